"""One process's run directory: spec.json, output.log, child.pid, shim.pid, exit.json.

The files are the source of truth the shim writes without the daemon; the database only
records what the daemon has made of them.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Result = Literal["success", "exit-code", "signal", "lost"]


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def spec(self) -> Path:
        return self.path / "spec.json"

    @property
    def output(self) -> Path:
        return self.path / "output.log"

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

    def write_spec(self, spec: dict[str, Any]) -> None:
        write_json_atomic(self.spec, spec)

    def read_spec(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.spec.read_text())
        return data

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


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)  # key order kept: the prompt lists context as written
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
