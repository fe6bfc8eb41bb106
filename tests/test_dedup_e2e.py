"""One thread per failure through the real CLI and daemon, with the scripted model: a hook's
`dedup:` and its own `agent:`.

The process under watch waits for files the test creates (`wait:NAME`), so each fire happens
when the test has seen what it needs (a thread waiting, a thread ended, a daemon killed)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from conftest import Daemon, Env

PROGRAM = """
import os, sys, time
for step in sys.argv[1:]:
    if step.startswith("wait:"):
        while not os.path.exists(step[5:]):
            time.sleep(0.02)
    elif step.startswith("exit:"):
        sys.exit(int(step[5:]))
    else:
        print(step, flush=True)
"""
# The first turn asks to read a file: no rule allows it, so the thread waits for approval
# and stays open while the test makes the failure happen again.
ASKS = [{"tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}]}]


def write_yaml(env: Env, name: str, body: Any) -> Path:
    return env.write(name, yaml.safe_dump(body, sort_keys=False))


def start(env: Env, hooks: Path, *steps: str) -> int:
    prog = env.write("prog.py", PROGRAM)
    pid: int = env.run_d(sys.executable, str(prog), *steps, hooks=hooks)["id"]
    return pid


def go(env: Env, name: str) -> None:
    (env.work / name).touch()


def wait_status(env: Env, tid: str, *statuses: str) -> None:
    """Until thread `tid` is in one of `statuses` (read from the database: no CLI start)."""
    n = int(tid.removeprefix("t"))
    env.wait_threads(
        lambda ts: any(t.id == n and t.status in statuses for t in ts), what=f"{tid} {statuses}"
    )


def thread(env: Env, tid: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(env.cli("thread", "show", tid, "--json", check=True).stdout)
    return data


def repeats(t: dict[str, Any]) -> list[str]:
    return [
        e["text"]
        for e in t["entries"]
        if e["kind"] == "user" and e["text"].startswith("This happened again")
    ]


def test_one_failure_five_times_is_one_thread_and_five_fires(env: Env, daemon: Daemon) -> None:
    turns = write_yaml(env, "turns.yaml", {"turns": [*ASKS, {"content": "the pool is too small"}]})
    hooks = write_yaml(
        env,
        "hooks.yaml",
        {
            "agent": {"model": f"scripted:{turns.name}"},
            "hooks": [
                {
                    "name": "errors",
                    "on_output_match": {"pattern": "ERROR"},
                    "instructions": "Diagnose the error.",
                    "max_spawns": 3,
                    "dedup": True,
                }
            ],
        },
    )
    lines = [
        f"2026-11-26 14:02:0{i}.{i}21 UTC [{4711 + i}] ERROR: could not obtain connection "
        f"{'%08x' % (0xC0FFEE00 + i * 977)} after {30 + i} s"
        for i in range(5)
    ]
    other = "ERROR: relation users does not exist"
    (env.work / "notes.txt").write_text("notes")
    start(env, hooks, lines[0], "wait:go1", *lines[1:3], "wait:go2", *lines[3:], other)
    wait_status(env, "t1", "waiting_approval")
    go(env, "go1")
    env.wait_fires(3)
    go(env, "go2")  # the rest in another read
    fires = env.wait_fires(6)
    ours = [f for f in fires if f["thread_id"] == "t1"]
    assert [(f["spawned"], f["reason"]) for f in ours] == [(True, None)] + [
        (False, "deduplicated")
    ] * 4
    assert [f["detail"] for f in ours] == lines
    # A different error: a thread of its own.
    (last,) = [f for f in fires if f["detail"] == other]
    assert last["spawned"] and last["thread_id"] == "t2"
    t1 = thread(env, "t1")
    told = repeats(t1)
    assert [m.split("(")[1].split(")")[0] for m in told] == [
        "2nd time",
        "3rd time",
        "4th time",
        "5th time",
    ]
    assert all(line in m for line, m in zip(lines[1:], told, strict=True))
    table = env.cli("fires", check=True).stdout
    assert table.count("deduplicated into t1") == 4 and table.count("spawned t1") == 1
    # Approved, the thread goes on with the repeats in its conversation, and ends.
    env.cli("approve", "t1", check=True)
    wait_status(env, "t1", "completed")
    conversation = env.cli("thread", "show", "t1", "--messages", "--json", check=True).stdout
    users = [m["content"] for m in json.loads(conversation) if m["type"] == "UserMessage"]
    assert sum(m.startswith("This happened again") for m in users) == 4


def test_a_cooldown_suppresses_then_allows(env: Env, daemon: Daemon) -> None:
    turns = write_yaml(env, "turns.yaml", {"turns": [{"content": "a diagnosis"}]})
    cooldown = 3.0
    hooks = write_yaml(
        env,
        "hooks.yaml",
        {
            "agent": {"model": f"scripted:{turns.name}"},
            "hooks": [
                {
                    "name": "errors",
                    "on_output_match": {"pattern": "ERROR"},
                    "instructions": "x",
                    "max_spawns": 5,
                    "dedup": {"cooldown": f"{cooldown:g}s"},
                }
            ],
        },
    )
    start(env, hooks, "ERROR job 1", "wait:go1", "ERROR job 2", "wait:go2", "ERROR job 3")
    wait_status(env, "t1", "completed")
    go(env, "go1")
    fires = env.wait_fires(2)
    assert (fires[1]["spawned"], fires[1]["reason"], fires[1]["thread_id"]) == (
        False,
        "cooldown",
        "t1",
    )
    assert "cooldown after t1" in env.cli("fires", check=True).stdout
    assert len(thread(env, "t1")["entries"]) == 2  # the first message and its answer, no more
    (t1,) = env.seen_threads()
    assert t1.status == "completed" and t1.ended_at is not None
    time.sleep(max(0.0, t1.ended_at + cooldown + 0.1 - time.time()))  # the cooldown passes
    go(env, "go2")
    fires = env.wait_fires(3)
    assert fires[2]["spawned"] and fires[2]["thread_id"] == "t2"


def test_a_daemon_killed_between_fires_keeps_one_thread(env: Env, start_daemon: Any) -> None:
    turns = write_yaml(env, "turns.yaml", {"turns": [*ASKS, {"content": "done"}]})
    hooks = write_yaml(
        env,
        "hooks.yaml",
        {
            "agent": {"model": f"scripted:{turns.name}"},
            "hooks": [
                {
                    "name": "errors",
                    "on_output_match": {"pattern": "ERROR"},
                    "instructions": "x",
                    "dedup": True,
                }
            ],
        },
    )
    first = start_daemon()
    pid = start(env, hooks, "ERROR at 14:02:07", "wait:go1", "ERROR at 14:09:13", "wait:go2")
    wait_status(env, "t1", "waiting_approval")
    first.kill()
    go(env, "go1")  # the repeat is printed while no daemon runs
    start_daemon()
    fires = env.wait_fires(2)
    assert [(f["reason"], f["thread_id"]) for f in fires] == [(None, "t1"), ("deduplicated", "t1")]
    assert len(env.seen_threads()) == 1
    assert len(repeats(thread(env, "t1"))) == 1
    go(env, "go2")
    env.wait_state(pid, "exited")
    assert len(env.seen_fires()) == 2 and len(env.seen_threads()) == 1


def test_dedup_process_joins_the_exit_to_the_match_thread(env: Env, daemon: Daemon) -> None:
    turns = write_yaml(env, "turns.yaml", {"turns": [*ASKS, {"content": "lock order bug"}]})
    hooks = write_yaml(
        env,
        "hooks.yaml",
        {
            "agent": {"model": f"scripted:{turns.name}"},
            "hooks": [
                {
                    "name": "deadlock",
                    "on_output_match": {"pattern": "deadlock detected"},
                    "instructions": "Find the lock order.",
                },
                {
                    "name": "crashed",
                    "on_exit": {"exit_codes": [3]},
                    "instructions": "Say why it crashed.",
                    "dedup": "process",
                },
            ],
        },
    )
    (env.work / "notes.txt").write_text("notes")
    pid = start(env, hooks, "ERROR: deadlock detected", "wait:go", "exit:3")
    wait_status(env, "t1", "waiting_approval")
    go(env, "go")
    env.wait_state(pid, "exited")
    fires = env.wait_fires(2)
    assert [(f["hook"], f["reason"], f["thread_id"]) for f in fires] == [
        ("deadlock", None, "t1"),
        ("crashed", "deduplicated", "t1"),
    ]
    (told,) = repeats(thread(env, "t1"))
    assert "the process hook `crashed` fired" in told
    assert "Trigger: on_exit (exit code: 3 — failure)" in told
    env.cli("approve", "t1", check=True)
    wait_status(env, "t1", "completed")
    assert len(env.seen_threads()) == 1


def test_each_hook_runs_with_its_own_agent(env: Env, daemon: Daemon) -> None:
    read = {"tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}]}
    a = write_yaml(env, "a.yaml", {"turns": [read, {"content": "answer from model A"}]})
    b = write_yaml(env, "b.yaml", {"turns": [read, {"content": "answer from model B"}]})
    hooks = write_yaml(
        env,
        "hooks.yaml",
        {
            "agent": {"model": f"scripted:{a.name}"},  # Read is not allowed: it asks
            "hooks": [
                {"name": "plain", "on_exit": {}, "instructions": "x"},
                {
                    "name": "own",
                    "on_exit": {},
                    "instructions": "y",
                    "agent": {"model": f"scripted:{b.name}", "permissions": {"allow": ["Read"]}},
                },
            ],
        },
    )
    (env.work / "notes.txt").write_text("the notes")
    start(env, hooks, "hello")
    threads = env.wait_threads(lambda ts: len(ts) == 2, what="two threads")
    by_hook = {t.hook: f"t{t.id}" for t in threads}
    wait_status(env, by_hook["plain"], "waiting_approval")
    own = env.wait_thread(by_hook["own"], ["completed"])
    assert own["model"] == f"scripted:{b}"
    answers = [e["content"] for e in own["entries"] if e["kind"] == "assistant"]
    assert answers[-1] == "answer from model B"
    env.cli("approve", by_hook["plain"], check=True)
    plain = env.wait_thread(by_hook["plain"], ["completed"])
    assert plain["model"] == f"scripted:{a}"
    answers = [e["content"] for e in plain["entries"] if e["kind"] == "assistant"]
    assert answers[-1] == "answer from model A"


def test_hooks_check_shows_dedup_and_each_hooks_agent(env: Env) -> None:
    hooks = write_yaml(
        env,
        "hooks.yaml",
        {
            "agent": {"model": "openai:gpt-4.1-mini"},
            "hooks": [
                {
                    "name": "deadlock",
                    "on_output_match": {"pattern": "deadlock"},
                    "instructions": "x",
                    "dedup": {"key": "signature", "cooldown": "5m"},
                    "agent": {"model": "anthropic:claude-sonnet-4-5"},
                },
                {"name": "crashed", "on_exit": {}, "instructions": "y", "dedup": "process"},
                {"name": "plain", "on_exit": {}, "instructions": "z"},
            ],
        },
    )
    out = env.cli("hooks", "check", str(hooks), check=True).stdout.splitlines()
    assert out[1:] == [
        "  hook deadlock: dedup by signature, cooldown 5m; own agent (model); "
        "model anthropic:claude-sonnet-4-5",
        "  hook crashed: dedup by process, cooldown 10m",
    ]
    bad = env.write("bad.yaml", "hooks:\n  - on_exit: {}\n    instructions: x\n    dedup: often\n")
    r = env.cli("hooks", "check", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{bad}:4: hooks[0].dedup must be true, one of signature, hook, process" in r.stderr
