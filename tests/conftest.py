"""Shared fixtures: a state dir per test, the real CLI as a subprocess, a real daemon."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pgserver
import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent


def wait_until(pred: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll `pred` until it is truthy (tests only; the product never polls)."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def match_hook(pattern: str, name: str, max_spawns: int = 1, instructions: str = "x") -> Any:
    """One on_output_match hook, as a hook file spells it."""
    return {
        "name": name,
        "on_output_match": {"pattern": pattern},
        "instructions": instructions,
        "max_spawns": max_spawns,
    }


@dataclass
class Env:
    home: Path
    work: Path
    extra: dict[str, str] = field(default_factory=dict)  # more variables for CLI and daemon

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SUPERVISE_HOME"] = str(self.home)
        env["PYTHONPATH"] = str(ROOT)
        # No developer settings file: each test starts from the defaults.
        env["SUPERVISE_CONFIG"] = str(self.home / "no-settings.toml")
        env.update(self.extra)
        return env

    def cli(
        self,
        *args: str,
        timeout: float = 30.0,
        check: bool = False,
        cwd: Path | None = None,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "supervisor", *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=cwd or self.work,
            timeout=timeout,
            input=input,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"supervise {' '.join(args)} -> {proc.returncode}\n{proc.stderr}")
        return proc

    def ps(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.cli("ps", "--json", check=True).stdout)
        return data

    def process(self, pid: int) -> dict[str, Any]:
        return next(p for p in self.ps()["processes"] if p["id"] == pid)

    def fires(self) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = json.loads(self.cli("fires", "--json", check=True).stdout)
        return data

    def run_d(
        self, *cmd: str, hooks: Path | None = None, name: str | None = None
    ) -> dict[str, Any]:
        args = ["run", "-d", "--json"]
        if hooks is not None:
            args += ["--hook", str(hooks)]
        if name is not None:
            args += ["--name", name]
        out = self.cli(*args, "--", *cmd, check=True).stdout
        data: dict[str, Any] = json.loads(out)
        return data

    def write(self, name: str, text: str) -> Path:
        path = self.work / name
        path.write_text(text)
        return path

    def wait_state(self, pid: int, *states: str, timeout: float = 15.0) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            p = self.process(pid)
            return p if p["state"] in states else None

        result: dict[str, Any] = wait_until(check, timeout, f"process {pid} in {states}")
        return result


class Daemon:
    """A real `supervise daemon` subprocess."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.env.home / "test-daemon.log"

    def start(self) -> Daemon:
        self.env.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        before = self.log.read_text() if self.log.exists() else ""
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "supervisor", "daemon"],
                stdout=log,
                stderr=log,
                env=self.env.env,
                start_new_session=True,
            )
        wait_until(
            lambda: self.log.read_text().count("daemon ready") > before.count("daemon ready"),
            15,
            "daemon ready",
        )
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)
        self.proc = None


def _kill_supervised(home: Path) -> None:
    for pidfile in (home / "runs").glob("*/child.pid"):
        with contextlib.suppress(ProcessLookupError, ValueError, PermissionError):
            os.killpg(int(pidfile.read_text()), signal.SIGKILL)
    # Every daemon of this state dir, also one started by `run` that has not locked yet.
    for proc in psutil.process_iter(["environ"]):
        with contextlib.suppress(psutil.Error):
            if (proc.info["environ"] or {}).get("SUPERVISE_HOME") == str(home):
                proc.kill()


@pytest.fixture(autouse=True)
def _clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's own SUPERVISE_* settings must not leak into the tests.
    # Nor a real API key or endpoint: model tests talk to a local server only.
    prefixes = ("SUPERVISE_", "OPENAI_", "ANTHROPIC_")
    for key in [k for k in os.environ if k.startswith(prefixes)]:
        monkeypatch.delenv(key)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path / "home", tmp_path / "work")
    e.work.mkdir()
    yield e
    _kill_supervised(e.home)


@pytest.fixture
def daemon(env: Env) -> Iterator[Daemon]:
    d = Daemon(env).start()
    yield d
    d.kill()


@pytest.fixture
def start_daemon(env: Env) -> Iterator[Callable[[], Daemon]]:
    """Start a daemon later in the test (after setting `env.extra`); killed at the end."""
    started: list[Daemon] = []

    def start() -> Daemon:
        started.append(Daemon(env).start())
        return started[-1]

    yield start
    for d in started:
        d.kill()


# --- PostgreSQL: a real server for the tests of the PostgreSQL backend (tests/pgserver.py) ---

# Read at import: the autouse _clean_environ removes every SUPERVISE_* variable from the tests.
_PG_ENV = {k: v for k, v in os.environ.items() if k == pgserver.REQUIRE_VAR}
_pg_db_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pgserver.PgServer]:
    """One throwaway server for the session; a skip where PostgreSQL is missing or broken.

    With SUPERVISE_TEST_POSTGRES=require (CI) a missing or failing server is an error instead.
    """
    try:
        mode = pgserver.decide_missing(_PG_ENV)
    except pgserver.PgServerError as e:
        pytest.fail(str(e), pytrace=False)

    def unavailable(reason: str) -> NoReturn:
        if mode == "error":
            pytest.fail(f"{reason} ({pgserver.REQUIRE_VAR}=require: never a skip)", pytrace=False)
        pytest.skip(reason)

    if importlib.util.find_spec("psycopg") is None:
        unavailable("psycopg is not installed: pip install -e '.[dev]'")
    bindir = pgserver.find_bindir()
    if bindir is None:
        unavailable(pgserver.INSTALL_HINT)
    try:
        server = pgserver.start(bindir)
    except pgserver.PgServerError as e:
        failure = f"PostgreSQL did not start: {e}"
    else:
        failure = ""
    if failure:
        # Outside the except: the report shows the server's log, not a chained traceback.
        unavailable(failure)
    try:
        yield server
    finally:
        pgserver.stop(server)


@pytest.fixture
def pg_url(pg_server: pgserver.PgServer) -> Iterator[str]:
    """A fresh empty database for this test, as a SQLAlchemy URL; dropped afterwards."""
    import psycopg
    from psycopg import sql

    name = f"t_{next(_pg_db_numbers)}"
    admin = pg_server.conninfo("postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield pg_server.url(name)
    with psycopg.connect(admin, autocommit=True) as conn:
        # FORCE: a connection the test left open (a pooled engine) must not block the drop.
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
