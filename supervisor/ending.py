"""Whether a process has ended, and how: pure decisions, no I/O, no clock reads.

The tracker reads the run dir (is it there, is there an exit record), the boot id and, only
when these leave it open, /proc; these functions say what that means. A process ends exactly
once, `Exited` or `Lost`, and its on_exit hooks fire with that end (triggers.end_fires).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from state.processes import ProcessEnd
from supervisor.rundir import ExitRecord

STARTING_GRACE_S = 60.0  # a row still "starting" after this, with no shim, was never launched

LostReason = Literal["run dir deleted", "ended without an exit record", "could not start"]
RUN_DIR_GONE: LostReason = "run dir deleted"
NO_EXIT_RECORD: LostReason = "ended without an exit record"
NOT_STARTED: LostReason = "could not start"  # a restart whose start failed (daemon.log says why)


@dataclass(frozen=True)
class Exited:
    """The shim recorded the child's end: its code is known."""

    record: ExitRecord


@dataclass(frozen=True)
class Lost:
    """It ended without telling how (or nothing can tell any more): the code is unknown."""

    reason: LostReason


End = Exited | Lost


def end_of(*, run_dir: bool, record: ExitRecord | None) -> End | None:
    """How the process ended, if its run dir tells: None while it may still run."""
    if not run_dir:
        # Nothing can tell its end any more (the shim writes exit.json there).
        return Lost(RUN_DIR_GONE)
    if record is not None:
        return Exited(record)
    return None


def dead_end(record: ExitRecord | None) -> End:
    """How a process that no longer runs ended: as its exit record says (the shim may have
    written it between the first look and the pid's end), else lost."""
    return Lost(NO_EXIT_RECORD) if record is None else Exited(record)


def presumed_alive(*, same_boot: bool, launched: bool, since_start: float) -> bool | None:
    """Whether it still runs, where that is known without asking /proc (None: ask /proc).

    A reboot ended every saved pid; a row never given a pid (the CLI died before starting
    the shim) counts as starting until the grace ends.
    """
    if not same_boot:
        return False
    if not launched:
        return since_start < STARTING_GRACE_S
    return None


def process_end(end: End, now: float, *, pid: int | None, shim_pid: int | None) -> ProcessEnd:
    """The row's end. An exit keeps the pids learned from the run dir (a process that ended
    before the CLI wrote them); a lost process ends `now`, the moment it was given up."""
    if isinstance(end, Exited):
        r = end.record
        return ProcessEnd(
            "exited",
            r.result,
            r.ended_at,
            exit_code=r.exit_code,
            signal=r.signal,
            pid=pid,
            shim_pid=shim_pid,
        )
    return ProcessEnd("lost", "lost", now, end_reason=end.reason)
