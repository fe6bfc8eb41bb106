"""Bringing an older state database up to this schema, in place.

New tables come from `create_all`; new columns of existing tables are added here. Every
column added after schema 1 is nullable or has a default, so `ALTER TABLE ADD COLUMN` keeps
every row that was already recorded.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel


def _default_sql(column: Column[Any]) -> str:
    server = column.server_default
    if server is not None:
        return f" DEFAULT {server.arg}"  # type: ignore[attr-defined]  # DefaultClause
    default = column.default
    if default is None or not getattr(default, "is_scalar", False):
        return ""
    value = default.arg  # type: ignore[attr-defined]  # ScalarElementColumnDefault
    if isinstance(value, bool):
        return f" DEFAULT {int(value)}"
    if isinstance(value, int | float):
        return f" DEFAULT {value}"
    return " DEFAULT '" + str(value).replace("'", "''") + "'"


def add_missing_columns(conn: Connection) -> list[str]:
    """Add every model column an existing table lacks; returns `table.column` names added."""
    added = []
    for table in SQLModel.metadata.sorted_tables:
        have = {r[1] for r in conn.exec_driver_sql(f'PRAGMA table_info("{table.name}")')}
        if not have:
            continue  # created just now by create_all
        for column in table.columns:
            if column.name in have:
                continue
            kind = column.type.compile(dialect=conn.dialect)
            conn.exec_driver_sql(
                f'ALTER TABLE "{table.name}" ADD COLUMN "{column.name}" {kind}'
                + _default_sql(column)
            )
            added.append(f"{table.name}.{column.name}")
    return added
