"""`supervise prune`: ended runs' records and run dirs go, by age or count; a running run, a
pending restart, a run with an unfinished thread never; `--dry-run` changes nothing. The
state half (state/prune.py) on both back ends with the `store` fixture."""

from __future__ import annotations

import json
import select as fdselect
import signal
import sqlite3
import subprocess
import sys
from typing import Any

import pytest
from conftest import Daemon, Env, wait_for
from sqlalchemy import func, select, text

from state import tables as t
from state.db import Store
from state.fires import FirePlan, FireWrite, PlanInput, RestartPlan, commit_fires
from state.processes import NewProcess, ProcessEnd, ProcessRecord, create_process, get_process
from state.prune import prune_run, prune_view
from state.ratelimit import DEFAULT_RATE
from state.runs import NextRun
from state.threads import NewThread
from supervisor.pruning import Rule, choose

# -- the state half ---------------------------------------------------------------------------


def started(store: Store, name: str = "p", at: float = 1.0) -> int:
    new = NewProcess(name, name, f'["{name}"]', "/tmp", "boot", at)
    return create_process(store, new, lambda row: f'{{"id": {row.id}}}').id


def nothing(given: PlanInput) -> FirePlan:
    return FirePlan([], dict(given.counters))


def spawning(key: str) -> Any:
    def plan(_given: PlanInput) -> FirePlan:
        thread = NewThread("on_exit", 1, "sys", "msg", 3.0, hook="h")
        return FirePlan([FireWrite(key, "h", "on_exit", 3.0, "exit 1", 1, None, thread)], {})

    return plan


def end(
    store: Store, pid: int, at: float, plan: Any = nothing, restart: Any = None, key: str = ""
) -> Any:
    done = ProcessEnd("exited", "exit-code", at, exit_code=1)
    return commit_fires(
        store,
        pid,
        [key] if key else [],
        plan,
        rate=DEFAULT_RATE,
        expect_offset=0,
        end=done,
        restart=restart,
    )


def counts(store: Store) -> dict[str, int]:
    with store.read() as conn:
        return {
            name: int(conn.execute(select(func.count()).select_from(table)).scalar_one())
            for name, table in [
                ("process", t.process),
                ("fire", t.fire),
                ("thread", t.thread),
                ("entry", t.entry),
                ("hook_counter", t.hook_counter),
            ]
        }


def test_a_run_goes_with_its_fires_threads_and_entries_in_one_step(store: Store) -> None:
    a, b = started(store, "a"), started(store, "b")
    end(store, a, 3.0, spawning(f"{a}:exit"), key=f"{a}:exit")
    end(store, b, 3.0, spawning(f"{b}:exit"), key=f"{b}:exit")
    with store.write() as conn:
        conn.execute(text("UPDATE thread SET status = 'completed'"))
    before = counts(store)
    assert before["thread"] == 2 and before["entry"] >= 2 and before["fire"] == 2
    pruned = prune_run(store, a, keep_live_after=0.0)
    assert pruned is not None and pruned.run.id == a and len(pruned.thread_ids) == 1
    after = counts(store)
    assert get_process(store, a) is None and get_process(store, b) is not None
    assert after["process"] == 1 and after["fire"] == 1 and after["thread"] == 1
    assert after["entry"] == before["entry"] // 2
    assert prune_run(store, a, keep_live_after=0.0) is None  # gone: nothing to do


def test_never_a_running_run_nor_one_with_an_unfinished_thread(store: Store) -> None:
    running, busy = started(store, "r"), started(store, "b")
    end(store, busy, 3.0, spawning(f"{busy}:exit"), key=f"{busy}:exit")  # its thread is queued
    assert prune_view(store).busy == frozenset({busy})
    assert prune_run(store, running, keep_live_after=1e12) is None
    assert prune_run(store, busy, keep_live_after=1e12) is None
    assert counts(store)["process"] == 2 and counts(store)["thread"] == 1


def test_a_chain_that_restarts_keeps_its_pending_and_recent_runs(store: Store) -> None:
    first = started(store, "w")

    def restart(_history: object) -> RestartPlan:
        return RestartPlan(NextRun(50.0, "restart"))

    done = end(store, first, 3.0, restart=restart)
    pending = done.next_run
    assert pending is not None
    assert prune_run(store, pending, keep_live_after=1e12) is None  # backoff: never
    assert prune_run(store, first, keep_live_after=2.0) is None  # ended after the guard
    pruned = prune_run(store, first, keep_live_after=4.0)  # older than the guard: goes
    assert pruned is not None
    row = get_process(store, pending)
    assert row is not None and row.state == "backoff"


def rec(pid: int, name: str, state: str, ended: float | None, chain: int | None = None) -> Any:
    return _Row(pid, name, state, ended, chain if chain is not None else pid)


class _Row:
    def __init__(self, pid: int, name: str, state: str, ended: float | None, chain: int) -> None:
        self.id, self.name, self.state, self.ended_at, self.chain = pid, name, state, ended, chain


def test_choose_by_age_count_and_both() -> None:
    day = 86400.0
    now = 100 * day
    rows: list[ProcessRecord] = [
        rec(1, "a", "exited", now - 10 * day),
        rec(2, "a", "exited", now - 5 * day),
        rec(3, "a", "lost", now - 1 * day),
        rec(4, "b", "exited", now - 9 * day),
        rec(5, "c", "running", None),
        rec(6, "d", "exited", now - 8 * day),  # busy: a thread runs
        rec(7, "w", "exited", now - 100.0, chain=7),  # its chain restarts: kept a day
        rec(8, "w", "backoff", None, chain=7),
        rec(9, "w", "exited", now - 2 * day, chain=9),
    ]

    def ids(rule: Rule) -> list[int]:
        return [r.id for r in choose(rows, frozenset({6}), rule, now)]

    assert ids(Rule(7 * day, None)) == [1, 4]
    assert ids(Rule(None, 1)) == [1, 2, 9]  # newest ended run of each name kept
    assert ids(Rule(6 * day, 1)) == [1]  # both: older AND beyond the newest one
    assert ids(Rule(0.0, 0)) == [1, 4, 2, 9, 3]  # oldest end first


# -- the real CLI ------------------------------------------------------------------------------


def prune(env: Env, *args: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(env.cli("prune", "--json", *args, check=True).stdout)
    return data


def ended(env: Env, name: str) -> int:
    pid = int(env.run_d("sh", "-c", "echo out", name=name)["id"])
    env.wait_state(pid, "exited")
    return pid


def test_ended_runs_go_by_age_with_their_dirs(env: Env, daemon: Daemon) -> None:
    old = ended(env, "job")
    new = ended(env, "job")
    # The first run ended an hour ago: a sleep between them would be a race on a busy machine.
    with sqlite3.connect(env.home / "state.db") as db:
        db.execute("UPDATE process SET ended_at = ended_at - 3600 WHERE id = ?", (old,))
    out = env.cli("prune", "--older-than", "30m", check=True).stdout
    assert out.splitlines()[-1].startswith("pruned 1 runs of 1 processes, ")
    assert out.rstrip().endswith("freed")
    assert [p.id for p in env.seen_processes()] == [new]
    assert not (env.home / "runs" / str(old)).exists()
    assert (env.home / "runs" / str(new) / "output.log").exists()


def test_keep_the_newest_runs_of_each_name(env: Env, daemon: Daemon) -> None:
    jobs = [ended(env, "job") for _ in range(3)]
    other = ended(env, "other")
    data = prune(env, "--keep", "1")
    assert sorted(r["id"] for r in data["runs"]) == jobs[:2]
    assert data["processes"] == 2 and data["dry_run"] is False and data["bytes"] > 0
    assert sorted(p.id for p in env.seen_processes()) == [jobs[2], other]


def test_dry_run_changes_nothing_and_a_running_run_is_never_pruned(
    env: Env, daemon: Daemon
) -> None:
    done = ended(env, "done")
    live = int(env.run_d("sleep", "60", name="live")["id"])
    env.wait_state(live, "running")
    orphan = env.home / "runs" / "9999"
    orphan.mkdir()
    before = env.cli("ps", "--json", check=True).stdout
    dry = env.cli("prune", "--older-than", "0s", "--keep", "0", "--dry-run", check=True).stdout
    assert f"would prune {done} done run 1" in dry and "live" not in dry
    assert "1 orphaned run dirs" in dry
    assert env.cli("ps", "--json", check=True).stdout == before and orphan.exists()
    data = prune(env, "--older-than", "0s", "--keep", "0")
    assert [r["id"] for r in data["runs"]] == [done] and data["orphan_dirs"] == ["9999"]
    assert [p.id for p in env.seen_processes()] == [live] and not orphan.exists()
    assert (env.home / "runs" / str(live)).is_dir()
    env.cli("stop", str(live), "--grace", "1", check=True)


def test_a_pending_restart_and_its_chain_stay(env: Env, daemon: Daemon) -> None:
    hooks = env.write("hooks.json", json.dumps({"restart": {"policy": "always", "delay": "4m"}}))
    first = int(env.run_d("sh", "-c", "exit 3", hooks=hooks, name="w")["id"])
    runs = wait_for(
        lambda: [p for p in env.seen_processes() if p.chain == first],
        lambda rs: any(p.state == "backoff" for p in rs),
        what="the pending restart",
    )
    data = prune(env, "--older-than", "0s", "--keep", "0")
    assert data["runs"] == []
    assert sorted(p.id for p in env.seen_processes()) == sorted(p.id for p in runs)
    env.cli("stop", "w", check=True)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "--older-than DURATION"),
        (["--older-than", "7x"], "'7x'"),
        (["--keep", "-1"], "--keep -1"),
        (["--keep", "many"], "invalid int value"),
    ],
)
def test_bad_arguments_exit_2_without_a_traceback(env: Env, args: list[str], says: str) -> None:
    proc = env.cli("prune", *args)
    assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr


def test_a_run_goes_with_its_settled_actions_but_not_a_pending_one(store: Store) -> None:
    from state.outbox import ActionWrite, add_actions, list_actions, settle

    a = started(store, "a")
    end(store, a, 3.0)
    add_actions(
        store,
        [
            ActionWrite("fire", "notify", "ops", "sent", process_id=a),
            ActionWrite("fire", "notify", "ops", "still trying", process_id=a),
        ],
        3.0,
    )
    sent = list_actions(store)[0]
    settle(store, sent.id, "done", 4.0, result="sent")
    assert prune_run(store, a, keep_live_after=0.0) is not None
    assert [r.title for r in list_actions(store)] == ["still trying"]


def crash_chain(env: Env, restarts: int, name: str = "w") -> list[ProcessRecord]:
    """A process restarted at once `restarts` times, then ended as a crash loop."""
    policy = {"policy": "always", "delay": "0s", "max_delay": "0s", "factor": 1,
              "max_restarts": restarts, "within": "1h"}  # fmt: skip
    hooks = env.write(f"{name}.json", json.dumps({"restart": policy}))
    first = int(env.run_d("sh", "-c", "echo out; exit 1", hooks=hooks, name=name)["id"])
    return wait_for(
        lambda: sorted((p for p in env.seen_processes() if p.chain == first), key=lambda p: p.id),
        lambda rs: rs and rs[-1].state == "crash-loop",
        what="the crash loop",
        timeout=30,
    )


def test_a_chain_whose_first_runs_were_pruned_still_answers_to_its_id(
    env: Env, daemon: Daemon
) -> None:
    runs = crash_chain(env, 3)
    first = runs[0].id
    data = prune(env, "--keep", "2")
    assert [r["id"] for r in data["runs"]] == [runs[0].id, runs[1].id]
    # The id people know (the first run's) still names the process everywhere.
    listed = env.ps()["processes"]
    assert [(p["first_id"], p["run"]) for p in listed] == [(first, 3), (first, 4)]
    table = env.cli("ps", check=True).stdout.splitlines()
    assert table[2].split()[:5] == [str(first), "w", "crash-loop", str(runs[3].pid), "1"]
    logs = env.cli("logs", str(first), check=True).stdout
    assert logs.count("out\n") == 2 and "run 3 (process" in logs and "run 4 (process" in logs
    fires = env.cli("fires", "--process", str(first))
    assert fires.returncode == 0, fires.stderr
    r = env.cli("restart", str(first), check=True)
    assert f"process {first} (w) restarted: run 5 is process" in r.stdout
    assert env.cli("logs", "99999").returncode == 2  # an id never used is still unknown


def test_a_prune_killed_midway_leaves_a_state_the_next_prune_finishes(
    env: Env, daemon: Daemon
) -> None:
    from supervisor.inotify import IN_DELETE, Inotify

    runs = crash_chain(env, 30)
    first, ids = runs[0].id, {r.id for r in runs}
    watch = Inotify()
    watch.add(str(env.home / "runs"), IN_DELETE)
    cmd = [sys.executable, "-m", "supervisor", "prune", "--keep", "0"]
    proc = subprocess.Popen(cmd, env=env.env, cwd=env.work, stdout=subprocess.DEVNULL)
    try:
        # Killed as soon as it removes anything from a run dir: mid-way through its runs.
        assert fdselect.select([watch.fd], [], [], 20)[0], "prune removed nothing"
        proc.kill()
    finally:
        proc.wait()
        watch.close()
    assert proc.returncode == -signal.SIGKILL
    left = {p.id for p in env.seen_processes()}
    assert left and left < ids, "the kill came before or after the whole prune"
    # Every run still recorded has its dir and output: only the one being removed may be
    # a dir without its records (the next prune's orphan).
    for rid in left:
        assert (env.home / "runs" / str(rid) / "output.log").exists()
    strays = [d.name for d in (env.home / "runs").iterdir() if int(d.name) not in left]
    assert len(strays) <= 1
    # What reads the state sees no fault in it.
    for args in (["ps"], ["logs", str(first)], ["fires", "--process", str(first)]):
        r = env.cli(*args)
        assert r.returncode == 0 and r.stderr == "", (args, r.stderr)
    data = prune(env, "--keep", "0")
    assert sorted(r["id"] for r in data["runs"]) == sorted(left)
    assert data["orphan_dirs"] == strays
    assert env.seen_processes() == [] and list((env.home / "runs").iterdir()) == []
    assert "Traceback" not in daemon.log.read_text()
