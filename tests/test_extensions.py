"""Lifecycle hooks and extensions, through the real daemon and a real OpenAI-protocol server."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, Daemon, Env
from modelserver import ModelServer
from test_threads_e2e import results, run_hooked, settled, thread

from agent_threads.api import (
    AgentEvent,
    AgentStatus,
    AssistantMessage,
    HookDecision,
    HookRegistrationError,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
)
from agent_threads.extensions import ExtensionAPI, Extensions, load_extensions

LIFECYCLE = """
from agent_threads.api import AgentEvent, HookDecision, SystemMessage, UserMessage

def register(api):
    api.on(AgentEvent.BEFORE_LLM_CALL).when(
        lambda s: not any(isinstance(m, SystemMessage) for m in s.agent.conversation_history)
    ).handle(effects=[lambda s: s.agent.conversation_history.append(
        SystemMessage("Always answer in <answer> tags."))])
    api.on(AgentEvent.AFTER_LLM_CALL).when(
        lambda s: "INVALID" in (s.assistant_message.content or "")
    ).handle(decision=HookDecision.RETRY)
    async def enrich(status, result):
        result.result = result.result + " [checked]"
        return result
    api.on(AgentEvent.AFTER_TOOL_EXECUTION).handle(value=enrich)
    api.on(AgentEvent.ON_TOOL_ERROR).handle(effects=[lambda s: s.agent.conversation_history.append(
        UserMessage("Tool failed: " + (s.error or "")[:40]))])
    def shout(status, msg):
        msg.content = (msg.content or "").upper()
        return msg
    api.on(AgentEvent.BEFORE_FINAL_RESPONSE).handle(value=shout)
    def broken(status):
        raise RuntimeError("boom")
    api.on(AgentEvent.BEFORE_TOOL_EXECUTION).handle(effects=[broken])
    def end(status):
        with open(status.agent.cwd + "/query_end.txt", "w") as f:
            f.write(str(status.iteration))
    api.on(AgentEvent.QUERY_END).handle(effects=[end])
    api.on("system_hook", lambda tool, result: "EXT-REMINDER" if tool == "Bash" else None)
    def mark(messages, ctx):
        return messages + [UserMessage("EXT-CONTEXT-MARK")]
    api.on("context", mark)
"""


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as s:
        yield s


def write_hooks(env: Env, agent: dict[str, Any]) -> Path:
    body = {
        "hooks": [{"name": "done", "on_exit": {}, "instructions": "Look."}],
        "agent": {"permissions": {"allow": ["Bash"]}, **agent},
    }
    return env.write("hooks.yaml", yaml.safe_dump(body))


def test_lifecycle_hooks_and_context_transform_reach_the_model(
    env: Env, server: ModelServer, start_daemon: Callable[[], Daemon]
) -> None:
    env.write("ext.py", LIFECYCLE)
    server.push("INVALID first try")
    server.push("", [{"id": "c1", "name": "Bash", "arguments": {"command": "echo hi"}}])
    server.push("", [{"id": "c2", "name": "Bash", "arguments": {"command": "exit 3"}}])
    server.push("<answer>fine</answer>")
    env.extra["OPENAI_BASE_URL"] = f"{server.url}/v1"
    start_daemon()
    run_hooked(env, write_hooks(env, {"model": "openai:m", "extensions": ["ext.py"]}))
    t = settled(env, "t1", timeout=30)
    assert t["status"] == "completed", t
    ok, failed = results(t)
    assert ok["output"] == "hi [checked]"  # AFTER_TOOL_EXECUTION's value
    assert failed["is_error"]
    kinds = [e["kind"] for e in t["entries"]]
    assert kinds.count("injected") == 2  # the system message and the tool-error note
    notes = [e["text"] for e in t["entries"] if e["kind"] == "note"]
    assert any("reply discarded: RETRY" in n for n in notes)
    assert any("BEFORE_TOOL_EXECUTION hook raised RuntimeError('boom')" in n for n in notes)
    final = [e for e in t["entries"] if e["kind"] == "final"]
    assert final[0]["content"] == "<ANSWER>FINE</ANSWER>"
    assert "--- final answer ---\n<ANSWER>FINE</ANSWER>" in env.cli("thread", "show", "t1").stdout
    assert len(server.requests) == 4  # the INVALID reply was asked for again
    first = server.requests[0]["json"]["messages"]
    assert first[-2]["content"] == "Always answer in <answer> tags."
    assert first[-1]["content"] == "EXT-CONTEXT-MARK"  # the transform, in the real request
    assert (env.work / "query_end.txt").read_text() == "3"
    third = json.dumps(server.requests[2]["json"]["messages"])
    assert "<system-hook>\\nEXT-REMINDER\\n</system-hook>" in third  # an extension's trigger


def test_pop_folds_a_sub_task_into_its_summary(
    env: Env, server: ModelServer, start_daemon: Callable[[], Daemon]
) -> None:
    stack = ROOT / "configs" / "extensions" / "stack.py"
    env.extra["OPENAI_BASE_URL"] = f"{server.url}/v1"
    start_daemon()
    server.push("ready")
    run_hooked(env, write_hooks(env, {"model": "openai:m", "extensions": [str(stack)]}))
    settled(env, "t1", "completed", timeout=30)

    def send(*args: str) -> str:
        r = env.cli("send", "t1", *args)
        assert r.returncode == 0, r.stderr
        return r.stdout

    assert "pushed 'dig into the cache'" in send("/push dig into the cache")
    server.push("The cache is cold because the TTL is 0.")
    assert "TTL is 0" in send("why is the cache cold?")
    assert "pushed 'side quest'" in send("/push side quest")
    out = env.cli("send", "t1", "/pop")
    assert "Pop which sub-task?" in out.stdout + out.stderr and "--choice N" in out.stdout
    assert "popped 'side quest'" in send("/pop", "--choice", "1")
    assert "popped 'dig into the cache'" in send("/pop")
    server.push("Next: raise the TTL.")
    send("what next?")
    msgs = json.dumps(server.requests[-1]["json"]["messages"])
    assert "why is the cache cold?" not in msgs  # folded away
    assert "Sub-task 'dig into the cache' was stacked away with /pop" in msgs
    assert "Summary: The cache is cold because the TTL is 0." in msgs
    assert "unknown command /nope" in send("/nope")
    assert thread(env, "t1")["status"] == "completed"


def test_registration_rules() -> None:
    ext = Extensions()
    api = ExtensionAPI(ext, "x.py")
    builder = api.on(AgentEvent.BEFORE_TOOL_EXECUTION)
    with pytest.raises(HookRegistrationError, match="RETRY is only allowed on AFTER_LLM_CALL"):
        builder.handle(decision=HookDecision.RETRY)
    with pytest.raises(HookRegistrationError, match="STOP on BEFORE_LLM_CALL needs a value"):
        api.on(AgentEvent.BEFORE_LLM_CALL).handle(decision=HookDecision.STOP)
    with pytest.raises(Exception, match="is not an event"):
        api.on("nonsense")  # type: ignore[call-overload]
    assert [
        type(c).__name__
        for c in (
            SystemMessage("a"),
            UserMessage("b"),
            AssistantMessage("c"),
            ToolCall("i", "n"),
            ToolResult("i", "n"),
        )
    ] == ["SystemMessage", "UserMessage", "AssistantMessage", "ToolCall", "ToolResult"]
    assert AgentStatus.__dataclass_fields__.keys() >= {
        "event",
        "agent",
        "iteration",
        "tool_call",
        "tool_result",
        "assistant_message",
        "error",
    }


@pytest.mark.anyio
async def test_stop_value_is_type_checked(tmp_path: Path) -> None:
    from agent_threads.api import AgentView
    from agent_threads.hooks.lifecycle import fire

    ext = Extensions()
    api = ExtensionAPI(ext, "x.py")
    api.on(AgentEvent.BEFORE_LLM_CALL).handle(decision=HookDecision.STOP, value="cached")
    status = AgentStatus(AgentEvent.BEFORE_LLM_CALL, AgentView("t1", [], str(tmp_path), "m"), 0)
    with pytest.raises(Exception, match="STOP on BEFORE_LLM_CALL must give a AssistantMessage"):
        await fire(ext.lifecycle, status, None)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_load_errors_say_file_and_line(env: Env, tmp_path: Path) -> None:
    bad = env.write("bad.py", "def register(api):\n    x = (\n")
    f = env.write("h.yaml", yaml.safe_dump({"agent": {"extensions": ["bad.py"]}}))
    r = env.cli("hooks", "check", str(f))
    assert r.returncode == 2 and f"{bad}:2: syntax error in extension" in r.stderr
    raising = tmp_path / "raising.py"
    raising.write_text("def register(api):\n    raise ValueError('nope')\n")
    with pytest.raises(Exception, match=r"raising.py:2: register\(api\) failed"):
        load_extensions([str(raising)], tmp_path)
    (tmp_path / "noreg.py").write_text("x = 1\n")
    with pytest.raises(Exception, match="must define register"):
        load_extensions(["noreg.py"], tmp_path)


def _run_process_from_a_thread(env: Env, hooks: dict[str, Any]) -> dict[str, Any]:
    """A thread calls RunProcess with `hooks`; the tool's result."""
    call = {"name": "RunProcess", "arguments": {"command": "true", "hooks": hooks}}
    turns = env.write(
        "t.yaml", yaml.safe_dump({"turns": [{"tool_calls": [call]}, {"content": "ok"}]})
    )
    agent = {"model": f"scripted:{turns.name}", "permissions": {"allow": ["RunProcess"]}}
    run_hooked(env, write_hooks(env, agent))
    (res,) = results(settled(env, "t1", "completed"))
    return res


def test_a_thread_cannot_add_extensions(env: Env, daemon: Daemon) -> None:
    env.write("evil.py", "def register(api):\n    pass\n")
    res = _run_process_from_a_thread(env, {"agent": {"extensions": ["evil.py"]}})
    assert res["is_error"] and "a thread cannot add extensions" in res["output"]


CACHE = """
from agent_threads.api import AgentEvent, AssistantMessage, HookDecision

def register(api):
    api.on(AgentEvent.BEFORE_LLM_CALL).when(
        lambda s: "cached?" in s.agent.conversation_history[-1].content
    ).handle(decision=HookDecision.STOP, value=lambda s, v: AssistantMessage("from the cache"))
"""


def test_ask_threads_get_settings_extensions_and_stop_skips_the_model(
    env: Env, daemon: Daemon
) -> None:
    env.write("cache.py", CACHE)
    settings = env.write("settings.json", json.dumps({"extensions": ["cache.py"]}))
    turns = env.write("t.yaml", yaml.safe_dump({"turns": [{"content": "from the model"}]}))
    r = env.cli("ask", "--settings", str(settings), "--model", f"scripted:{turns}", "cached?")
    assert r.returncode == 0, r.stderr
    t = thread(env, "t1")
    (reply,) = [e for e in t["entries"] if e["kind"] == "assistant"]
    assert reply["content"] == "from the cache" and reply["model"].startswith("hook:")
    # A settings file is Claude Code's: a key it has that supervise does not read is a
    # warning, never a refusal (a typo of ours gets a suggestion).
    typo = env.write("s2.json", json.dumps({"extension": []}))
    r = env.cli("ask", "-d", "--settings", str(typo), "--model", f"scripted:{turns}", "x")
    assert r.returncode == 0, r.stderr
    assert f"{typo}:1: warning: extension: not read: supervise reads only hooks, " in r.stderr
    assert "did you mean 'extensions'?" in r.stderr
    bad = env.write("s3.json", json.dumps({"extensions": "cache.py"}))
    r = env.cli("ask", "--settings", str(bad), "x")
    assert r.returncode == 2 and f"{bad}:1: extensions must be a list" in r.stderr


def test_a_pinned_extension_that_changed_is_refused(tmp_path: Path) -> None:
    from agent_threads.extensions import ExtensionError, pin

    ext = tmp_path / "ext.py"
    ext.write_text("def register(api):\n    pass\n")
    pinned = pin(str(ext), ext)
    assert load_extensions([pinned], tmp_path).specs == [pinned]
    flag = tmp_path / "pwned"
    ext.write_text(f"open({str(flag)!r}, 'w').close()\ndef register(api):\n    pass\n")
    with pytest.raises(ExtensionError, match="changed since a person started this process"):
        load_extensions([pinned], tmp_path)
    assert not flag.exists()
    assert load_extensions([str(ext)], tmp_path).sources == [str(ext)]  # unpinned: loads
    assert flag.exists()


def test_an_extension_a_thread_rewrites_never_runs_until_a_person_restarts(
    env: Env, daemon: Daemon
) -> None:
    env.write("ext.py", "def register(api):\n    pass\n")
    flag = env.work / "pwned"  # extensions run in the daemon, whose cwd is elsewhere
    evil = f"open({str(flag)!r}, 'w').close()\ndef register(api):\n    pass\n"
    turns = env.write(
        "t.yaml",
        yaml.safe_dump(
            {
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "Write", "arguments": {"path": "ext.py", "content": evil}},
                            {"name": "Bash", "arguments": {"command": "touch written"}},
                        ]
                    },
                    {"content": "ok"},
                ]
            }
        ),
    )
    body = {
        "hooks": [
            {
                "name": "go",
                "on_output_match": {"pattern": "^GO"},
                "instructions": "x",
                "max_spawns": 2,
            },
        ],
        "agent": {
            "model": f"scripted:{turns.name}",
            "extensions": ["ext.py"],
            "permissions": {"allow": ["Write", "Bash"]},
        },
    }
    hooks = env.write("hooks.yaml", yaml.safe_dump(body))
    code = (
        "import os, time\nprint('GO', flush=True)\n"
        "while not os.path.exists('written'): time.sleep(0.02)\nprint('GO', flush=True)\n"
    )
    run_hooked(env, hooks, code)
    assert settled(env, "t1")["status"] == "completed"
    t2 = settled(env, "t2")
    assert t2["status"] == "failed" and "changed since a person started" in t2["error"], t2
    assert not (env.work / "pwned").exists()
    # A person starting a process again is what makes the new version count.
    run_hooked(env, hooks, "print('GO')")
    assert settled(env, "t3")["status"] == "completed"
    assert (env.work / "pwned").exists()


def test_a_thread_cannot_add_shell_hooks(env: Env, daemon: Daemon) -> None:
    sneaky = {"agent": {"hooks": {"SessionStart": [{"command": "touch pwned"}]}}}
    res = _run_process_from_a_thread(env, sneaky)
    assert res["is_error"] and "a thread cannot add shell hooks" in res["output"]
    assert not (env.work / "pwned").exists()


def test_a_dotted_name_extension_loads_and_is_pinned_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_threads.extensions import ExtensionError, module_file, pin

    pkg = tmp_path / "myexts"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "hello.py").write_text(
        "def register(api):\n    api.command('hello', 'says hello', lambda args, ctx: 'hi')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    pinned = pin("myexts.hello", module_file("myexts.hello"))
    assert "#sha256=" in pinned
    assert "hello" in load_extensions([pinned], tmp_path).commands
    (pkg / "hello.py").write_text("def register(api):\n    pass\n")
    with pytest.raises(ExtensionError, match="changed since"):
        load_extensions([pinned], tmp_path)
