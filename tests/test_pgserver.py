"""The test PostgreSQL server and its fixtures: a real server, real databases, real cleanup."""

from __future__ import annotations

import os

import pgserver
import psutil
import psycopg
import pytest
import sqlalchemy as sa


def _libpq_url(pg_url: str) -> str:
    # The same database as libpq spells it: SQLAlchemy's driver tag is not libpq syntax.
    return pg_url.replace("postgresql+psycopg://", "postgresql://", 1)


def _tables(conn: psycopg.Connection[tuple[object, ...]]) -> list[object]:
    rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return [row[0] for row in rows]


def test_url_works_with_psycopg_and_sqlalchemy(pg_url: str) -> None:
    assert pg_url.startswith("postgresql+psycopg://supervise@127.0.0.1:")
    with psycopg.connect(_libpq_url(pg_url), autocommit=True) as conn:
        assert _tables(conn) == []
        conn.execute("CREATE TABLE item (id serial PRIMARY KEY, name text NOT NULL)")
        conn.execute("INSERT INTO item (name) VALUES (%s)", ("from psycopg",))
    engine = sa.create_engine(pg_url)
    try:
        with engine.begin() as sa_conn:
            sa_conn.execute(
                sa.text("INSERT INTO item (name) VALUES (:n)"), {"n": "from sqlalchemy"}
            )
            names = sa_conn.execute(sa.text("SELECT name FROM item ORDER BY id")).scalars().all()
    finally:
        engine.dispose()
    assert names == ["from psycopg", "from sqlalchemy"]
    with psycopg.connect(_libpq_url(pg_url)) as conn:
        assert conn.execute("SELECT count(*) FROM item").fetchone() == (2,)


_seen: list[str] = []


@pytest.mark.parametrize("run", [1, 2])
def test_each_test_gets_its_own_empty_database(
    run: int, pg_url: str, pg_server: pgserver.PgServer
) -> None:
    name = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(_libpq_url(pg_url), autocommit=True) as conn:
        # A shared or reused database would still hold the table the other run made.
        assert _tables(conn) == []
        conn.execute("CREATE TABLE marker (run int)")
    with psycopg.connect(pg_server.conninfo("postgres")) as admin:
        databases = {row[0] for row in admin.execute("SELECT datname FROM pg_database")}
    assert name in databases
    for earlier in _seen:
        assert earlier != name
        assert earlier not in databases, f"{earlier} was not dropped after its test"
    _seen.append(name)


def test_server_runs_unprivileged_and_local_only(pg_server: pgserver.PgServer) -> None:
    postmaster = psutil.Process(pg_server.postmaster_pid())
    assert "postgres" in postmaster.name()
    if os.geteuid() == 0:
        assert postmaster.uids().real != 0
        assert postmaster.username() == pg_server.account.name
    else:
        assert postmaster.uids().real == os.geteuid()
    listening = [c for c in postmaster.net_connections("inet") if c.status == psutil.CONN_LISTEN]
    assert listening
    assert {c.laddr.ip for c in listening} == {"127.0.0.1"}
    assert {c.laddr.port for c in listening} == {pg_server.port}


def test_stop_ends_the_server_and_removes_its_dir(pg_server: pgserver.PgServer) -> None:
    # A second, private server: the session's one must live on for the other tests.
    with pgserver.running(pg_server.bindir) as server:
        pid = server.postmaster_pid()
        assert server.port != pg_server.port
        with psycopg.connect(server.conninfo("postgres")) as conn:
            assert conn.execute("SELECT current_user").fetchone() == ("supervise",)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not server.root.exists()


@pytest.mark.parametrize(
    ("env", "expected"),
    [({}, "skip"), ({"SUPERVISE_TEST_POSTGRES": ""}, "skip"),
     ({"SUPERVISE_TEST_POSTGRES": "require"}, "error")],
)  # fmt: skip
def test_missing_server_skips_unless_required(env: dict[str, str], expected: str) -> None:
    assert pgserver.decide_missing(env) == expected


def test_a_misspelt_require_is_refused_not_skipped() -> None:
    with pytest.raises(pgserver.PgServerError, match=r"SUPERVISE_TEST_POSTGRES='required'.*"):
        pgserver.decide_missing({"SUPERVISE_TEST_POSTGRES": "required"})
