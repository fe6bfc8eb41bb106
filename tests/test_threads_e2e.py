"""Execution threads through the real CLI and daemon, with the scripted model."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from conftest import ROOT, WAIT_S, Daemon, Env, wait_for, wait_until

SETTLED = ("completed", "failed", "cancelled", "waiting_approval")


def script(env: Env, turns: list[dict[str, Any]], name: str = "turns.yaml") -> Path:
    return env.write(name, yaml.safe_dump({"turns": turns}))


def hook_file(
    env: Env,
    agent: dict[str, Any],
    *,
    limits: dict[str, Any] | None = None,
    name: str = "hooks.yaml",
) -> Path:
    body: dict[str, Any] = {
        "purpose": "test the agent loop",
        "hooks": [{"name": "done", "on_exit": {}, "instructions": "Look at the output."}],
        "agent": agent,
    }
    if limits:
        body["limits"] = limits
    return env.write(name, yaml.safe_dump(body))


def thread(env: Env, tid: str) -> dict[str, Any]:
    out = env.cli("thread", "show", tid, "--json", check=True).stdout
    data: dict[str, Any] = json.loads(out)
    return data


def settled(env: Env, tid: str, *statuses: str, timeout: float = WAIT_S) -> dict[str, Any]:
    return env.wait_thread(tid, statuses or SETTLED, timeout=timeout)


def results(t: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in t["entries"] if e["kind"] == "tool_result"]


def run_hooked(env: Env, hooks: Path, code: str = "print('hello from the job')") -> None:
    env.run_d(sys.executable, "-c", code, hooks=hooks)


def test_hook_thread_runs_tools_and_completes(env: Env, daemon: Daemon) -> None:
    turns = script(
        env,
        [
            {
                "tool_calls": [
                    {
                        "name": "Bash",
                        "arguments": {
                            "command": 'tail -n 1 "$SUPERVISE_OUTPUT"; '
                            "echo id=$SUPERVISE_PROCESS_ID $PWD"
                        },
                    }
                ]
            },
            {
                "tool_calls": [
                    {
                        "name": "UpdatePlan",
                        "arguments": {
                            "tasks": [
                                {"title": "read output", "status": "completed"},
                                {"title": "report", "status": "in_progress"},
                            ]
                        },
                    }
                ],
                "usage": [100, 7],
            },
            {"content": "Diagnosis: the job said hello."},
        ],
    )
    hooks = hook_file(env, {"model": f"scripted:{turns.name}", "permissions": {"allow": ["Bash"]}})
    run_hooked(env, hooks)
    t = settled(env, "t1", "completed")
    bash, plan = results(t)
    assert bash["status"] == "ok"
    assert bash["output"].splitlines() == ["hello from the job", f"id=1 {env.work}"]
    assert json.loads(plan["output"])["summary"] == {"total": 2, "completed": 1}
    assert t["usage"]["input_tokens"] == 100 and t["usage"]["output_tokens"] == 7
    assert t["entries"][0]["kind"] == "user"
    assert t["entries"][-1]["content"] == "Diagnosis: the job said hello."
    text = env.cli("thread", "show", "t1", check=True).stdout
    assert "-> Bash" in text and "--- final answer ---\nDiagnosis: the job said hello." in text


def test_thread_show_follow_prints_the_prompt_and_the_final_answer(
    env: Env, daemon: Daemon
) -> None:
    # The quickstart's own files: what the README promises `thread show t2 -f` prints.
    examples = ROOT / "configs" / "examples"
    env.run_d(sys.executable, str(examples / "fake_migrate.py"), hooks=examples / "migrate.yaml")
    env.wait_threads(lambda ts: len(ts) >= 2, what="thread t2")
    out = env.cli("thread", "show", "t2", "-f", check=True).stdout
    prompt = out.index("--- prompt ---\n")
    assert "Running database migration for auth module refactor" in out[prompt:]
    assert out.index("--- transcript ---\n") > prompt
    assert '-> Bash {"command": "grep -n' in out
    final = out.index("--- final answer ---\nDiagnosis: migration 0042_auth_refactor fails")
    assert final > out.index("-> Bash")
    assert out.endswith("then re-run it.\n")


def test_no_model_fails_at_once_and_retry_runs_it(env: Env, daemon: Daemon) -> None:
    hooks = hook_file(env, {"permissions": {"allow": ["*"]}})
    run_hooked(env, hooks)
    t = settled(env, "t1")
    assert t["status"] == "failed"
    assert t["error"] == (
        "no model configured: set agent.model in the hook file or SUPERVISE_MODEL"
    )
    turns = script(env, [{"content": "second try works"}])
    env.cli("thread", "retry", "t1", "--model", f"scripted:{turns}", check=True)
    t = settled(env, "t1", "completed")
    assert t["model"] == f"scripted:{turns}"
    assert t["entries"][-1]["content"] == "second try works"


def test_deny_rule_is_an_observation(env: Env, daemon: Daemon) -> None:
    turns = script(
        env,
        [
            {"tool_calls": [{"name": "Bash", "arguments": {"command": "rm -rf ./precious"}}]},
            {"content": "could not delete"},
        ],
    )
    (env.work / "precious").mkdir()
    hooks = hook_file(
        env,
        {
            "model": f"scripted:{turns.name}",
            "permissions": {"allow": ["Bash"], "deny": ["Bash(rm:*)"]},
        },
    )
    run_hooked(env, hooks)
    t = settled(env, "t1", "completed")
    (res,) = results(t)
    assert res["status"] == "denied" and "Bash(rm:*)" in res["output"]
    assert (env.work / "precious").is_dir()


def test_ask_waits_then_approve_runs_it(env: Env, daemon: Daemon) -> None:
    turns = script(
        env,
        [
            {"tool_calls": [{"name": "Write", "arguments": {"path": "out.txt", "content": "hi"}}]},
            {"content": "wrote it"},
        ],
    )
    hooks = hook_file(env, {"model": f"scripted:{turns.name}", "permissions": {"ask": ["Write"]}})
    run_hooked(env, hooks)
    t = settled(env, "t1")
    assert t["status"] == "waiting_approval"
    assert t["waiting"] == "Write(out.txt)"
    assert "Write(out.txt)" in env.cli("ps").stdout
    assert not (env.work / "out.txt").exists()
    r = env.cli("approve", "t1", check=True)
    assert "approved Write(out.txt)" in r.stdout
    t = settled(env, "t1", "completed")
    assert (env.work / "out.txt").read_text() == "hi"
    assert results(t)[0]["status"] == "ok"
    assert env.cli("approve", "t1").returncode == 2  # nothing waits any more


def test_ask_then_deny_tells_the_model_why(env: Env, daemon: Daemon) -> None:
    turns = script(
        env,
        [
            {"tool_calls": [{"name": "Bash", "arguments": {"command": "touch made"}}]},
            {"content": "ok, I will not"},
        ],
    )
    hooks = hook_file(env, {"model": f"scripted:{turns.name}"})  # unlisted tools ask
    run_hooked(env, hooks)
    settled(env, "t1", "waiting_approval")
    env.cli("deny", "t1", "--reason", "not on this machine", check=True)
    t = settled(env, "t1", "completed")
    (res,) = results(t)
    assert res["status"] == "denied" and "not on this machine" in res["output"]
    assert not (env.work / "made").exists()


def test_max_turns_ends_a_runaway_loop(env: Env, daemon: Daemon) -> None:
    call = {"tool_calls": [{"name": "UpdatePlan", "arguments": {"tasks": []}}]}
    turns = script(env, [call] * 10)
    hooks = hook_file(env, {"model": f"scripted:{turns.name}", "max_turns": 3})
    run_hooked(env, hooks)
    t = settled(env, "t1")
    assert t["status"] == "failed"
    assert t["error"].startswith("max_turns (3) reached")
    assert t["usage"]["model_calls"] == 3


def test_wall_clock_budget_ends_a_slow_thread(env: Env, daemon: Daemon) -> None:
    turns = script(env, [{"tool_calls": [{"name": "Bash", "arguments": {"command": "sleep 30"}}]}])
    hooks = hook_file(
        env, {"model": f"scripted:{turns.name}", "timeout": 1, "permissions": {"allow": ["Bash"]}}
    )
    run_hooked(env, hooks)
    t = settled(env, "t1")
    assert t["status"] == "failed" and "wall-clock budget of 1s" in t["error"]


def test_user_ask_and_send(env: Env, daemon: Daemon) -> None:
    turns = script(env, [{"content": "first answer"}, {"content": "second answer"}])
    r = env.cli("ask", "--model", f"scripted:{turns.name}", "why", "did", "it", "fail?")
    assert r.returncode == 0, r.stderr
    assert "first answer" in r.stdout
    t = thread(env, "t1")
    assert (t["trigger"], t["depth"], t["process_id"], t["status"]) == (
        "user",
        0,
        None,
        "completed",
    )
    assert t["entries"][0]["text"] == "why did it fail?"
    r = env.cli("send", "t1", "and", "then?")
    assert r.returncode == 0, r.stderr
    assert "second answer" in r.stdout and "first answer" not in r.stdout
    assert [e["kind"] for e in thread(env, "t1")["entries"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


def test_cancel_stops_a_running_tool(env: Env, daemon: Daemon) -> None:
    # The tool runs in the sandbox's PID namespace, where $$ means nothing outside: the
    # sleep is found by its (unique) argument instead.
    nap = f"30.{os.getpid()}"
    command = f"sleep {nap}"
    turns = script(env, [{"tool_calls": [{"name": "Bash", "arguments": {"command": command}}]}])
    hooks = hook_file(env, {"model": f"scripted:{turns.name}", "permissions": {"allow": ["Bash"]}})
    run_hooked(env, hooks)

    def sleeping() -> list[psutil.Process]:
        return [
            p
            for p in psutil.process_iter(["cmdline"])
            if (p.info["cmdline"] or [])[:2] == ["sleep", nap]
        ]

    wait_until(sleeping, what="tool started")
    env.cli("cancel", "t1", check=True)
    t = settled(env, "t1")
    assert t["status"] == "cancelled"

    def gone() -> bool:
        return not sleeping()

    wait_until(gone, what="the tool's process group killed")
    assert env.cli("cancel", "t1").returncode == 2


def test_runprocess_depth_is_refused_past_max_depth(env: Env, daemon: Daemon) -> None:
    inner = {"hooks": [{"name": "inner", "on_exit": {}, "instructions": "again"}]}
    turns = script(
        env,
        [
            {
                "tool_calls": [
                    {
                        "name": "RunProcess",
                        "arguments": {"command": ["true"], "hooks": inner, "name": "child"},
                    }
                ]
            },
            {"content": "started it"},
        ],
    )
    hooks = hook_file(
        env,
        {"model": f"scripted:{turns.name}", "permissions": {"allow": ["RunProcess"]}},
        limits={"max_depth": 1},
    )
    run_hooked(env, hooks)
    t = settled(env, "t1", "completed")
    assert results(t)[0]["status"] == "ok"
    wait_for(
        env.seen_processes,
        lambda ps: any(p.name == "child" for p in ps),
        what="the process `child` recorded",
    )
    child = next(p for p in env.ps()["processes"] if p["name"] == "child")
    assert child["depth"] == 1 and child["parent_thread"] == "t1"
    wait_for(env.seen_fires, lambda fs: any(f.hook == "inner" for f in fs), what="the inner fire")
    fire = next(f for f in env.fires() if f["hook"] == "inner")
    assert (fire["spawned"], fire["reason"]) == (False, "depth")


@pytest.mark.parametrize("bad", ["openai", "nope:x"])
def test_bad_model_flag_is_a_usage_error(env: Env, bad: str) -> None:
    r = env.cli("ask", "--model", bad, "hi")
    assert r.returncode == 2
    assert "model must be provider:name" in r.stderr and "Traceback" not in r.stderr


def test_permissions_are_inherited_never_widened(env: Env, daemon: Daemon) -> None:
    # The parent may run Bash; the child's own hook file asks for nothing to be allowed and
    # tries `*`: its thread still cannot run `rm`, which the parent's rules deny.
    child_turns = script(
        env,
        [
            {"tool_calls": [{"name": "Bash", "arguments": {"command": "rm -f nothing"}}]},
            {"tool_calls": [{"name": "Bash", "arguments": {"command": "echo child > c.txt"}}]},
            {"content": "child done"},
        ],
        name="child.yaml",
    )
    inner = {
        "hooks": [{"name": "inner", "on_exit": {}, "instructions": "child work"}],
        "agent": {"model": f"scripted:{child_turns}", "permissions": {"allow": ["*"]}},
    }
    turns = script(
        env,
        [
            {
                "tool_calls": [
                    {"name": "RunProcess", "arguments": {"command": "true", "hooks": inner}}
                ]
            },
            {"content": "started"},
        ],
    )
    hooks = hook_file(
        env,
        {
            "model": f"scripted:{turns.name}",
            "permissions": {"allow": ["RunProcess", "Bash"], "deny": ["Bash(rm:*)"]},
        },
    )
    run_hooked(env, hooks)
    settled(env, "t1", "completed")
    t2 = settled(env, "t2", "completed")
    assert t2["depth"] == 2
    rm, echo = results(t2)
    assert rm["status"] == "denied" and "Bash(rm:*)" in rm["output"]
    assert echo["status"] == "ok" and (env.work / "c.txt").read_text() == "child\n"


def test_the_rate_is_shared_with_asked_threads(env: Env) -> None:
    env.extra.update({"SUPERVISE_MAX_THREADS": "1", "SUPERVISE_RATE": "2/hour"})
    d = Daemon(env).start()
    try:
        turns = script(env, [{"content": "ok"}])
        for _ in range(3):
            r = env.cli("ask", "-d", "--json", "--model", f"scripted:{turns}", "hi")
            assert r.returncode == 0, r.stderr
        settled(env, "t1", "completed")
        settled(env, "t2", "completed")
        t3 = thread(env, "t3")
        assert t3["status"] == "queued"  # the third waits for the window: never dropped
        assert "queued until" in env.cli("ps").stdout
    finally:
        d.kill()


def test_concurrency_is_bounded(env: Env) -> None:
    env.extra["SUPERVISE_MAX_THREADS"] = "1"
    d = Daemon(env).start()
    try:
        cmd = "echo start >> order; sleep 0.5; echo end >> order"
        turns = script(
            env,
            [{"tool_calls": [{"name": "Bash", "arguments": {"command": cmd}}]}, {"content": "ok"}],
        )
        body = {
            "hooks": [
                {"name": "a", "on_exit": {}, "instructions": "x"},
                {"name": "b", "on_exit": {}, "instructions": "y"},
            ],
            "agent": {"model": f"scripted:{turns.name}", "permissions": {"allow": ["Bash"]}},
        }
        run_hooked(env, env.write("two.yaml", yaml.safe_dump(body)))
        settled(env, "t1", "completed")
        settled(env, "t2", "completed")
        assert (env.work / "order").read_text().split() == ["start", "end", "start", "end"]
    finally:
        d.kill()


def test_bad_input_to_thread_commands(env: Env) -> None:
    for args, message in [
        (["thread", "show", "t99"], "no thread t99"),
        (["approve", "x1"], "thread id must look like t3"),
        (["send", "t99", "hi"], "no thread t99"),
        (["cancel", "t99"], "no thread t99"),
        (["ask", " "], "the prompt is empty"),
    ]:
        r = env.cli(*args)
        assert r.returncode == 2 and message in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr
    bad = env.write("settings.toml", "max_threads = 'many'\n")
    env.extra["SUPERVISE_CONFIG"] = str(bad)
    r = env.cli("ask", "-d", "hi")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{bad}: max_threads must be a whole number" in r.stderr
    env.extra["SUPERVISE_CONFIG"] = str(env.write("s2.toml", "modle = 'x'\n"))
    r = env.cli("ask", "-d", "hi")
    assert r.returncode == 2 and "unknown setting 'modle'" in r.stderr
