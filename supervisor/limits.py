"""Whether a fire may spawn a thread, and when: pure decisions, no I/O.

- max_spawns: a hook fires at most that many times per process. Fires refused for depth
  count too, so a noisy pattern stays bounded. The first fire past the budget is recorded
  as refused (`max_spawns`); after that the hook is exhausted and no longer scanned.
- depth: a process at depth d spawns threads at d+1, refused past `max_depth`.
- rate: every thread creation shares one sliding window; over the rate a thread is created
  queued with a later not-before time. It is never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from state.counters import Counter as Counter  # the decisions' input, stored by state/
from supervisor.hookspec import Limits

Verdict = Literal["spawn", "refuse", "suppress"]


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str | None
    counter: Counter  # the hook's counter after this fire

    @property
    def recorded(self) -> bool:
        return self.verdict != "suppress"


def decide(counter: Counter, max_spawns: int, depth: int, limits: Limits) -> Decision:
    """What one fire of a hook does, given its history and the process's depth."""
    if counter.fires >= max_spawns:
        after = Counter(counter.fires, counter.refused + 1)
        if counter.refused == 0:
            return Decision("refuse", "max_spawns", after)
        return Decision("suppress", "max_spawns", after)
    after = Counter(counter.fires + 1, counter.refused)
    if depth + 1 > limits.max_depth:
        return Decision("refuse", "depth", after)
    return Decision("spawn", None, after)


def exhausted(counter: Counter, max_spawns: int) -> bool:
    """No further fire of this hook would be recorded: stop looking for it."""
    return counter.fires >= max_spawns and counter.refused > 0


def scan_budget(counter: Counter, max_spawns: int) -> int:
    """How many more matches of a hook are worth finding in the next output."""
    if exhausted(counter, max_spawns):
        return 0
    return max_spawns - counter.fires + 1
