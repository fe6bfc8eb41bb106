"""state/processes.py on a real database, SQLite and PostgreSQL alike (the `store` fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from state.db import Store, open_state_store
from state.fires import FirePlan, PlanInput, commit_fires
from state.processes import (
    LogPosition,
    NewProcess,
    ProcessEnd,
    ProcessRecord,
    TailState,
    active_processes,
    create_process,
    forget_process,
    get_process,
    list_processes,
    mark_running,
)
from state.ratelimit import DEFAULT_RATE
from state.settings import store_settings
from supervise.errors import StateError


def new(name: str, started_at: float, **kw: object) -> NewProcess:
    return NewProcess(
        name=name,
        command=name,
        argv=json.dumps([name]),
        cwd="/tmp",
        boot_id="boot",
        started_at=started_at,
        **kw,  # type: ignore[arg-type]
    )


def spec_of(row: ProcessRecord) -> str:
    return json.dumps({"id": row.id, "name": row.name})


def test_create_writes_the_launch_record_naming_its_id(store: Store) -> None:
    row = create_process(store, new("a", 100.0, depth=2, env_key="k"), spec_of)
    assert row.state == "starting" and row.depth == 2 and row.env_key == "k"
    assert row.spec is not None and json.loads(row.spec) == {"id": row.id, "name": "a"}
    assert get_process(store, row.id) == row
    assert row.tail == TailState(LogPosition(), LogPosition(), 0, 0)
    assert get_process(store, row.id + 1) is None


def test_a_failing_launch_record_leaves_no_row(store: Store) -> None:
    def broken(_: ProcessRecord) -> str:
        raise ValueError("cannot write the record")

    with pytest.raises(ValueError):
        create_process(store, new("a", 1.0), broken)
    assert list_processes(store) == []


def test_lists_are_in_the_order_things_started(store: Store) -> None:
    late = create_process(store, new("late", 300.0), spec_of)
    early = create_process(store, new("early", 100.0), spec_of)
    tie_a = create_process(store, new("tie-a", 200.0), spec_of)
    tie_b = create_process(store, new("tie-b", 200.0), spec_of)
    assert [p.name for p in list_processes(store)] == ["early", "tie-a", "tie-b", "late"]
    assert early.id > late.id and tie_b.id > tie_a.id


def test_mark_running_saves_pids_and_never_revives_an_ended_process(store: Store) -> None:
    a = create_process(store, new("a", 1.0), spec_of)
    running = mark_running(store, a.id, pid=10, pid_started=1.5, shim_pid=9, shim_started=1.25)
    assert (running.state, running.pid, running.pid_started) == ("running", 10, 1.5)
    assert (running.shim_pid, running.shim_started) == (9, 1.25)

    # The daemon saw it end before the CLI wrote its pids: it stays exited.
    b = create_process(store, new("b", 2.0), spec_of)
    end = ProcessEnd("exited", "success", 3.0, exit_code=0, pid=20)
    commit_fires(store, b.id, [], _never, rate=DEFAULT_RATE, expect_offset=0, end=end)
    late = mark_running(store, b.id, pid=20, pid_started=None, shim_pid=19, shim_started=None)
    assert (late.state, late.exit_code, late.result, late.ended_at) == ("exited", 0, "success", 3.0)
    assert late.shim_pid == 19

    with pytest.raises(StateError, match="vanished"):
        mark_running(store, b.id + 100, pid=1, pid_started=None, shim_pid=1, shim_started=None)


def test_active_processes_are_those_not_known_to_have_ended(store: Store) -> None:
    ids = [create_process(store, new(n, float(i)), spec_of).id for i, n in enumerate("abcd")]
    mark_running(store, ids[1], pid=1, pid_started=None, shim_pid=2, shim_started=None)
    lost = ProcessEnd("lost", "lost", 9.0, end_reason="run dir deleted")
    commit_fires(store, ids[2], [], _never, rate=DEFAULT_RATE, expect_offset=0, end=lost)
    forget_process(store, ids[3])
    assert [p.id for p in active_processes(store)] == ids[:2]
    gone = get_process(store, ids[2])
    assert gone is not None
    assert (gone.state, gone.result, gone.end_reason) == ("lost", "lost", "run dir deleted")
    assert get_process(store, ids[3]) is None


def test_the_tail_position_round_trips(store: Store) -> None:
    a = create_process(store, new("a", 1.0), spec_of)
    tail = TailState(LogPosition(4096, 77, "h1", True), LogPosition(12, 78, None, False), 10, 512)
    commit_fires(store, a.id, [], _never, rate=DEFAULT_RATE, expect_offset=0, tail=tail)
    got = get_process(store, a.id)
    assert got is not None and got.tail == tail
    assert got.log_skipping is True and got.log_new_skipping is False  # real booleans


def test_a_read_only_store_of_a_missing_sqlite_file_reads_empty(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    reader = open_state_store(db, store_settings(), readonly=True)
    assert list_processes(reader) == [] and get_process(reader, 1) is None
    assert not db.exists()  # reading created nothing
    writer = open_state_store(db, store_settings())
    a = create_process(writer, new("a", 1.0), spec_of)
    again = open_state_store(db, store_settings(), readonly=True)
    assert [p.id for p in list_processes(again)] == [a.id]


def _never(_: PlanInput) -> FirePlan:
    raise AssertionError("no keys: the planner is not asked")
