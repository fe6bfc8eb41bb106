"""Process hooks through the real CLI and daemon: what needs them (a real exit code and the
prompt it gives, a timer that rings while the process runs, the output bound on disk).

Which hooks fire, and with which key, for any history of output, exits, losses, timeouts and
crashes is tested in process (test_tracker.py, test_triggers.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon, Env, match_hook, wait_until


def _hooks(env: Env, body: dict[str, Any], name: str = "hooks.json") -> Path:
    return env.write(name, json.dumps(body))


def _thread(env: Env, tid: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(env.cli("thread", "show", tid, "--json", check=True).stdout)
    return data


def test_on_exit_fires_with_the_real_code_and_full_prompt(env: Env) -> None:
    hooks = _hooks(
        env,
        {
            "purpose": "Running database migration for auth module refactor",
            "context": {
                "related_files": ["migrations/0042.py", "tests/test_auth.py"],
                "original_thread_summary": "User asked for JWT.",
            },
            "hooks": [
                {"name": "failed", "on_exit": {"exit_codes": [1]}, "instructions": "Diagnose it."},
                {"name": "ok", "on_exit": {"exit_codes": [0]}, "instructions": "Run the tests."},
                {"name": "any", "on_exit": {}, "instructions": "Report."},
            ],
        },
    )
    script = "import sys\nfor i in range(80): print('step', i)\nsys.exit(1)"
    # The form users type: a trailing --hook after the command is ours.
    r = env.cli("run", "--", sys.executable, "-c", script, "--hook", str(hooks))
    assert r.returncode == 1
    assert "spawned thread t1" in r.stderr and "spawned thread t2" in r.stderr
    ps = env.ps()
    # No model is configured: the threads fail at once (test_threads_e2e covers that).
    assert [(t["hook"], t["trigger"], t["depth"]) for t in ps["threads"]] == [
        ("failed", "on_exit", 1),
        ("any", "on_exit", 1),
    ]
    proc = ps["processes"][0]
    t1 = _thread(env, "t1")
    prompt = t1["prompt"]  # the hook file's words: the system prompt's part
    assert prompt.startswith("A process hook has fired.")
    assert "Purpose: Running database migration for auth module refactor" in prompt
    assert "Instructions: Diagnose it." in prompt
    assert "Related files: migrations/0042.py, tests/test_auth.py" in prompt
    assert "Original thread summary: User asked for JWT." in prompt
    assert prompt.index("Related files") < prompt.index("Original thread summary")  # as written
    assert "step" not in prompt  # the process's output is never in the system prompt
    first = t1["entries"][0]  # the facts of the fire: the first user message
    assert first["kind"] == "user"
    message = first["text"]
    assert f"(PID {proc['pid']})" in message
    assert "Trigger: on_exit (exit code: 1 — failure)" in message
    assert "The process's output (its last 50 lines):" in message
    tail = message.split("The process's output (its last 50 lines):\n")[1].splitlines()
    assert tail[0].startswith("<process-output-") and tail[-1] == "</" + tail[0][1:]
    assert tail[1:-1] == [f"step {i}" for i in range(30, 80)]


def test_timeout_fires_once_while_running(env: Env, daemon: Daemon) -> None:
    hooks = _hooks(
        env,
        {"hooks": [{"name": "slow", "on_timeout": {"seconds": 0.5}, "instructions": "Why slow?"}]},
    )
    pid = env.run_d(sys.executable, "-c", "import time; time.sleep(30)", hooks=hooks)["id"]
    wait_until(lambda: env.fires(), what="timeout fire")
    fire = env.fires()[0]
    assert (fire["hook"], fire["trigger"], fire["spawned"]) == ("slow", "on_timeout", True)
    message = _thread(env, fire["thread_id"])["entries"][0]["text"]
    assert "Trigger: on_timeout (still running after 0.5s)" in message
    assert env.process(pid)["state"] == "running"
    env.cli("stop", str(pid), "--grace", "2", check=True)
    env.wait_state(pid, "exited")
    assert len(env.fires()) == 1


def test_output_log_is_bounded_without_losing_fires(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 64 * 1024
    monkeypatch.setenv("SUPERVISE_MAX_LOG_BYTES", str(limit))
    daemon = Daemon(env).start()
    try:
        hooks = _hooks(env, {"hooks": [match_hook("^MARK", "mark", 100)]})
        script = (
            "import time\n"
            "for i in range(40):\n"
            "    print('\\n'.join('x' * 99 for _ in range(100)), flush=True)\n"
            "    print(f'MARK {i}', flush=True)\n"
            "    time.sleep(0.01)\n"
        )
        pid = env.run_d(sys.executable, "-c", script, hooks=hooks)["id"]
        env.wait_state(pid, "exited", timeout=30)
    finally:
        daemon.kill()
    assert [f["detail"] for f in env.fires()] == [f"MARK {i}" for i in range(40)]
    run = env.home / "runs" / str(pid)
    out = run / "output.log"
    assert out.stat().st_size > 390_000  # offsets stay valid: the apparent size keeps growing
    assert out.stat().st_blocks * 512 <= 2 * limit  # but the disk holds about the limit
    assert (run / "output.log.1").exists()
    assert env.cli("logs", str(pid), "-n", "1").stdout == "MARK 39\n"
    full = env.cli("logs", str(pid))
    assert full.stdout.endswith("MARK 39\n") and "\0" not in full.stdout
    assert "output.log.1" in full.stderr


def test_depth_is_carried_by_processes_that_threads_start(env: Env) -> None:
    # The seam a thread's RunProcess tool uses: launch() with the thread's depth and limits,
    # real processes; their ends are settled by trackers driven here, without a daemon.
    from state.db import open_state_store
    from state.paths import StatePaths
    from state.processes import get_process
    from state.settings import store_settings
    from supervisor.hookspec import Hook, HookFile, Limits, OnExit
    from supervisor.launch import LaunchRequest, launch
    from supervisor.rundir import RunDir
    from supervisor.tracker import Tracker

    paths = StatePaths(env.home).ensure()
    store = open_state_store(paths.db, store_settings({}))
    hooks = HookFile(hooks=(Hook("any", OnExit(None), "x"),), limits=Limits(max_depth=5))
    ids = []
    for depth in (2, 3):
        req = LaunchRequest(
            argv=[sys.executable, "-c", "pass"],
            cwd=env.work,
            env=env.env,
            hooks=hooks,
            depth=depth,
            parent_limits=Limits(max_depth=3),  # the parent's stricter limit wins
        )
        row = launch(store, paths, req)
        ids.append(row.id)
    for pid in ids:
        run = RunDir(paths.run_dir(pid))
        wait_until(run.read_exit, 30, f"process {pid}'s exit record ({run.exit})")
        saved = get_process(store, pid)
        assert saved is not None
        tracker = Tracker(store, paths, saved)
        assert tracker.step(check_liveness=True).ended
        tracker.close()
    store.close()
    by_process = {f["process_id"]: f for f in env.fires()}
    assert by_process[ids[0]]["spawned"]
    assert (by_process[ids[1]]["spawned"], by_process[ids[1]]["reason"]) == (False, "depth")
    assert "refused: depth" in env.cli("fires").stdout
    assert [t["depth"] for t in env.ps()["threads"]] == [3]
    spec = json.loads((env.home / "runs" / str(ids[1]) / "spec.json").read_text())
    assert spec["hooks"]["limits"]["max_depth"] == 3 and spec["depth"] == 3


BAD_HOOK_FILES = [
    (
        "yaml.yaml",
        "hooks:\n  - on_exit: {exit_codes: [1]\n    instructions: x\n",
        3,
        "invalid YAML",
    ),
    ("unknown.yaml", "hooks:\n  - on_exits: {}\n    instructions: x\n", 2, "did you mean"),
    ("type.yaml", "hooks:\n  - on_exit: {exit_codes: '1'}\n    instructions: x\n", 2, "[1]"),
    (
        "regex.yaml",
        "hooks:\n  - on_output_match: {pattern: '(?<=x)y'}\n    instructions: x\n",
        2,
        "lookaround",
    ),
    (
        "negative.json",
        '{"hooks": [\n {"on_timeout": {"seconds": -5}, "instructions": "x"}]}',
        2,
        "seconds",
    ),
]


@pytest.mark.parametrize(("name", "text", "line", "hint"), BAD_HOOK_FILES)
def test_bad_hook_files_exit_2_with_file_line_and_launch_nothing(
    env: Env, name: str, text: str, line: int, hint: str
) -> None:
    bad = env.write(name, text)
    for args in (["hooks", "check", str(bad)], ["run", "-d", "--hook", str(bad), "--", "true"]):
        r = env.cli(*args)
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith(f"{bad}:{line}: ") and hint in r.stderr
        assert "Traceback" not in r.stderr
    assert env.ps()["processes"] == []


def test_on_exit_knows_a_person_stopped_it(env: Env, daemon: Daemon) -> None:
    hooks = _hooks(
        env,
        {
            "hooks": [
                {"name": "any-end", "on_exit": {}, "instructions": "Look."},
                {"name": "crashes", "on_exit": {"stopped_by_user": False}, "instructions": "Fix."},
            ]
        },
    )
    # `supervise stop`: the default hook spawns and its thread is told; the other does not.
    pid = env.run_d("sleep", "60", hooks=hooks)["id"]
    env.wait_state(pid, "running")
    env.cli("stop", str(pid), "--grace", "2", check=True)
    env.wait_state(pid, "exited")
    fires = {f["hook"]: f for f in wait_until(lambda: len(env.fires()) == 2 and env.fires())}
    assert fires["any-end"]["spawned"] and fires["any-end"]["detail"].endswith(
        "; stopped by supervise stop"
    )
    assert not fires["crashes"]["spawned"] and fires["crashes"]["reason"] == "stopped_by_user"
    message = _thread(env, fires["any-end"]["thread_id"])["entries"][0]["text"]
    assert (
        "Trigger: on_exit (killed by signal SIGTERM, shell status 143; a person stopped it "
        in message
    )
    # A crash: both spawn, neither thread is told of a person.
    crash = env.run_d(sys.executable, "-c", "raise SystemExit(3)", hooks=hooks)["id"]
    env.wait_state(crash, "exited")
    got = wait_until(lambda: len(env.fires()) == 4 and env.fires())[2:]
    assert [(f["hook"], f["spawned"], f["detail"]) for f in got] == [
        ("any-end", True, "exit code 3"),
        ("crashes", True, "exit code 3"),
    ]
    message = _thread(env, got[1]["thread_id"])["entries"][0]["text"]
    assert "Trigger: on_exit (exit code: 3 — failure)\n" in message


def test_a_restart_of_a_running_process_is_a_persons_exit_told_as_a_restart(
    env: Env, daemon: Daemon
) -> None:
    hooks = _hooks(
        env,
        {
            "hooks": [
                {"name": "any-end", "on_exit": {}, "instructions": "Look."},
                {"name": "crashes", "on_exit": {"stopped_by_user": False}, "instructions": "Fix."},
            ],
        },
    )
    pid = env.run_d("sleep", "60", hooks=hooks)["id"]
    env.wait_state(pid, "running")
    r = env.cli("restart", str(pid), "--grace", "2", check=True)
    assert "restarted: run 2" in r.stdout
    fires = {f["hook"]: f for f in wait_until(lambda: len(env.fires()) == 2 and env.fires())}
    # A person's doing, like a stop: `stopped_by_user: false` skips it; told as a restart.
    assert fires["any-end"]["spawned"] and fires["any-end"]["detail"] == (
        "exit code 143 (SIGTERM); restarted by supervise restart"
    )
    assert not fires["crashes"]["spawned"] and fires["crashes"]["reason"] == "stopped_by_user"
    message = _thread(env, fires["any-end"]["thread_id"])["entries"][0]["text"]
    assert "a person restarted it with `supervise restart` (a new run starts)" in message
    assert "stopped it" not in message
    runs = env.cli("ps", "--all", check=True).stdout
    assert "143 (SIGTERM, restarted by user)" in runs and "stopped by user" not in runs
    env.cli("stop", str(pid), "--grace", "2", check=True)
    wait_until(lambda: len(env.fires()) == 4, what="run 2's exit fires")
    assert "143 (SIGTERM, stopped by user)" in env.cli("ps", check=True).stdout
