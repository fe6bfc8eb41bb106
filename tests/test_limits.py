"""Pure limit decisions: max_spawns, depth, the shared rate window."""

from __future__ import annotations

import pytest

from state.ratelimit import not_before
from supervisor.hookspec import Limits, Rate
from supervisor.limits import Counter, decide, exhausted, scan_budget


def test_max_spawns_then_one_refusal_then_suppressed() -> None:
    lim = Limits()
    c = Counter()
    d = decide(c, 2, 0, lim)
    assert d.verdict == "spawn"
    d = decide(d.counter, 2, 0, lim)
    assert d.verdict == "spawn"
    d = decide(d.counter, 2, 0, lim)
    assert (d.verdict, d.reason) == ("refuse", "max_spawns") and d.recorded
    assert exhausted(d.counter, 2) and scan_budget(d.counter, 2) == 0
    d = decide(d.counter, 2, 0, lim)
    assert d.verdict == "suppress" and not d.recorded


def test_depth_refusal_counts_against_the_budget() -> None:
    lim = Limits(max_depth=3)
    assert decide(Counter(), 1, 2, lim).verdict == "spawn"  # thread at depth 3
    d = decide(Counter(), 1, 3, lim)
    assert (d.verdict, d.reason, d.counter.fires) == ("refuse", "depth", 1)
    assert scan_budget(Counter(), 3) == 4


def test_rate_window_queues_never_drops() -> None:
    rate = Rate(2, 60.0)
    starts: list[float] = []
    for _ in range(5):
        starts.append(not_before(starts, 100.0, rate))
    assert starts == [100.0, 100.0, 160.0, 160.0, 220.0]


@pytest.mark.parametrize(
    ("text", "count", "per"),
    [("10/minute", 10, 60.0), ("5/s", 5, 1.0), ("3 / hours", 3, 3600.0), ("1/day", 1, 86400.0)],
)
def test_rate_parse(text: str, count: int, per: float) -> None:
    assert Rate.parse(text) == Rate(count, per)


@pytest.mark.parametrize("text", ["10", "ten/minute", "0/minute", "5/fortnight", "-1/s"])
def test_rate_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"10/minute|at least 1"):
        Rate.parse(text)


def test_strictest_limits() -> None:
    a = Limits(3, Rate(10, 60.0))
    b = Limits(2, Rate(1, 1.0))
    assert a.strictest(b) == Limits(2, Rate(10, 60.0))
