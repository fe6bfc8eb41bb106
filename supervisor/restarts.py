"""Restarts: should a run that ended be started again, when, or is it a crash loop. Pure.

A restarted process is a chain of runs (each its own process row, with its own output, exit
record and fires; state/runs.py). When a run ends, the exit's transaction reads the chain's
history and asks `decide` what comes next; when a pending run is looked at, `start_due` says
whether it may start now. Neither reads a clock or a file: the facts are given.

The shape of the policy, and its defaults, follow systemd and pm2 (README, "Restarts"):
`policy` `no` (systemd's `Restart=no`: supervise ran a process once before this existed),
`delay` 1 s growing by `factor` 2 up to `max_delay` 5 min (systemd's RestartSteps /
RestartMaxDelaySec, pm2's exponential backoff), reset once a run stays up `reset_after`
10 min, and a crash loop past `max_restarts` 10 restarts within `within` 10 min (systemd's
StartLimitBurst / StartLimitIntervalSec): ten quick crashes take 1+2+...+256 s, about 8.5
minutes, inside the window, so a process that can never start is given up in under 10.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

Policy = Literal["no", "on-failure", "always"]
POLICIES: tuple[Policy, ...] = get_args(Policy)
# Who started a run: `run` (the first, by `supervise run` or a thread), `restart` (the
# policy, after an exit), `manual` (`supervise restart`: a person; the count starts over),
# `boot` (the daemon after a reboot ended the run before it: the count starts over too).
Cause = Literal["run", "restart", "manual", "boot"]
CAUSES: tuple[Cause, ...] = get_args(Cause)
# What a person asked of a running run: `stop` ends the restart loop, `restart` starts the
# next run at once.
# What ended a run on request: a person (`stop`, `restart`) or a hook's `restart: true` (`hook`).
StopRequest = Literal["stop", "restart", "hook"]
ByPerson = Literal["stop", "restart"]  # the requests a person makes (`ended_by_user`)

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_duration(value: Any) -> float:
    """Seconds from `1s`, `500ms`, `5m`, `2h`, `1d` or a number of seconds.

    Raises:
        ValueError: anything else (also a negative or non-finite number).
    """
    if isinstance(value, bool):
        raise ValueError("a duration, not true/false")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise ValueError("a duration of 0 or more seconds")
        return float(value)
    if isinstance(value, str) and (m := _DURATION.match(value)):
        return float(m.group(1)) * _UNITS[m.group(2) or "s"]
    raise ValueError("a duration such as 1s, 500ms, 5m or 2h")


def format_duration(seconds: float) -> str:
    """The shortest exact spelling `parse_duration` reads back: 1s, 5m, 1.5s, 250ms."""
    for unit in ("d", "h", "m", "s"):
        n = seconds / _UNITS[unit]
        if n >= 1 and n == int(n):
            return f"{int(n)}{unit}"
    if seconds < 1 and (seconds * 1000) == int(seconds * 1000):
        return f"{int(seconds * 1000)}ms"
    return f"{seconds:.6f}".rstrip("0").rstrip(".") + "s"


@dataclass(frozen=True)
class RestartSpec:
    """A process's `restart:` (hook file) or `--restart` (run): kept in its launch record."""

    policy: Policy = "no"
    delay: float = 1.0  # before the first restart of a series
    max_delay: float = 300.0  # the backoff never waits longer
    factor: float = 2.0  # each quick crash in a row multiplies the delay by this
    reset_after: float = 600.0  # a run up this long was stable: backoff and count start over
    max_restarts: int = 10  # restarts within `within` past which it is a crash loop
    within: float = 600.0
    after_thread: bool = False  # the next run waits for the threads this exit spawned

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "delay": self.delay,
            "max_delay": self.max_delay,
            "factor": self.factor,
            "reset_after": self.reset_after,
            "max_restarts": self.max_restarts,
            "within": self.within,
            "after_thread": self.after_thread,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RestartSpec:
        """Raises: KeyError, TypeError or ValueError (a record this version cannot read)."""
        policy = str(data.get("policy", "no"))
        if policy not in POLICIES:
            raise ValueError(f"restart policy {policy!r}")
        d = cls()
        return cls(
            policy=policy,
            delay=float(data.get("delay", d.delay)),
            max_delay=float(data.get("max_delay", d.max_delay)),
            factor=float(data.get("factor", d.factor)),
            reset_after=float(data.get("reset_after", d.reset_after)),
            max_restarts=int(data.get("max_restarts", d.max_restarts)),
            within=float(data.get("within", d.within)),
            after_thread=bool(data.get("after_thread", d.after_thread)),
        )

    def text(self) -> str:
        """How `hooks check` and `ps` say it."""
        if self.policy == "no":
            return "no"
        f = format_duration
        wait = " and after this exit's threads" if self.after_thread else ""
        return (
            f"{self.policy} (delay {f(self.delay)} x{self.factor:g} up to {f(self.max_delay)}"
            f"{wait}, reset after {f(self.reset_after)} up; crash loop past "
            f"{self.max_restarts} restarts within {f(self.within)})"
        )


@dataclass(frozen=True)
class RunFact:
    """One run of a chain as the decision sees it."""

    started_at: float
    ended_at: float
    failed: bool  # a non-zero exit code, a signal, or lost
    cause: Cause = "run"


@dataclass(frozen=True)
class NoRestart:
    reason: str  # for the log: "policy no", "exited 0 (policy on-failure)", "stopped by a person"


@dataclass(frozen=True)
class Restart:
    """Start the next run at `at` (wall clock; maybe already past: at once)."""

    at: float
    delay: float
    cause: Cause  # `restart`, or `manual` for `supervise restart`
    after_thread: bool = False
    streak: int = 0  # quick runs in a row, this one included: the backoff's step


@dataclass(frozen=True)
class CrashLoop:
    """Too many restarts within the window: stop restarting, fire on_crash_loop."""

    restarts: int
    within: float

    def text(self) -> str:
        return f"crash loop: {self.restarts} restarts within {format_duration(self.within)}"


Decision = NoRestart | Restart | CrashLoop


def stable(spec: RestartSpec, run: RunFact) -> bool:
    """A run up `reset_after` or longer ended a series: what came before no longer counts."""
    return run.ended_at - run.started_at >= spec.reset_after


def series(spec: RestartSpec, runs: Sequence[RunFact]) -> list[RunFact]:
    """The quick runs at the end of the chain: back from the last, through runs the policy
    restarted, to the one a person started (`run`, `manual`) or the first after a stable run."""
    out: list[RunFact] = []
    for i in range(len(runs) - 1, -1, -1):
        run = runs[i]
        if stable(spec, run):
            break
        out.append(run)
        if run.cause != "restart":
            break
    out.reverse()
    return out


def backoff(spec: RestartSpec, streak: int) -> float:
    """The wait before the next run after `streak` quick runs in a row (1: the first)."""
    base = min(spec.delay, spec.max_delay)
    if streak <= 1 or spec.factor == 1.0 or spec.delay == 0.0:
        return base
    try:
        grown = spec.delay * spec.factor ** (streak - 1)
    except OverflowError:
        grown = math.inf
    return min(grown, spec.max_delay)


def decide(
    spec: RestartSpec | None,
    runs: Sequence[RunFact],
    *,
    stop: StopRequest | None = None,
    restartable: bool = True,
) -> Decision:
    """What comes after the last of `runs` (the chain, oldest first) ended.

    Args:
        spec: the process's restart policy (None: `no`).
        runs: every run of the chain; the last is the one that just ended.
        stop: what a person asked of the last run (`supervise stop`, `supervise restart`).
        restartable: False when nothing can be started again (its run dir was deleted).
    """
    if not runs:
        raise ValueError("decide needs the run that ended")
    last = runs[-1]
    if stop == "restart":
        return Restart(last.ended_at, 0.0, "manual")
    if stop == "stop":
        return NoRestart("stopped by a person")
    if stop == "hook":
        return hook_restart(spec, runs)
    spec = spec or RestartSpec()
    if spec.policy == "no":
        return NoRestart("policy no")
    if not restartable:
        return NoRestart("its run dir was deleted")
    if spec.policy == "on-failure" and not last.failed:
        return NoRestart("exited 0 (policy on-failure)")
    if stable(spec, last):
        return Restart(last.ended_at + backoff(spec, 1), backoff(spec, 1), "restart",
                       spec.after_thread, 0)  # fmt: skip
    quick = series(spec, runs)
    since = last.ended_at - spec.within
    restarts = sum(1 for r in quick if r.cause == "restart" and r.started_at >= since)
    if restarts >= spec.max_restarts:
        return CrashLoop(restarts, spec.within)
    delay = backoff(spec, len(quick))
    return Restart(last.ended_at + delay, delay, "restart", spec.after_thread, len(quick))


def hook_restart(spec: RestartSpec | None, runs: Sequence[RunFact]) -> Restart | CrashLoop:
    """A hook's `restart: true` after the last of `runs` ended: at once, whatever the policy,
    but counted as an automatic restart (cause `restart`), so a hook that fires on every run
    ends in a crash loop past `max_restarts` within `within` (the defaults without a
    `restart:` key) instead of restarting forever."""
    spec = spec or RestartSpec()
    last = runs[-1]
    quick = series(spec, runs)
    since = last.ended_at - spec.within
    restarts = sum(1 for r in quick if r.cause == "restart" and r.started_at >= since)
    if restarts >= spec.max_restarts:
        return CrashLoop(restarts, spec.within)
    return Restart(last.ended_at, 0.0, "restart", False, len(quick))


def after_reboot(
    spec: RestartSpec | None, *, autostart: bool | None, stop: StopRequest | None = None
) -> Decision:
    """What follows a run that a reboot ended (its row names an earlier boot than now).

    A program from a program file comes back when its `autostart` is true (`autostart`
    None: not a program). Any other process comes back when its policy is `always`. A
    reboot is no failure of the process: its exit is unknown (lost) or the shutdown's
    signal, so `on-failure` does not bring it back (as systemd's Restart= starts nothing at
    boot). A person's stop, asked before the reboot, still holds. The start is due at once
    (`at` = when the run ended, already past) and counted as `boot`: a new series.
    """
    if stop == "stop":
        return NoRestart("stopped by a person")
    policy = (spec or RestartSpec()).policy
    if autostart is not None:
        if autostart:
            return Restart(0.0, 0.0, "boot")
        return NoRestart("autostart: false (not started after a reboot)")
    if policy == "always" or stop == "restart":
        return Restart(0.0, 0.0, "boot")
    return NoRestart(f"ended by a reboot (policy {policy} starts it only if always)")


@dataclass(frozen=True)
class StartNow:
    pass


@dataclass(frozen=True)
class WaitUntil:
    at: float


@dataclass(frozen=True)
class WaitForThreads:
    count: int  # threads of the previous exit not finished yet


StartDecision = StartNow | WaitUntil | WaitForThreads


def start_due(*, due_at: float, now: float, unfinished_threads: int) -> StartDecision:
    """Whether a pending run may start: its time has come, and (restart.after_thread) the
    threads the previous run's exit spawned have all finished."""
    if now < due_at:
        return WaitUntil(due_at)
    if unfinished_threads > 0:
        return WaitForThreads(unfinished_threads)
    return StartNow()
