"""One thread per failure on a real database, SQLite and PostgreSQL alike: the dedup decision
made inside the fire's transaction (supervisor/firing.py over state/fires.py and
state/repeats.py), and a repeat's message reaching a thread that is running."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from agent_threads.journal import Journal
from agent_threads.spawn import FireFacts
from agent_threads.transcript import AssistantReply, CallModel, UserText, next_step
from state.counters import Counter, load_counters
from state.db import Store
from state.entries import read_entries
from state.fires import list_fires
from state.processes import NewProcess, create_process
from state.runs import NextRun, insert_next_run
from state.threads import claim_next_thread, finish_thread, get_thread, list_threads
from supervise.errors import MessagesArrived
from supervisor.dedup import MAX_REPEAT_MESSAGES, DedupSpec
from supervisor.firing import FireEvent, Outcome, commit_fires
from supervisor.hookspec import Hook, Limits, OnExit, OnOutputMatch
from supervisor.triggers import FireKey, LogOffset

LATER = 4e9  # claims see every thread created now as due
ERRORS = Hook("errors", OnOutputMatch("ERROR"), "x", max_spawns=1, dedup=DedupSpec())


def process(store: Store) -> int:
    new = NewProcess("job", "job", '["job"]', "/tmp", "boot", 1.0)
    return create_process(store, new, lambda _: "{}").id


def match(pid: int, hook: Hook, offset: int, line: str, at: float = 100.0) -> FireEvent:
    facts = FireFacts(
        "job", 1, hook.kind, hook.name, "x", 1.0, output_tail=[line], matched_line=line
    )
    return FireEvent(hook, FireKey(pid, hook.name, LogOffset(offset)), at, line, facts)


def exit_(pid: int, hook: Hook, code: int, at: float = 100.0) -> FireEvent:
    facts = FireFacts("job", 1, "on_exit", hook.name, "x", 1.0, exit_code=code)
    return FireEvent(hook, FireKey(pid, hook.name, "exit"), at, f"exit code {code}", facts, code)


def commit(store: Store, pid: int, *events: FireEvent) -> list[Outcome]:
    return commit_fires(store, pid, events, limits=Limits(), expect_offset=None)[0]


def user_texts(store: Store, tid: int) -> list[str]:
    return [str(e.data["text"]) for e in read_entries(store, tid) if e.kind == "user"]


def end(store: Store, tid: int, at: float) -> None:
    assert claim_next_thread(store, 10, LATER) == [tid]
    assert finish_thread(store, tid, "completed", at)


def test_repeats_join_the_open_thread_in_one_commit_and_across_commits(store: Store) -> None:
    pid = process(store)
    lines = [f"2026-11-26T14:02:0{i}Z ERROR job {100 + i} failed" for i in range(5)]
    first = commit(store, pid, *(match(pid, ERRORS, i * 100, lines[i]) for i in range(3)))
    assert [(o.spawned, o.reason) for o in first] == [
        (True, None),
        (False, "deduplicated"),
        (False, "deduplicated"),
    ]
    tid = first[0].thread_id
    assert tid is not None and {o.thread_id for o in first} == {tid}
    later = commit(store, pid, *(match(pid, ERRORS, i * 100, lines[i]) for i in range(3, 5)))
    assert [(o.reason, o.thread_id) for o in later] == [("deduplicated", tid)] * 2
    assert len(list_threads(store)) == 1
    fires = list_fires(store)
    assert [(f.spawned, f.reason, f.thread_id) for f in fires] == [(True, None, tid)] + [
        (False, "deduplicated", tid)
    ] * 4
    texts = user_texts(store, tid)
    assert len(texts) == 5
    assert [t.split(" (")[1].split(")")[0] for t in texts[1:]] == [
        "2nd time",
        "3rd time",
        "4th time",
        "5th time",
    ]
    assert lines[4] in texts[4]
    # Repeats do not use up max_spawns (1): only the thread counted.
    assert load_counters(store, pid) == {"errors": Counter(1, 0)}


def test_different_failures_start_their_own_threads(store: Store) -> None:
    pid = process(store)
    hook = Hook("errors", OnOutputMatch("ERROR"), "x", max_spawns=2, dedup=DedupSpec())
    got = commit(
        store,
        pid,
        match(pid, hook, 0, "ERROR: relation users does not exist"),
        match(pid, hook, 100, "ERROR: deadlock detected"),
        match(pid, hook, 200, "ERROR: relation users does not exist"),
        match(pid, hook, 300, "ERROR: timeout after 30 s"),
    )
    assert [(o.spawned, o.reason) for o in got] == [
        (True, None),
        (True, None),
        (False, "deduplicated"),
        (False, "max_spawns"),
    ]
    assert got[2].thread_id == got[0].thread_id != got[1].thread_id


def test_a_cooldown_follows_the_thread_then_a_new_thread(store: Store) -> None:
    pid = process(store)
    hook = Hook("errors", OnOutputMatch("ERROR"), "x", 5, DedupSpec(cooldown=60.0))
    (first,) = commit(store, pid, match(pid, hook, 0, "ERROR 1", at=100.0))
    assert first.thread_id is not None
    end(store, first.thread_id, 200.0)
    (cool,) = commit(store, pid, match(pid, hook, 100, "ERROR 2", at=230.0))
    assert (cool.spawned, cool.reason, cool.thread_id) == (False, "cooldown", first.thread_id)
    assert len(user_texts(store, first.thread_id)) == 1  # no message: it stays ended
    thread = get_thread(store, first.thread_id)
    assert thread is not None and thread.status == "completed"
    (again,) = commit(store, pid, match(pid, hook, 200, "ERROR 3", at=261.0))
    assert again.spawned and again.thread_id != first.thread_id
    assert load_counters(store, pid) == {"errors": Counter(2, 0)}


def test_a_replayed_commit_repeats_neither_fire_nor_message(store: Store) -> None:
    # A daemon killed after the commit reads the same output again at its restart.
    pid = process(store)
    events = [match(pid, ERRORS, i, f"ERROR {i}") for i in (0, 100)]
    done = commit(store, pid, *events)
    tid = done[0].thread_id
    assert tid is not None
    again = commit(store, pid, *events)
    assert [o.reason for o in again] == ["duplicate", "duplicate"]
    assert len(list_fires(store)) == 2 and len(user_texts(store, tid)) == 2


def test_dedup_process_joins_across_hooks_and_runs(store: Store) -> None:
    pid = process(store)
    deadlock = Hook("deadlock", OnOutputMatch("deadlock"), "x")  # no dedup of its own
    crashed = Hook("crashed", OnExit(), "x", dedup=DedupSpec("process"))
    (d,) = commit(store, pid, match(pid, deadlock, 0, "deadlock detected"))
    (c,) = commit(store, pid, exit_(pid, crashed, 1))
    assert (c.reason, c.thread_id) == ("deduplicated", d.thread_id)
    assert d.thread_id is not None
    told = user_texts(store, d.thread_id)[1]
    assert "(2nd time): the process hook `crashed` fired" in told
    assert "Trigger: on_exit (exit code: 1" in told
    # The next run of a restarted process is the same process.
    run2 = store.transact(lambda conn: insert_next_run(conn, pid, NextRun(5.0, "restart"), 5.0))
    (c2,) = commit(store, run2, exit_(run2, crashed, 1))
    assert (c2.reason, c2.thread_id) == ("deduplicated", d.thread_id)
    # In one commit: the exit joins the thread the match starts.
    other = process(store)
    both = commit(store, other, match(other, deadlock, 0, "deadlock"), exit_(other, crashed, 1))
    assert both[0].spawned and (both[1].reason, both[1].thread_id) == (
        "deduplicated",
        both[0].thread_id,
    )


def test_a_thread_is_told_of_a_bounded_number_of_repeats(store: Store) -> None:
    pid = process(store)
    n = MAX_REPEAT_MESSAGES + 3
    done = commit(store, pid, *(match(pid, ERRORS, i * 10, f"ERROR {i}") for i in range(n)))
    tid = done[0].thread_id
    assert tid is not None and all(o.thread_id == tid for o in done)
    texts = user_texts(store, tid)
    assert len(texts) == 1 + MAX_REPEAT_MESSAGES
    assert "Further repeats are recorded as fires only" in texts[-1]
    assert len(list_fires(store)) == n


def test_a_running_thread_gets_the_message_before_its_reply_is_saved(store: Store) -> None:
    pid = process(store)
    (first,) = commit(store, pid, match(pid, ERRORS, 0, "ERROR 1"))
    tid = first.thread_id
    assert tid is not None and claim_next_thread(store, 5, LATER) == [tid]
    journal = Journal(store, tid)
    assert len(journal.entries()) == 1
    commit(store, pid, match(pid, ERRORS, 100, "ERROR 2"))  # while the model answers
    with pytest.raises(MessagesArrived) as info:
        journal.append(AssistantReply("an answer to the first message only"))
    (arrived,) = info.value.entries
    assert isinstance(arrived.body, UserText) and "2nd time" in arrived.body.text
    assert [e.kind for e in read_entries(store, tid)] == ["user", "user"]  # the reply: not saved
    journal.append(AssistantReply("an answer to both"))
    assert journal.finish("completed") and not journal.requeued
    thread = get_thread(store, tid)
    assert thread is not None and thread.status == "completed"


def test_a_thread_told_as_it_ends_is_queued_again(store: Store) -> None:
    pid = process(store)
    (first,) = commit(store, pid, match(pid, ERRORS, 0, "ERROR 1"))
    tid = first.thread_id
    assert tid is not None and claim_next_thread(store, 5, LATER) == [tid]
    journal = Journal(store, tid)
    journal.entries()
    journal.append(AssistantReply("done"))
    commit(store, pid, match(pid, ERRORS, 100, "ERROR 2"))  # after the reply, before the end
    assert journal.finish("completed") and journal.requeued
    thread = get_thread(store, tid)
    assert thread is not None and thread.status == "queued" and thread.ended_at is None
    journal2 = Journal(store, tid)
    assert isinstance(next_step(journal2.entries()), CallModel)  # it answers the repeat


def test_a_repeat_during_a_tool_call_reaches_the_next_reply(store: Store) -> None:
    from agent_threads.messages import ToolCall
    from agent_threads.transcript import ToolOutput

    pid = process(store)
    (first,) = commit(store, pid, match(pid, ERRORS, 0, "ERROR 1"))
    tid = first.thread_id
    assert tid is not None and claim_next_thread(store, 5, LATER) == [tid]
    journal = Journal(store, tid)
    journal.entries()
    call = ToolCall("c1", "Bash", {"command": "true"})
    journal.append(AssistantReply("", (call,)))
    commit(store, pid, match(pid, ERRORS, 100, "ERROR 2"))  # while the tool runs
    journal.append(ToolOutput("c1", "Bash", "ok", False, "ok"))  # saved after the message
    with pytest.raises(MessagesArrived) as info:
        journal.append(AssistantReply("final"))
    assert [e.seq for e in info.value.entries] == [3]
    journal.append(AssistantReply("final, having read it"))
    assert journal.finish("completed") and not journal.requeued


def test_after_thread_waits_for_the_thread_an_exit_joined(store: Store) -> None:
    # restart.after_thread: the next run waits for the threads working on the exit before
    # it, the one its fire joined included.
    from state.processes import get_process
    from state.runs import unfinished_exit_threads

    pid = process(store)
    crashed = Hook("crashed", OnExit(), "x", dedup=DedupSpec())
    (first,) = commit(store, pid, exit_(pid, crashed, 1))
    run2 = store.transact(lambda conn: insert_next_run(conn, pid, NextRun(5.0, "restart"), 5.0))
    (joined,) = commit(store, run2, exit_(run2, crashed, 1))
    assert (joined.reason, joined.thread_id) == ("deduplicated", first.thread_id)
    run3 = store.transact(lambda conn: insert_next_run(conn, run2, NextRun(6.0, "restart"), 6.0))
    pending = get_process(store, run3)
    assert pending is not None and unfinished_exit_threads(store, pending) == 1
    assert first.thread_id is not None
    end(store, first.thread_id, 7.0)
    assert unfinished_exit_threads(store, pending) == 0


@pytest.mark.anyio
async def test_the_loop_asks_again_when_a_repeat_comes_while_the_model_answers(
    store: Store, tmp_path: Path
) -> None:
    from fakes import TableModel

    from agent_threads.loop import LoopConfig, run_loop
    from agent_threads.messages import Message, Reply, ToolSpec, UserMessage
    from agent_threads.permissions import Profile
    from agent_threads.tools.base import ToolContext

    pid = process(store)
    (first,) = commit(store, pid, match(pid, ERRORS, 0, "ERROR 1"))
    tid = first.thread_id
    assert tid is not None and claim_next_thread(store, 5, LATER) == [tid]

    class Meanwhile(TableModel):
        async def complete(
            self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]
        ) -> Reply:
            if not self.sent:  # the failure happens again while the model answers
                commit(store, pid, match(pid, ERRORS, 100, "ERROR 2"))
            return await super().complete(system, messages, tools)

    model = Meanwhile([Reply("an answer")])
    journal = Journal(store, tid)
    ctx = ToolContext(thread_id=tid, cwd=tmp_path, env={})
    cfg = LoopConfig(model=model, tools={}, profile=Profile(), ctx=ctx, system="sys")
    end = await run_loop(journal, cfg, journal.entries(), 0)
    assert end.status == "completed" and journal.finish("completed") and not journal.requeued
    assert len(model.sent) == 2
    told = [m for m in model.sent[1] if isinstance(m, UserMessage)]
    assert len(told) == 2 and "2nd time" in told[1].content
    # The first reply, which answered the first message alone, was not saved.
    assert [e.kind for e in read_entries(store, tid)] == ["user", "user", "assistant"]


def test_only_a_message_holds_a_reply_back(store: Store) -> None:
    # The loop's background tasks save entries too, from worker threads: one whose save has
    # not been counted yet is not a message the model missed.
    from state.entries import insert_entry

    pid = process(store)
    (first,) = commit(store, pid, match(pid, ERRORS, 0, "ERROR 1"))
    tid = first.thread_id
    assert tid is not None and claim_next_thread(store, 5, LATER) == [tid]
    journal = Journal(store, tid)
    journal.entries()
    store.transact(lambda conn: insert_entry(conn, tid, "note", 1.0, {"text": "a hook ran"}))
    journal.append(AssistantReply("the answer"))
    assert journal.finish("completed") and not journal.requeued
