"""`thread show` from the real CLI: the transcript as saved, and the conversation as sent."""

from __future__ import annotations

import json

from conftest import Daemon, Env
from test_threads_e2e import script, settled


def test_messages_print_the_conversation_the_model_is_sent(env: Env, daemon: Daemon) -> None:
    call = {"name": "Bash", "arguments": {"command": "echo hi"}}
    turns = script(env, [{"content": "looking", "tool_calls": [call]}, {"content": "it said hi"}])
    r = env.cli("ask", "-d", "--model", f"scripted:{turns.name}", "say", "hi")
    assert r.returncode == 0, r.stderr
    assert settled(env, "t1")["status"] == "waiting_approval"  # unlisted tools ask
    # The call waiting for approval has no result yet: the model would not be sent it.
    waiting = env.cli("thread", "show", "t1", "--messages", check=True).stdout.splitlines()
    assert waiting == ["user #1:", "    say hi", "assistant #2:", "    looking"]
    env.cli("approve", "t1", check=True)
    assert settled(env, "t1", "completed")["status"] == "completed"
    lines = env.cli("thread", "show", "t1", "--messages", check=True).stdout.splitlines()
    assert lines[:4] == waiting
    assert lines[4].startswith('  -> Bash {"command": "echo hi"} (id call_')
    assert lines[5].startswith("tool Bash (id call_") and lines[6] == "    hi"
    as_json = json.loads(env.cli("thread", "show", "t1", "--messages", "--json").stdout)
    assert [m["type"] for m in as_json] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResult",
        "AssistantMessage",
    ]
    assert as_json[2]["result"] == "hi" and as_json[3]["content"] == "it said hi"
    # --json without --messages prints the entries as saved, each kind with its own keys.
    raw = json.loads(env.cli("thread", "show", "t1", "--json").stdout)
    approval = next(e for e in raw["entries"] if e["kind"] == "approval")
    assert set(approval) == {"seq", "kind", "at", "call_id", "name", "decision", "by", "reason"}
    assert raw["usage"]["model_calls"] == 2


def test_messages_and_follow_together_are_a_usage_error(env: Env) -> None:
    r = env.cli("thread", "show", "t1", "--messages", "-f")
    assert r.returncode == 2 and "drop -f" in r.stderr and "Traceback" not in r.stderr
