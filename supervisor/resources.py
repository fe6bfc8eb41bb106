"""`on_resource`: has the process's tree stayed over a threshold long enough? Pure decisions.

The sampler (sampler.py) measures; these decide. A hook fires once per stretch over its
threshold, when the stretch has lasted `for_seconds` (measured between samples, on the
monotonic clock); going back under ends the stretch and arms it again (max_spawns bounds
the fires). The stretch's start names the fire (`ResourceAt`).

After a daemon restart nothing is known of a stretch in progress: a hook that has fired
before starts `blocked`, so a stretch already over at the first sample is taken as the one
that fired (never twice), and only one that begins after it went under fires.
"""

from __future__ import annotations

from dataclasses import dataclass

from supervisor.hookspec import OnResource

MB = 1024 * 1024
MIN_INTERVAL_S = 0.5
MAX_INTERVAL_S = 5.0


@dataclass(frozen=True)
class Usage:
    """One sample of a process tree: resident memory, and CPU in percent of one core since
    the previous sample (None at the first, which has nothing to compare with)."""

    rss_bytes: int
    cpu_percent: float | None
    processes: int = 1

    def text(self) -> str:
        cpu = "" if self.cpu_percent is None else f", CPU {self.cpu_percent:.0f}%"
        return f"RSS {self.rss_bytes / MB:.0f} MB{cpu}"


@dataclass(frozen=True)
class ResourceAt:
    """A fire's key part: the stretch over the threshold that began at wall time `since`."""

    since_ms: int

    @property
    def text(self) -> str:
        return f"resource@{self.since_ms}"


@dataclass(frozen=True)
class Stretch:
    """A hook's state between samples."""

    over_since: float | None = None  # monotonic time of the first sample over (None: under)
    over_since_wall: float | None = None
    fired: bool = False  # this stretch has fired (or, after a restart, may have)


def interval(hooks: list[OnResource]) -> float:
    """How often to sample: half the shortest for_seconds, within 0.5 s and 5 s."""
    if not hooks:
        return MAX_INTERVAL_S
    shortest = min(h.for_seconds for h in hooks)
    return min(max(shortest / 2, MIN_INTERVAL_S), MAX_INTERVAL_S)


def over(t: OnResource, u: Usage) -> bool:
    """Whether `u` is over either threshold the hook gives."""
    if t.rss_mb is not None and u.rss_bytes > t.rss_mb * MB:
        return True
    return t.cpu_percent is not None and u.cpu_percent is not None and u.cpu_percent > t.cpu_percent


def initial(fired_before: bool) -> Stretch:
    return Stretch(fired=fired_before)


@dataclass(frozen=True)
class Step:
    stretch: Stretch
    fire: bool  # fire now, for the stretch that began at `stretch.over_since_wall`


def step(t: OnResource, s: Stretch, u: Usage, mono: float, wall: float) -> Step:
    """The hook's state after sample `u` taken at `mono` (monotonic) / `wall`."""
    if not over(t, u):
        return Step(Stretch(), False)  # under: the stretch ends, the hook is armed again
    since = mono if s.over_since is None else s.over_since
    s = Stretch(since, wall if s.over_since_wall is None else s.over_since_wall, s.fired)
    if s.fired or mono - since < t.for_seconds:
        return Step(s, False)
    return Step(Stretch(since, s.over_since_wall, True), True)


def describe(t: OnResource, u: Usage) -> str:
    """`RSS 812 MB over 500 MB for 30 s`: what a thread is told fired it."""
    parts = []
    if t.rss_mb is not None and u.rss_bytes > t.rss_mb * MB:
        parts.append(f"RSS {u.rss_bytes / MB:.0f} MB over {t.rss_mb:g} MB")
    if t.cpu_percent is not None and u.cpu_percent is not None and u.cpu_percent > t.cpu_percent:
        parts.append(f"CPU {u.cpu_percent:.0f}% over {t.cpu_percent:g}%")
    tree = f" ({u.processes} processes)" if u.processes > 1 else ""
    return f"{' and '.join(parts)} for {t.for_seconds:g} s{tree}"
