"""Why the daemon steps a process: typed wake reasons, gathered per process until its step.

A process may be woken for several reasons before it is stepped; they are kept as a set, so
each reason is a frozen (hashable) value, and the step reads them with the functions below.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Change:
    """Something in its run dir (or the database) changed: look at it."""


@dataclass(frozen=True)
class Liveness:
    """It may have ended without telling (its pid ended, a recheck, a retry): ask /proc."""


@dataclass(frozen=True)
class OutputReady:
    """It wrote output: a step that only reads (coalesced; see coalesce.py)."""


@dataclass(frozen=True)
class TimeoutDue:
    """Timeout hook `hook`'s timer rang (maybe early: the tracker decides on the boot clock)."""

    hook: str


@dataclass(frozen=True)
class SilenceDue:
    """on_silence hook `hook`'s timer rang (maybe early: output may have come since)."""

    hook: str


@dataclass(frozen=True)
class ScheduleDue:
    """on_schedule hook `hook`'s timer rang (maybe early: the tracker decides on the clock)."""

    hook: str


@dataclass(frozen=True)
class ResourceDue:
    """on_resource hook `hook`'s condition held for its for_seconds (the sampler decided): the
    stretch that began at wall time `since`, told as `detail`."""

    hook: str
    since: float
    detail: str


Wake = Change | Liveness | OutputReady | TimeoutDue | SilenceDue | ScheduleDue | ResourceDue

# A process's timers, one per purpose: a retry after a failed step, a recheck of a row never
# launched, the start of a pending restart, and one per timeout hook (named by the wake it
# brings, so never by a string).
Timer = Literal["retry", "recheck", "start"] | TimeoutDue | SilenceDue | ScheduleDue

CHANGE = Change()
LIVENESS = Liveness()
OUTPUT = OutputReady()


def only_output(reasons: Collection[Wake]) -> bool:
    """Nothing but new output: the cheap step that reads it, and nothing else."""
    return bool(reasons) and all(isinstance(r, OutputReady) for r in reasons)


def check_liveness(reasons: Collection[Wake]) -> bool:
    return any(isinstance(r, Liveness) for r in reasons)


def timeouts_due(reasons: Collection[Wake]) -> list[str]:
    """The timeout hooks whose timers rang, by name, in a stable order."""
    return sorted(r.hook for r in reasons if isinstance(r, TimeoutDue))


def silences_due(reasons: Collection[Wake]) -> list[str]:
    return sorted(r.hook for r in reasons if isinstance(r, SilenceDue))


def schedules_due(reasons: Collection[Wake]) -> list[str]:
    return sorted(r.hook for r in reasons if isinstance(r, ScheduleDue))


def resources_due(reasons: Collection[Wake]) -> list[ResourceDue]:
    return sorted((r for r in reasons if isinstance(r, ResourceDue)), key=lambda r: r.hook)
