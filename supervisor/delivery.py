"""When to send notifications and when to try again: pure decisions, no I/O.

- Rate, per target: at most `rate.count` messages in any `rate.per_seconds`. Over it,
  events are never dropped: they wait until the window opens, and what waited goes as one
  message ("... and N more events"), so a burst costs one message, not N.
- Retries: a failed send is tried again after 0.5 s, 1 s, 2 s, ... (at most 5 min), up to
  the settings' `attempts`; then it is recorded as failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from state.ratelimit import Rate

RETRY_BASE_S = 0.5
RETRY_MAX_S = 300.0


def retry_delay(attempts: int) -> float:
    """Seconds before the next try, after `attempts` failed ones (1, 2, ...)."""
    return float(min(RETRY_BASE_S * 2 ** max(attempts - 1, 0), RETRY_MAX_S))


@dataclass(frozen=True)
class SendPlan:
    """For one target's due rows (oldest first): which go alone, which go together as one
    message (`together[0]` carries the others), and when the rest may go."""

    alone: tuple[int, ...] = ()
    together: tuple[int, ...] = ()
    wait_until: float | None = None  # every row waits: the window is full


def plan_sends(due: Sequence[int], sent: Sequence[float], rate: Rate, now: float) -> SendPlan:
    """`due`: row ids in order; `sent`: when the messages of the current window went
    (oldest first)."""
    recent = [s for s in sent if s > now - rate.per_seconds]
    budget = rate.count - len(recent)
    if not due:
        return SendPlan()
    if budget <= 0:
        return SendPlan(wait_until=recent[-rate.count] + rate.per_seconds)
    if len(due) <= budget:
        return SendPlan(alone=tuple(due))
    # One message left for the rest: the last of the budget carries them all.
    return SendPlan(alone=tuple(due[: budget - 1]), together=tuple(due[budget - 1 :]))


def coalesced(titles: Sequence[str], bodies: Sequence[str]) -> tuple[str, str]:
    """One message for several events: the first in full, the others by their first line
    (what happened: the hook, the process, the matched line or exit)."""
    more = len(titles) - 1
    title = f"{titles[0]} (and {more} more event{'s' if more != 1 else ''})"
    others = "\n".join(
        f"- {(b.splitlines() or [t])[0]}" for t, b in zip(titles[1:], bodies[1:], strict=True)
    )
    body = f"{bodies[0]}\n\n{more} more event{'s' if more != 1 else ''} (rate limit):\n{others}"
    return title, body
