"""How long a process has run, on a clock a wall-clock step does not move.

The wall clock jumps (NTP, a person, a VM resumed): measured by it, a restarted daemon fired
`on_timeout` early after a step forward and an hour late after a step back. The boot clock
(CLOCK_BOOTTIME) only moves forward, suspend included, but restarts at each boot: it is used
while the boot id is the one recorded at the start, and the wall clock only across a reboot
(or for a process recorded before its start was read on the boot clock).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from supervisor.identity import boot_id


@dataclass(frozen=True)
class Instant:
    """One moment read on both clocks, with the boot it belongs to."""

    wall: float
    boot: float | None  # CLOCK_BOOTTIME seconds; None when not recorded
    boot_id: str


def boot_clock() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def now() -> Instant:
    return Instant(time.time(), boot_clock(), boot_id())


def elapsed(start: Instant, at: Instant) -> float:
    """Seconds from `start` to `at`: on the boot clock within one boot, else the wall clock."""
    if start.boot is not None and at.boot is not None and start.boot_id == at.boot_id:
        return at.boot - start.boot
    return at.wall - start.wall


def due_in(start: Instant, seconds: float, at: Instant) -> float:
    """Seconds from `at` until `seconds` have passed since `start` (0 or less: due)."""
    return seconds - elapsed(start, at)
