"""Shared fixtures: a state dir per test, the real CLI as a subprocess, a real daemon."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn, TypeVar

import pgserver
import psutil
import pytest

if TYPE_CHECKING:
    from state.db import Store
    from state.fires import FireRecord
    from state.processes import ProcessRecord
    from state.threads import ThreadRecord

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent

# A parent that ignores SIGINT (a script's `pytest &` job, nohup) passes that on to every
# child: Ctrl-C would not detach `run`, nor `stop --signal INT` reach a Python child. A
# handler, unlike an ignore, is reset to the default at exec: the tests' children then get
# SIGINT as a terminal gives it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Likewise SIGHUP under nohup: a closed terminal's hangup must reach the tests' children as
# it would from a terminal, while pytest itself still survives one.
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, lambda _sig, _frame: None)


# A wait returns the moment its event happens, so a long limit costs nothing when all is
# well; it only has to outlast a machine loaded by other work (a busy loop beside the suite).
WAIT_S = 30.0
_SHOWN = 1500  # characters of the last value a timed-out wait prints


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} characters)"


def wait_for(
    observe: Callable[[], T], done: Callable[[T], object], *, timeout: float = WAIT_S, what: str
) -> T:
    """Observe until `done(value)`; return that value (tests only; the product never polls).

    A timeout says what it waited for and the last value it saw.
    """
    deadline = time.monotonic() + timeout
    pause = 0.01
    while True:
        value = observe()
        if done(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:g}s waiting for {what}; last seen: {_show(value)}"
            )
        time.sleep(pause)
        pause = min(pause * 1.5, 0.1)  # quick for what comes at once, cheap for what does not


def wait_until(pred: Callable[[], Any], timeout: float = WAIT_S, what: str = "condition") -> Any:
    """Poll `pred` until it is truthy and return its value; see wait_for."""
    return wait_for(pred, bool, timeout=timeout, what=what)


def first_line(stream: IO[str], *, what: str, timeout: float = WAIT_S) -> str:
    """A child's first line, within `timeout`. For a stream nothing was read from yet (what
    Python buffered is not seen by select); for more lines, use Lines."""
    if not select.select([stream], [], [], timeout)[0]:
        raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
    return stream.readline()


class Lines:
    """A child's pipe read line by line in a thread, so that each wait has a deadline (a bare
    readline() waits forever and leaves pytest-timeout to report nothing useful)."""

    def __init__(self, stream: IO[str]) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []

        def pump() -> None:
            with contextlib.suppress(ValueError, OSError):  # closed by the test meanwhile
                for line in stream:
                    self._lines.put(line)
            self._lines.put("")  # the end of the stream

        threading.Thread(target=pump, daemon=True).start()

    def next(self, *, what: str, timeout: float = WAIT_S) -> str:
        """The next line ("" at the end of the stream)."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"timed out after {timeout:g}s waiting for {what}; lines so far: {_show(self.seen)}"
            ) from None
        self.seen.append(line)
        return line


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

    # -- watching the state without a CLI start ------------------------------------------------
    # A CLI start costs 0.3 s of CPU (most of it importing SQLAlchemy), and CLI starts were
    # half the suite's CPU: a wait that polled `ps --json` kept a core busy, taken from the
    # daemon it waited on. These read the database in this process, read-only, as `ps` and
    # `fires` read it, and answer in the JSON those print (supervisor.views), without the
    # CLI's masking of the shell's credentials. The CLI's own output is what env.ps(),
    # env.fires() and env.cli() give, and what the tests of the CLI use.

    def _read(self, read: Callable[[Store], T]) -> T:
        from state.db import open_state_store
        from state.settings import store_settings

        # Opened and closed each time: no connection of ours outlives the read (a test
        # remounts the home read-only, or hands it to another user).
        store = open_state_store(self.home / "state.db", store_settings(self.env), readonly=True)
        try:
            return read(store)
        finally:
            store.close()

    def seen_processes(self) -> list[ProcessRecord]:
        from state.processes import list_processes

        return self._read(list_processes)

    def seen_fires(self) -> list[FireRecord]:
        from state.fires import list_fires

        return self._read(list_fires)

    def seen_threads(self) -> list[ThreadRecord]:
        from state.threads import list_threads

        return self._read(list_threads)

    def wait_state(self, pid: int, *states: str, timeout: float = WAIT_S) -> dict[str, Any]:
        """Until process `pid` is in one of `states`; its row as `ps --json` shows it."""
        from supervisor.views import process_json

        def row() -> dict[str, Any] | None:
            found = next((p for p in self.seen_processes() if p.id == pid), None)
            return None if found is None else process_json(found)

        found = wait_for(
            row,
            lambda p: p is not None and p["state"] in states,
            timeout=timeout,
            what=f"process {pid} in {states}",
        )
        assert found is not None
        return found

    def wait_fires(
        self, count: int, *, timeout: float = WAIT_S, what: str | None = None
    ) -> list[dict[str, Any]]:
        """Until at least `count` fires are committed; all of them, as `fires --json` shows."""
        from supervisor.views import fire_json

        return wait_for(
            lambda: [fire_json(f) for f in self.seen_fires()],
            lambda fires: len(fires) >= count,
            timeout=timeout,
            what=what or f"{count} fire(s)",
        )

    def wait_threads(
        self, done: Callable[[list[ThreadRecord]], object], *, timeout: float = WAIT_S, what: str
    ) -> list[ThreadRecord]:
        """Until `done(threads)` holds for the thread rows."""
        return wait_for(self.seen_threads, done, timeout=timeout, what=what)

    def wait_thread(
        self, tid: str, statuses: Sequence[str], *, timeout: float = WAIT_S
    ) -> dict[str, Any]:
        """Until thread `tid` ("t3") is in one of `statuses`; then `thread show --json`."""
        number = int(tid.removeprefix("t"))

        def status() -> tuple[str, str | None, str | None] | None:
            t = next((t for t in self.seen_threads() if t.id == number), None)
            return None if t is None else (t.status, t.waiting, t.error)

        wait_for(
            status,
            lambda seen: seen is not None and seen[0] in statuses,
            timeout=timeout,
            what=f"thread {tid} in {tuple(statuses)}",
        )
        data: dict[str, Any] = json.loads(
            self.cli("thread", "show", tid, "--json", check=True).stdout
        )
        return data


class Daemon:
    """A real `supervise daemon` subprocess."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.env.home / "test-daemon.log"

    def start(self, *, log_through_pipe: bool = False) -> Daemon:
        """Start it and wait until it is ready.

        log_through_pipe: the daemon writes its log to a pipe this process copies to the
            file. A pipe has no file size limit: a daemon whose disk is "full"
            (RLIMIT_FSIZE) can still say what failed, and a test can wait for that.
        """
        self.env.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        before = self.log.read_text() if self.log.exists() else ""
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "supervisor", "daemon"],
                stdout=subprocess.PIPE if log_through_pipe else log,
                stderr=subprocess.STDOUT if log_through_pipe else log,
                env=self.env.env,
                start_new_session=True,
            )
        proc = self.proc
        if log_through_pipe:
            threading.Thread(target=self._copy_log, args=(proc,), daemon=True).start()

        def log_since() -> str:
            text = self.log.read_text()[len(before) :]
            if proc.poll() is not None and "daemon ready" not in text:
                raise AssertionError(
                    f"the daemon exited {proc.returncode} before it was ready; its log:\n{text}"
                )
            return text

        # "daemon ready" comes after recovery's first pass: what that settles is committed.
        wait_for(log_since, lambda text: "daemon ready" in text, what=f"daemon ready in {self.log}")
        return self

    def _copy_log(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        with proc.stdout, open(self.log, "ab", buffering=0) as log:
            for line in proc.stdout:
                log.write(line)

    def wait_log(self, text: str, *, timeout: float = WAIT_S) -> str:
        """Until the daemon's log holds `text`; the log."""
        return wait_for(
            self.log.read_text, lambda log: text in log, timeout=timeout, what=f"{text!r} logged"
        )

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)
        self.proc = None


def _kill_supervised(home: Path) -> None:
    # Every daemon of this state dir first (also one started by `run` that has not locked
    # yet): a daemon left running would restart a child killed below.
    for proc in psutil.process_iter(["environ"]):
        with contextlib.suppress(psutil.Error):
            if (proc.info["environ"] or {}).get("SUPERVISE_HOME") == str(home):
                proc.kill()
    for pidfile in (home / "runs").glob("*/child.pid"):
        with contextlib.suppress(ProcessLookupError, ValueError, PermissionError):
            os.killpg(int(pidfile.read_text()), signal.SIGKILL)


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
def start_daemon(env: Env) -> Iterator[Callable[..., Daemon]]:
    """Start a daemon later in the test (after setting `env.extra`); killed at the end."""
    started: list[Daemon] = []

    def start(*, log_through_pipe: bool = False) -> Daemon:
        started.append(Daemon(env).start(log_through_pipe=log_through_pipe))
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


# --- Both back ends: the state layer's tests and a handful of end-to-end tests run on each ---


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def db_url(backend: str, request: pytest.FixtureRequest) -> str | None:
    """SUPERVISE_DB_URL for the back end: None for SQLite (the state dir's own file)."""
    if backend == "sqlite":
        return None
    url: str = request.getfixturevalue("pg_url")  # skips where PostgreSQL is missing
    return url


@pytest.fixture
def store(db_url: str | None, tmp_path: Path) -> Iterator[Store]:
    """A migrated state database on the back end (state.db.Store)."""
    from state.db import Store, target_for

    s = Store(target_for(tmp_path / "state.db", db_url), timeout=10.0)
    yield s
    s.close()


# --- Which tests start a daemon (issue #15: keep them for what needs them) ---------------------
# Every daemon says "daemon ready" in its log: the fixtures' in test-daemon.log, the one `run`
# starts in daemon.log. A test's count is read from the logs under its tmp_path at teardown
# and travels on its report (through pytest-xdist too); `--daemon-report=FILE` writes the list.

_DAEMON_STARTS = "daemon_starts"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--daemon-report",
        metavar="FILE",
        help="write each test that started a real daemon, with how many times, to FILE",
    )


def _daemon_starts(root: Path) -> int:
    return sum(
        log.read_text(errors="replace").count("daemon ready")
        for log in root.rglob("*daemon.log")
        if log.is_file()
    )


@pytest.fixture(autouse=True)
def _count_daemons(request: pytest.FixtureRequest) -> Iterator[None]:
    # Asked for before the test (not after it): then tmp_path is torn down after this.
    root: Path | None = None
    if "tmp_path" in request.fixturenames:
        root = request.getfixturevalue("tmp_path")
    yield
    if root is not None:
        with contextlib.suppress(OSError):  # a test's mount may be gone
            if n := _daemon_starts(root):
                request.node.user_properties.append((_DAEMON_STARTS, n))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    counts: dict[str, int] = {}
    for reports in terminalreporter.stats.values():
        for r in reports:
            if getattr(r, "when", None) != "teardown":
                continue
            for key, n in r.user_properties:
                if key == _DAEMON_STARTS:
                    counts[r.nodeid] = n
    if not counts:
        return
    total = sum(counts.values())
    terminalreporter.write_line(
        f"{len(counts)} tests started a real daemon ({total} starts); "
        "--daemon-report=FILE lists them"
    )
    if out := config.getoption("--daemon-report"):
        lines = [f"{n}\t{nodeid}" for nodeid, n in sorted(counts.items())]
        Path(out).write_text(
            f"# {len(counts)} tests start a real daemon, {total} starts (starts, tab, test)\n"
            + "\n".join(lines)
            + "\n"
        )
