"""The schema version, and bringing an older database up to it on start, on both back ends.

The version lives in `meta` (key `schema_version`), the small migration table. Every column
added after schema 1 is nullable or has a default, so adding the missing columns of existing
tables keeps every row that was already recorded; a step that cannot be expressed that way
goes in `_STEPS`, run once when the stored version is below its number.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Column, inspect, select
from sqlalchemy.engine import Connection

from state import tables as t
from supervise.errors import StateError

SCHEMA_VERSION = 8


def _runs(conn: Connection) -> None:
    """Schema 6: every row recorded before restarts is the first (and only) run of itself."""
    conn.execute(
        t.process.update().where(t.process.c.first_id.is_(None)).values(first_id=t.process.c.id)
    )
    t.run_index.create(conn, checkfirst=True)


# version -> what to run on a database older than it, after the columns were added.
_STEPS: dict[int, Callable[[Connection], None]] = {6: _runs}


def _default_sql(column: Column[Any]) -> str:
    server = column.server_default
    if server is not None:
        return f" DEFAULT {server.arg}"  # type: ignore[attr-defined]  # DefaultClause
    default = column.default
    if default is None or not getattr(default, "is_scalar", False):
        return ""
    value = default.arg  # type: ignore[attr-defined]  # ScalarElementColumnDefault
    if isinstance(value, bool):
        return " DEFAULT " + ("TRUE" if value else "FALSE")
    if isinstance(value, int | float):
        return f" DEFAULT {value}"
    return " DEFAULT '" + str(value).replace("'", "''") + "'"


def add_missing_columns(conn: Connection) -> list[str]:
    """Add every declared column an existing table lacks; returns `table.column` names added."""
    added = []
    have_tables = set(inspect(conn).get_table_names())
    for table in t.metadata.sorted_tables:
        if table.name not in have_tables:
            continue
        have = {c["name"] for c in inspect(conn).get_columns(table.name)}
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


def migrate(conn: Connection, where: str) -> int:
    """Create what is missing and bring the schema to SCHEMA_VERSION; returns the old version.

    Runs inside the caller's write transaction (on PostgreSQL DDL is transactional, and the
    caller holds a lock so two daemons starting at once do not migrate twice).

    Raises:
        StateError: the database was written by a newer supervise.
    """
    t.metadata.create_all(conn)
    row = conn.execute(select(t.meta.c.value).where(t.meta.c.key == "schema_version")).first()
    if row is None:
        conn.execute(t.meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
        return SCHEMA_VERSION
    old = int(row[0])
    if old > SCHEMA_VERSION:
        raise StateError(
            f"{where}: state schema version {old} is newer than this supervise understands "
            f"({SCHEMA_VERSION}); upgrade supervise"
        )
    if old < SCHEMA_VERSION:
        add_missing_columns(conn)
        for version in sorted(_STEPS):
            if old < version:
                _STEPS[version](conn)
        conn.execute(
            t.meta.update()
            .where(t.meta.c.key == "schema_version")
            .values(value=str(SCHEMA_VERSION))
        )
    return old
