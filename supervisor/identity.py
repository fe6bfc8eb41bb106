"""Which process is which: pids are reused, so a process is (pid, start time, boot).

psutil's start time has 10 ms resolution and is computed from the boot time, which moves
when the wall clock is stepped: compare with a tolerance.
"""

from __future__ import annotations

from pathlib import Path

import psutil

START_TOLERANCE_S = 1.0
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str:
    """The kernel's id for this boot; when it changes, every saved pid is dead."""
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return f"btime-{int(psutil.boot_time())}"


def start_time(pid: int) -> float | None:
    """The process's start time, or None if no such process (or a zombie)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        return None


def is_same(pid: int | None, started: float | None) -> bool:
    """Whether `pid` still names the process that started at `started`."""
    if pid is None:
        return False
    now = start_time(pid)
    if now is None:
        return False
    return started is None or abs(now - started) <= START_TOLERANCE_S
