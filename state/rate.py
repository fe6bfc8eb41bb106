"""A thread-start rate such as `10/minute`: a pure record.

Here, not in supervisor.hookspec, because the settings (state) parse `SUPERVISE_RATE` and
state imports nothing above it; a hook file's `limits.rate` is the same record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RATE_UNITS = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
}
_RATE_RE = re.compile(r"^\s*(\d+)\s*/\s*([a-z]+?)s?\s*$")


@dataclass(frozen=True)
class Rate:
    """At most `count` thread starts per `per_seconds`, shared by every thread creation."""

    count: int
    per_seconds: float

    @classmethod
    def parse(cls, text: str) -> Rate:
        """Parse `N/second|minute|hour|day` (also `N/s`, `N/m`, `N/h`, plural units).

        Raises:
            ValueError: with a message that says how to write a rate.
        """
        m = _RATE_RE.match(text.lower())
        if not m or m.group(2) not in _RATE_UNITS:
            raise ValueError(
                f"rate must look like 10/minute (units: second, minute, hour, day), got {text!r}"
            )
        count = int(m.group(1))
        if count < 1:
            raise ValueError(f"rate must allow at least 1 thread, got {text!r}; write 1/hour")
        return cls(count, _RATE_UNITS[m.group(2)])

    @property
    def text(self) -> str:
        for unit in ("second", "minute", "hour", "day"):
            if _RATE_UNITS[unit] == self.per_seconds:
                return f"{self.count}/{unit}"
        return f"{self.count}/{self.per_seconds:g}s"

    def stricter(self, other: Rate) -> Rate:
        """The rate that allows fewer threads per second (on a tie, the longer window)."""
        mine, theirs = self.count / self.per_seconds, other.count / other.per_seconds
        if mine != theirs:
            return self if mine < theirs else other
        return self if self.per_seconds >= other.per_seconds else other


DEFAULT_RATE = Rate(10, 60.0)
