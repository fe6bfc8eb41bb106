"""System hooks: triggers after tool results, batched into one `<system-hook>` message."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from conftest import Daemon, Env
from modelserver import ModelServer
from test_threads_e2e import hook_file, run_hooked, script, settled

from agent_threads.hooks.system import (
    SystemHookConfig,
    collect_system_hooks,
    format_system_hooks,
)
from agent_threads.transcript import Entry, decode
from state.entries import EntryRecord

PLAN_DONE = (
    "All tasks have been completed. Consider updating the following files with any new or "
    "updated information from this session:\n"
    "- CLAUDE.md - Project conventions, commands, architecture changes\n"
    "- README.md - User-facing documentation, setup instructions, feature descriptions"
)


def plan(*statuses: str, error: bool = False) -> tuple[str, dict[str, Any]]:
    total, done = len(statuses), statuses.count("completed")
    data = {"summary": {"total": total, "completed": done}}
    return ("UpdatePlan", {"output": "", "is_error": error, "data": data, "arguments": {}})


def call(tool: str, output: str = "ok", **args: Any) -> tuple[str, dict[str, Any]]:
    return (tool, {"output": output, "is_error": False, "arguments": args})


def history(*calls: tuple[str, dict[str, Any]]) -> list[Entry]:
    """Entries holding earlier calls and their results."""
    out: list[Entry] = []
    for i, (tool, res) in enumerate(calls):
        cid = f"h{i}"
        reply = {"tool_calls": [{"id": cid, "name": tool, "arguments": res["arguments"]}]}
        out.append(decode(EntryRecord(len(out) + 1, "assistant", 0.0, reply)))
        result = {**res, "call_id": cid, "name": tool}
        out.append(decode(EntryRecord(len(out) + 1, "tool_result", 0.0, result)))
    return out


CFG = SystemHookConfig()


def collect(
    batch: list[tuple[str, Mapping[str, Any]]],
    hist: list[Entry] | None = None,
    cfg: SystemHookConfig = CFG,
    tokens: int = 0,
) -> list[str]:
    return collect_system_hooks(batch, hist or [], cfg, input_tokens=tokens)


def test_plan_completion_fires_only_when_every_task_is_done() -> None:
    assert collect([plan("completed", "completed")]) == [PLAN_DONE]
    assert collect([plan("completed", "pending")]) == []
    assert collect([plan("completed", "in_progress")]) == []
    assert collect([plan()]) == []  # an empty plan
    assert collect([plan("completed", error=True)]) == []  # a failed update
    assert collect([("UpdatePlan", {"output": "x", "data": None, "arguments": {}})]) == []
    assert collect([call("Bash", command="ls")]) == []  # another tool


def test_format_matches_the_design_document() -> None:
    assert format_system_hooks(["First hook message."]) == (
        "<system-hook>\nFirst hook message.\n</system-hook>"
    )
    assert format_system_hooks(["First hook message.", "Second hook message."]) == (
        "<system-hook>\nFirst hook message.\n</system-hook>\n\n"
        "<system-hook>\nSecond hook message.\n</system-hook>"
    )


def test_sensitive_files_and_custom_globs() -> None:
    (msg,) = collect([call("Write", path="config/.env")])
    assert "sensitive file (config/.env)" in msg
    assert collect([call("Edit", path="deploy/key.pem")])
    assert collect([call("Write", path="notes.txt")]) == []
    cfg = SystemHookConfig.from_mapping({"sensitive_file": {"globs": ["*.txt"], "message": "M"}})
    assert collect([call("Write", path="notes.txt")], cfg=cfg) == ["M"]


def test_tests_not_run_fires_once_per_streak() -> None:
    edit = call("Edit", path="app.py")
    (msg,) = collect([edit])
    assert "have not run the tests" in msg
    assert collect([call("Edit", path="b.py")], history(edit)) == []  # same streak
    ran = call("Bash", command="python -m pytest -q")
    assert collect([call("Edit", path="c.py")], history(edit, ran)) != []  # a new streak
    assert collect([call("Edit", path="README.md")]) == []  # not code


def test_many_files_fires_when_crossing_the_threshold() -> None:
    cfg = SystemHookConfig.from_mapping({"many_files": {"threshold": 3}, "tests_not_run": False})
    earlier = history(call("Write", path="a.txt"), call("Write", path="b.txt"))
    (msg,) = collect([call("Write", path="c.txt")], earlier, cfg)
    assert msg.startswith("3 files changed since the last commit")
    more = history(*[call("Write", path=f"{n}.txt") for n in "abc"])
    assert collect([call("Write", path="d.txt")], more, cfg) == []  # already said
    committed = history(
        *[call("Write", path=f"{n}.txt") for n in "ab"], call("Bash", command="git commit -am wip")
    )
    assert collect([call("Write", path="c.txt")], committed, cfg) == []


def test_truncated_output_and_context_use() -> None:
    out = "head\n[... 1234 characters truncated: the output was longer ...]\ntail"
    (msg,) = collect([call("Bash", output=out, command="cat big")])
    assert "output of Bash was truncated (1234 characters" in msg
    (ctx,) = collect([call("Read", path="x")], tokens=110_000)
    assert ctx.startswith("Context use is at 86% of the model's window (110000 of 128000")
    assert collect([call("Read", path="x")], tokens=50_000) == []


def test_turning_off_and_bad_config() -> None:
    cfg = SystemHookConfig.from_mapping({"plan_completion": False})
    assert collect([plan("completed")], cfg=cfg) == []
    cfg = SystemHookConfig.from_mapping({"plan_completion": {"enabled": False}})
    assert collect([plan("completed")], cfg=cfg) == []
    with pytest.raises(ValueError, match="unknown system hook 'plan'"):
        SystemHookConfig.from_mapping({"plan": False})
    with pytest.raises(ValueError, match="threshold must be a whole number"):
        SystemHookConfig.from_mapping({"many_files": {"threshold": 0}})


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as s:
        yield s


def test_one_system_hook_message_after_the_batch_reaches_the_model(
    env: Env, server: ModelServer, start_daemon: Callable[[], Daemon]
) -> None:
    tasks = [{"title": "a", "status": "completed"}, {"title": "b", "status": "completed"}]
    server.push(
        "",
        [
            {"id": "c1", "name": "UpdatePlan", "arguments": {"tasks": tasks}},
            {"id": "c2", "name": "Write", "arguments": {"path": ".env", "content": "A=1"}},
        ],
    )
    server.push("noted")
    env.extra["OPENAI_BASE_URL"] = f"{server.url}/v1"
    start_daemon()
    hooks = hook_file(env, {"model": "openai:m", "permissions": {"allow": ["Write"]}})
    run_hooked(env, hooks)
    t = settled(env, "t1", "completed", timeout=30)
    msgs = server.requests[1]["json"]["messages"]
    roles = [m["role"] for m in msgs]
    assert roles[-4:] == ["assistant", "tool", "tool", "user"]  # ONE message after the batch
    text = msgs[-1]["content"]
    assert text.count("<system-hook>") == 2
    assert text.startswith(f"<system-hook>\n{PLAN_DONE}\n</system-hook>\n\n<system-hook>\n")
    assert "sensitive file (.env)" in text
    assert [e["kind"] for e in t["entries"]].count("system_hook") == 1


def test_system_hooks_with_the_scripted_model(env: Env, daemon: Daemon) -> None:
    tasks = [{"title": "a", "status": "completed"}]
    turns = script(
        env,
        [
            {"tool_calls": [{"name": "UpdatePlan", "arguments": {"tasks": tasks}}]},
            {"content": "done"},
        ],
    )
    hooks = hook_file(
        env,
        {
            "model": f"scripted:{turns.name}",
            "system_hooks": {"plan_completion": {"docs": ["docs/ops.md"]}},
        },
    )
    run_hooked(env, hooks)
    t = settled(env, "t1", "completed")
    (sh,) = [e for e in t["entries"] if e["kind"] == "system_hook"]
    assert sh["messages"] == [
        "All tasks have been completed. Consider updating the following files with any new or "
        "updated information from this session:\n- docs/ops.md"
    ]
    assert "<< system hooks:" in env.cli("thread", "show", "t1").stdout
    assert json.loads(env.cli("thread", "show", "t1", "--json").stdout)["status"] == "completed"
