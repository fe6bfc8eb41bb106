"""Restart recovery with a real daemon killed by SIGKILL: nothing missed, nothing repeated."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon, Env, wait_until


def _hooks(env: Env, hooks: list[dict[str, Any]], **top: Any) -> Path:
    return env.write("hooks.json", json.dumps({"hooks": hooks, **top}))


def _exit_file(env: Env, pid: int) -> Path:
    return env.home / "runs" / str(pid) / "exit.json"


def _t(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _child_pid(run: Path) -> int:
    path = run / "child.pid"
    return int(wait_until(lambda: path.exists() and path.read_text(), what=f"{path} written"))


def test_exit_while_daemon_down_fires_on_restart_with_real_code(env: Env, daemon: Daemon) -> None:
    hooks = _hooks(
        env,
        [
            {"name": "mark", "on_output_match": {"pattern": "marker"}, "instructions": "x"},
            {"name": "four", "on_exit": {"exit_codes": [4]}, "instructions": "y"},
        ],
    )
    script = "import time, sys\ntime.sleep(0.8)\nprint('marker')\nsys.exit(4)"
    pid = env.run_d(sys.executable, "-c", script, hooks=hooks)["id"]
    daemon.kill(signal.SIGKILL)
    wait_until(_exit_file(env, pid).exists, what="exit.json")
    time.sleep(1.0)  # the scenario, not a wait: the marker is read a second after the exit
    restarted = time.time()
    daemon.start()
    p = env.wait_state(pid, "exited")
    assert (p["exit_code"], p["result"]) == (4, "exit-code")
    # What it printed with no daemon running is all there.
    assert env.cli("logs", str(pid), check=True).stdout == "marker\n"
    fires = env.fires()
    # In the order they happened: the line was printed before the exit, and its fire is
    # stamped no later than the exit although the restarted daemon read it after.
    assert [(f["hook"], f["exit_code"]) for f in fires] == [("mark", None), ("four", 4)]
    assert "exit code: 4 — failure" in env.cli("thread", "show", "t2").stdout
    # A fire is stamped when its trigger happened: the exit when it happened, and the line,
    # read after the exit though written before it, no later than the exit. A thread is
    # stamped when it was created: at the restart, after both.
    mark, four = (_t(f["at"]) for f in fires)
    assert four == _t(p["ended_at"]) < restarted
    assert mark <= four
    t1, t2 = (env.cli("thread", "show", t, "--json", check=True).stdout for t in ("t1", "t2"))
    created = [_t(json.loads(t)["created_at"]) for t in (t1, t2)]
    assert restarted <= created[0] <= created[1]


def test_lost_process_fires_only_any_code_hooks(env: Env, daemon: Daemon) -> None:
    hooks = _hooks(
        env,
        [
            {"name": "any", "on_exit": None, "instructions": "x"},
            {"name": "one", "on_exit": {"exit_codes": [1]}, "instructions": "y"},
        ],
    )
    pid = env.run_d(sys.executable, "-c", "import time; time.sleep(60)", hooks=hooks)["id"]
    run = env.home / "runs" / str(pid)
    child = _child_pid(run)
    shim = int((run / "shim.pid").read_text())
    daemon.kill(signal.SIGKILL)
    os.kill(shim, signal.SIGKILL)  # the machine "reboots": shim and child die, no exit record
    os.killpg(child, signal.SIGKILL)
    daemon.start()
    p = env.wait_state(pid, "lost")
    assert p["result"] == "lost" and p["exit_code"] is None
    fires = {f["hook"]: f for f in env.fires()}
    assert fires["any"]["spawned"] and fires["any"]["exit_code"] is None
    assert (fires["one"]["spawned"], fires["one"]["reason"]) == (False, "lost")
    assert "exit code unknown" in env.cli("thread", "show", fires["any"]["thread_id"]).stdout


def test_shim_killed_while_daemon_runs_is_noticed(env: Env, daemon: Daemon) -> None:
    hooks = _hooks(env, [{"name": "any", "on_exit": None, "instructions": "x"}])
    pid = env.run_d(sys.executable, "-c", "import time; time.sleep(60)", hooks=hooks)["id"]
    run = env.home / "runs" / str(pid)
    child = _child_pid(run)
    env.wait_state(pid, "running")  # the daemon knows the process before its shim dies
    os.kill(int((run / "shim.pid").read_text()), signal.SIGKILL)
    os.killpg(child, signal.SIGKILL)
    env.wait_state(pid, "lost")
    assert env.fires()[0]["spawned"]


def test_new_boot_id_means_old_pids_are_dead(env: Env, daemon: Daemon) -> None:
    pid = env.run_d(sys.executable, "-c", "import time; time.sleep(60)")["id"]
    env.wait_state(pid, "running")
    daemon.kill(signal.SIGKILL)
    with sqlite3.connect(env.home / "state.db") as db:
        db.execute("update process set boot_id = 'an-earlier-boot'")
    daemon.start()
    assert env.wait_state(pid, "lost")["result"] == "lost"


def test_timeout_is_rearmed_with_the_time_left(env: Env, daemon: Daemon) -> None:
    # 6 s, not 2: a daemon restart on a busy machine took over 2 s, and the test then failed.
    hooks = _hooks(env, [{"name": "slow", "on_timeout": {"seconds": 6.0}, "instructions": "x"}])
    started = time.time()
    pid = env.run_d(sys.executable, "-c", "import time; time.sleep(60)", hooks=hooks)["id"]
    daemon.kill(signal.SIGKILL)
    daemon.start()  # ready: recovery has run, and would have fired a due timeout
    if time.time() - started < 5.0:  # a restart slower than that (a loaded machine) may fire
        assert env.fires() == []  # not fired at restart: time is left
    env.wait_fires(1, what="the timeout's fire")
    assert time.time() - started >= 6.0
    daemon.kill(signal.SIGKILL)
    daemon.start()
    assert len(env.fires()) == 1  # and never again after another restart
    env.cli("stop", str(pid), "--grace", "1", check=True)


def test_timeout_past_its_deadline_fires_at_restart(
    env: Env, daemon: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooks = _hooks(env, [{"name": "slow", "on_timeout": {"seconds": 0.5}, "instructions": "x"}])
    daemon.kill(signal.SIGKILL)
    monkeypatch.setenv("SUPERVISE_AUTOSTART", "0")  # no daemon while the deadline passes
    pid = env.run_d(sys.executable, "-c", "import time; time.sleep(60)", hooks=hooks)["id"]
    started = _t(env.process(pid)["started_at"])
    time.sleep(max(0.0, started + 1.0 - time.time()))  # the scenario: the deadline passes
    assert env.fires() == []
    restarted = time.time()
    daemon.start()  # ready: recovery has fired what was due
    (fire,) = env.fires()
    # Stamped with its deadline, not with the restart that found it passed.
    assert abs(_t(fire["at"]) - (started + 0.5)) < 0.2
    env.cli("stop", str(pid), "--grace", "1", check=True)
    created = json.loads(env.cli("thread", "show", "t1", "--json", check=True).stdout)
    assert _t(created["created_at"]) >= restarted


def test_a_launch_the_cli_never_finished_becomes_lost(env: Env, daemon: Daemon) -> None:
    # The CLI recorded the process and its run dir, then died before starting the shim.
    from state.db import open_state_store
    from state.processes import NewProcess, ProcessRecord, create_process
    from state.settings import store_settings
    from supervisor.hookspec import Hook, HookFile, OnExit
    from supervisor.rundir import RunDir
    from supervisor.tracker import STARTING_GRACE_S

    store = open_state_store(env.home / "state.db", store_settings())
    new = NewProcess(
        name="ghost",
        command="ghost",
        argv='["ghost"]',
        cwd=str(env.work),
        boot_id="",
        started_at=time.time() - STARTING_GRACE_S + 1.0,
    )
    hooks = HookFile(hooks=(Hook("any", OnExit(None), "x"),))

    def first_record(row: ProcessRecord) -> str:
        # A record as the first versions wrote it (no newer fields).
        record = {"id": row.id, "name": "ghost", "argv": ["ghost"], "cwd": str(env.work)}
        return json.dumps({**record, "hooks": hooks.to_json()})

    row = create_process(store, new, first_record)
    run = RunDir(env.home / "runs" / str(row.id))
    run.path.mkdir()
    run.write_spec(first_record(row))
    p = env.wait_state(row.id, "lost")
    assert p["result"] == "lost"
    assert env.fires()[0]["spawned"]
