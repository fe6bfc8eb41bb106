"""The SQLite engine: WAL, a busy timeout, short transactions, a schema version.

Writers begin with `BEGIN IMMEDIATE`: a deferred transaction that reads and then writes
can fail with SQLITE_BUSY at once in WAL mode instead of waiting for the busy timeout.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DatabaseError, OperationalError
from sqlmodel import Session, SQLModel, create_engine, select

from state.migrate import add_missing_columns
from state.models import SCHEMA_VERSION, Meta
from state.settings import busy_timeout
from supervise.errors import DatabaseLocked, StateError

T = TypeVar("T")


def _on_connect(dbapi_conn: Any, _record: Any) -> None:
    # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite would defer it).
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _on_begin(conn: Any) -> None:
    immediate = conn.get_execution_options().get("sqlite_immediate", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


class Store:
    """One state database; `read()` and `write()` give short-lived sessions."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.timeout = busy_timeout()
        if not path.exists():
            # Created 0600 before SQLite touches it: transcripts may hold private data.
            try:
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            except OSError as exc:
                raise StateError(
                    f"{path}: cannot create the state database: {exc.strerror}; make "
                    f"{path.parent} writable, or set SUPERVISE_HOME to a writable directory"
                ) from exc
        self.engine: Engine = create_engine(
            f"sqlite:///{path}",
            connect_args={"timeout": self.timeout, "check_same_thread": False},
        )
        event.listen(self.engine, "connect", _on_connect)
        event.listen(self.engine, "begin", _on_begin)
        self._writer = self.engine.execution_options(sqlite_immediate=True)
        # Writers in this process queue here and wake the moment the lock is free; left to
        # SQLite's busy handler they would sleep in steps of up to 100 ms (seconds lost when
        # a daemon commits a thousand fires while threads write their transcripts).
        self._write_lock = threading.RLock()
        self._guard(self._init_schema)

    def _init_schema(self) -> None:
        SQLModel.metadata.create_all(self.engine)
        with self.write() as s:
            row = s.get(Meta, "schema_version")
            if row is None:
                s.add(Meta(key="schema_version", value=str(SCHEMA_VERSION)))
            elif int(row.value) > SCHEMA_VERSION:
                raise StateError(
                    f"{self.path}: state schema version {row.value} is newer than this "
                    f"supervise understands ({SCHEMA_VERSION}); upgrade supervise"
                )
            elif int(row.value) < SCHEMA_VERSION:
                add_missing_columns(s.connection())
                row.value = str(SCHEMA_VERSION)
                s.add(row)

    def _guard(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (DatabaseError, sqlite3.DatabaseError) as exc:
            raise self.error(exc) from exc

    def error(self, exc: BaseException) -> StateError:
        """A StateError naming the database file, for a failure SQLite reported."""
        text = str(getattr(exc, "orig", exc))
        if "locked" in text or "busy" in text:
            return DatabaseLocked(
                f"{self.path}: the state database stayed locked for {self.timeout:g}s "
                "(another program holds a write lock); stop it and retry"
            )
        if isinstance(exc, (OperationalError, sqlite3.OperationalError)) and "disk" in text:
            return StateError(f"{self.path}: cannot write the state database: {text}; free space")
        if "readonly" in text or not os.access(self.path.parent, os.W_OK):
            # Not a damaged file: moving it aside would not help.
            return StateError(
                f"{self.path}: cannot write the state database ({text}); it or "
                f"{self.path.parent} is read-only: make both writable (chmod u+w, remount "
                "read-write), or set SUPERVISE_HOME to a writable directory"
            )
        return StateError(
            f"{self.path}: the state database is unreadable ({text}); move it aside to start "
            "afresh, or restore it from a backup"
        )

    @contextmanager
    def read(self) -> Iterator[Session]:
        try:
            with Session(self.engine, expire_on_commit=False) as s:
                yield s
        except (DatabaseError, sqlite3.DatabaseError) as exc:
            raise self.error(exc) from exc

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A write transaction, committed on leaving the block, rolled back on error."""
        try:
            with self._write_lock, Session(self._writer, expire_on_commit=False) as s:
                yield s
                s.commit()
        except (DatabaseError, sqlite3.DatabaseError) as exc:
            raise self.error(exc) from exc

    @contextmanager
    def sql_read(self) -> Iterator[sqlite3.Connection]:
        """The bare sqlite3 connection for reads on hot paths (each statement its own snapshot)."""
        proxy = self.engine.raw_connection()
        try:
            conn = proxy.driver_connection
            assert isinstance(conn, sqlite3.Connection)
            yield conn
        except sqlite3.DatabaseError as exc:
            raise self.error(exc) from exc
        finally:
            proxy.close()

    @contextmanager
    def sql_write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the bare sqlite3 connection, for hot paths.

        SQLAlchemy's work per statement (~80 us) was most of the cost of committing a fire;
        plain sqlite3 takes ~5 us. Committed on leaving the block, rolled back on error.
        """
        with self._write_lock:
            proxy = self.engine.raw_connection()
            try:
                conn = proxy.driver_connection
                assert isinstance(conn, sqlite3.Connection)
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.DatabaseError as exc:
                raise self.error(exc) from exc
            finally:
                proxy.close()

    def meta(self, key: str) -> str | None:
        with self.read() as s:
            row = s.exec(select(Meta).where(Meta.key == key)).first()
            return row.value if row else None

    def close(self) -> None:
        self.engine.dispose()


def open_store(path: Path) -> Store:
    return Store(path)
