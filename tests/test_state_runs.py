"""state/runs.py and the restart step of commit_fires on a real database, SQLite and
PostgreSQL alike: a next run is recorded with the end, once; a pending run is claimed once;
a person's stop and restart race the daemon safely; an older database gains the chains."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from state.db import Store, target_for
from state.fires import FirePlan, FireWrite, PlanInput, RestartPlan, commit_fires
from state.processes import NewProcess, ProcessEnd, create_process, get_process
from state.ratelimit import DEFAULT_RATE
from state.runs import (
    NextRun,
    RunHistory,
    cancel_run,
    chain_runs,
    claim_run,
    history_in,
    hurry_run,
    insert_next_run,
    newest_run,
    pending_runs,
    record_next_run,
    request_stop,
    runs_named,
    unfinished_exit_threads,
)
from state.threads import NewThread
from supervise.errors import StateError


def first_run(store: Store, name: str = "p", started_at: float = 1.0) -> int:
    new = NewProcess(name, name, f'["{name}"]', "/tmp", "boot", started_at)
    return create_process(store, new, lambda row: f'{{"id": {row.id}}}').id


def end(at: float, code: int = 1) -> ProcessEnd:
    return ProcessEnd("exited", "exit-code" if code else "success", at, exit_code=code)


def restarting(due: float = 50.0, seen: list[RunHistory] | None = None) -> object:
    def plan(history: RunHistory) -> RestartPlan:
        if seen is not None:
            seen.append(history)
        return RestartPlan(NextRun(due, "restart"))

    return plan


def nothing(given: PlanInput) -> FirePlan:
    return FirePlan([], dict(given.counters))


def test_a_first_run_heads_its_own_chain(store: Store) -> None:
    pid = first_run(store)
    row = get_process(store, pid)
    assert row is not None
    assert (row.first_id, row.run_no, row.cause, row.chain) == (pid, 1, "run", pid)


def test_the_end_records_the_next_run_with_the_same_launch(store: Store) -> None:
    pid = first_run(store)
    seen: list[RunHistory] = []
    done = commit_fires(
        store,
        pid,
        [],
        nothing,
        rate=DEFAULT_RATE,
        expect_offset=0,
        end=end(10.0),
        restart=restarting(12.0, seen),  # type: ignore[arg-type]
    )
    (history,) = seen
    assert [(r.id, r.run_no, r.state, r.ended_at) for r in history.runs] == [
        (pid, 1, "exited", 10.0)
    ]
    assert done.next_run is not None
    nxt = get_process(store, done.next_run)
    assert nxt is not None
    assert (nxt.state, nxt.chain, nxt.run_no, nxt.due_at, nxt.cause) == (
        "backoff",
        pid,
        2,
        12.0,
        "restart",
    )
    first = get_process(store, pid)
    assert first is not None
    assert (nxt.name, nxt.argv, nxt.cwd, nxt.spec) == (
        first.name,
        first.argv,
        first.cwd,
        first.spec,
    )
    assert nxt.env_key is None and nxt.pid is None  # sealed anew, pids learned, when it starts
    assert [r.id for r in pending_runs(store)] == [nxt.id]
    assert newest_run(store, pid) == nxt


def test_a_run_is_recorded_once(store: Store) -> None:
    pid = first_run(store)
    with store.write() as conn:
        insert_next_run(conn, pid, NextRun(5.0, "restart"), 4.0)
    with pytest.raises(StateError, match="already recorded"), store.write() as conn:
        insert_next_run(conn, pid, NextRun(5.0, "restart"), 4.0)  # the unique (first_id, run_no)
    with pytest.raises(StateError, match="recorded already"):
        record_next_run(store, pid, NextRun(5.0, "manual"), 4.0)
    assert [r.run_no for r in chain_runs(store, pid)] == [1, 2]


def test_the_end_and_its_next_run_commit_together_or_not_at_all(store: Store) -> None:
    pid = first_run(store)

    def broken(given: PlanInput) -> FirePlan:
        raise RuntimeError("the daemon died here")

    write = ["k"]
    with pytest.raises(RuntimeError):
        commit_fires(
            store,
            pid,
            write,
            broken,
            rate=DEFAULT_RATE,
            expect_offset=0,
            end=end(10.0),
            restart=restarting(),  # type: ignore[arg-type]
        )
    row = get_process(store, pid)
    assert row is not None and row.state == "starting"  # nothing of it was written
    assert chain_runs(store, pid) == [row]


def test_a_crash_loop_is_the_ends_state(store: Store) -> None:
    pid = first_run(store)
    commit_fires(
        store,
        pid,
        [],
        nothing,
        rate=DEFAULT_RATE,
        expect_offset=0,
        end=end(10.0),
        restart=lambda _h: RestartPlan(state="crash-loop"),
    )
    row = get_process(store, pid)
    assert row is not None and (row.state, row.exit_code) == ("crash-loop", 1)
    assert pending_runs(store) == []


def test_the_history_is_the_chain_up_to_the_run_ending(store: Store) -> None:
    pid = first_run(store)
    with store.write() as conn:
        second = insert_next_run(conn, pid, NextRun(5.0, "restart"), 4.0)
        insert_next_run(conn, second, NextRun(9.0, "manual"), 8.0)
    request_stop(store, second, "stop")  # not running: nothing noted
    with store.read() as conn:
        history = history_in(conn, second)
    assert [(r.run_no, r.cause) for r in history.runs] == [(1, "run"), (2, "restart")]
    assert history.stop_request is None


def test_a_pending_run_is_claimed_once(store: Store) -> None:
    pid = first_run(store)
    with store.write() as conn:
        nxt = insert_next_run(conn, pid, NextRun(5.0, "restart"), 4.0)
    claims: list[object] = []

    def claim() -> None:
        claims.append(
            claim_run(
                store, nxt, started_at=6.0, started_boot=None, boot_id="b", spec="{}", env_key="k"
            )
        )

    workers = [threading.Thread(target=claim) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    won = [c for c in claims if c is not None]
    assert len(won) == 1
    row = get_process(store, nxt)
    assert row is not None and (row.state, row.started_at, row.env_key) == ("starting", 6.0, "k")
    assert not cancel_run(store, nxt)  # started: a stop signals it instead
    assert hurry_run(store, nxt, 7.0) is None


def test_a_stop_cancels_a_pending_run_before_its_claim(store: Store) -> None:
    pid = first_run(store)
    with store.write() as conn:
        nxt = insert_next_run(conn, pid, NextRun(5.0, "restart", after_thread=True), 4.0)
    hurried = hurry_run(store, nxt, 4.5)
    assert hurried is not None
    assert (hurried.due_at, hurried.cause, hurried.after_thread) == (4.5, "manual", False)
    assert cancel_run(store, nxt)
    claimed = claim_run(
        store, nxt, started_at=6.0, started_boot=None, boot_id="b", spec="{}", env_key="k"
    )
    assert claimed is None and get_process(store, nxt) is None
    assert [r.run_no for r in chain_runs(store, pid)] == [1]


def test_a_persons_request_is_noted_on_a_running_run(store: Store) -> None:
    pid = first_run(store)
    row = request_stop(store, pid, "restart")
    assert row is not None and row.stop_request == "restart"
    seen: list[RunHistory] = []
    commit_fires(
        store,
        pid,
        [],
        nothing,
        rate=DEFAULT_RATE,
        expect_offset=0,
        end=end(3.0),
        restart=restarting(3.0, seen),  # type: ignore[arg-type]
    )
    assert seen[0].stop_request == "restart"
    assert request_stop(store, pid, "stop") is None  # ended


def test_names_and_threads_of_a_chain(store: Store) -> None:
    a = first_run(store, "worker", 1.0)
    b = first_run(store, "worker", 2.0)
    first_run(store, "other", 3.0)
    hook = ["exit"]

    def spawn(given: PlanInput) -> FirePlan:
        thread = NewThread("on_exit", 1, "sys", "msg", 3.0, hook="h")
        return FirePlan([FireWrite(hook[0], "h", "on_exit", 3.0, "exit 1", 1, None, thread)], {})

    done = commit_fires(
        store,
        a,
        hook,
        spawn,
        rate=DEFAULT_RATE,
        expect_offset=0,
        end=end(3.0),
        restart=restarting(4.0),  # type: ignore[arg-type]
    )
    assert done.next_run is not None
    # The newest run of each chain of that name, in the order the chains' newest started.
    assert [r.id for r in runs_named(store, "worker")] == [b, done.next_run]
    pending = get_process(store, done.next_run)
    assert pending is not None
    assert unfinished_exit_threads(store, pending) == 1  # after_thread waits for it
    with store.write() as conn:
        conn.execute(text("UPDATE thread SET status = 'completed'"))
    assert unfinished_exit_threads(store, pending) == 0


# A state database as schema 5 left it: processes without chains.
_SCHEMA_5_ROWS = [
    """INSERT INTO process (id, name, command, argv, cwd, state, boot_id, started_at, depth,
    log_offset, log_skipping, log_archived, log_punched, log_new_offset, log_new_skipping)
    VALUES (7, 'old', 'old', '["old"]', '/', 'exited', '', 1.0, 0, 42, FALSE, 0, 0, 0, FALSE)""",
]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_an_older_database_gains_chains_and_keeps_its_rows(
    db_url: str | None, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}" if db_url is None else db_url
    Store(target_for(tmp_path / "state.db", db_url), timeout=10.0).close()
    engine = create_engine(url)
    with engine.begin() as conn:  # back to schema 5: no run columns, no index, version 5
        conn.execute(text("DROP INDEX ux_process_run"))
        for column in ("first_id", "run_no", "cause", "due_at", "after_thread", "stop_request"):
            conn.execute(text(f"ALTER TABLE process DROP COLUMN {column}"))
        conn.execute(text("UPDATE meta SET value = '5'"))
        for stmt in _SCHEMA_5_ROWS:
            conn.execute(text(stmt))
    engine.dispose()
    store = Store(target_for(tmp_path / "state.db", db_url), timeout=10.0)
    try:
        old = get_process(store, 7)
        assert old is not None and (old.first_id, old.run_no, old.cause) == (7, 1, "run")
        assert old.log_offset == 42
        with store.write() as conn:
            insert_next_run(conn, 7, NextRun(2.0, "manual"), 2.0)
        with pytest.raises(StateError, match="already recorded"), store.write() as conn:
            insert_next_run(conn, 7, NextRun(2.0, "manual"), 2.0)
    finally:
        store.close()
