"""The schema is created and migrated on start, on SQLite and PostgreSQL alike: an older
database keeps every row and gains the columns added since; a newer one is refused; two
stores opening one new database at once migrate it once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from state.db import Store, target_for
from state.processes import get_process
from state.schema import SCHEMA_VERSION
from state.threads import get_thread
from supervise.errors import StateError

# A state database as schema 3 left it: no process.spec/env_key (schema 4).
_SCHEMA_3 = [
    "CREATE TABLE meta (key VARCHAR NOT NULL PRIMARY KEY, value VARCHAR NOT NULL)",
    "INSERT INTO meta VALUES ('schema_version', '3')",
    """CREATE TABLE process (id INTEGER NOT NULL PRIMARY KEY, name VARCHAR NOT NULL,
    command VARCHAR NOT NULL, argv VARCHAR NOT NULL, cwd VARCHAR NOT NULL,
    state VARCHAR NOT NULL, pid INTEGER, pid_started FLOAT, shim_pid INTEGER,
    shim_started FLOAT, boot_id VARCHAR NOT NULL, exit_code INTEGER, signal VARCHAR,
    result VARCHAR, end_reason VARCHAR, started_at FLOAT NOT NULL, started_boot FLOAT,
    ended_at FLOAT, depth INTEGER NOT NULL, parent_thread_id INTEGER,
    log_offset INTEGER NOT NULL, log_inode INTEGER, log_head VARCHAR,
    log_skipping BOOLEAN NOT NULL, log_archived INTEGER NOT NULL, log_punched INTEGER NOT NULL,
    log_new_offset INTEGER NOT NULL, log_new_inode INTEGER, log_new_head VARCHAR,
    log_new_skipping BOOLEAN NOT NULL)""",
    """INSERT INTO process (id, name, command, argv, cwd, state, boot_id, started_at, depth,
    log_offset, log_skipping, log_archived, log_punched, log_new_offset, log_new_skipping)
    VALUES (7, 'old', 'old', '["old"]', '/', 'exited', '', 1.0, 0, 42, FALSE, 0, 0, 0, FALSE)""",
]


def _raw_url(db_url: str | None, tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}" if db_url is None else db_url


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_an_older_database_keeps_its_rows_and_gains_the_new_columns(
    db_url: str | None, tmp_path: Path
) -> None:
    engine = create_engine(_raw_url(db_url, tmp_path))
    with engine.begin() as conn:
        for stmt in _SCHEMA_3:
            conn.execute(text(stmt))
    engine.dispose()
    store = Store(target_for(tmp_path / "state.db", db_url), timeout=10.0)
    try:
        old = get_process(store, 7)
        assert old is not None and old.name == "old" and old.log_offset == 42
        assert old.spec is None and old.env_key is None  # the columns schema 4 added
        assert get_thread(store, 1) is None  # the tables schema 3 lacked exist now
        with store.read() as conn:
            version = conn.execute(text("SELECT value FROM meta")).scalar()
        assert version == str(SCHEMA_VERSION)
    finally:
        store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_a_newer_database_is_refused(db_url: str | None, tmp_path: Path) -> None:
    Store(target_for(tmp_path / "state.db", db_url), timeout=10.0).close()
    engine = create_engine(_raw_url(db_url, tmp_path))
    with engine.begin() as conn:
        conn.execute(text("UPDATE meta SET value = '99' WHERE key = 'schema_version'"))
    engine.dispose()
    with pytest.raises(StateError, match="schema version 99 is newer"):
        Store(target_for(tmp_path / "state.db", db_url), timeout=10.0)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_stores_opening_a_new_database_at_once_migrate_it_once(
    db_url: str | None, tmp_path: Path
) -> None:
    errors: list[BaseException] = []
    stores: list[Store] = []
    start = threading.Barrier(4)

    def open_one() -> None:
        start.wait()
        try:
            stores.append(Store(target_for(tmp_path / "state.db", db_url), timeout=10.0))
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=open_one) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    try:
        assert errors == []
        with stores[0].read() as conn:
            rows = conn.execute(text("SELECT key, value FROM meta")).all()
        assert rows == [("schema_version", str(SCHEMA_VERSION))]
    finally:
        for s in stores:
            s.close()


def test_a_postgresql_url_without_its_driver_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from state.db import DatabaseTarget
    from supervise.errors import UserError

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if never installed
    with pytest.raises(UserError, match=r"pip install 'supervise\[postgresql\]'"):
        Store(DatabaseTarget.parse("postgresql+psycopg://u@127.0.0.1:1/db"), timeout=1.0)


def test_an_unreachable_postgresql_is_a_clear_runtime_failure(tmp_path: Path) -> None:
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "SUPERVISE_HOME": str(tmp_path / "home"),
        "SUPERVISE_AUTOSTART": "0",
        "SUPERVISE_DB_URL": f"postgresql+psycopg://u:secret@127.0.0.1:{port}/db",
        "SUPERVISE_DB_TIMEOUT": "2",
    }
    r = subprocess.run(
        [sys.executable, "-m", "supervisor", "ps"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and "SUPERVISE_DB_URL" in r.stderr
    assert "secret" not in r.stderr  # the URL is named without its password
