"""Shell hooks inside threads, through the real daemon: blocking, injection, timeouts."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Daemon, Env, wait_until
from modelserver import ModelServer
from test_threads_e2e import results, run_hooked, script, settled

BASH = "Bash"


def hook_file(env: Env, turns: Path, shell: dict[str, Any], **agent: Any) -> Path:
    body = {
        "purpose": "hook tests",
        "hooks": [{"name": "done", "on_exit": {}, "instructions": "Look at the output."}],
        "agent": {
            "model": f"scripted:{turns.name}",
            "permissions": {"allow": ["Bash", "Write", "RunProcess"]},
            "hooks": shell,
            **agent,
        },
    }
    return env.write("hooks.yaml", yaml.safe_dump(body))


def bash_turns(env: Env, *commands: str) -> Path:
    calls = [{"tool_calls": [{"name": BASH, "arguments": {"command": c}}]} for c in commands]
    return script(env, [*calls, {"content": "done"}])


def hooks_of(t: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [e for e in t["entries"] if e["kind"] == "hook" and e["event"] == event]


def test_pre_tool_use_blocks_and_input_is_only_data(env: Env, daemon: Daemon) -> None:
    turns = bash_turns(env, 'echo $(touch pwned) `touch pwned2` "\'; touch pwned3"')
    shell = {
        "PreToolUse": [
            {
                "matcher": "Bash",
                "command": 'printf %s "$INPUT" > seen.json; echo "$TOOL_NAME no" >&2; exit 1',
                "continueOnFailure": False,
            }
        ]
    }
    run_hooked(env, hook_file(env, turns, shell))
    t = settled(env, "t1", "completed")
    (res,) = results(t)
    assert res["status"] == "denied" and "Blocked by a PreToolUse hook" in res["output"]
    assert "Bash no" in res["output"]
    seen = json.loads((env.work / "seen.json").read_text())
    assert seen["command"].startswith("echo $(touch pwned)")
    assert not any((env.work / n).exists() for n in ("pwned", "pwned2", "pwned3"))
    (run,) = hooks_of(t, "PreToolUse")
    assert (run["decision"], run["exit_code"], run["matcher"]) == ("deny", 1, "Bash")
    assert "PreToolUse hook `printf" in env.cli("thread", "show", "t1").stdout


def test_failing_hook_continues_by_default(env: Env, daemon: Daemon) -> None:
    turns = bash_turns(env, "echo ran > ran.txt")
    shell = {"PreToolUse": [{"matcher": "*", "command": "exit 1"}]}
    run_hooked(env, hook_file(env, turns, shell))
    t = settled(env, "t1", "completed")
    assert results(t)[0]["status"] == "ok" and (env.work / "ran.txt").exists()


def test_claude_code_shape_exit_2_and_json_decisions(env: Env, daemon: Daemon) -> None:
    turns = bash_turns(env, "rm -rf x", "echo original", "git push")
    guard = (
        "import json,sys; e=json.load(sys.stdin); c=e['tool_input']['command']\n"
        "if c.startswith('rm'): print('rm is not allowed', file=sys.stderr); sys.exit(2)\n"
        "if c.startswith('echo'): print(json.dumps({'hookSpecificOutput': {"
        "'hookEventName': 'PreToolUse', 'permissionDecision': 'allow',"
        "'updatedInput': {'command': 'echo rewritten'}}}))\n"
        "if c.startswith('git'): print(json.dumps({'hookSpecificOutput': {"
        "'permissionDecision': 'deny', 'permissionDecisionReason': 'no pushing'}}))\n"
    )
    (env.work / "guard.py").write_text(guard)
    shell = {
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [{"type": "command", "command": f"{sys.executable} guard.py"}],
            }
        ]
    }
    run_hooked(env, hook_file(env, turns, shell))
    t = settled(env, "t1", "completed")
    rm, echo, push = results(t)
    assert rm["status"] == "denied" and "rm is not allowed" in rm["output"]
    assert echo["status"] == "ok" and echo["output"] == "rewritten"
    assert push["status"] == "denied" and "no pushing" in push["output"]


def test_a_hung_hook_is_killed_with_its_group(env: Env, daemon: Daemon) -> None:
    turns = bash_turns(env, "echo a", "echo b")
    hung = "sleep 30 & echo $! > bg.pid; sleep 30"
    shell = {
        "PreToolUse": [
            {"matcher": "Bash", "command": hung, "timeout": 300},
            {"matcher": "Bash", "command": "sleep 30", "timeout": 300, "fail_mode": "closed"},
        ]
    }
    started = time.monotonic()
    run_hooked(env, hook_file(env, turns, shell))
    t = settled(env, "t1", "completed")
    assert time.monotonic() - started < 15
    a, _b = results(t)
    assert a["status"] == "denied" and "timed out after 300 ms" in a["output"]  # closed
    runs = hooks_of(t, "PreToolUse")
    assert [r["timed_out"] for r in runs] == [True, True, True, True]
    assert [r.get("decision") for r in runs] == [None, "deny", None, "deny"]
    bg = int((env.work / "bg.pid").read_text())
    wait_until(lambda: not Path(f"/proc/{bg}").exists() or _zombie(bg), what="grandchild killed")


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def test_session_prompt_and_post_hooks_see_their_values(env: Env, daemon: Daemon) -> None:
    turns = bash_turns(env, "echo tool-said-this")
    shell = {
        "SessionStart": [{"command": 'echo "session $SESSION_ID in $PROJECT_ROOT"'}],
        "UserPromptSubmit": [{"command": 'printf %s "$PROMPT" > prompt.txt'}],
        "PostToolUse": [{"matcher": "Bash", "command": 'printf %s "$OUTPUT" > post.txt'}],
        "SessionEnd": [{"command": "echo $SESSION_ID > end.txt"}],
    }
    run_hooked(env, hook_file(env, turns, shell))
    t = settled(env, "t1", "completed")
    ctx = [e for e in t["entries"] if e["kind"] == "context"]
    assert ctx[0]["event"] == "SessionStart" and ctx[0]["text"] == f"session t1 in {env.work}"
    prompt = (env.work / "prompt.txt").read_text()
    # What entered the thread as its prompt, as in Claude Code: not the system prompt.
    assert prompt.startswith("The process hook `done` has fired.")
    assert "You are an execution thread" not in prompt and "Instructions:" not in prompt
    assert (env.work / "post.txt").read_text() == "tool-said-this"
    wait_until(lambda: (env.work / "end.txt").exists(), what="SessionEnd")
    assert (env.work / "end.txt").read_text() == "t1\n"
    kinds = [e["kind"] for e in t["entries"]]
    assert kinds.index("context") < kinds.index("assistant")  # injected before the first call


def test_hooks_run_in_sub_agents_too(env: Env, daemon: Daemon) -> None:
    child_turns = script(
        env,
        [
            {"tool_calls": [{"name": BASH, "arguments": {"command": "echo child"}}]},
            {"content": "child done"},
        ],
        name="child.yaml",
    )
    inner = {
        "hooks": [{"name": "inner", "on_exit": {}, "instructions": "child work"}],
        "agent": {"model": f"scripted:{child_turns}", "permissions": {"allow": ["Bash"]}},
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
    shell = {"PreToolUse": [{"matcher": "*", "command": 'echo "$SESSION_ID $TOOL_NAME" >> audit'}]}
    run_hooked(env, hook_file(env, turns, shell))
    settled(env, "t1", "completed")
    settled(env, "t2", "completed")
    assert (env.work / "audit").read_text().split("\n")[:2] == ["t1 RunProcess", "t2 Bash"]


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as s:
        yield s


def test_settings_file_hooks_and_context_reach_the_model(
    env: Env, server: ModelServer, start_daemon: Callable[[], Daemon]
) -> None:
    settings = env.write(
        "settings.json",
        json.dumps(
            {
                "hooks": {
                    "SessionStart": [
                        {"hooks": [{"type": "command", "command": "echo branch: main"}]}
                    ]
                }
            }
        ),
    )
    env.extra.update({"OPENAI_BASE_URL": f"{server.url}/v1", "SUPERVISE_SETTINGS": str(settings)})
    start_daemon()
    server.push("all good")
    r = env.cli("ask", "--model", "openai:m", "status?")
    assert r.returncode == 0, r.stderr
    sent = json.dumps(server.requests[0]["json"]["messages"])
    assert "branch: main" in sent and "hook-output" in sent


def test_hooks_test_command(env: Env) -> None:
    f = env.write(
        "h.yaml",
        yaml.safe_dump(
            {"agent": {"hooks": {"PreToolUse": [{"matcher": "Bash(rm:*)", "command": "exit 2"}]}}}
        ),
    )
    r = env.cli(
        "hooks",
        "test",
        str(f),
        "--event",
        "PreToolUse",
        "--tool",
        "Bash",
        "--input",
        '{"command": "rm -rf /"}',
    )
    assert r.returncode == 0 and "decision: deny" in r.stdout
    r = env.cli(
        "hooks",
        "test",
        str(f),
        "--event",
        "PreToolUse",
        "--tool",
        "Bash",
        "--input",
        '{"command": "ls"}',
    )
    assert "no PreToolUse hook" in r.stdout and "decision: no objection" in r.stdout
    bad = env.write("b.yaml", "agent:\n  hooks:\n    PreToolUse:\n      - matcher: Bash\n")
    r = env.cli("hooks", "check", str(bad))
    assert (
        r.returncode == 2
        and f"{bad}:4: agent.hooks.PreToolUse.0: a hook entry needs a command" in r.stderr
    )
