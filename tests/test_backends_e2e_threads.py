"""Threads end to end on both back ends: the real CLI and daemon with the scripted model, on
the default SQLite file and on a real PostgreSQL server (SUPERVISE_DB_URL)."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from conftest import Daemon, Env


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, env: Env) -> str:
    """Which database the CLI and the daemon use; PostgreSQL through SUPERVISE_DB_URL."""
    if request.param == "postgresql":
        env.extra["SUPERVISE_DB_URL"] = request.getfixturevalue("pg_url")
    return str(request.param)


def script(env: Env, turns: list[dict[str, Any]]) -> str:
    env.write("turns.yaml", yaml.safe_dump({"turns": turns}))
    return "scripted:turns.yaml"


def show(env: Env, tid: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(env.cli("thread", "show", tid, "--json", check=True).stdout)
    return data


def settled(env: Env, tid: str, status: str) -> dict[str, Any]:
    return env.wait_thread(tid, [status])


def test_ask_detached_completes_and_shows(
    backend: str, env: Env, start_daemon: Callable[[], Daemon]
) -> None:
    start_daemon()
    model = script(env, [{"content": "the disk was full"}])
    r = env.cli("ask", "-d", "--json", "--model", model, "why", "did", "it", "fail?", check=True)
    assert json.loads(r.stdout) == {"id": "t1"}
    t = settled(env, "t1", "completed")
    assert (t["trigger"], t["process_id"], t["turns"], t["model"]) == (
        "user",
        None,
        1,
        f"scripted:{env.work / 'turns.yaml'}",
    )
    assert [(e["seq"], e["kind"]) for e in t["entries"]] == [(1, "user"), (2, "assistant")]
    assert t["entries"][0]["text"] == "why did it fail?"
    assert t["usage"]["model_calls"] == 1
    text = env.cli("thread", "show", "t1", check=True).stdout
    assert "--- final answer ---\nthe disk was full" in text
    assert "status completed" in text
    ps = env.ps()
    assert [(x["id"], x["status"]) for x in ps["threads"]] == [("t1", "completed")]


def test_approve_send_and_cancel(
    backend: str, env: Env, start_daemon: Callable[[], Daemon]
) -> None:
    (env.home).mkdir(parents=True, exist_ok=True)
    (env.home / "no-settings.toml").write_text('[permissions]\nask = ["Write"]\n')
    model = script(
        env,
        [
            {"tool_calls": [{"name": "Write", "arguments": {"path": "out.txt", "content": "hi"}}]},
            {"content": "wrote it"},
            {"tool_calls": [{"name": "Write", "arguments": {"path": "two.txt", "content": "x"}}]},
        ],
    )
    daemon = start_daemon()
    env.cli("ask", "-d", "--model", model, "write a file", check=True)
    t = settled(env, "t1", "waiting_approval")
    assert t["waiting"] == "Write(out.txt)"
    assert not (env.work / "out.txt").exists()
    r = env.cli("approve", "t1", check=True)
    assert "approved Write(out.txt)" in r.stdout
    settled(env, "t1", "completed")
    assert (env.work / "out.txt").read_text() == "hi"
    assert env.cli("approve", "t1").returncode == 2  # nothing waits any more
    # A daemon killed while nothing runs loses nothing; the next one continues the thread.
    daemon.kill(signal.SIGKILL)
    start_daemon()
    env.cli("send", "-d", "t1", "now", "another", check=True)
    settled(env, "t1", "waiting_approval")
    r = env.cli("cancel", "t1", check=True)
    assert r.stdout.strip() == "t1: cancelled"
    t = settled(env, "t1", "cancelled")
    assert t["error"] == "cancelled by a person"
    assert not (env.work / "two.txt").exists()
    r = env.cli("cancel", "t1")
    assert (r.returncode, "already ended (cancelled)" in r.stderr) == (2, True)
    kinds = [e["kind"] for e in t["entries"]]
    assert kinds.count("approval") == 3  # asked, approved; asked again, never decided
    assert kinds[-3:] == ["user", "assistant", "approval"]
