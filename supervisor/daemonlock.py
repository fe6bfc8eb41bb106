"""One daemon per state directory: an flock on daemon.pid, released by the kernel on death."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from supervise.errors import DaemonRunning


def running_pid(path: Path) -> int | None:
    """The pid of the daemon that holds the lock on `path`, or None if none does."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode(errors="replace").strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class DaemonLock:
    """Held for the daemon's lifetime; the pid file names its holder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise DaemonRunning naming the running daemon."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise DaemonRunning(
                f"a daemon (pid {text or '?'}) already runs on {self.path.parent}; "
                "stop it first, or set SUPERVISE_HOME to another state directory"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
