"""Faults inflicted on purpose: random SIGKILLs of the daemon, concurrent CLIs and daemons,
a daemon killed while a thread waits on its model. Bounded in time; the seed is printed.

Replay a failing run with `SUPERVISE_CHAOS_SEED=<seed> pytest tests/test_chaos.py`.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon, Env, wait_for, wait_until
from modelserver import ModelServer
from test_threads_e2e import hook_file, results, run_hooked, settled

PROCS = 12
LINES = 15


def _seed() -> int:
    return int(os.environ.get("SUPERVISE_CHAOS_SEED") or random.SystemRandom().randrange(1 << 30))


def _mark_hooks(env: Env, name: str, *, max_spawns: int, rate: str | None = None) -> Path:
    """A hook file firing on every line that starts with MARK."""
    hook = {
        "name": "m",
        "on_output_match": {"pattern": "^MARK"},
        "instructions": "x",
        "max_spawns": max_spawns,
    }
    body: dict[str, Any] = {"hooks": [hook]}
    if rate is not None:
        body["limits"] = {"rate": rate}
    return env.write(name, json.dumps(body))


def test_random_daemon_kills_lose_and_repeat_nothing(env: Env, daemon: Daemon) -> None:
    seed = _seed()
    print(f"chaos seed: {seed} (SUPERVISE_CHAOS_SEED={seed} replays it)")
    rng = random.Random(seed)
    hooks = env.write(
        "chaos.json",
        json.dumps(
            {
                "hooks": [
                    {
                        "name": "mark",
                        "on_output_match": {"pattern": "^MARK "},
                        "instructions": "x",
                        "max_spawns": LINES,
                    },
                    {"name": "end", "on_exit": {}, "instructions": "x"},
                ],
                "limits": {"rate": "1000/second"},
            }
        ),
    )
    codes = {}
    for i in range(PROCS):
        code = rng.randrange(0, 5)
        pause = rng.uniform(0.01, 0.08)
        script = (
            f"import sys, time\nfor n in range({LINES}):\n"
            f"    print('MARK', {i}, n, flush=True); print('noise', flush=True)\n"
            f"    time.sleep({pause:.3f})\nsys.exit({code})"
        )
        pid = env.run_d(sys.executable, "-c", script, hooks=hooks)["id"]
        codes[pid] = code
    for _ in range(4):  # the kills land at random points (the chaos, not a wait)
        time.sleep(rng.uniform(0.1, 0.5))
        daemon.kill(signal.SIGKILL)
        time.sleep(rng.uniform(0.0, 0.3))
        daemon.start()
    wait_for(
        lambda: sorted((p.id, p.state) for p in env.seen_processes()),
        lambda seen: all(state == "exited" for _, state in seen),
        what=f"all {PROCS} processes exited (seed {seed})",
    )
    fires = env.wait_fires(PROCS * (LINES + 1), what=f"every fire (seed {seed})")
    assert len(fires) == PROCS * (LINES + 1), f"seed {seed}"
    by = Counter((f["process_id"], f["hook"], f["detail"]) for f in fires)
    assert max(by.values()) == 1, f"a fire was repeated (seed {seed})"
    ends = {f["process_id"]: f["exit_code"] for f in fires if f["hook"] == "end"}
    assert ends == codes, f"seed {seed}"
    for pid in codes:
        marks = [f["detail"] for f in fires if f["process_id"] == pid and f["hook"] == "mark"]
        assert marks == [f"MARK {pid - 1} {n}" for n in range(LINES)], f"seed {seed}"


def test_twenty_concurrent_runs_and_two_daemons_at_once(env: Env, tmp_path: Path) -> None:
    env.home.mkdir(mode=0o700, parents=True, exist_ok=True)
    logs = [tmp_path / f"{n}-daemon.log" for n in ("first", "second")]
    starts = []
    for log in logs:
        with open(log, "wb") as out:
            starts.append(
                subprocess.Popen(
                    [sys.executable, "-m", "supervisor", "daemon"],
                    env=env.env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
    try:
        refused = wait_for(
            lambda: [
                (p.returncode, log.read_text())
                for p, log in zip(starts, logs, strict=True)
                if p.poll() is not None
            ],
            bool,
            what="one of two daemons started together to refuse",
        )
        assert len(refused) == 1 and refused[0][0] == 1, refused
        assert "already runs" in refused[0][1] and "Traceback" not in refused[0][1], refused
        # Each run's outcome, or what went wrong calling it (a timeout): a thread's exception
        # must reach the assertion, not vanish with the thread.
        outs: dict[int, subprocess.CompletedProcess[str] | BaseException] = {}

        def run(i: int) -> None:
            try:
                outs[i] = env.cli(
                    "run", "-d", "--json", "--name", f"p{i}", "--", sys.executable, "-c",
                    f"print({i})", timeout=90,
                )  # fmt: skip
            except BaseException as e:
                outs[i] = e

        workers = [threading.Thread(target=run, args=(i,)) for i in range(20)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
        bad = {
            i: o if isinstance(o, BaseException) else (o.returncode, o.stderr)
            for i, o in sorted(outs.items())
            if isinstance(o, BaseException) or o.returncode != 0
        }
        assert len(outs) == 20 and not bad, f"{20 - len(outs)} runs never returned; failed: {bad}"
        done = [o for o in outs.values() if not isinstance(o, BaseException)]
        ids = sorted(json.loads(o.stdout)["id"] for o in done)
        assert ids == list(range(1, 21))
        wait_for(
            lambda: sorted((p.id, p.state) for p in env.seen_processes()),
            lambda seen: [state for _, state in seen] == ["exited"] * 20,
            what="all 20 processes exited",
        )
        assert all("database is locked" not in o.stderr for o in done)
    finally:
        for p in starts:
            if p.poll() is None:
                p.kill()
            p.wait(10)


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as s:
        yield s


def test_daemon_killed_during_a_model_call_resumes_once(
    env: Env, server: ModelServer, start_daemon: Callable[[], Daemon]
) -> None:
    gate = threading.Event()
    original = server.next_turn

    def slow(request: dict[str, object]):  # type: ignore[no-untyped-def]
        turn = original(request)
        if len(server.requests) == 1:
            gate.wait(20)  # the first call hangs until the daemon is dead
        return turn

    server.next_turn = slow  # type: ignore[method-assign]
    server.push("", [{"id": "c1", "name": "Bash", "arguments": {"command": "echo x >> ran"}}])
    server.push("", [{"id": "c2", "name": "Bash", "arguments": {"command": "echo y >> ran"}}])
    server.push("done")
    env.extra["OPENAI_BASE_URL"] = f"{server.url}/v1"
    d = start_daemon()
    run_hooked(env, hook_file(env, {"model": "openai:m", "permissions": {"allow": ["Bash"]}}))
    wait_until(lambda: len(server.requests) == 1, what="the first model call")
    d.kill(signal.SIGKILL)
    gate.set()
    start_daemon()
    t = settled(env, "t1")
    assert t["status"] == "completed", t
    # The reply that never arrived is asked for again (the server hands out its next turn);
    # nothing the lost reply asked for ran, and each call that ran, ran once.
    assert (env.work / "ran").read_text() == "y\n"
    assert len(server.requests) == 3
    assert [r["status"] for r in results(t)] == ["ok"]


def test_daemon_killed_during_a_hook_runs_the_tool_once(env: Env, daemon: Daemon) -> None:
    turns = env.write(
        "turns.yaml",
        json.dumps(
            {
                "turns": [
                    {"tool_calls": [{"name": "Bash", "arguments": {"command": "echo t >> tool"}}]},
                    {"content": "done"},
                ]
            }
        ),
    )
    shell = {"PreToolUse": [{"matcher": "Bash", "command": "echo h >> hook; sleep 2"}]}
    hooks = hook_file(
        env,
        {"model": f"scripted:{turns}", "permissions": {"allow": ["Bash"]}, "hooks": shell},
    )
    run_hooked(env, hooks)
    wait_until((env.work / "hook").exists, what="the hook running")
    daemon.kill(signal.SIGKILL)
    daemon.start()
    t = settled(env, "t1")
    assert t["status"] == "completed", t
    assert (env.work / "tool").read_text() == "t\n"  # the tool ran exactly once
    assert (env.work / "hook").read_text() == "h\nh\n"  # the unfinished hook ran again


def test_secret_like_variables_reach_tools_but_not_transcripts() -> None:
    from supervisor.redaction import make_redact, tool_env

    env = {
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG",
        "GITHUB_TOKEN": "ghp_0123456789abcdef",
        "DB_PASSWORD": "hunter2hunter2",
        "HOME": "/home/u",
        "SHORT_KEY": "abc",  # too short to scrub from text safely
        "OPENAI_API_KEY": "sk-the-daemons-own",
        "ANTHROPIC_API_KEY": "sk-ant-the-daemons-own",
    }
    # Tools need the credentials (a migration needs its DB password); not the model's keys.
    assert tool_env(env) == {
        k: v for k, v in env.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    }
    redact = make_redact(env)
    text = redact("id wJalrXUtnFEMI/K7MDENG and ghp_0123456789abcdef, pw hunter2hunter2")
    assert text == (
        "id [redacted $AWS_SECRET_ACCESS_KEY] and [redacted $GITHUB_TOKEN], "
        "pw [redacted $DB_PASSWORD]"
    )


def test_a_100_mb_line_without_newline_neither_blocks_nor_bloats(env: Env, daemon: Daemon) -> None:
    import psutil

    hooks = env.write(
        "long.json",
        json.dumps(
            {
                "hooks": [
                    {"name": "a", "on_output_match": {"pattern": "^aaaa"}, "instructions": "x"},
                    {
                        "name": "after",
                        "on_output_match": {"pattern": "^MARK after"},
                        "instructions": "x",
                    },
                ]
            }
        ),
    )
    script = (
        "import sys\nchunk = b'a' * (1 << 20)\n"
        "for _ in range(100): sys.stdout.buffer.write(chunk)\n"
        "sys.stdout.buffer.write(b'\\nMARK after\\n'); sys.stdout.flush()"
    )
    pid = env.run_d(sys.executable, "-c", script, hooks=hooks)["id"]
    env.wait_state(pid, "exited", timeout=60)
    fires = env.wait_fires(2, what="both fires")
    assert sorted(f["hook"] for f in fires) == ["a", "after"]  # matched on its first 64 KiB
    long_fire = next(f for f in fires if f["hook"] == "a")
    assert len(long_fire["detail"]) <= 70_000
    assert daemon.proc is not None
    rss = psutil.Process(daemon.proc.pid).memory_info().rss
    assert rss < 200 << 20, f"daemon RSS {rss >> 20} MiB after a 100 MB line"


def test_a_full_disk_loses_no_fire_and_recovers(
    env: Env, start_daemon: Callable[..., Daemon]
) -> None:
    # The daemon's writes fail as on a full disk (RLIMIT_FSIZE: EFBIG, SIGXFSZ ignored by
    # Python), then space "returns": every fire is committed once, in order.
    import resource

    import psutil

    daemon = start_daemon(log_through_pipe=True)  # it can say that a commit failed
    hooks = _mark_hooks(env, "disk.json", max_spawns=10)

    script = (
        "import os, time\nprint('MARK 1', flush=True)\n"
        "while not os.path.exists('go1'): time.sleep(0.02)\nprint('MARK 2', flush=True)\n"
        "while not os.path.exists('go2'): time.sleep(0.02)\nprint('MARK 3', flush=True)\n"
    )
    pid = env.run_d(sys.executable, "-c", script, hooks=hooks)["id"]
    env.wait_fires(1, what="the first fire")
    assert daemon.proc is not None
    proc = psutil.Process(daemon.proc.pid)
    proc.rlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))  # the disk is full
    try:
        (env.work / "go1").touch()
        # It tried, and failed, to commit MARK 2 (not only to claim t1's thread).
        wait_for(
            daemon.log.read_text,
            lambda log: re.search(rf"process {pid}: .*; retrying in", log),
            what="the failed commit of MARK 2 logged",
        )
        assert daemon.proc.poll() is None, "the daemon died on a full disk"
        assert [f.detail for f in env.seen_fires()] == ["MARK 1"]
    finally:
        proc.rlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    # Space is back: the daemon retries by itself (no new output needed), from the saved offset.
    env.wait_fires(2, what="MARK 2 committed after the disk freed up")
    # It says what happened (the report made while the disk was full could not be written);
    # the log reaches its file through a pipe, so after the commit, not with it.
    log = daemon.wait_log("saved again (failing since")
    assert "saved again (failing since" in log and "free space" in log, log
    (env.work / "go2").touch()
    env.wait_state(pid, "exited")
    fires = env.wait_fires(3, what="all fires")
    assert [f["detail"] for f in fires] == ["MARK 1", "MARK 2", "MARK 3"]


def test_a_full_disk_during_a_thread_resumes_it_once(
    env: Env, start_daemon: Callable[..., Daemon]
) -> None:
    # The thread's tool is running when the disk fills: its result cannot be saved. The run
    # must neither die silently (left `running`) nor re-run the tool; once space returns the
    # thread resumes from its saved entries, with no restart, and completes.
    import resource

    import psutil

    daemon = start_daemon(log_through_pipe=True)  # it can say that a save failed
    script = "echo t >> tool; while [ ! -e go ]; do sleep 0.02; done; echo ok"
    turns = env.write(
        "turns.yaml",
        json.dumps(
            {
                "turns": [
                    {"tool_calls": [{"name": "Bash", "arguments": {"command": script}}]},
                    {"content": "done"},
                ]
            }
        ),
    )
    hooks = hook_file(env, {"model": f"scripted:{turns}", "permissions": {"allow": ["Bash"]}})
    run_hooked(env, hooks)
    wait_until((env.work / "tool").exists, what="the tool running")
    assert daemon.proc is not None
    proc = psutil.Process(daemon.proc.pid)
    proc.rlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))  # the disk is full
    try:
        (env.work / "go").touch()
        daemon.wait_log("resuming in")  # the tool ended; saving its result failed
        assert daemon.proc.poll() is None, "the daemon died on a full disk"
    finally:
        proc.rlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    t = settled(env, "t1")
    assert t["status"] == "completed", t
    assert (env.work / "tool").read_text() == "t\n"  # never re-run
    assert any("resumed from the saved transcript" in str(e) for e in t["entries"]), t
    log = daemon.log.read_text()
    assert "t1: ran on after failing since" in log and "free space" in log, log


def test_hostile_output_and_file_names_reach_hooks_and_tools_only_as_data(
    env: Env, daemon: Daemon
) -> None:
    # Process output (in the prompt) and a file name (in a tool input) carry shell syntax,
    # quotes, newlines and a NUL. Hooks see them as variables and stdin JSON; nothing runs.
    evil = "x $(touch pwned1) `touch pwned2` 'q\" ;touch pwned3\nline2"
    turns = env.write(
        "turns.yaml",
        json.dumps(
            {
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "Write", "arguments": {"path": evil, "content": evil}},
                            {
                                "name": "Write",
                                "arguments": {"path": "nul\0name", "content": ""},
                            },
                        ]
                    },
                    {"content": "done"},
                ]
            }
        ),
    )
    shell = {
        "UserPromptSubmit": [{"command": 'printf %s "$PROMPT" > seen_prompt'}],
        "PostToolUse": [{"matcher": "Write", "command": 'printf "%s\\n" "$INPUT" >> seen_input'}],
        "PreToolUse": [{"matcher": "Write", "command": "cat > /dev/null"}],
    }
    hooks = hook_file(
        env, {"model": f"scripted:{turns}", "permissions": {"allow": ["*"]}, "hooks": shell}
    )
    code = (
        "import sys; sys.stdout.write('ALERT $(touch pwned4) `touch pwned5` \\'q\\\" \\0 end\\n')"
    )
    run_hooked(env, hooks, code)
    t = settled(env, "t1")
    assert t["status"] == "completed", t
    assert not list(env.work.rglob("pwned*")), "a value was executed"
    prompt = (env.work / "seen_prompt").read_text()
    assert "ALERT $(touch pwned4) `touch pwned5` 'q\" \\0 end" in prompt  # NUL shown as \0
    seen = [json.loads(line) for line in (env.work / "seen_input").read_text().splitlines()]
    # Claude Code's key, made absolute before hooks see it (the model sent the old `path`).
    assert seen[0]["file_path"] == f"{env.work}/{evil}"  # newline and all, as JSON
    assert (env.work / evil).read_text() == evil
    res = results(t)
    assert "cannot contain a NUL byte" in res[1]["output"], res[1]  # a clear error, no crash


def test_ps_while_the_daemon_writes_heavily(env: Env, daemon: Daemon) -> None:
    # 2,000 marked lines, each a fire and a thread (which fails at once: no model), so the
    # daemon commits continuously while `ps` reads: every `ps` answers, none sees a lock.
    hooks = _mark_hooks(env, "busy.json", max_spawns=2000, rate="100000/second")
    code = (
        "import time\nfor i in range(2000):\n"
        "    print('MARK', i, flush=True)\n    i % 50 or time.sleep(0.01)\n"
    )
    pid = env.run_d(sys.executable, "-c", code, hooks=hooks)["id"]
    env.wait_fires(1, what="the first fire")
    took = []
    # A `ps` that waited for the writer's lock would fail within a second (the lock timeout
    # it is given), saying "locked"; how fast it answers depends on the machine's load.
    env.extra["SUPERVISE_DB_TIMEOUT"] = "1"
    for _ in range(12):
        t0 = time.monotonic()
        r = env.cli("ps", "--json")
        took.append(time.monotonic() - t0)
        assert r.returncode == 0 and "locked" not in r.stderr, r.stderr
        assert json.loads(r.stdout)["processes"][0]["id"] == pid
    del env.extra["SUPERVISE_DB_TIMEOUT"]
    env.wait_state(pid, "exited", timeout=60)
    assert len(env.wait_fires(2000, timeout=60, what="all 2,000 fires")) == 2000
    median = sorted(took)[len(took) // 2]
    print(f"ps under load: median {median * 1000:.0f} ms, max {max(took) * 1000:.0f} ms")


def test_ps_and_fires_mask_credentials(env: Env, daemon: Daemon) -> None:
    secret = "tok_9f8e7d6c5b4a"
    env.extra["DEPLOY_TOKEN"] = secret
    hooks = env.write(
        "s.json",
        json.dumps(
            {"hooks": [{"name": "m", "on_output_match": {"pattern": "token"}, "instructions": "x"}]}
        ),
    )
    pid = env.run_d(
        sys.executable, "-c", f"print('token={secret}')", "--auth", secret, hooks=hooks
    )["id"]
    env.wait_state(pid, "exited")
    env.wait_fires(1, what="the fire")
    for out in (env.cli("ps").stdout, env.cli("fires").stdout):  # tables clip long cells
        assert secret not in out
    out = env.cli("ps", "--json").stdout
    assert secret not in out and "[redacted $DEPLOY_TOKEN]" in out
    # Masked before it is saved: by value (the process's own environment has it), else by
    # its form.
    out = env.cli("fires", "--json").stdout
    assert secret not in out
    assert "token=[redacted $DEPLOY_TOKEN]" in out or "token=***" in out
