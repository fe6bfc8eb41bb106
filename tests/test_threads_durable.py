"""Threads against real model servers and a daemon killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import Daemon, Env, wait_until
from modelserver import ModelServer
from test_threads_e2e import hook_file, results, run_hooked, script, settled, thread

KEY = "sk-live-SECRET-abcdef0123456789"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as s:
        yield s


def test_resumed_after_sigkill_completes_exactly_once(env: Env, daemon: Daemon) -> None:
    turns = script(
        env,
        [
            {"tool_calls": [{"name": "Bash", "arguments": {"command": "echo once >> first"}}]},
            {
                "tool_calls": [
                    {
                        "name": "Bash",
                        "arguments": {"command": "echo $$ > slow.pid; echo x >> slow; sleep 30"},
                    }
                ]
            },
            {"tool_calls": [{"name": "Bash", "arguments": {"command": "echo after >> third"}}]},
            {"content": "finished"},
        ],
    )
    # Unsandboxed: the tool outlives the daemon, and the restarted daemon must kill it (a
    # sandboxed tool dies with the daemon: tests/test_sandbox.py).
    agent = {"model": f"scripted:{turns.name}", "permissions": {"allow": ["Bash"]}}
    run_hooked(env, hook_file(env, {**agent, "sandbox": "off"}))
    pidfile = env.work / "slow.pid"
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="slow tool running")
    # The kill below is of a call whose pid the daemon recorded (a daemon killed in the
    # moment between the spawn and that record cannot know what to kill).
    wait_until(
        lambda: [e["kind"] for e in thread(env, "t1")["entries"]].count("tool_pid") == 2,
        what="the slow call's tool_pid entry (the first call has one too)",
    )
    daemon.kill(signal.SIGKILL)
    leftover = int(pidfile.read_text())
    os.kill(leftover, 0)  # the tool outlived the daemon
    daemon.start()
    t = settled(env, "t1")
    assert t["status"] == "completed", t
    assert (env.work / "first").read_text() == "once\n"
    assert (env.work / "slow").read_text() == "x\n"  # interrupted, never re-run
    assert (env.work / "third").read_text() == "after\n"
    statuses = [r["status"] for r in results(t)]
    assert statuses == ["ok", "interrupted", "ok"]
    assert "processes that were still running have been killed" in results(t)[1]["output"]
    with pytest.raises(ProcessLookupError):
        wait_until(lambda: os.kill(leftover, 0), what="leftover killed")
    finals = [e for e in t["entries"] if e["kind"] == "assistant" and not e["tool_calls"]]
    assert len(finals) == 1 and finals[0]["content"] == "finished"
    assert any(e["kind"] == "note" and "resumed" in e["text"] for e in t["entries"])


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", ["1", "0"])
def test_real_wire_protocol_through_the_daemon(
    env: Env, server: ModelServer, start_daemon: Callable[[], Daemon], provider: str, stream: str
) -> None:
    server.push_error(429, headers={"retry-after": "0"})
    server.push_error(500)
    server.push(
        "Checking the output.",
        [{"id": "c1", "name": "Bash", "arguments": {"command": 'tail -n 1 "$SUPERVISE_OUTPUT"'}}],
        usage=(200, 12),
    )
    server.push("Diagnosis: it printed hello.", usage=(260, 8))
    base = f"{server.url}/v1" if provider == "openai" else server.url
    var = provider.upper()
    env.extra.update({f"{var}_BASE_URL": base, f"{var}_API_KEY": KEY, "SUPERVISE_STREAM": stream})
    start_daemon()
    hooks = hook_file(env, {"model": f"{provider}:test-model", "permissions": {"allow": ["Bash"]}})
    run_hooked(env, hooks)
    t = settled(env, "t1")
    assert t["status"] == "completed", t
    assert t["model"] == f"{provider}:test-model"
    assert results(t)[0]["output"] == "hello from the job"
    assert t["usage"] == {"input_tokens": 460, "output_tokens": 20, "model_calls": 2}
    assert len(server.requests) == 4  # 429 and 500 were retried
    last: dict[str, Any] = server.requests[-1]["json"]
    assert "hello from the job" in json.dumps(last["messages"])
    system = last["messages"][0]["content"] if provider == "openai" else last["system"]
    assert "A process hook has fired" in system and "Instructions: Look at the output." in system


def test_api_key_never_reaches_db_transcript_or_log(
    env: Env, server: ModelServer, start_daemon: Callable[[], Daemon]
) -> None:
    server.push(
        "",
        [{"id": "c1", "name": "Bash", "arguments": {"command": "echo key=$OPENAI_API_KEY; env"}}],
    )
    server.push("done")
    env.extra.update({"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": KEY})
    daemon = start_daemon()
    hooks = hook_file(env, {"model": "openai:m", "permissions": {"allow": ["Bash"]}})
    run_hooked(env, hooks)
    t = settled(env, "t1")
    assert t["status"] == "completed"
    assert results(t)[0]["output"].startswith("key=\n")  # not in the tool's environment
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"
    daemon.kill(signal.SIGTERM)
    for path in [*env.home.rglob("*"), daemon.log]:
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_auth_error_fails_the_thread_naming_the_variable(
    env: Env, server: ModelServer, start_daemon: Callable[[], Daemon]
) -> None:
    server.push_error(401, body='{"error": {"message": "invalid x-api-key"}}')
    env.extra.update({"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": KEY})
    start_daemon()
    hooks = hook_file(env, {"model": "anthropic:m", "permissions": {"allow": ["Bash"]}})
    run_hooked(env, hooks)
    t = settled(env, "t1")
    assert t["status"] == "failed"
    assert "set ANTHROPIC_API_KEY" in t["error"] and KEY not in t["error"]
    assert len(server.requests) == 1  # an auth error is not retried


def test_a_secret_a_model_server_echoes_stays_out_of_the_daemon_log(
    env: Env, server: ModelServer, start_daemon: Callable[[], Daemon]
) -> None:
    # A proxy's error may quote any credential of the daemon's environment, not only the
    # model's key (which the model client masks itself): the thread's failure reaches
    # daemon.log and must not carry it.
    token = "ghp-deploy-0123456789abcdef"
    echo = json.dumps({"error": {"message": f"upstream refused token {token}"}})
    server.push_error(400, body=echo)
    env.extra.update(
        {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": KEY, "DEPLOY_TOKEN": token}
    )
    daemon = start_daemon()
    run_hooked(env, hook_file(env, {"model": "openai:m"}))
    t = settled(env, "t1")
    assert t["status"] == "failed" and token not in t["error"], t
    daemon.kill(signal.SIGTERM)
    log = daemon.log.read_text()
    assert "upstream refused token [redacted $DEPLOY_TOKEN]" in log, log
    assert token not in log
