"""`on_schedule`: when a crontab expression's times come, and which one is due now.

The times come from APScheduler's `CronTrigger` (its crontab parser and `get_next_fire_time`;
no scheduler runs). A schedule is a wall-clock matter, so it is measured on the wall clock;
the daemon's timer for it wakes at least every MAX_TIMER_S, so a stepped clock is noticed.

Exactly once: a fire's key is the scheduled time itself (`cron@EPOCH`), so a time fired
before a daemon SIGKILL, found due again after it, is a duplicate the commit drops. A time
missed while no daemon ran fires once when one comes back, if it is recent (MISFIRE_GRACE_S);
only the latest such time fires (a schedule that ran ten times meanwhile is told once).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from apscheduler.triggers.cron import CronTrigger

# A time missed while the daemon was down fires at its recovery if it is at most this old: a
# daemon restarted by systemd or after a reboot is back well within it; an older one is stale,
# and the next time comes anyway.
MISFIRE_GRACE_S = 3600.0
EARLY_S = 0.05  # a timer that wakes this early counts as on time
FIELDS = ("minute", "hour", "day of month", "month", "day of week")
EXAMPLE_CRON = "0 3 * * *"
_FIX = f"write e.g. {EXAMPLE_CRON!r} (minute hour day-of-month month day-of-week)"


@dataclass(frozen=True)
class ScheduledAt:
    """A fire's key part: the scheduled time it is for, in whole epoch seconds."""

    epoch: int

    @property
    def text(self) -> str:
        return f"cron@{self.epoch}"


def cron_problem(cron: str, timezone: str | None) -> str | None:
    """What is wrong with a crontab expression and time zone (naming the field), or None."""
    from apscheduler.triggers.cron import CronTrigger

    if timezone is not None:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            return f"timezone {timezone!r} is not a known IANA time zone; write e.g. Europe/Paris"
    fields = cron.split()
    if len(fields) != len(FIELDS):
        return (
            f"cron {cron!r} has {len(fields)} fields, not 5 "
            f"({', '.join(FIELDS)}); write e.g. {EXAMPLE_CRON!r}"
        )
    try:
        CronTrigger.from_crontab(cron, timezone="UTC")
        return None
    except ValueError as whole:
        found = str(whole)
    keys = ("minute", "hour", "day", "month", "day_of_week")
    for name, key, value in zip(FIELDS, keys, fields, strict=True):
        try:
            CronTrigger(**{key: value}, timezone="UTC")
        except ValueError as exc:
            why = re.sub(r"^Error validating expression '[^']*': ", "", str(exc))
            return f"cron {cron!r}: its {name} field {value!r} is invalid ({why}); {_FIX}"
    return f"cron {cron!r} is invalid ({found}); {_FIX}"


@cache
def _trigger(cron: str, timezone: str | None) -> CronTrigger:
    from apscheduler.triggers.cron import CronTrigger

    return CronTrigger.from_crontab(cron, timezone=timezone)


def _at(epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)


def next_time(cron: str, timezone: str | None, after: float) -> float | None:
    """The first scheduled time strictly after `after` (epoch seconds); None: never."""
    trig = _trigger(cron, timezone)
    # get_next_fire_time answers times at or after `now`: a hair later means strictly after.
    found = trig.get_next_fire_time(None, _at(after + 1e-3))
    return None if found is None else found.timestamp()


@dataclass(frozen=True)
class ScheduleDecision:
    due: float | None  # the scheduled time that fires now (None: none is due)
    wait: float | None  # seconds until the next scheduled time (None: none ever)
    skipped: int = 0  # earlier times missed, too old or superseded, that do not fire


def decide(
    cron: str, timezone: str | None, *, since: float, fired: float | None, now: float
) -> ScheduleDecision:
    """Which scheduled time fires at `now` for a run started at `since` whose last fired
    time (known to this daemon) is `fired`, and how long until the next one.

    The time that fires is the latest one in (since, now], if it is within MISFIRE_GRACE_S
    of now and later than `fired`; times between are counted as skipped.
    """
    horizon = now + EARLY_S
    start = max(since, now - MISFIRE_GRACE_S)
    if fired is not None:
        start = max(start, fired)
    due: float | None = None
    skipped = 0
    t = next_time(cron, timezone, start)
    while t is not None and t <= horizon:
        if due is not None:
            skipped += 1
        due = t
        t = next_time(cron, timezone, t)
    wait = None if t is None else t - now
    return ScheduleDecision(due, wait, skipped)


def describe_time(epoch: float, cron: str, timezone: str | None) -> str:
    """A scheduled time in the schedule's zone: `2026-11-27 03:00 UTC`."""
    local = dt.datetime.fromtimestamp(epoch, _trigger(cron, timezone).timezone)
    return f"{local:%Y-%m-%d %H:%M} {local.tzname() or timezone or ''}".rstrip()


def describe(epoch: float, cron: str, timezone: str | None) -> str:
    """`scheduled run at 2026-11-27 03:00 UTC (cron 0 3 * * *)`: what a thread is told."""
    return f"scheduled run at {describe_time(epoch, cron, timezone)} (cron {cron})"
