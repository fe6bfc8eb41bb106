"""Restarts through the real CLI and a real daemon: a crash loop under backoff with the
daemon SIGKILLed in between is restarted exactly as often as the policy says, each run with
its own exit, output and fires; a person's stop ends the loop; `restart`, and `stop`, `logs`
and `fires` by name; restart.after_thread waits for the exit's thread; `daemon stop`."""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from conftest import Daemon, Env, wait_for, wait_until
from test_threads_e2e import script, settled

if TYPE_CHECKING:
    from state.processes import ProcessRecord

CRASH = "import sys, time\nprint('run', flush=True)\ntime.sleep(0.2)\nsys.exit(3)"


def crash_hooks(env: Env, restart: dict[str, Any], name: str = "hooks.json") -> Path:
    return env.write(
        name,
        json.dumps(
            {
                "restart": restart,
                "hooks": [
                    {"name": "end", "on_exit": {}, "instructions": "x"},
                    {"name": "loop", "on_crash_loop": {}, "instructions": "why?"},
                ],
                "limits": {"rate": "1000/minute"},
            }
        ),
    )


def chain(env: Env, first: int) -> list[ProcessRecord]:
    return sorted((p for p in env.seen_processes() if p.chain == first), key=lambda p: p.run_no)


def wait_chain(
    env: Env, first: int, done: Callable[[list[ProcessRecord]], object], what: str
) -> list[ProcessRecord]:
    return wait_for(lambda: chain(env, first), done, what=what, timeout=60)


def newest(runs: list[ProcessRecord]) -> ProcessRecord:
    return runs[-1]


def check_crash_loop(env: Env, first: int, restarts: int, delays: list[float]) -> None:
    """Exactly 1 + `restarts` runs, each exited 3 once with its own fires; the last a crash
    loop with one on_crash_loop fire; each run started its backoff after the one before."""
    runs = wait_chain(
        env, first, lambda rs: rs and newest(rs).state == "crash-loop", "the crash loop"
    )
    assert [r.run_no for r in runs] == list(range(1, restarts + 2))
    assert [r.cause for r in runs] == ["run"] + ["restart"] * restarts
    assert [r.state for r in runs] == ["exited"] * restarts + ["crash-loop"]
    assert all(r.exit_code == 3 for r in runs)
    for before, after, delay in zip(runs, runs[1:], delays, strict=False):
        assert before.ended_at is not None
        assert after.started_at >= before.ended_at + delay - 0.05, (before, after)
    for r in runs:  # its own output: one run each
        assert (env.home / "runs" / str(r.id) / "output.log").read_text() == "run\n"
    fires = env.wait_fires(len(runs) + 1, what="every end and the crash loop")
    assert len(fires) == len(runs) + 1
    assert Counter((f["process_id"], f["hook"]) for f in fires) == Counter(
        [(r.id, "end") for r in runs] + [(runs[-1].id, "loop")]
    )
    (loop,) = [f for f in fires if f["hook"] == "loop"]
    assert loop["trigger"] == "on_crash_loop" and loop["spawned"]
    assert loop["detail"].startswith(f"crash loop: {restarts} restarts within 5m")
    assert {f["run"] for f in fires} == set(range(1, restarts + 2))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_a_crash_loop_under_backoff_is_restarted_exactly_across_daemon_kills(
    env: Env, db_url: str | None, start_daemon: Callable[[], Daemon]
) -> None:
    if db_url is not None:
        env.extra["SUPERVISE_DB_URL"] = db_url
    restart = {"policy": "on-failure", "delay": "300ms", "factor": 2, "max_delay": "1s",
               "max_restarts": 4, "within": "5m"}  # fmt: skip
    hooks = crash_hooks(env, restart)
    daemon = start_daemon()
    # Each run lives as long as `pace` says when it starts: long enough, at first, for the
    # daemon to be killed while run 2 runs, however loaded the machine.
    pace = env.write("pace", "3")
    paced = CRASH.replace("time.sleep(0.2)", "time.sleep(float(open('pace').read()))")
    first = env.run_d(sys.executable, "-c", paced, hooks=hooks, name="crashy")["id"]
    # 1. Killed while run 2 runs; run 2 crashes while no daemon runs: restarted once on return.
    runs = wait_chain(env, first, lambda rs: len(rs) >= 2 and rs[1].pid, "run 2 started")
    daemon.kill(signal.SIGKILL)
    pace.write_text("0.2")
    wait_until((env.home / "runs" / str(runs[1].id) / "exit.json").exists, what="run 2 ended")
    assert len(chain(env, first)) == 2  # nobody restarts it while the daemon is down
    daemon.start()
    # 2. Killed while run 4 waits out its backoff (recorded, not started): started once.
    wait_chain(env, first, lambda rs: len(rs) >= 4, "run 4 recorded")
    daemon.kill(signal.SIGKILL)
    daemon.start()
    check_crash_loop(env, first, 4, [0.3, 0.6, 1.0, 1.0])
    # What a person sees: one line with the run and the restarts; every run in logs.
    table = env.cli("ps", check=True).stdout
    line = next(ln for ln in table.splitlines() if "crashy" in ln)
    assert line.split()[:3] == [str(first), "crashy", "crash-loop"]
    assert line.split()[7:9] == ["5", "4"]  # RUN, RESTARTS
    logs = env.cli("logs", "crashy", check=True).stdout
    assert logs.count("run\n") == 5 and logs.count("--- supervise: run ") == 5
    assert "run 5 " in logs and "a crash loop (not restarted)" in logs
    fires = env.cli("fires", "--process", "crashy", check=True).stdout
    assert fires.count("crash loop: 4 restarts") == 1


def test_random_daemon_kills_during_a_crash_loop_restart_exactly(env: Env, daemon: Daemon) -> None:
    seed = int(os.environ.get("SUPERVISE_CHAOS_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"chaos seed: {seed} (SUPERVISE_CHAOS_SEED={seed} replays it)")
    rng = random.Random(seed)
    restart = {"policy": "always", "delay": "100ms", "factor": 1.5, "max_delay": "400ms",
               "max_restarts": 6, "within": "5m"}  # fmt: skip
    hooks = crash_hooks(env, restart)
    first = env.run_d(sys.executable, "-c", CRASH, hooks=hooks)["id"]
    for _ in range(3):  # the kills land at random points: mid-run, in backoff, mid-start
        wait_chain(env, first, bool, "the first run")
        daemon.kill(signal.SIGKILL)
        if rng.random() < 0.5:  # let what was started end while no daemon runs

            def ended() -> bool:
                runs = [env.home / "runs" / str(r.id) for r in chain(env, first)]
                return all((d / "exit.json").exists() for d in runs if (d / "child.pid").exists())

            wait_until(ended, what=f"the runs ended while the daemon was down (seed {seed})")
        daemon.start()
        time.sleep(rng.uniform(0.0, 0.8))
    check_crash_loop(env, first, 6, [0.1, 0.15, 0.225, 0.3375, 0.4, 0.4])


def test_a_stop_ends_the_loop_and_restart_brings_it_back_by_name(env: Env, daemon: Daemon) -> None:
    sleeper = "import time\nprint('up', flush=True)\ntime.sleep(60)"
    # Policy always from the command line, into the launch record.
    r = env.cli("run", "-d", "--json", "--name", "svc2", "--restart", "always",
                "--restart-delay", "200ms", "--", sys.executable, "-c", sleeper)  # fmt: skip
    svc = json.loads(r.stdout)["id"]
    # A kill by someone else is a crash: restarted after 200 ms.
    wait_until(lambda: chain(env, svc)[0].pid, what="run 1's pid")
    os.killpg(chain(env, svc)[0].pid or 0, signal.SIGKILL)
    runs = wait_chain(env, svc, lambda rs: len(rs) == 2 and rs[1].pid, "run 2 started")
    assert runs[0].signal == "SIGKILL" and runs[1].cause == "restart"
    # A person's stop: no restart follows, whatever the policy.
    r = env.cli("stop", "svc2", "--grace", "2", check=True)
    assert f"process {svc} (run 2) stopped: killed by SIGTERM" in r.stdout
    runs = wait_chain(env, svc, lambda rs: rs[-1].state == "exited", "run 2 recorded")
    assert len(runs) == 2 and runs[1].stop_request == "stop"
    # `restart` by name starts run 3 (a person's), and it runs.
    r = env.cli("restart", "svc2", check=True)
    runs = chain(env, svc)
    assert [x.cause for x in runs] == ["run", "restart", "manual"]
    assert f"process {svc} (svc2) restarted: run 3 is process {runs[2].id} (pid " in r.stdout
    # `restart` of a running one: stopped first, then run 4 at once.
    r = env.cli("restart", "svc2", "--grace", "2", check=True)
    runs = chain(env, svc)
    assert [x.cause for x in runs][-1] == "manual" and len(runs) == 4
    assert runs[2].signal == "SIGTERM" and runs[2].stop_request == "restart"
    logs = env.cli("logs", "svc2", check=True).stdout
    assert logs.count("up\n") == 4 and "run 4 (process" in logs
    # Only run 1 (the shim's sh says how a signal ended it).
    assert env.cli("logs", "svc2", "--run", "1", check=True).stdout == "up\nKilled\n"
    # A stop while its restart is pending (backoff) cancels it.
    os.killpg(runs[3].pid or 0, signal.SIGKILL)
    wait_chain(env, svc, lambda rs: len(rs) == 5 and rs[-1].pid, "run 5 started")
    os.killpg(chain(env, svc)[4].pid or 0, signal.SIGKILL)
    wait_chain(env, svc, lambda rs: len(rs) == 6, "run 6 recorded")
    r = env.cli("stop", "svc2")
    if "cancelled" in r.stdout:  # caught in its 200 ms backoff
        assert len(chain(env, svc)) == 5
    else:  # it had started already: stopped as any run
        assert "stopped" in r.stdout
    assert all(x.state != "backoff" for x in chain(env, svc))


def test_names_resolve_to_the_newest_live_process_or_say_which(env: Env, daemon: Daemon) -> None:
    sleeper = "import time; time.sleep(60)"
    a = env.run_d(sys.executable, "-c", sleeper, name="twin")["id"]
    b = env.run_d(sys.executable, "-c", sleeper, name="twin")["id"]
    r = env.cli("stop", "twin")
    assert r.returncode == 2
    assert f"2 live processes are named 'twin': {a} (running), {b} (running)" in r.stderr
    env.cli("stop", str(a), "--grace", "2", check=True)
    env.wait_state(a, "exited")
    r = env.cli("stop", "twin", "--grace", "2", check=True)  # the one still live
    assert f"process {b} stopped" in r.stdout
    assert env.cli("logs", "nobody").returncode == 2
    assert "no process named 'nobody'" in env.cli("restart", "nobody").stderr


def test_after_thread_waits_for_the_exits_thread_to_fix_it(env: Env, daemon: Daemon) -> None:
    # The job fails until fixed.txt exists; the exit's thread writes it (after a person's
    # approval); only then does the next run start, and it succeeds.
    job = env.write("job.py", "import os, sys\nsys.exit(0 if os.path.exists('fixed.txt') else 1)\n")
    turns = script(
        env,
        [
            {
                "tool_calls": [
                    {"name": "Write", "arguments": {"path": "fixed.txt", "content": "ok"}}
                ]
            },
            {"content": "fixed"},
        ],
    )
    hooks = env.write(
        "hooks.yaml",
        json.dumps(
            {
                "restart": {"policy": "on-failure", "delay": "100ms", "after_thread": True},
                "hooks": [{"name": "fix", "on_exit": {"exit_codes": [1]}, "instructions": "x"}],
                "agent": {"model": f"scripted:{turns.name}", "permissions": {"ask": ["Write"]}},
            }
        ),
    )
    first = env.run_d(sys.executable, str(job), hooks=hooks)["id"]
    settled(env, "t1", "waiting_approval")
    runs = wait_chain(env, first, lambda rs: len(rs) == 2, "run 2 recorded")
    assert runs[1].state == "backoff" and runs[1].after_thread
    assert "backoff (waiting for its threads)" in env.cli("ps", check=True).stdout
    env.cli("approve", "t1", check=True)
    t = settled(env, "t1", "completed")
    runs = wait_chain(env, first, lambda rs: rs[-1].state == "exited", "run 2 ended")
    assert [(r.run_no, r.exit_code) for r in runs] == [(1, 1), (2, 0)]
    assert t["ended_at"] is not None
    from datetime import datetime

    assert runs[1].started_at >= datetime.fromisoformat(t["ended_at"]).timestamp() - 0.01


def test_bad_restart_values_are_exit_2_with_file_line_and_fix(env: Env) -> None:
    bad = env.write("bad.yaml", "purpose: x\nrestart:\n  policy: always\n  delay: soon\n")
    for args in (("hooks", "check", str(bad)), ("run", "--hook", str(bad), "--", "true")):
        r = env.cli(*args)
        assert r.returncode == 2, r
        assert f"{bad}:4: restart.delay must be a duration such as 1s" in r.stderr
        assert "write delay: 1s" in r.stderr
    r = env.cli("run", "--restart-delay", "2s", "--", "true")
    assert r.returncode == 2 and "--restart-delay needs a restart policy" in r.stderr
    r = env.cli("run", "--restart", "sometimes", "--", "true")
    assert r.returncode == 2 and "invalid choice: 'sometimes'" in r.stderr
    assert not (env.home / "runs").exists() or not any((env.home / "runs").iterdir())


def test_daemon_stop_stops_it_and_a_pending_restart_waits_for_the_next(
    env: Env, start_daemon: Callable[[], Daemon]
) -> None:
    d = start_daemon()
    first = env.run_d(
        sys.executable, "-c", CRASH, hooks=crash_hooks(env, {"policy": "always", "delay": "5s"})
    )["id"]
    wait_chain(env, first, lambda rs: len(rs) == 2, "run 2 recorded")
    r = env.cli("daemon", "stop", check=True)
    assert "stopped; supervised processes keep running" in r.stdout
    assert d.proc is not None and d.proc.wait(10) == 0
    assert "no daemon runs" in env.cli("daemon", "stop", check=True).stdout
    assert [r.state for r in chain(env, first)] == ["exited", "backoff"]
    d.start()  # the next daemon starts it, once
    runs = wait_chain(env, first, lambda rs: len(rs) >= 2 and rs[1].pid, "run 2 started")
    assert runs[1].run_no == 2 and [r.run_no for r in runs] == list(range(1, len(runs) + 1))


@pytest.mark.parametrize("made_dir", [False, True])
def test_a_run_claimed_by_a_daemon_that_died_is_started_once(
    env: Env, start_daemon: Callable[[], Daemon], made_dir: bool
) -> None:
    from state.db import open_state_store
    from state.runs import claim_run
    from state.settings import store_settings
    from supervisor.rundir import new_env_key
    from supervisor.runspec import renumbered

    d = start_daemon()
    body = "import time\nprint('up', flush=True)\ntime.sleep(60)"
    first = env.run_d(
        sys.executable, "-c", body, hooks=crash_hooks(env, {"policy": "always", "delay": "1h"})
    )["id"]
    wait_until(lambda: chain(env, first)[0].pid, what="run 1's pid")
    os.killpg(chain(env, first)[0].pid or 0, signal.SIGKILL)
    pending = wait_chain(env, first, lambda rs: len(rs) == 2, "run 2 recorded")[1]
    d.kill(signal.SIGKILL)
    # What a daemon killed right after its claim leaves: the run `starting`, no shim (and
    # maybe its run dir, made just before it died).
    store = open_state_store(env.home / "state.db", store_settings(env.env))
    try:
        assert pending.spec is not None
        claimed = claim_run(
            store,
            pending.id,
            started_at=time.time(),
            started_boot=None,
            boot_id=pending.boot_id,
            spec=renumbered(pending.spec, pending.id, time.time()),
            env_key=new_env_key(),
        )
        assert claimed is not None and claimed.state == "starting"
    finally:
        store.close()
    if made_dir:
        (env.home / "runs" / str(pending.id)).mkdir(mode=0o700)
    d.start()
    runs = wait_chain(env, first, lambda rs: rs[1].state == "running" and rs[1].pid, "run 2 up")
    assert len(runs) == 2
    out = env.home / "runs" / str(runs[1].id) / "output.log"
    wait_until(lambda: out.read_text() == "up\n", what="run 2's output")
    time.sleep(1.0)  # a second start would show by now
    assert out.read_text() == "up\n" and len(chain(env, first)) == 2


def test_a_restart_that_cannot_start_is_a_lost_run_and_counts_to_the_loop(
    env: Env, daemon: Daemon
) -> None:
    gone = env.work / "gone"
    gone.mkdir()
    r = env.cli("run", "-d", "--json", "--cwd", str(gone), "--hook",
                str(crash_hooks(env, {"policy": "on-failure", "delay": "100ms",
                                      "max_restarts": 2, "within": "5m"})),
                "--", sys.executable, "-c", "import os, sys; os.rmdir(os.getcwd()); sys.exit(1)",
                check=True)  # fmt: skip
    first = json.loads(r.stdout)["id"]
    runs = wait_chain(env, first, lambda rs: rs[-1].state == "crash-loop", "the crash loop")
    assert [(x.state, x.result, x.end_reason) for x in runs] == [
        ("exited", "exit-code", None),
        ("lost", "lost", "could not start"),
        ("crash-loop", "lost", "could not start"),
    ]
    assert "does not exist any more" in daemon.wait_log("run 2 could not start")
    assert "- (could not start)" in env.cli("ps", check=True).stdout
