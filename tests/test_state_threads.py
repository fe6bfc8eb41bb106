"""state.threads, state.entries and state.approvals on both back ends: a SQLite file and a
real PostgreSQL server (skipped with a reason where PostgreSQL is not installed)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from state import threads as th
from state.approvals import decide
from state.db import DatabaseTarget, Store
from state.entries import (
    EntryKind,
    EntryRecord,
    append_entry,
    append_external,
    last_seq,
    read_entries,
)
from state.ratelimit import Rate
from supervise.errors import ThreadStopped

T0 = 1_700_000_000.0
WIDE = Rate(1000, 60.0)  # no thread waits for the limiter


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> DatabaseTarget:
    if request.param == "sqlite":
        return DatabaseTarget.sqlite(tmp_path / "state.db")
    url: str = request.getfixturevalue("pg_url")
    return DatabaseTarget.parse(url)


@pytest.fixture
def store(target: DatabaseTarget) -> Iterator[Store]:
    s = Store(target, timeout=10)
    yield s
    s.close()


def new(at: float = T0, **kw: object) -> th.NewThread:
    return th.NewThread(
        trigger="user",
        depth=0,
        prompt="why?",
        first_message=f"question at {at}",
        created_at=at,
        **kw,  # type: ignore[arg-type]
    )


def create(store: Store, at: float = T0, rate: Rate = WIDE) -> th.ThreadRecord:
    return store.transact(lambda conn: th.create_thread(conn, new(at), rate))


def running(store: Store, at: float = T0) -> int:
    """A thread claimed by the dispatcher."""
    tid = create(store, at).id
    assert th.claim_next_thread(store, 1, at) == [tid]
    return tid


def test_create_thread_saves_the_first_message(store: Store) -> None:
    t = create(store)
    assert (t.status, t.trigger, t.not_before, t.turns) == ("queued", "user", T0, 0)
    assert th.get_thread(store, t.id) == t
    [first] = read_entries(store, t.id)
    assert (first.seq, first.kind, first.at, first.data) == (
        1,
        "user",
        T0,
        {"text": f"question at {T0}"},
    )
    assert th.get_thread(store, t.id + 100) is None


def test_the_rate_limiter_delays_the_thread_over_the_rate(store: Store) -> None:
    rate = Rate(2, 60.0)
    starts = [create(store, T0 + i, rate).not_before for i in range(4)]
    # Two in any minute: the third waits until a minute after the first, the fourth after
    # the second.
    assert starts == [T0, T0 + 1, T0 + 60, T0 + 61]
    assert th.next_due(store) == T0
    assert th.claim_next_thread(store, 10, T0 + 30) == [1, 2]
    assert th.next_due(store) == T0 + 60


def test_list_threads_in_the_order_they_were_created(store: Store) -> None:
    late = create(store, T0 + 10)
    early = create(store, T0)  # a later id, created earlier (another host's clock)
    tie = create(store, T0)
    assert [t.id for t in th.list_threads(store)] == [early.id, tie.id, late.id]
    assert th.list_threads(store, process_id=7) == []


def test_claim_takes_due_threads_once(store: Store) -> None:
    due, later = create(store), create(store, T0 + 100)
    assert th.claim_next_thread(store, 0, T0) == []
    assert th.claim_next_thread(store, 5, T0) == [due.id]
    assert th.claim_next_thread(store, 5, T0) == []
    claimed = th.get_thread(store, due.id)
    assert claimed is not None
    assert (claimed.status, claimed.segment_started_at) == ("running", T0)
    assert th.statuses(store, [due.id, later.id, 999]) == {due.id: "running", later.id: "queued"}
    assert th.statuses(store, []) == {}


def test_two_dispatchers_never_claim_one_thread(target: DatabaseTarget, store: Store) -> None:
    ids = {create(store).id for _ in range(40)}
    claims: list[list[int]] = [[], []]
    go = threading.Barrier(2)
    errors: list[BaseException] = []

    def dispatcher(mine: list[int]) -> None:
        # Its own Store (its own engine and connections), as a second host would have.
        other = Store(target, timeout=10)
        try:
            go.wait()
            while got := th.claim_next_thread(other, 3, T0):
                mine.extend(got)
        except BaseException as exc:
            errors.append(exc)
        finally:
            other.close()

    workers = [threading.Thread(target=dispatcher, args=(c,)) for c in claims]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert not errors
    every = claims[0] + claims[1]
    assert sorted(every) == sorted(ids)  # each thread claimed, none twice
    assert set(th.statuses(store, sorted(ids)).values()) == {"running"}


def test_requeue_running_keeps_the_first(store: Store) -> None:
    ids = [create(store).id for _ in range(3)]
    assert th.claim_next_thread(store, 3, T0) == ids
    assert th.requeue_running(store, 2) == ids[:2]
    assert th.statuses(store, ids) == {ids[0]: "running", ids[1]: "running", ids[2]: "queued"}


def test_append_entry_counts_turns_and_numbers_entries(store: Store) -> None:
    tid = running(store)
    e = append_entry(store, tid, "assistant", {"content": "hi", "tool_calls": []}, T0 + 1)
    assert (e.seq, e.kind) == (2, "assistant")
    append_entry(store, tid, "note", {"text": "n"}, T0 + 2)
    assert [x.seq for x in read_entries(store, tid)] == [1, 2, 3]
    assert [x.kind for x in read_entries(store, tid, after=2)] == ["note"]
    assert last_seq(store, tid) == 3
    t = th.get_thread(store, tid)
    assert t is not None and t.turns == 1


def test_append_after_cancel_raises_and_writes_nothing(store: Store) -> None:
    tid = running(store)
    assert th.cancel_thread(store, tid, T0 + 5) == "running"
    with pytest.raises(ThreadStopped, match="cancelled"):
        append_entry(store, tid, "assistant", {"content": "late", "tool_calls": []}, T0 + 6)
    assert [e.kind for e in read_entries(store, tid)] == ["user"]
    t = th.get_thread(store, tid)
    assert t is not None
    assert (t.status, t.error, t.ended_at, t.turns) == (
        "cancelled",
        "cancelled by a person",
        T0 + 5,
        0,
    )
    # The run's own end does not overwrite the person's cancel.
    assert not th.finish_thread(store, tid, "completed", T0 + 7)
    assert th.cancel_thread(store, tid, T0 + 8) == "cancelled"  # already ended: unchanged
    assert th.cancel_thread(store, 999, T0) is None


def test_finish_and_fail_move_only_a_running_thread(store: Store) -> None:
    tid = running(store)
    assert th.finish_thread(store, tid, "waiting_approval", T0 + 1, waiting="bash(ls)")
    t = th.get_thread(store, tid)
    assert t is not None
    assert (t.status, t.waiting, t.ended_at, t.segment_started_at) == (
        "waiting_approval",
        "bash(ls)",
        None,
        None,
    )
    assert not th.fail_thread(store, tid, "boom", T0 + 2)
    other = running(store, T0 + 3)
    assert th.fail_thread(store, other, "boom", T0 + 4)
    t = th.get_thread(store, other)
    assert t is not None and (t.status, t.error, t.ended_at) == ("failed", "boom", T0 + 4)


def test_append_external_requeues_a_finished_thread(store: Store) -> None:
    tid = running(store)
    append_entry(store, tid, "assistant", {"content": "done", "tool_calls": []}, T0 + 1)
    assert th.finish_thread(store, tid, "failed", T0 + 2, error="model said no")
    before = append_external(
        store, tid, [("user", {"text": "again"})], allowed=("completed", "failed"), at=T0 + 3
    )
    assert before == "failed"
    t = th.get_thread(store, tid)
    assert t is not None
    # Queued again, its error cleared and its turn budget whole again.
    assert (t.status, t.error, t.ended_at, t.turns) == ("queued", None, None, 0)
    assert [(e.seq, e.kind, e.at) for e in read_entries(store, tid, after=2)] == [
        (3, "user", T0 + 3)
    ]


def test_append_external_writes_nothing_to_a_thread_not_allowed(store: Store) -> None:
    tid = running(store)
    assert append_external(
        store, tid, [("user", {"text": "x"})], allowed=("completed",), at=T0
    ) == ("running")
    assert last_seq(store, tid) == 1
    assert th.statuses(store, [tid]) == {tid: "running"}
    assert (
        append_external(store, 999, [("user", {"text": "x"})], allowed=("completed",), at=T0)
        is None
    )


def test_retry_with_another_model(store: Store) -> None:
    tid = running(store)
    th.record_model(store, tid, "openai:a")
    th.record_model(store, tid, "openai:b")  # the first one a thread got stays
    t = th.get_thread(store, tid)
    assert t is not None and t.model == "openai:a"
    th.set_model(store, tid, "openai:c")  # a person's choice replaces it
    t = th.get_thread(store, tid)
    assert t is not None and t.model == "openai:c"


@dataclass(frozen=True)
class Call:
    id: str
    name: str


def _denied(call: Call) -> tuple[EntryKind, dict[str, Any]]:
    data = {"call_id": call.id, "name": call.name, "decision": "denied", "by": "user"}
    return ("approval", {**data, "reason": "no"})


def _pending(entries: Sequence[EntryRecord]) -> Call | None:
    # The loop's rule in small: the last call asked about, if nothing answered it.
    asked = [e for e in entries if e.kind == "approval" and e.data["decision"] == "ask"]
    answered = {
        e.data["call_id"] for e in entries if e.kind == "approval" and e.data["by"] == "user"
    }
    if asked and asked[-1].data["call_id"] not in answered:
        return Call(asked[-1].data["call_id"], asked[-1].data["name"])
    return None


def test_decide_records_a_decision_once(store: Store) -> None:
    tid = running(store)
    ask = {"call_id": "c1", "name": "bash", "decision": "ask", "by": "rule"}
    append_entry(store, tid, "approval", ask, T0 + 1)
    assert th.finish_thread(store, tid, "waiting_approval", T0 + 2, waiting="bash(rm)")
    done = decide(store, tid, pending=_pending, record=_denied, at=T0 + 3)
    assert (done.status, done.call) == ("waiting_approval", Call("c1", "bash"))
    last = read_entries(store, tid)[-1]
    assert (last.kind, last.data) == (
        "approval",
        {"call_id": "c1", "name": "bash", "decision": "denied", "by": "user", "reason": "no"},
    )
    assert th.statuses(store, [tid]) == {tid: "queued"}
    # A second decision finds the thread queued: nothing is written.
    again = decide(store, tid, pending=_pending, record=_denied, at=T0 + 4)
    assert (again.status, again.call) == ("queued", None)
    assert last_seq(store, tid) == 3
