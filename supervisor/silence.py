"""`on_silence`: has the process printed nothing for long enough? Pure decisions.

A silent stretch is named by where the output stood when it began: the bytes the child had
written (`SilenceAt`, the fire key's part). The same stretch seen again by a daemon started
after a SIGKILL gets the same key, and the commit drops it as a duplicate; new output makes a
new stretch, and a new key.

When the last output came is measured on the boot clock while a daemon watches (a wall-clock
step moves nothing); a daemon starting anew takes it from the output file's mtime (the last
write), read on the wall clock once, as a timeout across a reboot is.
"""

from __future__ import annotations

from dataclasses import dataclass

from supervisor import clocks
from supervisor.triggers import TIMER_SLACK_S


@dataclass(frozen=True)
class SilenceAt:
    """A fire's key part: the silence that began after the child's `written`-th byte."""

    written: int

    @property
    def text(self) -> str:
        return f"silence@{self.written}"


def last_output(
    start: clocks.Instant, size: int, mtime: float, now: clocks.Instant
) -> clocks.Instant:
    """When the process last printed, as a daemon starting now can know it: its start if it
    printed nothing, else the file's last write (at most now: an mtime from a stepped clock)."""
    if size == 0:
        return start
    ago = max(0.0, now.wall - mtime)
    boot = None if now.boot is None else now.boot - ago
    later = clocks.Instant(now.wall - ago, boot, now.boot_id)
    # Never before the start: output cannot predate it (a clock stepped back between).
    return later if clocks.elapsed(start, later) > 0 else start


@dataclass(frozen=True)
class SilenceCheck:
    fire: bool  # the stretch has lasted long enough: fire it
    wait: float  # else, seconds until it would have


def check(seconds: float, since: clocks.Instant, now: clocks.Instant) -> SilenceCheck:
    """Whether `seconds` of silence since `since` have passed at `now`."""
    left = clocks.due_in(since, seconds, now)
    return SilenceCheck(left <= TIMER_SLACK_S, max(left, 0.0))
