"""One process's run directory: spec.json, env.json, output.log, output.times, child.pid,
shim.pid, exit.json.

The shim writes its files without the daemon, and they are the truth about the child. What
the process's threads run under is not: spec.json is a copy of the launch record in the
database, and env.json is sealed with a key kept there (Fernet: AES and an HMAC), so it
shows no secret in clear and a changed one does not open. A thread's tool (or anything
else) that writes them gains nothing.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from supervise.errors import StateError

Result = Literal["success", "exit-code", "signal", "lost"]


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def spec(self) -> Path:
        return self.path / "spec.json"

    @property
    def env(self) -> Path:
        """The environment the process was launched with (0600: values may be secrets)."""
        return self.path / "env.json"

    @property
    def output(self) -> Path:
        return self.path / "output.log"

    @property
    def times(self) -> Path:
        """When each chunk of output.log was read (supervisor/readtimes.py)."""
        return self.path / "output.times"

    @property
    def archive(self) -> Path:
        return self.path / "output.log.1"

    @property
    def exit(self) -> Path:
        return self.path / "exit.json"

    @property
    def child_pid(self) -> Path:
        return self.path / "child.pid"

    @property
    def shim_pid(self) -> Path:
        return self.path / "shim.pid"

    @property
    def recorded(self) -> Path:
        """Touched by the daemon once the exit and its fires are committed, if `attached`."""
        return self.path / "recorded"

    @property
    def attached(self) -> Path:
        """Made by an attached `run`: only then does the daemon touch `recorded`.

        Creating a file costs about 1 ms on ext4; a thousand at recovery cost a second.
        """
        return self.path / "attached"

    def write_spec(self, text: str) -> None:
        write_text_atomic(self.spec, text)

    def read_spec(self) -> str:
        """spec.json as found: only for processes launched before the DB kept the record
        (`RunSpec.from_text` reads it)."""
        return self.spec.read_text()

    def check_spec(self, recorded: str) -> None:
        """Refuse a spec.json that differs from the launch record (a missing one is fine:
        the record is the truth, the file only shows it).

        Raises:
            StateError: naming the file and what to do.
        """
        try:
            on_disk = self.spec.read_text(errors="replace")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StateError(f"{self.spec}: cannot be read to check it: {exc.strerror}") from exc
        if on_disk != recorded:
            raise StateError(
                f"{self.spec} was changed after launch (it no longer matches the launch record "
                "in the state database); refusing to run a thread under it. A running "
                "process's hooks and permissions cannot be changed: stop it and start it "
                "again with `supervise run`"
            )

    def write_env(self, sealed: bytes) -> None:
        write_text_atomic(self.env, sealed.decode("ascii"))

    def read_env(self, key: str) -> dict[str, str]:
        """env.json opened with the key recorded at launch.

        Raises:
            StateError: it is missing, unreadable, or was changed.
        """
        try:
            sealed = self.env.read_bytes()
        except OSError as exc:
            raise StateError(
                f"{self.env}: cannot be read ({exc.strerror}): the environment this process "
                "was launched with is unknown, so its threads cannot run (was the run dir "
                "deleted?); start the process again with `supervise run`"
            ) from exc
        from cryptography.fernet import Fernet, InvalidToken  # ~10 ms: `logs` and `ps` skip it

        try:
            data = Fernet(key.encode("ascii")).decrypt(sealed)
        except (InvalidToken, ValueError) as exc:
            raise StateError(
                f"{self.env} was changed after launch (it no longer opens with the key in the "
                "launch record in the state database); refusing to run a thread with it. "
                "Stop the process and start it again with `supervise run`"
            ) from exc
        env: dict[str, str] = json.loads(data)
        return env

    def read_pid(self, which: Literal["child", "shim"]) -> int | None:
        path = self.child_pid if which == "child" else self.shim_pid
        try:
            return int(path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def read_exit(self) -> ExitRecord | None:
        try:
            raw = json.loads(self.exit.read_text())
        except FileNotFoundError:
            return None
        except ValueError:
            return None  # never half-written (renamed into place); treat junk as absent
        return ExitRecord.from_status(int(raw["status"]), float(raw["ended_at"]))


@dataclass(frozen=True)
class ExitRecord:
    """How a child ended, as systemd reports it: a result, a code, maybe a signal."""

    exit_code: int
    signal: str | None
    ended_at: float

    @classmethod
    def from_status(cls, status: int, ended_at: float) -> ExitRecord:
        # A POSIX sh reports death by signal N as status 128+N; a program that itself exits
        # with 128+N reads the same. We report the signal, and keep the status as the code.
        sig = None
        if 128 < status < 128 + 65:
            try:
                sig = signal.Signals(status - 128).name
            except ValueError:
                sig = None
        return cls(status, sig, ended_at)

    @property
    def result(self) -> Result:
        if self.signal:
            return "signal"
        return "success" if self.exit_code == 0 else "exit-code"


def seal_env(env: dict[str, str]) -> tuple[bytes, str]:
    """env.json's sealed content and its new key (which the DB keeps instead of the values)."""
    key = new_env_key()
    return seal_env_with(env, key), key


def new_env_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode("ascii")


def seal_env_with(env: dict[str, str], key: str) -> bytes:
    """env.json's sealed content under a key already recorded (a restarted run's)."""
    from cryptography.fernet import Fernet

    return Fernet(key.encode("ascii")).encrypt(json.dumps(env, sort_keys=True).encode())


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
