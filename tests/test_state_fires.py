"""state/fires.py and state/counters.py on a real database, SQLite and PostgreSQL alike."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence

import pytest
from sqlalchemy import select

from state import tables as t
from state.counters import Counter, load_active_counters, load_counters
from state.db import Store
from state.fires import Committed, FirePlan, FireWrite, PlanInput, commit_fires, list_fires
from state.processes import (
    LogPosition,
    NewProcess,
    ProcessEnd,
    TailState,
    create_process,
    get_process,
)
from state.ratelimit import DEFAULT_RATE
from state.threads import NewThread, list_threads
from supervise.errors import StateError


def process(store: Store, started_at: float = 1.0, depth: int = 0) -> int:
    new = NewProcess("p", "p", '["p"]', "/tmp", "boot", started_at, depth=depth)
    return create_process(store, new, lambda _: "{}").id


def tail(offset: int) -> TailState:
    return TailState(LogPosition(offset, 5, "h", False), LogPosition(), 0, 0)


def spawning(
    hook: str, at: float = 10.0
) -> tuple[list[PlanInput], Callable[[PlanInput, Sequence[str]], FirePlan]]:
    """A planner that spawns a thread for every key not recorded yet, counting each, and
    remembers what it was given."""
    seen: list[PlanInput] = []

    def plan(given: PlanInput, keys: Sequence[str]) -> FirePlan:
        seen.append(given)
        counters = dict(given.counters)
        writes = []
        for key in keys:
            if key in given.recorded:
                continue
            before = counters.get(hook, Counter())
            counters[hook] = Counter(before.fires + 1, before.refused)
            thread = NewThread("on_exit", given.depth + 1, "sys", f"msg {key}", at, hook=hook)
            writes.append(FireWrite(key, hook, "on_exit", at, f"detail {key}", 3, None, thread))
        return FirePlan(writes, counters)

    return seen, plan


def commit(
    store: Store,
    pid: int,
    keys: list[str],
    *,
    expect: int | None = 0,
    moved_to: int = 0,
    hook: str = "h",
    at: float = 10.0,
    end: ProcessEnd | None = None,
) -> tuple[Committed, list[PlanInput]]:
    seen, plan = spawning(hook, at)
    done = commit_fires(
        store,
        pid,
        keys,
        lambda given: plan(given, keys),
        rate=DEFAULT_RATE,
        expect_offset=expect,
        tail=tail(moved_to),
        end=end,
    )
    return done, seen


def test_a_fire_is_recorded_once_with_its_thread_and_first_message(store: Store) -> None:
    pid = process(store, depth=1)
    done, seen = commit(store, pid, ["k1"], moved_to=100)
    (fire,) = done.fires
    assert (fire.key, fire.process_id, fire.spawned, fire.exit_code) == ("k1", pid, True, 3)
    assert seen[0].depth == 1 and seen[0].recorded == frozenset()
    (thread,) = list_threads(store, pid)
    assert fire.thread_id == thread.id
    assert (thread.fire_id, thread.depth, thread.status, thread.hook) == (fire.id, 2, "queued", "h")
    with store.read() as conn:
        entries = conn.execute(
            select(t.entry.c.seq, t.entry.c.kind, t.entry.c.data).where(
                t.entry.c.thread_id == thread.id
            )
        ).all()
    assert [(s, k, json.loads(d)) for s, k, d in entries] == [(1, "user", {"text": "msg k1"})]
    assert done.counters == {"h": Counter(1, 0)} == load_counters(store, pid)

    # The same key again (a restarted daemon rescanning): the planner is told, nothing new.
    again, seen = commit(store, pid, ["k1", "k2"], expect=100, moved_to=200)
    assert seen[0].recorded == frozenset({"k1"})
    assert [f.key for f in again.fires] == ["k2"]
    assert [f.key for f in list_fires(store)] == ["k1", "k2"]
    assert len(list_threads(store, pid)) == 2
    assert load_counters(store, pid) == {"h": Counter(2, 0)}


def test_a_moved_offset_writes_nothing(store: Store) -> None:
    pid = process(store)
    commit(store, pid, ["k1"], moved_to=100)
    with pytest.raises(StateError, match=r"saved offset moved \(100 != 0\)"):
        commit(store, pid, ["k2"], expect=0, moved_to=500)
    row = get_process(store, pid)
    assert row is not None and row.log_offset == 100
    assert [f.key for f in list_fires(store)] == ["k1"]
    assert len(list_threads(store)) == 1
    assert load_counters(store, pid) == {"h": Counter(1, 0)}
    with pytest.raises(StateError, match="vanished"):
        commit(store, pid + 100, ["k3"])


def test_a_refused_fire_has_no_thread(store: Store) -> None:
    pid = process(store)

    def refuse(given: PlanInput) -> FirePlan:
        write = FireWrite("k", "h", "on_exit", 5.0, "exit code 1", 1, "depth")
        return FirePlan([write], {"h": Counter(1, 0)})

    done = commit_fires(store, pid, ["k"], refuse, rate=DEFAULT_RATE, expect_offset=0)
    (fire,) = done.fires
    assert (fire.spawned, fire.reason, fire.thread_id) == (False, "depth", None)
    assert list_threads(store) == []
    assert list_fires(store, pid) == [fire]


def test_the_end_commits_with_its_fires(store: Store) -> None:
    pid = process(store)
    other = process(store, started_at=2.0)
    commit(store, other, ["o"], hook="x")
    end = ProcessEnd("exited", "exit-code", 20.0, exit_code=3, pid=42, shim_pid=41)
    commit(store, pid, ["exit"], end=end)
    row = get_process(store, pid)
    assert row is not None
    assert (row.state, row.exit_code, row.result, row.ended_at) == ("exited", 3, "exit-code", 20.0)
    assert (row.pid, row.shim_pid) == (42, 41)
    # The daemon's recovery loads the counters of unended processes only, in one query.
    assert load_active_counters(store) == {other: {"x": Counter(1, 0)}}


def test_fires_list_in_the_order_they_happened(store: Store) -> None:
    a, b = process(store), process(store, started_at=2.0)
    commit(store, a, ["late"], at=30.0, moved_to=1)
    commit(store, b, ["early"], at=10.0, moved_to=1)
    commit(store, a, ["tie"], at=30.0, expect=1, moved_to=2)
    assert [f.key for f in list_fires(store)] == ["early", "late", "tie"]
    assert [f.key for f in list_fires(store, a)] == ["late", "tie"]
    assert list_fires(store, b + 1) == []


def test_two_writers_on_one_process_record_each_fire_once(store: Store) -> None:
    # Two daemons (two stores, real threads) commit the same fires from the same saved
    # offset at once: the row lock serializes them, and the second finds the offset moved.
    pid = process(store)
    others = [Store(store.target, timeout=10.0) for _ in range(2)]
    start = threading.Barrier(2)
    results: list[object] = []

    def daemon(s: Store) -> None:
        start.wait()
        try:
            results.append(commit(s, pid, ["k1", "k2"], expect=0, moved_to=100)[0])
        except StateError as exc:
            results.append(exc)

    workers = [threading.Thread(target=daemon, args=(s,)) for s in others]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    for s in others:
        s.close()
    won = [r for r in results if isinstance(r, Committed)]
    lost = [r for r in results if isinstance(r, StateError)]
    assert len(won) == 1 and len(lost) == 1, results
    assert "saved offset moved" in str(lost[0])
    assert sorted(f.key for f in list_fires(store)) == ["k1", "k2"]
    assert len(list_threads(store)) == 2
    assert load_counters(store, pid) == {"h": Counter(2, 0)}


def test_writers_without_an_offset_check_still_record_each_key_once(store: Store) -> None:
    # Timeout fires move no offset: the second writer passes the check and is told the keys
    # are recorded.
    pid = process(store)
    others = [Store(store.target, timeout=10.0) for _ in range(4)]
    start = threading.Barrier(len(others))
    errors: list[BaseException] = []

    def daemon(s: Store) -> None:
        start.wait()
        try:
            commit(s, pid, ["timeout"], expect=None)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    workers = [threading.Thread(target=daemon, args=(s,)) for s in others]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    for s in others:
        s.close()
    assert errors == []
    assert [f.key for f in list_fires(store)] == ["timeout"]
    assert len(list_threads(store)) == 1
    assert load_counters(store, pid) == {"h": Counter(1, 0)}
