"""The trigger decisions (supervisor/triggers.py), in process: event tables and properties.

No daemon and no subprocess: the decisions are pure, so thousands of cases run in a second.
The keys' text is checked against the literal format earlier versions committed, which
users' databases hold: a changed format would fire every hook again after an upgrade.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state.counters import Counter
from supervisor import wakes
from supervisor.clocks import Instant
from supervisor.ending import (
    NO_EXIT_RECORD,
    RUN_DIR_GONE,
    STARTING_GRACE_S,
    Exited,
    Lost,
    dead_end,
    end_of,
    presumed_alive,
    process_end,
)
from supervisor.hookspec import Hook, OnExit, OnOutputMatch, OnTimeout
from supervisor.limits import scan_budget
from supervisor.logcap import BLOCK, cap_due, plan_punch
from supervisor.matching import Matcher
from supervisor.restarts import ByPerson
from supervisor.rundir import ExitRecord
from supervisor.triggers import (
    SAVE_EVERY,
    TIMER_SLACK_S,
    Arm,
    FireKey,
    FireKind,
    LogOffset,
    NewLogOffset,
    archived_after,
    end_fires,
    exit_fires,
    lost_fires,
    match_budget,
    match_fires,
    match_hooks_of,
    match_time,
    pending_timeouts,
    save_due,
    timeout_fires,
)

ANY = Hook("any", OnExit(), "look")
FAIL = Hook("fail", OnExit((1, 2)), "why")
OK = Hook("ok", OnExit((0,)), "celebrate")
KILLED = Hook("killed", OnExit((137, 143)), "who")
SLOW = Hook("slow", OnTimeout(10.0), "hurry")
SLOWER = Hook("slower", OnTimeout(60.0), "hurry more")
ERR = Hook("err", OnOutputMatch("ERROR"), "fix", max_spawns=3)
WARN = Hook("warn", OnOutputMatch("^warn"), "check")
HOOKS = (ANY, FAIL, OK, KILLED, SLOW, SLOWER, ERR, WARN)


def boot(boot_s: float, wall: float = 1_000.0) -> Instant:
    return Instant(wall, boot_s, "boot-a")


# -- keys ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "text"),
    [
        (FireKey(7, "crash", "exit"), "7:crash:exit"),
        (FireKey(7, "slow", "timeout"), "7:slow:timeout"),
        (FireKey(7, "err", LogOffset(0)), "7:err:@0"),
        (FireKey(12, "err", LogOffset(123_456)), "12:err:@123456"),
        (FireKey(12, "err", NewLogOffset(98765, 40)), "12:err:@i98765+40"),
        # A new output.log whose inode was never read: the old f-string wrote None.
        (FireKey(3, "err", NewLogOffset(None, 5)), "3:err:@iNone+5"),
        (FireKey(3, "a:b", "exit"), "3:a:b:exit"),  # names may hold the separator
    ],
)
def test_key_text_is_the_format_databases_hold(key: FireKey, text: str) -> None:
    assert key.text == text


# Small numbers and names made of the key's own characters: near misses are likely.
small = st.integers(0, 12)
kinds = st.one_of(
    st.sampled_from(["exit", "timeout"]),
    st.builds(LogOffset, small),
    st.builds(NewLogOffset, st.none() | small, small),
)
keys = st.builds(FireKey, small, st.text(":@i+1exit", min_size=1, max_size=6), kinds)


@settings(max_examples=300)
@given(st.lists(keys, max_size=60))
def test_distinct_keys_have_distinct_text(many: list[FireKey]) -> None:
    # The text alone deduplicates: two different fires must never share it.
    assert len({k.text for k in many}) == len(set(many))


def test_no_two_keys_of_a_grid_share_their_text() -> None:
    # Exhaustive over small values, where a format without separators would collide
    # ("@12" from offset 12, or from inode 1 at offset 2).
    offsets = range(25)
    tails: list[FireKind] = ["exit", "timeout", *(LogOffset(n) for n in offsets)]
    tails += [NewLogOffset(i, n) for i in [None, *offsets] for n in offsets]
    names = ["a", "b", "a:b", ":", "exit", "a:exit", "@1", "i", "1"]
    grid = [FireKey(p, h, t) for p in range(1, 13) for h in names for t in tails]
    assert len({k.text for k in grid}) == len(grid) > 70_000


# -- exit and lost -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "fired", "detail", "signal"),
    [
        (0, ["any", "ok"], "exit code 0", None),
        (1, ["any", "fail"], "exit code 1", None),
        (2, ["any", "fail"], "exit code 2", None),
        (3, ["any"], "exit code 3", None),
        (137, ["any", "killed"], "exit code 137 (SIGKILL)", "SIGKILL"),
        (143, ["any", "killed"], "exit code 143 (SIGTERM)", "SIGTERM"),
        (130, ["any"], "exit code 130 (SIGINT)", "SIGINT"),
    ],
)
def test_exit_fires_the_hooks_that_accept_its_code(
    status: int, fired: list[str], detail: str, signal: str | None
) -> None:
    record = ExitRecord.from_status(status, 1234.5)
    fires = exit_fires(9, HOOKS, record)
    assert [f.hook.name for f in fires] == fired
    for f in fires:
        assert f.key.text == f"9:{f.hook.name}:exit"
        assert (f.at, f.detail, f.exit_code, f.signal) == (1234.5, detail, status, signal)
        assert f.refuse is None and f.timeout_s is None and f.matched_line is None


CRASH_ONLY = Hook("crash-only", OnExit(stopped_by_user=False), "only crashes")
DETAIL = {"stop": "; stopped by supervise stop", "restart": "; restarted by supervise restart"}


@pytest.mark.parametrize(
    ("status", "by_user", "want"),
    [
        # (exit status, what a person did that ended it) -> {hook: refusal}
        (143, None, {"any": None, "crash-only": None, "killed": None}),
        (143, "stop", {"any": None, "crash-only": "stopped_by_user", "killed": None}),
        (143, "restart", {"any": None, "crash-only": "stopped_by_user", "killed": None}),
        (0, "stop", {"any": None, "crash-only": "stopped_by_user", "ok": None}),
        (1, None, {"any": None, "crash-only": None, "fail": None}),
        (1, "stop", {"any": None, "crash-only": "stopped_by_user", "fail": None}),
        (1, "restart", {"any": None, "crash-only": "stopped_by_user", "fail": None}),
    ],
)
def test_an_exit_a_person_caused_is_told_and_refused_where_the_hook_says(
    status: int, by_user: ByPerson | None, want: dict[str, str | None]
) -> None:
    record = ExitRecord.from_status(status, 9.0)
    fires = exit_fires(3, (*HOOKS, CRASH_ONLY), record, ended_by_user=by_user)
    assert {f.hook.name: f.refuse for f in fires} == want
    for f in fires:
        assert f.ended_by_user == by_user
        # A restart's exit says so, never that it was stopped.
        told = [d for d in DETAIL.values() if d in f.detail]
        assert told == ([] if by_user is None else [DETAIL[by_user]])
        assert f.key == FireKey(3, f.hook.name, "exit")  # refused, its key is taken all the same
    # end_fires passes it on for an exit; a loss is a loss (its code, and cause, unknown).
    ended = end_fires(3, (CRASH_ONLY,), Exited(record), 10.0, ended_by_user=by_user)
    assert [f.refuse for f in ended] == [want["crash-only"]]
    lost = end_fires(3, (CRASH_ONLY,), Lost(NO_EXIT_RECORD), 10.0, ended_by_user=by_user)
    assert [(f.refuse, f.ended_by_user) for f in lost] == [(None, None)]


def test_exit_without_on_exit_hooks_fires_nothing() -> None:
    assert exit_fires(1, (SLOW, ERR), ExitRecord(1, None, 5.0)) == []


def test_lost_fires_every_on_exit_hook_and_refuses_those_naming_codes() -> None:
    fires = lost_fires(4, HOOKS, 77.0)
    got = {f.hook.name: f.refuse for f in fires}
    # The code is unknown: a hook for "any code" still fires; one for codes cannot know.
    assert got == {"any": None, "fail": "lost", "ok": "lost", "killed": "lost"}
    for f in fires:
        assert f.key == FireKey(4, f.hook.name, "exit")  # the exit's key: one or the other
        assert (f.at, f.detail, f.exit_code, f.signal) == (
            77.0,
            "lost: exit code unknown",
            None,
            None,
        )


def test_lost_and_exit_share_keys_so_only_one_ever_records() -> None:
    exited = {f.key for f in exit_fires(4, HOOKS, ExitRecord(1, None, 1.0))}
    lost = {f.key for f in lost_fires(4, HOOKS, 2.0)}
    assert exited <= lost


# -- the end: exited or lost, once ---------------------------------------------------------

RECORD = ExitRecord(1, None, 50.0)


@pytest.mark.parametrize(
    ("run_dir", "record", "end"),
    [
        (True, None, None),  # it may still run
        (True, RECORD, Exited(RECORD)),
        (False, None, Lost(RUN_DIR_GONE)),  # nothing can tell its end any more
        (False, RECORD, Lost(RUN_DIR_GONE)),  # (the tracker reads no record without the dir)
    ],
)
def test_the_run_dir_tells_the_end(
    run_dir: bool, record: ExitRecord | None, end: Exited | Lost | None
) -> None:
    assert end_of(run_dir=run_dir, record=record) == end


def test_a_dead_process_ended_as_its_record_says_else_lost() -> None:
    assert dead_end(RECORD) == Exited(RECORD)  # written between the first look and the death
    assert dead_end(None) == Lost(NO_EXIT_RECORD)


@pytest.mark.parametrize(
    ("same_boot", "launched", "since_start", "alive"),
    [
        (False, True, 1.0, False),  # a reboot ended every saved pid
        (False, False, 1.0, False),
        (True, True, 1e6, None),  # only /proc can tell
        (True, False, 0.0, True),  # recorded, the CLI is still starting it
        (True, False, STARTING_GRACE_S - 0.1, True),
        (True, False, STARTING_GRACE_S, False),  # never launched
    ],
)
def test_what_liveness_knows_without_proc(
    same_boot: bool, launched: bool, since_start: float, alive: bool | None
) -> None:
    got = presumed_alive(same_boot=same_boot, launched=launched, since_start=since_start)
    assert got is alive


def test_the_row_ends_as_the_end_says() -> None:
    killed = ExitRecord.from_status(137, 9.0)
    row = process_end(Exited(killed), 99.0, pid=5, shim_pid=6)
    assert (row.state, row.result, row.ended_at, row.exit_code, row.signal) == (
        "exited",
        "signal",
        9.0,  # when it ended, not when the daemon read it
        137,
        "SIGKILL",
    )
    assert (row.pid, row.shim_pid, row.end_reason) == (5, 6, None)
    lost = process_end(Lost(NO_EXIT_RECORD), 99.0, pid=5, shim_pid=6)
    assert (lost.state, lost.result, lost.ended_at, lost.exit_code) == ("lost", "lost", 99.0, None)
    assert (lost.end_reason, lost.pid) == ("ended without an exit record", None)


@settings(max_examples=300)
@given(st.integers(0, 255), st.floats(0, 1e9), st.floats(0, 1e9))
def test_an_end_fires_the_exit_key_whichever_end_it_is(
    status: int, ended_at: float, now: float
) -> None:
    exited = end_fires(3, HOOKS, Exited(ExitRecord.from_status(status, ended_at)), now)
    lost = end_fires(3, HOOKS, Lost(NO_EXIT_RECORD), now)
    assert exited == exit_fires(3, HOOKS, ExitRecord.from_status(status, ended_at))
    assert lost == lost_fires(3, HOOKS, now)
    # Every key is the exit key, one per hook: the end is committed once, either way.
    for fires in (exited, lost):
        assert [f.key for f in fires] == [FireKey(3, f.hook.name, "exit") for f in fires]
    assert {f.key for f in exited} <= {f.key for f in lost}


# -- timeouts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("elapsed", "counters", "due", "fired", "rearmed"),
    [
        (10.0, {}, ["slow"], ["slow"], []),
        (9.99, {}, ["slow"], ["slow"], []),  # within the slack: a timer wakes a hair early
        (9.0, {}, ["slow"], [], [("slow", 1.0)]),
        (3600.0, {}, ["slow", "slower"], ["slow", "slower"], []),
        (30.0, {}, ["slow", "slower"], ["slow"], [("slower", 30.0)]),
        (30.0, {}, ["slower"], [], [("slower", 30.0)]),  # slow is due but its timer did not ring
        (30.0, {"slow": Counter(1, 0)}, ["slow"], [], []),  # fired before a restart
        (30.0, {"slow": Counter(1, 1)}, ["slow"], [], []),  # exhausted
        (30.0, {"other": Counter(1, 0)}, ["slow"], ["slow"], []),
        (30.0, {}, ["not-a-hook"], [], []),
        (30.0, {}, [], [], []),
    ],
)
def test_timeout_fires_when_due_and_unfired(
    elapsed: float,
    counters: dict[str, Counter],
    due: list[str],
    fired: list[str],
    rearmed: list[tuple[str, float]],
) -> None:
    d = timeout_fires(5, HOOKS, counters, due, boot(100.0), boot(100.0 + elapsed), 5000.0)
    assert [f.hook.name for f in d.fires] == fired
    assert [(a.hook, round(a.seconds, 6)) for a in d.rearm] == rearmed
    for f in d.fires:
        seconds = f.hook.trigger.seconds  # type: ignore[union-attr]
        assert f.key.text == f"5:{f.hook.name}:timeout"
        assert f.detail == f"still running after {seconds:g}s" and f.timeout_s == seconds
        # Told at the deadline, not when the daemon got to it.
        assert f.at == pytest.approx(5000.0 - max(0.0, elapsed - seconds))


def test_timeout_is_measured_on_the_boot_clock_unless_the_machine_rebooted() -> None:
    start = Instant(1_000.0, 50.0, "boot-a")
    # The wall clock was stepped back an hour: the boot clock says 20 s passed.
    stepped = Instant(1_000.0 - 3600, 70.0, "boot-a")
    assert [
        f.hook.name for f in timeout_fires(1, (SLOW,), {}, ["slow"], start, stepped, 0.0).fires
    ] == ["slow"]
    # Another boot: the boot clock restarted, and only the wall clock spans the gap.
    rebooted = Instant(1_005.0, 500.0, "boot-b")
    d = timeout_fires(1, (SLOW,), {}, ["slow"], start, rebooted, 0.0)
    assert d.fires == [] and d.rearm == [Arm("slow", 5.0)]


def test_pending_timeouts_are_the_unfired_ones_with_their_wait() -> None:
    got = pending_timeouts(HOOKS, {"slower": Counter(1, 0)}, boot(10.0), boot(14.0))
    assert got == [Arm("slow", 6.0)]
    assert pending_timeouts((ANY, ERR), {}, boot(0.0), boot(1.0)) == []


@settings(max_examples=1000)
@given(
    seconds=st.floats(0.0, 1e6),
    elapsed=st.floats(0.0, 2e6),
    fired=st.booleans(),
    wall=st.floats(0.0, 2e9),
)
def test_a_due_timeout_either_fires_or_rearms_once(
    seconds: float, elapsed: float, fired: bool, wall: float
) -> None:
    hook = Hook("t", OnTimeout(seconds), "x")
    counters = {"t": Counter(1, 0)} if fired else {}
    d = timeout_fires(2, (hook,), counters, ["t"], boot(0.0), boot(elapsed), wall)
    if fired:
        assert d.fires == [] and d.rearm == []
        return
    assert len(d.fires) + len(d.rearm) == 1
    if d.fires:
        assert seconds - elapsed <= TIMER_SLACK_S and d.fires[0].at <= wall + TIMER_SLACK_S
    else:
        assert d.rearm[0].seconds == pytest.approx(seconds - elapsed) and d.rearm[0].seconds > 0
    again = timeout_fires(2, (hook,), counters, ["t"], boot(0.0), boot(elapsed), wall)
    assert again == d  # deciding twice decides the same


# -- output matches ------------------------------------------------------------------------

MATCH_HOOKS = [ERR, WARN]
MATCHER = Matcher([h.trigger.pattern for h in MATCH_HOOKS])  # type: ignore[union-attr]


def test_match_fires_key_each_line_by_its_position() -> None:
    data = b"ok\nERROR one\r\nwarn: disk\nfine\nERROR two\n"
    matches = MATCHER.scan(data, [9, 9])
    fires = match_fires(8, MATCH_HOOKS, matches, data, 100, LogOffset(1100), 42.0)
    got = [(f.key.text, f.detail, f.tail_end) for f in fires]
    assert got == [
        ("8:err:@1103", "ERROR one", 100 + 14),  # the \r is not part of what it printed
        ("8:warn:@1114", "warn: disk", 100 + 25),
        ("8:err:@1130", "ERROR two", 100 + 40),
    ]
    assert all(f.at == 42.0 and f.refuse is None for f in fires)
    assert [(f.matched_line, f.pattern) for f in fires][1] == ("warn: disk", "^warn")
    new = match_fires(8, MATCH_HOOKS, matches, data, 0, NewLogOffset(55, 0), 42.0)
    assert [f.key.text for f in new] == ["8:err:@i55+3", "8:warn:@i55+14", "8:err:@i55+30"]


def test_exhausted_hooks_are_not_scanned_so_do_not_fire() -> None:
    data = b"ERROR\nwarn\n" * 4
    counters = {"err": Counter(3, 1), "warn": Counter(0, 0)}
    budget = [scan_budget(counters.get(h.name, Counter()), h.max_spawns) for h in MATCH_HOOKS]
    assert budget == [0, 2]  # warn may fire once, and be refused once (max_spawns)
    fires = match_fires(1, MATCH_HOOKS, MATCHER.scan(data, budget), data, 0, LogOffset(0), 1.0)
    assert [f.key.text for f in fires] == ["1:warn:@6", "1:warn:@17"]


@pytest.mark.parametrize(
    ("counters", "budget"),
    [
        ({}, [4, 2]),  # err: 3 fires and the refusal; warn: 1 and the refusal
        ({"err": Counter(2, 0)}, [2, 2]),
        ({"err": Counter(3, 0)}, [1, 2]),  # only the refusal is left to record
        ({"err": Counter(3, 1), "warn": Counter(1, 1)}, [0, 0]),  # exhausted: read nothing
        ({"other": Counter(9, 9)}, [4, 2]),
    ],
)
def test_the_budget_is_what_is_left_to_record_per_hook(
    counters: dict[str, Counter], budget: list[int]
) -> None:
    assert match_hooks_of(HOOKS) == MATCH_HOOKS  # the Matcher's order: the file's
    assert match_budget(MATCH_HOOKS, counters) == budget


@settings(max_examples=500)
@given(st.integers(1, 20), st.lists(st.integers(0, 5), max_size=40))
def test_spending_the_budget_never_records_past_max_spawns_and_one_refusal(
    max_spawns: int, batches: list[int]
) -> None:
    # Matches arrive in batches; each batch finds at most the budget; every match found is
    # recorded as a fire (or the one refusal) and counted, as firing.py does.
    from supervisor.hookspec import Limits
    from supervisor.limits import decide

    hook = Hook("h", OnOutputMatch("x"), "x", max_spawns=max_spawns)
    counter, recorded = Counter(), 0
    for found in batches:
        (budget,) = match_budget([hook], {"h": counter})
        for _ in range(min(found, budget)):
            d = decide(counter, max_spawns, 0, Limits())
            counter, recorded = d.counter, recorded + d.recorded
    assert counter.fires <= max_spawns and counter.refused <= 1
    assert recorded == min(sum(batches), max_spawns + 1)


@pytest.mark.parametrize(
    ("archived", "read_to", "restarted", "after"),
    [(0, 500, False, 0), (0, 500, True, 500), (700, 30, True, 730), (700, 30, False, 700)],
)
def test_a_restarted_file_keys_after_what_was_read_of_the_old(
    archived: int, read_to: int, restarted: bool, after: int
) -> None:
    assert archived_after(archived, read_to, restarted) == after


@settings(max_examples=300)
@given(st.lists(st.tuples(st.integers(1, 100), st.booleans()), min_size=1, max_size=20))
def test_keys_of_files_restarted_any_number_of_times_never_repeat(
    files: list[tuple[int, bool]],
) -> None:
    # Each file is read to `size` then restarted (truncated, replaced): a line at offset n of
    # any file keys at archived + n, so keys across all files are distinct and growing.
    archived, keys = 0, []
    for size, _ in files:
        keys += [LogOffset(archived + n).text for n in range(size)]
        archived = archived_after(archived, size, True)
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize(
    ("fired", "restarted", "unsaved", "due"),
    [
        (True, False, 0, True),  # fires commit with their offset, always
        (False, True, 0, True),
        (False, False, 0, False),  # nothing to lose: a crash rescans output that fired nothing
        (False, False, SAVE_EVERY - 1, False),
        (False, False, SAVE_EVERY, True),  # but never rescan more than this
    ],
)
def test_when_a_position_is_saved(fired: bool, restarted: bool, unsaved: int, due: bool) -> None:
    assert save_due(fired=fired, restarted=restarted, unsaved=unsaved) is due


@pytest.mark.parametrize(
    ("limit", "scanned", "punched", "due"),
    [
        (0, 10**9, 0, False),  # no bound
        (64 * 1024, 32 * 1024 + BLOCK, 0, False),  # not past half the bound plus a block
        (64 * 1024, 32 * 1024 + BLOCK + 1, 0, True),
        (64 * 1024, 10**6, 10**6 - 32 * 1024 - BLOCK, False),  # freed up to there already
    ],
)
def test_when_the_output_bound_is_looked_at(
    limit: int, scanned: int, punched: int, due: bool
) -> None:
    assert cap_due(limit, scanned, punched) is due


@settings(max_examples=500)
@given(st.integers(1, 1 << 22), st.integers(0, 1 << 26), st.integers(0, 1 << 26))
def test_the_bound_never_frees_unscanned_bytes_nor_the_last_half(
    limit: int, scanned: int, on_disk: int
) -> None:
    punched = 0
    plan = (
        plan_punch(on_disk, scanned, punched, limit) if cap_due(limit, scanned, punched) else None
    )
    if plan is not None:
        assert plan.start == punched < plan.end <= scanned - limit // 2
        assert plan.end % BLOCK == 0


@pytest.mark.parametrize(
    ("now", "exited_at", "at"), [(10.0, None, 10.0), (10.0, 8.0, 8.0), (10.0, 12.0, 10.0)]
)
def test_a_match_is_never_told_after_the_exit(
    now: float, exited_at: float | None, at: float
) -> None:
    assert match_time(now, exited_at) == at


lines = st.lists(
    st.sampled_from([b"ERROR x", b"warn y", b"ok", b"", b"ERROR", b"warn ERROR"]), max_size=30
)


@settings(max_examples=500)
@given(lines, st.integers(0, 30), st.integers(0, 10**9))
def test_keys_do_not_depend_on_how_the_output_was_read(
    chunks: list[bytes], cut: int, origin: int
) -> None:
    # A restart resumes at the saved offset: matches read in two pieces key as in one.
    data = b"".join(c + b"\n" for c in chunks)
    split = sum(len(c) + 1 for c in chunks[:cut])
    big = [9999, 9999]

    def keys(part: bytes, start: int) -> list[str]:
        ms = MATCHER.scan(part, big)
        fires = match_fires(3, MATCH_HOOKS, ms, part, start, LogOffset(origin + start), 0.0)
        return [f.key.text for f in fires]

    whole = keys(data, 0)
    assert keys(data[:split], 0) + keys(data[split:], split) == whole
    assert len(set(whole)) == len(whole)  # distinct matches, distinct keys
    assert keys(data, 0) == whole  # deciding twice decides the same
    # One fire per line and pattern: "warn ERROR" fires both hooks, at one position.
    assert len(whole) == sum((b"ERROR" in c) + c.startswith(b"warn") for c in chunks)


# -- wake reasons --------------------------------------------------------------------------


def test_wake_reasons_read_as_typed_events() -> None:
    reasons: set[wakes.Wake] = {wakes.TimeoutDue("b"), wakes.TimeoutDue("a:b"), wakes.CHANGE}
    assert wakes.timeouts_due(reasons) == ["a:b", "b"]  # a name holding ":" is kept whole
    assert not wakes.check_liveness(reasons) and not wakes.only_output(reasons)
    assert wakes.check_liveness(reasons | {wakes.LIVENESS})
    assert wakes.only_output({wakes.OUTPUT}) and not wakes.only_output(set())
    assert not wakes.only_output({wakes.OUTPUT, wakes.TimeoutDue("a")})
    assert {wakes.OutputReady(), wakes.OUTPUT} == {wakes.OUTPUT}  # a set gathers them once
