"""The real CLI and daemon on each back end (SQLite file, PostgreSQL via SUPERVISE_DB_URL):
hooks fire, a SIGKILLed daemon restarts without missing or repeating a fire, `ps` lists."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable

from conftest import Daemon, Env, match_hook, wait_until


def on(env: Env, db_url: str | None) -> Env:
    if db_url is not None:
        env.extra["SUPERVISE_DB_URL"] = db_url
    return env


def test_hooks_fire_exactly_once_across_daemon_kills(
    env: Env, db_url: str | None, start_daemon: Callable[[], Daemon]
) -> None:
    env = on(env, db_url)
    hooks = env.write(
        "hooks.json",
        json.dumps(
            {
                "hooks": [
                    match_hook("^tick", "tick", 1000),
                    {"name": "done", "on_exit": {"exit_codes": [3]}, "instructions": "y"},
                ],
                "limits": {"rate": "1000/minute"},
            }
        ),
    )
    daemon = start_daemon()
    script = (
        "import sys, time\nfor i in range(30):\n    print(f'tick {i}', flush=True)\n"
        "    time.sleep(0.05)\nsys.exit(3)"
    )
    pid = env.run_d(sys.executable, "-c", script, hooks=hooks, name="ticker")["id"]
    for n in (5, 15):  # killed mid-run, while it fires; what it missed is read on restart, once
        env.wait_fires(n, what=f"tick {n - 1} fired")
        daemon.kill(signal.SIGKILL)
        daemon.start()
    p = env.wait_state(pid, "exited")
    assert (p["exit_code"], p["name"], p["state"]) == (3, "ticker", "exited")
    fires = env.fires()  # the end commits with its fire, and after every other fire
    # Each once; a match's time is when it was read, so the exit may list before late ticks.
    ticks = [f["detail"] for f in fires if f["hook"] == "tick"]
    assert ticks == [f"tick {i}" for i in range(30)]
    assert [f["detail"] for f in fires if f["hook"] == "done"] == ["exit code 3"]
    assert len(fires) == 31
    assert all(f["spawned"] and f["process_id"] == pid for f in fires)
    ps = env.ps()
    assert [q["id"] for q in ps["processes"]] == [pid]
    assert sorted(t["id"] for t in ps["threads"]) == sorted(f["thread_id"] for f in fires)
    table = env.cli("ps", check=True).stdout
    assert f"{pid}   ticker" in table and "exited" in table
    assert "tick 29" in env.cli("fires", "--process", str(pid), check=True).stdout


def test_an_exit_while_the_daemon_is_down_fires_on_restart(
    env: Env, pg_url: str, start_daemon: Callable[[], Daemon]
) -> None:
    # On PostgreSQL; on SQLite, test_recovery.py's test of it checks more.
    env = on(env, pg_url)
    hooks = env.write(
        "hooks.json",
        json.dumps(
            {"hooks": [{"name": "four", "on_exit": {"exit_codes": [4]}, "instructions": "y"}]}
        ),
    )
    daemon = start_daemon()
    script = "import time, sys; time.sleep(0.5); sys.exit(4)"
    pid = env.run_d(sys.executable, "-c", script, hooks=hooks)["id"]
    daemon.kill(signal.SIGKILL)
    wait_until((env.home / "runs" / str(pid) / "exit.json").exists, what="exit.json")
    daemon.start()
    assert env.wait_state(pid, "exited")["exit_code"] == 4
    ((hook, code),) = [(f["hook"], f["exit_code"]) for f in env.fires()]
    assert (hook, code) == ("four", 4)


def test_the_database_is_where_the_settings_say(env: Env, db_url: str | None) -> None:
    # The SQLite file exists only on the SQLite back end: PostgreSQL holds it all. The CLI
    # alone records a run (no daemon: the tests above run one on each back end).
    env = on(env, db_url)
    env.extra["SUPERVISE_AUTOSTART"] = "0"
    env.run_d(sys.executable, "-c", "pass")
    assert [p["id"] for p in env.ps()["processes"]] == [1]
    assert (env.home / "state.db").exists() == (db_url is None)
