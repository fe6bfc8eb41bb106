"""The state database: one engine, short transactions, the same code on SQLite and PostgreSQL.

SQLite (the default, a file in the state directory) runs in WAL mode; its writers begin with
`BEGIN IMMEDIATE`, because a deferred transaction that reads and then writes can fail with
SQLITE_BUSY at once in WAL mode instead of waiting for the busy timeout. PostgreSQL
(`SUPERVISE_DB_URL=postgresql+psycopg://...`) runs at READ COMMITTED; the record modules take
row locks (`SELECT ... FOR UPDATE`) where a transaction reads what it then writes, and
`transact()` runs a transaction again when PostgreSQL reports a serialization failure or a
deadlock.

Only `state/` talks to the database: the record modules (`processes`, `fires`, `threads`,
`entries`, `counters`, `approvals`) hold every statement, written in SQLAlchemy Core on the
tables of `state.tables` (compiled once, then served from SQLAlchemy's statement cache).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from state.schema import migrate
from state.settings import StoreSettings
from supervise.errors import DatabaseLocked, StateError, UserError

T = TypeVar("T")

Backend = Literal["sqlite", "postgresql"]

# PostgreSQL's "try again" codes: serialization_failure, deadlock_detected.
_RETRY_SQLSTATES = frozenset({"40001", "40P01"})
_LOCK_SQLSTATES = frozenset({"55P03"})  # lock_not_available: lock_timeout ran out
_ATTEMPTS = 8


@dataclass(frozen=True)
class DatabaseTarget:
    """Which database: a SQLite file (the default) or a PostgreSQL URL."""

    url: str
    sqlite_path: Path | None = None

    @classmethod
    def sqlite(cls, path: Path) -> DatabaseTarget:
        return cls(f"sqlite:///{path}", path)

    @classmethod
    def parse(cls, url: str) -> DatabaseTarget:
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite" and parsed.database:
            return cls(url, Path(parsed.database))
        return cls(url)

    @property
    def backend(self) -> Backend:
        return "sqlite" if self.url.startswith("sqlite") else "postgresql"

    @property
    def where(self) -> str:
        """How messages name it: the file, or the URL without its password."""
        if self.sqlite_path is not None:
            return str(self.sqlite_path)
        return make_url(self.url).render_as_string(hide_password=True)


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    # SQLAlchemy's "begin" event issues BEGIN itself (pysqlite would defer it).
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _sqlite_begin(conn: Connection) -> None:
    immediate = conn.get_execution_options().get("sqlite_immediate", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _sqlstate(exc: BaseException) -> str | None:
    orig = getattr(exc, "orig", None)
    return getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)


class Store:
    """One state database. `read()`, `write()` and `transact()` give short transactions.

    Args:
        target: the database.
        timeout: seconds to wait for another writer's lock before DatabaseLocked.
        readonly: for commands that only read (`ps`, `fires`): never create or migrate; a
            SQLite file that does not exist yet reads as empty.
    """

    def __init__(self, target: DatabaseTarget, *, timeout: float, readonly: bool = False) -> None:
        self.target = target
        self.timeout = timeout
        self.backend: Backend = target.backend
        # Writers in this process queue here and wake the moment the lock is free; left to
        # SQLite's busy handler they would sleep in steps of up to 100 ms.
        self._write_lock = threading.RLock()
        self.engine = self._guard(lambda: self._engine(readonly))
        self._writer: Engine = (
            self.engine.execution_options(sqlite_immediate=True)
            if self.backend == "sqlite"
            else self.engine
        )
        if not readonly:
            try:
                self._migrate_when_free()
            except BaseException:
                self.engine.dispose()  # refused (too new, unreachable): no connection left open
                raise

    @property
    def where(self) -> str:
        return self.target.where

    def _engine(self, readonly: bool) -> Engine:
        if self.backend == "postgresql":
            return self._postgres_engine()
        path = self.target.sqlite_path
        assert path is not None
        if readonly:
            return _empty_engine() if not path.exists() else self._sqlite_reader(path)
        if not path.exists():
            # Created 0600 before SQLite touches it: transcripts may hold private data.
            try:
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            except OSError as exc:
                raise StateError(
                    f"{path}: cannot create the state database: {exc.strerror}; make "
                    f"{path.parent} writable, or set SUPERVISE_HOME to a writable directory"
                ) from exc
        return self._sqlite_engine(self.target.url, _sqlite_connect)

    def _sqlite_engine(self, url: str, on_connect: Callable[[Any, Any], None]) -> Engine:
        engine = create_engine(
            url, connect_args={"timeout": self.timeout, "check_same_thread": False}
        )
        event.listen(engine, "connect", on_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine

    def _sqlite_reader(self, path: Path) -> Engine:
        engine = self._sqlite_engine(f"sqlite:///file:{path}?mode=ro&uri=true", _sqlite_ro)
        if "process" in inspect(engine).get_table_names():
            return engine
        engine.dispose()  # created, never migrated: as empty as a missing file
        return _empty_engine()

    def _postgres_engine(self) -> Engine:
        try:
            import psycopg  # noqa: F401  # SQLAlchemy loads it by name; say what to install
        except ImportError:
            raise UserError(
                f"SUPERVISE_DB_URL names PostgreSQL ({self.where}) but its driver is not "
                "installed: pip install 'supervise[postgresql]'"
            ) from None
        engine = create_engine(
            self.target.url,
            connect_args={"connect_timeout": max(1, round(self.timeout))},
            pool_pre_ping=True,
        )
        ms = max(1, round(self.timeout * 1000))

        def on_connect(dbapi_conn: Any, _record: Any) -> None:
            # A lock held past the timeout fails the statement (55P03: DatabaseLocked).
            cur = dbapi_conn.cursor()
            cur.execute(f"SET lock_timeout = {ms}")
            cur.close()
            dbapi_conn.commit()

        event.listen(engine, "connect", on_connect)
        return engine

    def _migrate_when_free(self) -> None:
        """Migrate, waiting up to the timeout for other stores opening the database at once.

        On a new SQLite file, switching to WAL needs the file to itself, and SQLite answers a
        connection that would otherwise deadlock with "locked" at once, not after its busy
        timeout; the others are done in milliseconds, so try again until the timeout.
        """
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                self.transact(self._migrate)
                return
            except DatabaseLocked:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.02)

    def _migrate(self, conn: Connection) -> None:
        if self.backend == "postgresql":
            # Two daemons starting at once: one migrates, the other waits and finds it done.
            conn.execute(text("SELECT pg_advisory_xact_lock(7352001)"))
        migrate(conn, self.where)

    def _guard(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (SQLAlchemyError, OSError) as exc:
            if isinstance(exc, OSError):
                raise
            raise self.error(exc) from exc

    def error(self, exc: BaseException) -> StateError:
        """A StateError naming the database, for a failure the database reported."""
        text_ = str(getattr(exc, "orig", exc)).strip()
        state = _sqlstate(exc)
        if "locked" in text_ or "busy" in text_ or state in _LOCK_SQLSTATES:
            return DatabaseLocked(
                f"{self.where}: the state database stayed locked for {self.timeout:g}s "
                "(another program holds a write lock); retry, or raise SUPERVISE_DB_TIMEOUT"
            )
        if state in _RETRY_SQLSTATES:
            return DatabaseLocked(
                f"{self.where}: a transaction kept conflicting with another writer ({text_}); retry"
            )
        if isinstance(exc, IntegrityError):
            # A unique key held: the record is there already (two writers raced); nothing of
            # this transaction was written.
            return StateError(f"{self.where}: already recorded, nothing written ({text_})")
        if self.backend == "postgresql":
            return self._postgres_error(exc, text_, state)
        return self._sqlite_error(text_)

    def _postgres_error(self, exc: BaseException, text_: str, state: str | None) -> StateError:
        if (isinstance(exc, DBAPIError) and exc.connection_invalidated) or state is None:
            return StateError(
                f"{self.where}: cannot reach the state database ({text_}); check "
                "SUPERVISE_DB_URL and that PostgreSQL is running"
            )
        return StateError(f"{self.where}: the state database failed: {text_}")

    def _sqlite_error(self, text_: str) -> StateError:
        where, path = self.where, self.target.sqlite_path
        assert path is not None
        # "database or disk is full", or "disk I/O error" (EFBIG/ENOSPC mid-write): both
        # clear once space returns.
        if "disk" in text_:
            return StateError(f"{where}: cannot write the state database: {text_}; free space")
        if "readonly" in text_ or not os.access(path.parent, os.W_OK):
            # Not a damaged file: moving it aside would not help.
            return StateError(
                f"{where}: cannot write the state database ({text_}); it or "
                f"{path.parent} is read-only: make both writable (chmod u+w, remount "
                "read-write), or set SUPERVISE_HOME to a writable directory"
            )
        return StateError(
            f"{where}: the state database is unreadable ({text_}); move it aside to start "
            "afresh, or restore it from a backup"
        )

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read transaction: one consistent snapshot for the block."""
        try:
            with self.engine.connect() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise self.error(exc) from exc

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction, committed on leaving the block, rolled back on error.

        Not retried: use `transact()` where PostgreSQL may ask for a retry (a transaction
        that reads rows it then writes, under concurrency).
        """
        try:
            with self._write_lock, self._writer.begin() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise self.error(exc) from exc

    def transact(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` in a write transaction; again, from the start, when PostgreSQL reports a
        serialization failure or a deadlock. `fn` must only touch the database."""
        for attempt in range(_ATTEMPTS):
            try:
                with self._write_lock, self._writer.begin() as conn:
                    return fn(conn)
            except DBAPIError as exc:
                if _sqlstate(exc) in _RETRY_SQLSTATES and attempt + 1 < _ATTEMPTS:
                    time.sleep(0.005 * 2**attempt)
                    continue
                raise self.error(exc) from exc
            except SQLAlchemyError as exc:
                raise self.error(exc) from exc
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.engine.dispose()


def _sqlite_ro(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None


def _empty_engine() -> Engine:
    """An in-memory database with the schema: what a state dir with nothing recorded reads as."""
    from state.tables import metadata

    engine = create_engine("sqlite://")
    metadata.create_all(engine)
    return engine


def open_store(target: DatabaseTarget, *, timeout: float, readonly: bool = False) -> Store:
    return Store(target, timeout=timeout, readonly=readonly)


def target_for(sqlite_path: Path, url: str | None) -> DatabaseTarget:
    """The database a state directory uses: `url` when set, else its own SQLite file."""
    return DatabaseTarget.parse(url) if url else DatabaseTarget.sqlite(sqlite_path)


def open_state_store(db_path: Path, settings: StoreSettings, *, readonly: bool = False) -> Store:
    """The store of a state directory: `settings.url` when set, else its own SQLite file."""
    target = target_for(db_path, settings.url)
    return Store(target, timeout=settings.timeout, readonly=readonly)
