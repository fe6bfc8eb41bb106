"""A run dir deleted under a running process: the process becomes lost, with the reason, at
once and across a restart, never "running" forever (issue #13, item 10)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path

from conftest import Daemon, Env, match_hook, wait_until

SCRIPT = "import time\nprint('ready', flush=True)\ntime.sleep(120)"


def _hooks(env: Env) -> Path:
    hooks = [match_hook("^ready", "ready"), {"name": "end", "on_exit": None, "instructions": "x"}]
    return env.write("hooks.json", json.dumps({"hooks": hooks}))


def _child(env: Env, pid: int) -> int:
    run = env.home / "runs" / str(pid)
    path = run / "child.pid"
    return int(wait_until(lambda: path.exists() and path.read_text(), what=f"{path} written"))


def test_deleted_run_dir_makes_the_process_lost_with_the_reason(env: Env, daemon: Daemon) -> None:
    pid = env.run_d(sys.executable, "-c", SCRIPT, hooks=_hooks(env))["id"]
    child = _child(env, pid)
    # The daemon has read the process (its hooks are known) once the first line fired.
    env.wait_fires(1, what="the ready fire")
    shutil.rmtree(env.home / "runs" / str(pid))

    p = env.wait_state(pid, "lost")
    assert (p["result"], p["reason"], p["exit_code"]) == ("lost", "run dir deleted", None)
    assert "lost (run dir deleted)" in daemon.log.read_text()
    assert f"pid {child} still runs" in daemon.log.read_text()
    assert "(run dir deleted)" in env.cli("ps", check=True).stdout
    # Its hooks were known: on_exit for any code fires as for any lost process.
    end = [f for f in env.fires() if f["hook"] == "end"]
    assert len(end) == 1 and end[0]["spawned"]
    stop = env.cli("stop", str(pid))
    assert stop.returncode != 0 and "state lost" in stop.stderr
    os.killpg(child, signal.SIGKILL)  # left running on purpose: supervise kills nothing lost


def test_run_dir_deleted_while_the_daemon_is_down(env: Env, daemon: Daemon) -> None:
    pid = env.run_d(sys.executable, "-c", SCRIPT, hooks=_hooks(env))["id"]
    _child(env, pid)
    env.wait_fires(1, what="the ready fire")
    daemon.kill(signal.SIGKILL)
    shutil.rmtree(env.home / "runs" / str(pid))
    daemon.start()

    p = env.wait_state(pid, "lost")
    assert (p["result"], p["reason"]) == ("lost", "run dir deleted")
    # Its hooks are the launch record in the DB, not spec.json: on_exit for any code fires
    # once, as for any lost process, though the run dir is gone.
    fires = env.wait_fires(2, what="the on_exit fire")
    assert sorted(f["hook"] for f in fires) == ["end", "ready"]
    assert "run dir deleted" in daemon.log.read_text()
    # And it stays settled across another restart: nothing fires again.
    daemon.kill(signal.SIGKILL)
    daemon.start()  # ready: recovery has run, and would have fired again
    assert env.process(pid)["state"] == "lost"
    assert len(env.fires()) == 2
