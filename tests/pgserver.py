"""A throwaway PostgreSQL server for the tests: initdb in a temp dir, a free port, pg_ctl.

The server listens on 127.0.0.1 only (and a unix socket in its own temp dir), trusts every
local connection as the superuser `supervise`, and runs with fsync off: its data dies with
the test session. PostgreSQL refuses to run as root, so as root the server runs as the
`postgres` user (Debian's package creates it), else as `nobody`.
Standalone: `python tests/pgserver.py` starts one, prints its URL and waits for Ctrl-C.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

SUPERUSER = "supervise"
REQUIRE_VAR = "SUPERVISE_TEST_POSTGRES"
INSTALL_HINT = "PostgreSQL is not installed: apt-get install postgresql"


class PgServerError(RuntimeError):
    """The server could not be set up, started or stopped; the message says why."""


def decide_missing(env: Mapping[str, str]) -> Literal["skip", "error"]:
    """What a missing or failing server means: a skip on a developer's machine, an error in CI.

    CI sets SUPERVISE_TEST_POSTGRES=require so that a broken install can never pass as skips.
    Any other non-empty value is refused: a typo must not silently turn CI's errors into skips.
    """
    value = env.get(REQUIRE_VAR, "")
    if value == "require":
        return "error"
    if value == "":
        return "skip"
    raise PgServerError(f"{REQUIRE_VAR}={value!r}: expected 'require' or unset")


def find_bindir(path: str | None = None) -> Path | None:
    """The directory holding initdb and pg_ctl, or None when PostgreSQL is not installed.

    Debian keeps the server binaries off PATH (/usr/lib/postgresql/N/bin); its pg_config
    names that dir, but with only libpq-dev installed it names /usr/bin, which lacks initdb.
    """
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config", path=path)
    if pg_config is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
            if out:
                candidates.append(Path(out))
    candidates += sorted(
        (Path(d) for d in glob.glob("/usr/lib/postgresql/*/bin")),
        key=_version_key,
        reverse=True,
    )
    initdb = shutil.which("initdb", path=path)
    if initdb is not None:
        candidates.append(Path(initdb).parent)
    for bindir in candidates:
        if all(os.access(bindir / tool, os.X_OK) for tool in ("initdb", "pg_ctl", "postgres")):
            return bindir
    return None


def _version_key(bindir: Path) -> tuple[int, ...]:
    # /usr/lib/postgresql/15/bin -> (15,); a non-numeric dir sorts last.
    try:
        return tuple(int(part) for part in bindir.parent.name.split("."))
    except ValueError:
        return (-1,)


@dataclass(frozen=True)
class RunAs:
    """The account the server runs as; None fields mean: the current user, unchanged."""

    name: str
    uid: int | None
    gid: int | None


def server_account(euid: int) -> RunAs:
    """As root: `postgres` if it exists, else `nobody`. Otherwise the current user."""
    if euid != 0:
        return RunAs(pwd.getpwuid(euid).pw_name, None, None)
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            return RunAs(name, entry.pw_uid, entry.pw_gid)
    raise PgServerError("running as root, and neither a 'postgres' nor a 'nobody' user exists")


@dataclass(frozen=True)
class PgServer:
    bindir: Path
    root: Path  # the temp dir: data dir, log, unix socket
    port: int
    account: RunAs

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    @property
    def logfile(self) -> Path:
        return self.root / "server.log"

    def url(self, dbname: str) -> str:
        """The SQLAlchemy URL of one database on this server."""
        return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.port}/{dbname}"

    def conninfo(self, dbname: str) -> str:
        """The libpq conninfo (for psycopg.connect) of one database on this server."""
        return f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname={dbname}"

    def postmaster_pid(self) -> int:
        # postmaster.pid's first line is the postmaster's pid.
        return int((self.datadir / "postmaster.pid").read_text().split("\n", 1)[0])


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _run(server: PgServer, *args: str, timeout: float = 60.0) -> None:
    """Run one PostgreSQL tool as the server's account; PgServerError with its output on failure."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    # A locale the server cannot load would fail initdb; the tests need none.
    env.update(LC_ALL="C", LANG="C", HOME=str(server.root))
    try:
        proc = subprocess.run(
            [str(server.bindir / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            env=env,
            cwd=server.root,  # root's cwd may be unreadable to the server's account
            user=server.account.uid,
            group=server.account.gid,
            extra_groups=[] if server.account.uid is not None else None,
            timeout=timeout,
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise PgServerError(f"{args[0]} failed to run: {e}") from e
    if proc.returncode != 0:
        log = server.logfile.read_text(errors="replace")[-2000:] if server.logfile.exists() else ""
        raise PgServerError(
            f"{' '.join(args)} exited {proc.returncode} (as {server.account.name}):\n"
            f"{proc.stdout}{proc.stderr}{log}"
        )


def _make_root(account: RunAs) -> Path:
    # Under /tmp as root: a unix socket path must stay short (108 bytes), and every parent
    # dir must be traversable by the server's account (a TMPDIR under /root is not).
    tmp = "/tmp" if account.uid is not None else None
    root = Path(tempfile.mkdtemp(prefix="supervise-pg-", dir=tmp))
    root.chmod(0o755)
    if account.uid is not None:
        os.chown(root, account.uid, account.gid if account.gid is not None else -1)
    return root


_CONF = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{root}'
# Throwaway data: nothing is worth an fsync.
fsync = off
synchronous_commit = off
full_page_writes = off
"""


def start(bindir: Path, attempts: int = 3) -> PgServer:
    """initdb and start a server; a port taken between picking and binding is retried."""
    account = server_account(os.geteuid())
    root = _make_root(account)
    try:
        probe = PgServer(bindir, root, 0, account)
        _run(probe, "initdb", "-D", str(probe.datadir), "-A", "trust", "-U", SUPERUSER,
             "-E", "UTF8", "--no-locale", "--no-sync")  # fmt: skip
        conf = probe.datadir / "postgresql.conf"
        base = conf.read_text()
        for attempt in range(attempts):
            server = PgServer(bindir, root, _free_port(), account)
            conf.write_text(base + _CONF.format(port=server.port, root=root))
            try:
                _run(server, "pg_ctl", "-D", str(server.datadir), "-l", str(server.logfile),
                     "-w", "-t", "60", "start", timeout=90)  # fmt: skip
                return server
            except PgServerError as e:
                if attempt + 1 == attempts or "could not bind" not in str(e):
                    raise
    except BaseException:
        # A start that timed out may still have left a postmaster running: stop it too.
        with contextlib.suppress(PgServerError):
            stop(PgServer(bindir, root, 0, account))
        shutil.rmtree(root, ignore_errors=True)
        raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def stop(server: PgServer) -> None:
    """Stop at once (the data is thrown away) and remove the temp dir."""
    try:
        if (server.datadir / "postmaster.pid").exists():
            _run(server, "pg_ctl", "-D", str(server.datadir), "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(server.root, ignore_errors=True)


@contextlib.contextmanager
def running(bindir: Path) -> Iterator[PgServer]:
    server = start(bindir)
    try:
        yield server
    finally:
        stop(server)


if __name__ == "__main__":
    found = find_bindir()
    if found is None:
        raise SystemExit(INSTALL_HINT)
    with running(found) as srv, contextlib.suppress(KeyboardInterrupt):
        print(srv.url("postgres"), flush=True)
        signal.pause()
