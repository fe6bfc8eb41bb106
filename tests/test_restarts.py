"""The restart decision, pure (supervisor/restarts.py): tables of histories, and properties
over random ones; the `restart:` key of hook files, every problem at FILE:LINE with a fix."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervise.errors import HookFileError
from supervisor.hookfile import parse_hook_text
from supervisor.hookspec import HookFile, OnCrashLoop
from supervisor.restarts import (
    CrashLoop,
    Decision,
    NoRestart,
    Restart,
    RestartSpec,
    RunFact,
    StartNow,
    WaitForThreads,
    WaitUntil,
    backoff,
    decide,
    format_duration,
    parse_duration,
    start_due,
)

ALWAYS = RestartSpec("always", delay=1.0, max_delay=60.0, factor=2.0, reset_after=600.0)


def crashes(*uptimes: float, gap: float = 0.0, first_cause: str = "run") -> list[RunFact]:
    """Runs one after another, each up `uptime` s and failing, `gap` s apart."""
    runs, t = [], 1000.0
    for i, up in enumerate(uptimes):
        cause = first_cause if i == 0 else "restart"
        runs.append(RunFact(t, t + up, True, cause))  # type: ignore[arg-type]
        t += up + gap
    return runs


# -- tables ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "runs", "stop", "expected"),
    [
        # The policies.
        (None, crashes(1), None, NoRestart("policy no")),
        (RestartSpec("no"), crashes(1), None, NoRestart("policy no")),
        (
            RestartSpec("on-failure"),
            [RunFact(0.0, 5.0, False)],
            None,
            NoRestart("exited 0 (policy on-failure)"),
        ),
        (
            RestartSpec("on-failure"),
            [RunFact(0.0, 5.0, True)],
            None,
            Restart(6.0, 1.0, "restart", streak=1),
        ),
        (
            RestartSpec("always"),
            [RunFact(0.0, 5.0, False)],
            None,
            Restart(6.0, 1.0, "restart", streak=1),
        ),
        # A person's stop ends the loop; a person's restart starts at once, whatever the policy.
        (ALWAYS, crashes(1), "stop", NoRestart("stopped by a person")),
        (None, crashes(1), "restart", Restart(1001.0, 0.0, "manual")),
        # The backoff grows by the factor with each quick crash in a row, up to max_delay.
        (ALWAYS, crashes(1, 1), None, Restart(1004.0, 2.0, "restart", streak=2)),
        (ALWAYS, crashes(1, 1, 1), None, Restart(1007.0, 4.0, "restart", streak=3)),
        (ALWAYS, crashes(*[1] * 8), None, Restart(1068.0, 60.0, "restart", streak=8)),
        # ... and starts over after a stable run (up reset_after or longer).
        (ALWAYS, crashes(1, 1, 700, 1), None, Restart(1704.0, 1.0, "restart", streak=1)),
        (ALWAYS, crashes(1, 1, 700, 1, 1), None, Restart(1706.0, 2.0, "restart", streak=2)),
        (ALWAYS, crashes(1, 1, 700), None, Restart(1703.0, 1.0, "restart", streak=0)),
        # A manual start (supervise restart) starts the series over too.
        (
            ALWAYS,
            [*crashes(1, 1, 1), RunFact(2000.0, 2001.0, True, "manual")],
            None,
            Restart(2002.0, 1.0, "restart", streak=1),
        ),
    ],
)
def test_what_follows_an_end(
    spec: RestartSpec | None, runs: list[RunFact], stop: str | None, expected: Decision
) -> None:
    assert decide(spec, runs, stop=stop) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("max_restarts", "runs", "expected"),
    [
        # max_restarts 3: the first run and 3 restarts; the 4th crash is the loop.
        (3, 1, Restart),
        (3, 3, Restart),
        (3, 4, CrashLoop),
        (1, 2, CrashLoop),
        (10, 10, Restart),
        (10, 11, CrashLoop),
    ],
)
def test_a_crash_loop_comes_past_max_restarts(max_restarts: int, runs: int, expected: type) -> None:
    spec = RestartSpec("on-failure", delay=0.1, max_restarts=max_restarts, within=600.0)
    d = decide(spec, crashes(*[0.5] * runs, gap=0.1))
    assert isinstance(d, expected)
    if isinstance(d, CrashLoop):
        assert (d.restarts, d.text()) == (max_restarts, f"crash loop: {max_restarts} restarts "
                                                       "within 10m")  # fmt: skip


def test_restarts_outside_the_window_do_not_count() -> None:
    spec = RestartSpec("always", delay=1.0, max_delay=1.0, max_restarts=3, within=60.0)
    # Quick crashes, but 100 s apart: never 3 restarts within a minute.
    assert isinstance(decide(spec, crashes(*[1] * 20, gap=100.0)), Restart)
    # The same, 1 s apart, is a loop.
    assert isinstance(decide(spec, crashes(*[1] * 4, gap=1.0)), CrashLoop)


def test_a_deleted_run_dir_is_not_restarted_but_a_persons_restart_is() -> None:
    assert decide(ALWAYS, crashes(1), restartable=False) == NoRestart("its run dir was deleted")
    assert decide(ALWAYS, crashes(1), stop="restart", restartable=False).cause == "manual"  # type: ignore[union-attr]


def test_after_thread_is_carried_to_the_next_run() -> None:
    spec = RestartSpec("on-failure", after_thread=True)
    d = decide(spec, crashes(1))
    assert isinstance(d, Restart) and d.after_thread


@pytest.mark.parametrize(
    ("due", "now", "threads", "expected"),
    [
        (10.0, 5.0, 0, WaitUntil(10.0)),
        (10.0, 5.0, 2, WaitUntil(10.0)),
        (10.0, 10.0, 2, WaitForThreads(2)),
        (10.0, 10.0, 0, StartNow()),
        (10.0, 99.0, 0, StartNow()),
    ],
)
def test_when_a_pending_run_starts(due: float, now: float, threads: int, expected: object) -> None:
    assert start_due(due_at=due, now=now, unfinished_threads=threads) == expected


# -- properties -----------------------------------------------------------------------------

SPECS = st.builds(
    RestartSpec,
    policy=st.sampled_from(["on-failure", "always"]),
    delay=st.floats(0, 100),
    max_delay=st.floats(100, 1000),
    factor=st.floats(1, 10),
    reset_after=st.floats(1, 1000),
    max_restarts=st.integers(1, 20),
    within=st.floats(1, 5000),
)
UPTIMES = st.lists(st.floats(0, 2000), min_size=1, max_size=60)


def simulate(spec: RestartSpec, uptimes: Sequence[float]) -> tuple[list[RunFact], Decision]:
    """Run a process whose runs fail after each uptime in turn, restarted as decided, until
    a decision is not a restart or the uptimes run out."""
    runs = [RunFact(0.0, uptimes[0], True, "run")]
    for up in uptimes[1:]:
        d = decide(spec, runs)
        if not isinstance(d, Restart):
            return runs, d
        runs.append(RunFact(d.at, d.at + up, True, "restart"))
    return runs, decide(spec, runs)


@settings(max_examples=300, deadline=None)
@given(SPECS, st.integers(1, 200))
def test_the_delay_stays_between_delay_and_max_delay(spec: RestartSpec, streak: int) -> None:
    assert min(spec.delay, spec.max_delay) <= backoff(spec, streak) <= spec.max_delay


@settings(max_examples=300, deadline=None)
@given(SPECS, st.integers(1, 100))
def test_the_delay_never_shrinks_while_the_crashes_go_on(spec: RestartSpec, streak: int) -> None:
    assert backoff(spec, streak + 1) >= backoff(spec, streak)


@settings(max_examples=300, deadline=None)
@given(SPECS, UPTIMES)
def test_never_more_than_max_restarts_within_any_window(
    spec: RestartSpec, uptimes: list[float]
) -> None:
    runs, _ = simulate(spec, uptimes)
    # Within one series (no stable run between), no window of `within` ending at a restart
    # decision holds more than max_restarts restarts.
    starts = [r.started_at for r in runs if r.cause == "restart"]
    stable_ends = [r.ended_at for r in runs if r.ended_at - r.started_at >= spec.reset_after]
    for i, t in enumerate(starts):
        since_stable = max([e for e in stable_ends if e <= t], default=-1.0)
        inside = [s for s in starts[: i + 1] if s >= t - spec.within and s > since_stable]
        assert len(inside) <= spec.max_restarts


@settings(max_examples=300, deadline=None)
@given(SPECS, UPTIMES)
def test_each_restart_waits_its_backoff_and_a_loop_ends_it(
    spec: RestartSpec, uptimes: list[float]
) -> None:
    runs, last = simulate(spec, uptimes)
    for before, after in itertools.pairwise(runs):
        gap = after.started_at - before.ended_at
        assert min(spec.delay, spec.max_delay) - 1e-6 <= gap <= spec.max_delay + 1e-6
    if isinstance(last, CrashLoop):
        assert last.restarts == spec.max_restarts


@settings(max_examples=200, deadline=None)
@given(SPECS, UPTIMES)
def test_a_stop_by_a_person_never_restarts(spec: RestartSpec, uptimes: list[float]) -> None:
    runs, _ = simulate(spec, uptimes)
    assert decide(spec, runs, stop="stop") == NoRestart("stopped by a person")
    assert isinstance(decide(spec, runs, stop="restart"), Restart)


@settings(max_examples=200, deadline=None)
@given(SPECS, UPTIMES)
def test_a_manual_restart_starts_the_count_over(spec: RestartSpec, uptimes: list[float]) -> None:
    runs, _ = simulate(spec, uptimes)
    end = runs[-1].ended_at
    fresh = [*runs, RunFact(end + 1, end + 1.5, True, "manual")]
    assert isinstance(decide(spec, fresh), Restart)  # one quick crash after a person's start


# -- durations and the record ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("500ms", 0.5), ("5m", 300.0), ("2h", 7200.0), ("1d", 86400.0), (3, 3.0),
     ("1.5s", 1.5), ("10", 10.0), (0, 0.0)],
)  # fmt: skip
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["1x", "-1s", "", True, -3, float("nan"), None, [1]])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(bad)


@given(st.floats(0.001, 1e6))
def test_a_formatted_duration_reads_back_close(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds, rel=1e-5)


def test_the_spec_round_trips_through_the_launch_record() -> None:
    spec = RestartSpec("on-failure", 0.5, 30.0, 3.0, 60.0, 4, 120.0, True)
    hf = HookFile(restart=spec)
    assert HookFile.from_json(json.loads(json.dumps(hf.to_json()))).restart == spec
    assert "restart" not in HookFile().to_json()  # records without it stay as they were


# -- the hook file's restart: key -------------------------------------------------------------


def load(text: str) -> HookFile:
    return parse_hook_text(text, "h.yaml")


def problems(text: str) -> list[str]:
    with pytest.raises(HookFileError) as info:
        load(text)
    return info.value.problems


def test_restart_forms() -> None:
    assert load("restart: always\n").restart == RestartSpec("always")
    assert load("restart: no\n").restart == RestartSpec("no")  # YAML's `no` is false
    full = load(
        "restart:\n  policy: on-failure\n  delay: 250ms\n  max_delay: 1m\n  factor: 1.5\n"
        "  reset_after: 30s\n  max_restarts: 4\n  within: 2m\n  after_thread: true\n"
    ).restart
    assert full == RestartSpec("on-failure", 0.25, 60.0, 1.5, 30.0, 4, 120.0, True)
    assert load("restart: {policy: always}\n").restart == RestartSpec("always")
    hooks = load("hooks:\n  - on_crash_loop: {}\n    instructions: why?\n").hooks
    assert hooks[0].trigger == OnCrashLoop() and hooks[0].name == "on_crash_loop-1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "purpose: x\nrestart: sometimes\n",
            'h.yaml:2: restart must be one of no, on-failure, always, got "sometimes"; '
            "write one of no, on-failure, always",
        ),
        (
            "restart: on_failure\n",
            'h.yaml:1: restart must be one of no, on-failure, always, got "on_failure"; '
            "write on-failure",
        ),
        (
            "restart:\n  policy: always\n  delay: 1x\n",
            'h.yaml:3: restart.delay must be a duration such as 1s, 500ms, 5m or 2h, got "1x"; '
            "write delay: 1s",
        ),
        (
            "restart:\n  delay: 1s\n",
            "h.yaml:1: restart has no policy; add policy: on-failure (or no, on-failure, always)",
        ),
        (
            "restart:\n  policy: always\n  max_restarts: 0\n",
            "h.yaml:3: restart.max_restarts must be a whole number from 1 to 1000000, got 0; "
            "write max_restarts: 10",
        ),
        (
            "restart:\n  policy: always\n  delay: 10s\n  max_delay: 5s\n",
            "h.yaml:4: restart.max_delay (5s) is below restart.delay (10s); raise max_delay "
            "or lower delay",
        ),
        (
            "restart:\n  policy: always\n  factor: 0.5\n",
            "h.yaml:3: restart.factor must be a number from 1 (a fixed delay) to 100, got 0.5; "
            "write factor: 2",
        ),
        (
            "restart:\n  policy: always\n  within: 0s\n",
            'h.yaml:3: restart.within must be a duration above 0 up to 10 years, got "0s"; '
            "write within: 10m",
        ),
        (
            "restart:\n  policy: always\n  after_thread: maybe\n",
            'h.yaml:3: restart.after_thread must be true or false, got "maybe"; '
            "write after_thread: true",
        ),
        (
            "restart:\n  policy: always\n  dealy: 1s\n",
            "h.yaml:3: unknown key 'dealy' in restart; did you mean 'delay'? (known: policy, "
            "delay, max_delay, factor, reset_after, max_restarts, within, after_thread)",
        ),
        (
            "restart: [always]\n",
            "h.yaml:1: restart must be a policy (no, on-failure, always) or a mapping, got "
            '["always"]; write restart: {policy: on-failure, delay: 1s, max_restarts: 10, '
            "within: 10m}",
        ),
        (
            "hooks:\n  - on_crash_loop: {after: 3}\n    instructions: x\n",
            'h.yaml:2: hooks[0].on_crash_loop takes no keys, got "after" (restart: sets when '
            "a crash loop is); write on_crash_loop: {}",
        ),
    ],
)
def test_a_bad_restart_names_its_line_and_the_fix(text: str, expected: str) -> None:
    assert problems(text) == [expected]


def test_a_hooks_restart_is_at_once_whatever_the_policy_and_counted_toward_a_crash_loop() -> None:
    # `restart: true` on a hook: policy no still restarts (at the end, no backoff), as cause
    # `restart`, so a hook firing on every run meets max_restarts instead of looping forever.
    spec = RestartSpec("no", max_restarts=2, within=3600.0)
    one = crashes(1)
    assert decide(spec, one, stop="hook") == Restart(one[-1].ended_at, 0.0, "restart", False, 1)
    assert decide(None, one, stop="hook") == Restart(one[-1].ended_at, 0.0, "restart", False, 1)
    three = crashes(1, 1, 1)  # two restarts already
    assert decide(spec, three, stop="hook") == CrashLoop(2, 3600.0)
    # A person's restart starts a new series: the hook may restart again.
    fresh = [*three, RunFact(2000.0, 2001.0, True, "manual")]
    assert isinstance(decide(spec, fresh, stop="hook"), Restart)
