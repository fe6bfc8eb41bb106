"""`supervise stop`: TERM (or --signal) to the child's process group, KILL after the grace.

The child leads its own process group, so its whole tree gets the signal and the shim does
not: the shim lives on to record how the child ended. Identity (pid and start time) is
checked again before every signal, since pids are reused.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from supervise.errors import SuperviseError, UserError
from supervisor.identity import is_same
from supervisor.rundir import ExitRecord, RunDir

if TYPE_CHECKING:  # the CLI imports this module: no SQLAlchemy for --help
    from state.processes import ProcessRecord


@dataclass(frozen=True)
class StopReport:
    sent: list[str]
    record: ExitRecord | None


def parse_signal(text: str) -> signal.Signals:
    name = text.upper()
    if name.isdigit():
        try:
            return signal.Signals(int(name))
        except ValueError:
            pass
    else:
        name = name if name.startswith("SIG") else "SIG" + name
        if name in signal.Signals.__members__:
            return signal.Signals[name]
    raise UserError(f"unknown signal {text!r}; write a name such as TERM, INT, HUP or a number")


def _wait_gone(pid: int, seconds: float) -> bool:
    """Wait (on a pidfd, not by polling) until `pid` ends; True if it did in time."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], max(seconds, 0.0))[0])
    finally:
        os.close(fd)


def stop_process(
    row: ProcessRecord,
    run: RunDir,
    *,
    sig: signal.Signals = signal.SIGTERM,
    grace: float = 10.0,
    say: Callable[[str], None] = lambda _: None,
) -> StopReport:
    """Signal the child's group, escalate to SIGKILL after `grace` seconds, report the end.

    Raises:
        SuperviseError: the process is not running (exit code 1).
    """
    if grace < 0:
        raise UserError(f"--grace must be 0 or more seconds, got {grace:g}")
    pid = row.pid or run.read_pid("child")
    started = row.pid_started
    if row.state not in ("running", "starting") or pid is None or not is_same(pid, started):
        raise SuperviseError(
            f"process {row.id} is not running (state {row.state}); nothing to stop"
        )
    sent = []
    say(f"sending {sig.name} to process {row.id} (pid {pid}) and its process group")
    os.killpg(pid, sig)
    sent.append(sig.name)
    gone = _wait_gone(pid, grace)
    if not gone and sig != signal.SIGKILL and is_same(pid, started):
        say(f"still running after {grace:g}s; sending SIGKILL")
        os.killpg(pid, signal.SIGKILL)
        sent.append("SIGKILL")
        _wait_gone(pid, 5.0)
    return StopReport(sent, _await_exit_record(run, 5.0))


def _await_exit_record(run: RunDir, seconds: float) -> ExitRecord | None:
    # The shim writes exit.json right after reaping the child: a few milliseconds.
    deadline = time.monotonic() + seconds
    shim = run.read_pid("shim")
    while time.monotonic() < deadline:
        record = run.read_exit()
        if record is not None:
            return record
        if shim is None or _wait_gone(shim, deadline - time.monotonic()):
            return run.read_exit()
    return None
