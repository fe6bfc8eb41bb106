"""A read-only view of the state database through the stdlib sqlite3 module.

`ps`, `fires`, `logs` and `thread show` only read, and importing SQLModel/SQLAlchemy costs
~0.4 s of CLI start-up; this keeps those commands quick. Rows come back as plain dicts whose
keys are the column names of `state.models`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from state.settings import busy_timeout
from supervise.errors import StateError

Row = dict[str, Any]


class Reader:
    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection | None]:
        if not self.path.exists():
            yield None
            return
        try:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=busy_timeout())
        except sqlite3.Error as exc:
            raise self._error(exc) from exc
        conn.row_factory = sqlite3.Row
        try:
            yield conn
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return  # no daemon or launch has created the schema yet: nothing to read
            raise self._error(exc) from exc
        except sqlite3.DatabaseError as exc:
            raise self._error(exc) from exc
        finally:
            conn.close()

    def _error(self, exc: sqlite3.Error) -> StateError:
        if "locked" in str(exc) or "busy" in str(exc):
            return StateError(f"{self.path}: the state database stayed locked; retry shortly")
        return StateError(
            f"{self.path}: the state database is unreadable ({exc}); move it aside to start "
            "afresh, or restore it from a backup"
        )

    def _all(self, sql: str, *args: Any) -> list[Row]:
        with self._conn() as conn:
            if conn is None:
                return []
            return [dict(r) for r in conn.execute(sql, args)]
        return []

    def processes(self) -> list[Row]:
        return self._all("select * from process order by id")

    def process(self, process_id: int) -> Row | None:
        rows = self._all("select * from process where id = ?", process_id)
        return rows[0] if rows else None

    def threads(self, process_id: int | None = None) -> list[Row]:
        if process_id is None:
            return self._all("select * from thread order by id")
        return self._all("select * from thread where process_id = ? order by id", process_id)

    def thread(self, thread_id: int) -> Row | None:
        rows = self._all("select * from thread where id = ?", thread_id)
        return rows[0] if rows else None

    def fires(self, process_id: int | None = None) -> list[Row]:
        if process_id is None:
            return self._all("select * from fire order by id")
        return self._all("select * from fire where process_id = ? order by id", process_id)

    def entries(self, thread_id: int, after: int = 0) -> list[Row]:
        """A thread's transcript entries after seq `after`, `data` decoded."""
        rows = self._all(
            "select seq, kind, at, data from entry where thread_id = ? and seq > ? order by seq",
            thread_id,
            after,
        )
        for r in rows:
            r["data"] = json.loads(r["data"])
        return rows
