"""The Tracker driven in process through scripted histories: which hooks fire, with which key.

Each history is what a daemon would see of one process: output arriving in pieces, its
reads, a timeout's timer ringing at a given clock value, an exit record, a process gone
without one, a daemon crash (the tracker rebuilt from the saved row). The tracker is the
real one, committing to a real SQLite file; only the clocks are fakes (tests/
fakes_supervisor.py). The real-daemon tests (test_hooks_e2e.py, test_coalescing.py) keep
what needs the event loop: timers, watches, a real child's buffering, the CLI.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest
from fakes_supervisor import FakeClock, Supervised
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from state.counters import load_counters
from state.db import Store, open_state_store
from state.entries import read_entries
from state.fires import list_fires
from state.paths import StatePaths
from state.settings import store_settings
from state.threads import list_threads
from supervisor.hookspec import Hook, HookFile, Limits, OnExit, OnOutputMatch, OnTimeout, Rate
from supervisor.tracker import StepResult, Tracker

# -- a history, and how it is replayed --------------------------------------------------------


@dataclass(frozen=True)
class Out:
    """The child writes these bytes (nobody reads them yet)."""

    data: bytes


@dataclass(frozen=True)
class Read:
    """A coalesced output read (the daemon's OutputReady wake)."""


@dataclass(frozen=True)
class Step:
    """A full step: a change in the run dir; `liveness` also asks whether it still runs."""

    liveness: bool = False


@dataclass(frozen=True)
class Tick:
    """Both clocks move on."""

    seconds: float


@dataclass(frozen=True)
class Due:
    """Timeout hook `hook`'s timer rings (the tracker decides on the clock if it is due)."""

    hook: str


@dataclass(frozen=True)
class Record:
    """The child ended with `status`: the shim writes exit.json (no step yet)."""

    status: int


@dataclass(frozen=True)
class Exit:
    """The child ended with `status`, and its pid's end wakes the daemon."""

    status: int


@dataclass(frozen=True)
class Vanish:
    """Child and shim SIGKILLed together: no exit record; the pid's end wakes the daemon."""


@dataclass(frozen=True)
class RmDir:
    """Someone deletes the run dir (with spec.json and exit.json's future home)."""


@dataclass(frozen=True)
class Truncate:
    """logrotate's copytruncate: output.log emptied under the reader."""


@dataclass(frozen=True)
class Crash:
    """The daemon dies (SIGKILL); a new one rebuilds the tracker from the saved row."""


Event = Out | Read | Step | Tick | Due | Record | Exit | Vanish | RmDir | Truncate | Crash


@dataclass
class Replay:
    results: list[StepResult]
    ended: bool


def replay(sup: Supervised, history: Sequence[Event], *, max_log_bytes: int = 0) -> Replay:
    """Feed `history` to a tracker as the daemon would; stop stepping once it ended."""
    results: list[StepResult] = []

    def fresh() -> Tracker:
        t = sup.tracker(max_log_bytes=max_log_bytes)
        # A new tracker's first step asks about liveness too (daemon._step).
        results.append(t.step(check_liveness=True))
        return t

    tracker = fresh()
    for ev in history:
        if results[-1].ended:
            break
        if _world(sup, ev):
            continue
        match ev:
            case Read():
                results.append(tracker.read_output())
            case Step(liveness):
                results.append(tracker.step(check_liveness=liveness))
            case Due(hook):
                results.append(tracker.step(check_liveness=False, timeouts_due=[hook]))
            case Exit() | Vanish() | RmDir():
                results.append(tracker.step(check_liveness=True))  # the pid's end wakes it
            case Crash():
                tracker.close()
                tracker = fresh()
    return Replay(results, results[-1].ended)


def _world(sup: Supervised, ev: Event) -> bool:
    """Do what happens outside the daemon; True if that is all there is to the event."""
    match ev:
        case Out(data):
            sup.write(data)
        case Tick(seconds):
            sup.clock.advance(seconds)
        case Record(status) | Exit(status):
            sup.exit(status)
        case Vanish():
            sup.vanish()
        case RmDir():
            shutil.rmtree(sup.run.path)
        case Truncate():
            sup.run.output.write_bytes(b"")
    return isinstance(ev, Out | Tick | Record | Truncate)


class Make(Protocol):
    def __call__(
        self, hooks: HookFile, clock: FakeClock, *, depth: int = 0, launched: bool = True
    ) -> Supervised: ...


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, StatePaths]]:
    """One state file for the module: each history is a process of its own in it."""
    paths = StatePaths(tmp_path_factory.mktemp("tracker") / "home").ensure()
    store = open_state_store(paths.db, store_settings({}))
    yield store, paths
    store.close()


@pytest.fixture
def supervise(state: tuple[Store, StatePaths]) -> Iterator[Make]:
    """`supervise(hooks, clock, ...)`: a recorded process, its child killed at the end."""
    store, paths = state
    made: list[Supervised] = []

    def make(
        hooks: HookFile, clock: FakeClock, *, depth: int = 0, launched: bool = True
    ) -> Supervised:
        made.append(Supervised(store, paths, hooks, clock, depth=depth, launched=launched))
        return made[-1]

    yield make
    for s in made:
        s.close()


# -- the table ------------------------------------------------------------------------------

ERR = Hook("err", OnOutputMatch("ERROR"), "fix it", max_spawns=2)
WARN = Hook("warn", OnOutputMatch("^warn"), "look")
ANY = Hook("any", OnExit(), "report")
FAIL = Hook("fail", OnExit((1,)), "diagnose")
SLOW = Hook("slow", OnTimeout(10.0), "hurry")
HOOKS = HookFile(hooks=(ERR, WARN, ANY, FAIL, SLOW))

S, MAX = "spawned", "refused: max_spawns"

# (name, history, fires as (hook, key after "<process id>:", what it became), ended)
HISTORIES: list[tuple[str, list[Event], list[tuple[str, str, str]], bool]] = [
    ("nothing happens", [Out(b"ok\n"), Read(), Tick(5), Step()], [], False),
    (
        "a line split across writes fires once, keyed at its start",
        [Out(b"ok\nERR"), Read(), Out(b"OR x\n"), Read()],
        [("err", "err:@3", S)],
        False,
    ),
    (
        "a line without its newline waits for it",
        [Out(b"ERROR"), Read(), Step(), Tick(100), Read()],
        [],
        False,
    ),
    (
        "max_spawns: two fire, the third is refused, the fourth is not recorded",
        [Out(b"ERROR 1\nERROR 2\nwarn\nERROR 3\nERROR 4\n"), Read()],
        [
            ("err", "err:@0", S),
            ("err", "err:@8", S),
            ("warn", "warn:@16", S),
            ("err", "err:@21", MAX),
        ],
        False,
    ),
    (
        "one line, two hooks: both fire at the same offset",
        [Out(b"warn ERROR\n"), Read()],
        [("err", "err:@0", S), ("warn", "warn:@0", S)],
        False,
    ),
    ("exit 0 fires the hook for any code", [Exit(0)], [("any", "any:exit", S)], True),
    (
        "exit 1 fires both on_exit hooks, after the output it wrote",
        [Out(b"ERROR late"), Exit(1)],  # the last line has no newline: it counts at the end
        [("err", "err:@0", S), ("any", "any:exit", S), ("fail", "fail:exit", S)],
        True,
    ),
    (
        "a process gone without a record is lost: a hook naming codes is refused",
        [Vanish()],
        [("any", "any:exit", S), ("fail", "fail:exit", "refused: lost")],
        True,
    ),
    (
        "a run dir deleted: lost, after what it wrote is read",
        [Out(b"ERROR x\n"), RmDir()],
        [("err", "err:@0", S), ("any", "any:exit", S), ("fail", "fail:exit", "refused: lost")],
        True,
    ),
    ("a timeout due fires", [Tick(10), Due("slow")], [("slow", "slow:timeout", S)], False),
    (
        "a timer that rings early fires nothing; on time, once",
        [Tick(4), Due("slow"), Tick(6), Due("slow"), Tick(60), Due("slow")],
        [("slow", "slow:timeout", S)],
        False,
    ),
    (
        "an exit record found with the timeout's ring wins: no timeout fire",
        [Tick(30), Record(0), Due("slow")],
        [("any", "any:exit", S)],
        True,
    ),
    (
        "a crash between reads: each line fires once",
        [Out(b"ERROR a\n"), Read(), Crash(), Out(b"ERROR b\n"), Read(), Crash(), Exit(0)],
        [("err", "err:@0", S), ("err", "err:@8", S), ("any", "any:exit", S)],
        True,
    ),
    (
        "a crash after a fired timeout: it does not fire again",
        [Tick(11), Due("slow"), Crash(), Due("slow")],
        [("slow", "slow:timeout", S)],
        False,
    ),
    (
        "a crash with the exit unread: the new tracker settles it, once",
        [Out(b"warn\n"), Record(1), Crash(), Step(liveness=True)],
        [("warn", "warn:@0", S), ("any", "any:exit", S), ("fail", "fail:exit", S)],
        True,
    ),
    (
        "a truncated file is read from its start; its keys continue after the old bytes",
        [Out(b"ERROR one\n"), Read(), Truncate(), Out(b"ERROR two\n"), Step()],
        [("err", "err:@0", S), ("err", "err:@10", S)],
        False,
    ),
]


@pytest.mark.parametrize(
    ("history", "fires", "ended"),
    [pytest.param(h, f, e, id=name) for name, h, f, e in HISTORIES],
)
def test_a_history_fires_these_hooks(
    supervise: Make,
    history: list[Event],
    fires: list[tuple[str, str, str]],
    ended: bool,
) -> None:
    sup = supervise(HOOKS, FakeClock())
    got = replay(sup, history)
    assert sup.fires() == [(h, f"{sup.id}:{k}", what) for h, k, what in fires]
    assert got.ended == ended
    assert (sup.row.state in ("exited", "lost")) == ended


def test_the_end_is_recorded_with_its_code_or_why_it_was_lost(
    supervise: Make,
) -> None:
    exited = supervise(HOOKS, FakeClock())
    replay(exited, [Tick(3), Exit(137)])
    row = exited.row
    assert (row.state, row.exit_code, row.signal, row.result) == (
        "exited",
        137,
        "SIGKILL",
        "signal",
    )
    assert row.ended_at == exited.clock.wall
    for history, reason in (
        ([Vanish()], "ended without an exit record"),
        ([RmDir()], "run dir deleted"),
    ):
        lost = supervise(HOOKS, FakeClock())
        replay(lost, history)
        row = lost.row
        assert (row.state, row.exit_code, row.end_reason) == ("lost", None, reason)


def test_timeouts_are_armed_once_with_the_time_left(supervise: Make) -> None:
    clock = FakeClock()
    sup = supervise(HOOKS, clock)
    clock.advance(4.0)
    got = replay(sup, [Due("slow"), Step()])
    first, early, later = ([(h, round(s, 6)) for h, s in r.timeouts] for r in got.results)
    assert first == [("slow", 6.0)]  # the first step arms it
    assert early == [("slow", 6.0)]  # woken early: the rest of the wait again
    assert later == []  # armed already
    assert got.results[0].watch_pid == sup.row.pid and got.results[0].launched


def test_a_process_never_launched_is_lost_after_the_grace(supervise: Make) -> None:
    from supervisor.ending import STARTING_GRACE_S

    clock = FakeClock()
    sup = supervise(HOOKS, clock, launched=False)
    got = replay(sup, [Tick(STARTING_GRACE_S - 1), Step(liveness=True)])
    assert not got.ended and got.results[-1].recheck_at == sup.row.started_at + STARTING_GRACE_S
    replay(sup, [Tick(2), Step(liveness=True)])
    assert sup.row.state == "lost"


def test_a_wall_clock_step_does_not_give_up_a_launch_in_progress(supervise: Make) -> None:
    # The grace is counted on the boot clock: a wall clock stepped forward a day (NTP after
    # a long suspend, or a daemon whose clock differs from the CLI's) leaves it 1 s in.
    from supervisor.ending import STARTING_GRACE_S

    clock = FakeClock()
    sup = supervise(HOOKS, clock, launched=False)
    clock.wall += 86_400.0
    got = replay(sup, [Tick(1), Step(liveness=True)])
    assert not got.ended  # not lost
    assert got.results[-1].recheck_at == clock.wall + STARTING_GRACE_S - 1
    replay(sup, [Tick(STARTING_GRACE_S), Step(liveness=True)])
    assert sup.row.state == "lost"


def test_a_fire_tells_the_output_up_to_its_line_and_is_never_after_the_exit(
    supervise: Make,
) -> None:
    clock = FakeClock()
    sup = supervise(HOOKS, clock)
    lines = b"".join(b"line %d\n" % i for i in range(60))
    replay(sup, [Out(lines + b"ERROR here\nafter\n"), Record(1), Tick(50), Step()])
    (thread, *_) = list_threads(sup.store, sup.id)
    assert thread.hook == "err"
    message = read_entries(sup.store, thread.id)[0].data["text"]
    tail = message.rstrip().splitlines()
    assert tail[-2] == "ERROR here" and tail[-3] == "line 59"  # ends at the match
    assert "after" not in message
    # Read after the exit (by a later step), it is told at the exit's time: never after it.
    at = {f.hook: f.at for f in list_fires(sup.store, sup.id)}
    assert at["err"] == at["any"] == clock.wall - 50


def test_depth_past_the_limit_refuses_and_counts(supervise: Make) -> None:
    deep = HookFile(hooks=(ANY, ERR), limits=Limits(max_depth=2))
    sup = supervise(deep, FakeClock(), depth=2)
    replay(sup, [Out(b"ERROR\n"), Read(), Exit(0)])
    assert [what for _, _, what in sup.fires()] == ["refused: depth"] * 2
    assert list_threads(sup.store, sup.id) == []
    assert load_counters(sup.store, sup.id)["err"].fires == 1  # a refusal for depth counts


def test_the_rate_limit_queues_threads_and_drops_none(tmp_path: Path) -> None:
    # A state file of its own: the rate's window is shared by every thread in it.
    paths = StatePaths(tmp_path / "home").ensure()
    store = open_state_store(paths.db, store_settings({}))
    busy = HookFile(
        hooks=(Hook("go", OnOutputMatch("go"), "x", max_spawns=4),),
        limits=Limits(rate=Rate.parse("2/hour")),
    )
    sup = Supervised(store, paths, busy, FakeClock())
    try:
        replay(sup, [Out(b"go 1\ngo 2\ngo 3\ngo 4\n"), Read()])
        threads = list_threads(store, sup.id)
    finally:
        sup.close()
        store.close()
    assert len(threads) == 4
    delayed = [t for t in threads if t.not_before > t.created_at]
    assert len(delayed) == 2 and all(t.status == "queued" for t in delayed)


def test_the_launch_record_not_spec_json_says_which_hooks_fire(
    supervise: Make,
) -> None:
    sup = supervise(HookFile(hooks=(ANY,)), FakeClock())
    # A tool rewrites spec.json after launch: the daemon reads the row's record.
    sup.run.write_spec(sup.run.spec.read_text().replace('"any"', '"evil"'))
    replay(sup, [Exit(0)])
    assert [h for h, _, _ in sup.fires()] == ["any"]


def test_the_output_bound_frees_scanned_bytes_and_keeps_keys(
    supervise: Make,
) -> None:
    limit = 64 * 1024
    sup = supervise(HookFile(hooks=(Hook("mark", OnOutputMatch("^MARK"), "x", 100),)), FakeClock())
    block = b"x" * 99 + b"\n"
    history: list[Event] = []
    for i in range(40):
        history += [Out(block * 100 + b"MARK %d\n" % i), Read()]
    replay(sup, [*history, Exit(0)], max_log_bytes=limit)
    size = 40 * (10_000 + 7) + 30  # the apparent size: every offset stays valid
    keys = [int(k.rsplit("@", 1)[1]) for _, k, _ in sup.fires()]
    assert len(keys) == 40 and keys == sorted(keys) and keys[-1] < size
    assert sup.run.output.stat().st_blocks * 512 <= 2 * limit and sup.run.archive.exists()
    assert sup.row.log_punched > 0


# -- properties: how the output arrives changes nothing -------------------------------------

PROP_HOOKS = (
    Hook("e", OnOutputMatch("E"), "x", max_spawns=3),
    Hook("w", OnOutputMatch("^w"), "x", max_spawns=2),
    Hook("end", OnExit(), "x"),
)
LINES = [b"E", b"w", b"wE", b"ok", b"", b"xEx"]


def expected(lines: list[bytes], pid: int) -> list[tuple[str, str, str]]:
    """What the lines must fire: a model of the rules, written apart from the tracker."""
    fires, count, off = [], {h.name: 0 for h in PROP_HOOKS}, 0
    for line in lines:
        for h in PROP_HOOKS[:2]:
            hit = b"E" in line if h.name == "e" else line.startswith(b"w")
            if hit:
                count[h.name] += 1
                n = count[h.name]
                if n <= h.max_spawns:
                    fires.append((h.name, f"{pid}:{h.name}:@{off}", S))
                elif n == h.max_spawns + 1:
                    fires.append((h.name, f"{pid}:{h.name}:@{off}", MAX))
        off += len(line) + 1
    return [*fires, ("end", f"{pid}:end:exit", S)]


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[list[bytes], list[Event]]:
    """Lines, and a history delivering them: cut anywhere, read and stepped at random
    moments, with daemon crashes between any two events. A crash inside a step is one of
    these too: nothing of a step is saved but by its one transaction, which either
    committed (the crash came after) or did not (before)."""
    lines = draw(st.lists(st.sampled_from(LINES), max_size=14))
    data = b"".join(line + b"\n" for line in lines)
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(data) - 1)), max_size=6)))
    history: list[Event] = []
    for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
        if a < b:
            history.append(Out(data[a:b]))
        history += draw(st.lists(st.sampled_from([Read(), Step(), Crash()]), max_size=3))
    return lines, [*history, Exit(0)]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(deliveries())
def test_any_delivery_fires_each_match_once_and_misses_none(
    state: tuple[Store, StatePaths], delivery: tuple[list[bytes], list[Event]]
) -> None:
    store, paths = state
    lines, history = delivery
    sup = Supervised(store, paths, HookFile(hooks=PROP_HOOKS), FakeClock(), launched=False)
    try:
        assert replay(sup, history).ended
        assert sup.fires() == expected(lines, sup.id)
        # The counters that limits decide on never pass max_spawns (plus the one refusal).
        for h in PROP_HOOKS:
            c = load_counters(store, sup.id).get(h.name)
            if c is not None:
                assert c.fires <= h.max_spawns and c.refused <= len(lines)
        assert sum(t.hook == "e" for t in list_threads(store, sup.id)) <= 3
    finally:
        sup.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([4.0, 6.0, 9.99, 0.5, 30.0]), max_size=5), st.booleans())
def test_a_timeout_fires_once_whenever_its_timers_ring(
    state: tuple[Store, StatePaths], ticks: list[float], crash: bool
) -> None:
    store, paths = state
    sup = Supervised(store, paths, HookFile(hooks=(SLOW,)), FakeClock(), launched=False)
    history: list[Event] = []
    for t in ticks:
        history += [Tick(t), Due("slow"), *([Crash()] if crash else [])]
    try:
        replay(sup, history)
        fired = [k for _, k, _ in sup.fires()]
        assert fired == ([f"{sup.id}:slow:timeout"] if sum(ticks) >= 10.0 - 0.05 else [])
    finally:
        sup.close()
