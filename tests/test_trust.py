"""What a thread runs under is the daemon's, never a file a tool can write (issue 13, item 1).

Through the real CLI and daemon with the scripted model: a thread cannot widen its own
permissions by editing its process's spec.json, a spec.json or env.json changed by hand is
refused, Read/Write/Edit never touch the state directory, and tools get the environment the
process was launched with, also after the daemon is SIGKILLed. Then the file tools' path
handling, in process against real files.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from conftest import Daemon, Env, wait_until
from cryptography.fernet import Fernet
from test_threads_e2e import results, settled

from agent_threads.tools.base import ToolContext, ToolResult
from agent_threads.tools.files import EditArgs, EditTool, ReadArgs, ReadTool, WriteArgs, WriteTool

# Prints FIRE, then FIRE again once the test creates `go`: two fires of one process.
TWICE = (
    "import os, time\n"
    "print('FIRE', flush=True)\n"
    "while not os.path.exists('go'): time.sleep(0.05)\n"
    "print('FIRE', flush=True)\n"
    "time.sleep(60)\n"
)
# Prints FIRE once `go` exists.
ONCE_GO = (
    "import os, time\n"
    "while not os.path.exists('go'): time.sleep(0.05)\n"
    "print('FIRE', flush=True)\n"
    "time.sleep(60)\n"
)


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _hooks(env: Env, turns: list[dict[str, Any]], permissions: dict[str, Any]) -> Path:
    env.write("turns.yaml", yaml.safe_dump({"turns": turns}))
    body = {
        "purpose": "trust boundary test",
        "hooks": [
            {
                "name": "fire",
                "on_output_match": {"pattern": "FIRE"},
                "instructions": "Look.",
                "max_spawns": 2,
            }
        ],
        "agent": {"model": "scripted:turns.yaml", "permissions": permissions},
    }
    return env.write("hooks.yaml", yaml.safe_dump(body))


# -- the attack of item 1 ------------------------------------------------------------------


def test_a_thread_cannot_edit_its_spec_json_to_widen_the_next_threads_permissions(
    env: Env, daemon: Daemon
) -> None:
    spec = env.home / "runs" / "1" / "spec.json"
    dotdot = f"{env.work}/../{env.home.name}/runs/1/spec.json"  # /w/../<home>/runs/1/spec.json
    turns = [
        _call("Edit", path=dotdot, old_string='"Bash"', new_string='"Nothing"'),
        _call("Edit", path=str(spec), old_string='"allow": [', new_string='"allow": [\n"*",'),
        _call("Bash", command="touch pwned"),
        {"content": "done"},
    ]
    # Edits allowed in the work dir and even in the state dir by the rules: the tools refuse.
    allow = [f"Edit({env.work}/:*)", f"Edit({env.home}/:*)"]
    hooks = _hooks(env, turns, {"allow": allow, "deny": ["Bash"]})
    env.run_d(sys.executable, "-c", TWICE, hooks=hooks)
    before = wait_until(lambda: spec.exists() and spec.read_text(), what="spec.json")

    t1 = settled(env, "t1", "completed")
    edit_dotdot, edit_abs, bash = results(t1)
    # The permission check refuses first (the rule sees the real path, and $SUPERVISE_HOME
    # is never a tool's); the tool's own refusal is the next wall (tested alone below).
    for res in (edit_dotdot, edit_abs):
        assert res["status"] in ("denied", "error"), res
        assert "state dir" in res["output"] or "SUPERVISE_HOME" in res["output"], res
    assert bash["status"] == "denied"
    assert spec.read_text() == before

    (env.work / "go").touch()
    t2 = settled(env, "t2", "completed")
    assert t2["error"] is None
    assert results(t2)[2]["status"] == "denied"  # Bash: still the launch's permissions
    assert not (env.work / "pwned").exists()


@pytest.mark.parametrize("victim", ["spec.json", "env.json"])
def test_a_run_dir_file_changed_by_hand_is_refused(env: Env, daemon: Daemon, victim: str) -> None:
    turns = [_call("Bash", command="touch ran"), {"content": "done"}]
    hooks = _hooks(env, turns, {"deny": ["Bash"]})
    env.run_d(sys.executable, "-c", ONCE_GO, hooks=hooks)
    path = env.home / "runs" / "1" / victim
    wait_until(path.exists, what=str(path))
    if victim == "spec.json":  # the edit the attack wanted: every tool allowed
        spec = json.loads(path.read_text())
        spec["hooks"]["agent"]["permissions"] = {"allow": ["*"]}
        path.write_text(json.dumps(spec, indent=1))
    else:  # sealed again with a key of the attacker's: it must not open with the DB's
        evil = json.dumps({"LD_PRELOAD": "/tmp/evil.so", "PATH": "/usr/bin:/bin"}).encode()
        path.write_bytes(Fernet(Fernet.generate_key()).encrypt(evil))
    (env.work / "go").touch()

    t = settled(env, "t1")
    assert t["status"] == "failed"
    assert f"{path} was changed after launch" in t["error"]
    assert "start it again with `supervise run`" in t["error"]
    assert not (env.work / "ran").exists()
    # The hook still fired from the record in the DB; the daemon says why the thread failed.
    assert [f["hook"] for f in env.fires()] == ["fire"]
    assert f"WARNING process 1: {path} was changed after launch" in daemon.log.read_text()


# -- file tools and the state directory, end to end ----------------------------------------


def test_read_through_a_symlink_into_the_state_dir_is_refused(env: Env, daemon: Daemon) -> None:
    (env.work / "state").symlink_to(env.home)
    (env.work / "notes.txt").write_text("plain\n")
    turns = [
        _call("Read", path="state/runs/1/env.json"),
        _call("Read", path="state/state.db"),
        _call("Read", path="/proc/self/environ"),
        _call("Read", path="notes.txt"),
        _call("Write", path="state/runs/1/spec.json", content='{"hooks": {}}'),
        _call("Read", path="state/runs/1/output.log"),  # its own output: the one exception
        {"content": "done"},
    ]
    hooks = _hooks(env, turns, {"allow": ["Read", "Write"]})
    env.run_d(sys.executable, "-c", "print('FIRE')", hooks=hooks)
    env_json, db, environ, notes, write, output = results(settled(env, "t1", "completed"))
    # Refused by the permission check (the rule sees the real path) or, past it, by the tool.
    for res in (env_json, db, write):
        assert res["status"] in ("denied", "error"), res
        assert "SUPERVISE_HOME" in res["output"], res
    assert environ["status"] == "error" and "daemon's own /proc entry" in environ["output"]
    assert notes["status"] == "ok" and "plain" in notes["output"]
    assert output["status"] == "ok" and "FIRE" in output["output"]
    assert json.loads((env.home / "runs" / "1" / "spec.json").read_text())["hooks"]["hooks"]


# -- the process's environment -------------------------------------------------------------


def test_tools_see_the_process_env_also_after_the_daemon_is_killed(
    env: Env, daemon: Daemon
) -> None:
    token = "tok-" + "7" * 20  # a credential given to the process alone, not to the daemon
    turns = [
        _call("Bash", command='echo "$FOO" > "out-$SUPERVISE_THREAD_ID"; cat "$SUPERVISE_OUTPUT"'),
        {"content": "done"},
    ]
    hooks = _hooks(env, turns, {"allow": ["Bash"]})
    code = "import os; print('token', os.environ['APP_TOKEN'], flush=True)\n" + TWICE
    args = ["run", "-d", "--json", "--env", "FOO=bar", "--env", f"APP_TOKEN={token}"]
    env.cli(*args, "--hook", str(hooks), "--", sys.executable, "-c", code, check=True)

    t1 = settled(env, "t1", "completed")
    assert (env.work / "out-t1").read_text() == "bar\n"
    # The process's own secrets are scrubbed from the transcript like the daemon's.
    out = results(t1)[0]["output"]
    assert "token [redacted $APP_TOKEN]" in out and token not in out
    saved = (env.home / "runs" / "1" / "env.json").stat()
    assert saved.st_mode & 0o777 == 0o600
    assert token.encode() not in (env.home / "runs" / "1" / "env.json").read_bytes()  # sealed
    with sqlite3.connect(env.home / "state.db") as db:
        saved_entries = "".join(r[0] for r in db.execute("select data from entry"))
    assert "[redacted $APP_TOKEN]" in saved_entries and token not in saved_entries

    daemon.kill(signal.SIGKILL)
    daemon.start()
    (env.work / "go").touch()
    settled(env, "t2", "completed")
    assert (env.work / "out-t2").read_text() == "bar\n"


def test_the_launch_record_is_in_the_db_and_env_json_is_sealed(env: Env) -> None:
    value = "a-value-of-foo-" + "9" * 12
    env.extra["OPENAI_API_KEY"] = "sk-the-models-key-0123456789"
    env.cli("run", "-d", "--env", f"FOO={value}", "--", sys.executable, "-c", "pass", check=True)
    run = env.home / "runs" / "1"
    with sqlite3.connect(env.home / "state.db") as db:
        spec, key = db.execute("select spec, env_key from process where id = 1").fetchone()
    assert spec == (run / "spec.json").read_text()
    assert json.loads(spec)["env_keys"] == ["FOO"]
    sealed = (run / "env.json").read_bytes()
    assert (
        value.encode() not in sealed and value.encode() not in (env.home / "state.db").read_bytes()
    )
    saved = json.loads(Fernet(key.encode()).decrypt(sealed))
    assert saved["FOO"] == value and saved["PYTHONUNBUFFERED"] == "1"
    assert saved["OPENAI_API_KEY"] == env.extra["OPENAI_API_KEY"]  # kept, sealed: to scrub it


# -- the file tools themselves (real files, in process) ------------------------------------


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    home, work, user = tmp_path / "state", tmp_path / "work", tmp_path / "user"
    for d in (home, work, user):
        d.mkdir()
    (home / "state.db").write_text("records")
    env = {"SUPERVISE_HOME": str(home), "HOME": str(user)}
    return ToolContext(thread_id=1, cwd=work, env=env)


def _run(tool: Any, args: Any, ctx: ToolContext) -> ToolResult:
    from agent_threads.tools.base import ToolFailure

    async def go() -> ToolResult:
        try:
            result: ToolResult = await tool.run(args, ctx)
        except ToolFailure as exc:
            return ToolResult(str(exc), is_error=True)
        return result

    return anyio.run(go)


def _read(ctx: ToolContext, path: str) -> ToolResult:
    return _run(ReadTool(), ReadArgs(file_path=path), ctx)


def _write(ctx: ToolContext, path: str, content: str) -> ToolResult:
    return _run(WriteTool(), WriteArgs(file_path=path, content=content), ctx)


def _home(ctx: ToolContext) -> Path:
    return Path(ctx.env["SUPERVISE_HOME"])


@pytest.mark.parametrize(
    "path",
    [
        "../state/state.db",
        "{home}/state.db",
        "{home}/./runs/../state.db",
        "sub/../../state/state.db",
        "link/state.db",
        "dblink",
        "~/to-state/state.db",
    ],
)
def test_no_path_spelling_reaches_the_state_dir(ctx: ToolContext, path: str) -> None:
    home = _home(ctx)
    (ctx.cwd / "sub").mkdir()
    (ctx.cwd / "link").symlink_to(home)
    (ctx.cwd / "dblink").symlink_to(home / "state.db")
    (Path(ctx.env["HOME"]) / "to-state").symlink_to(home)
    path = path.format(home=home)
    read = _read(ctx, path)
    assert read.is_error and "inside supervise's state directory" in read.output
    write = _write(ctx, path, "mine")
    edit = _run(EditTool(), EditArgs(file_path=path, old_string="records", new_string="x"), ctx)
    for res in (write, edit):
        assert res.is_error and "inside supervise's state directory" in res.output
    assert (home / "state.db").read_text() == "records"
    assert (home / "runs").exists() is False  # not even a folder was made there


def test_only_read_of_the_triggering_output_is_let_through(ctx: ToolContext) -> None:
    run = _home(ctx) / "runs" / "1"
    run.mkdir(parents=True)
    (run / "output.log").write_text("boom\n")
    (run / "spec.json").write_text("{}")
    ctx = replace(ctx, output_path=run / "output.log")
    assert "boom" in _read(ctx, "../state/runs/1/output.log").output
    for res in (
        _read(ctx, str(run / "spec.json")),
        _write(ctx, str(run / "output.log"), "forged"),
        _run(
            EditTool(),
            EditArgs(file_path=str(run / "output.log"), old_string="boom", new_string="x"),
            ctx,
        ),
    ):
        assert res.is_error and "inside supervise's state directory" in res.output
    assert (run / "output.log").read_text() == "boom\n"


def test_writing_a_new_file_under_the_state_dir_makes_nothing(ctx: ToolContext) -> None:
    res = _write(ctx, f"{_home(ctx)}/runs/9/spec.json", "{}")
    assert res.is_error and not (_home(ctx) / "runs").exists()


def test_paths_resolve_from_cwd_and_the_tools_home(ctx: ToolContext) -> None:
    user = Path(ctx.env["HOME"])
    assert not _write(ctx, "~/notes.txt", "in the tools' HOME\n").is_error
    assert (user / "notes.txt").read_text() == "in the tools' HOME\n"
    assert not _write(ctx, "a/b.txt", "rel\n").is_error
    assert (ctx.cwd / "a" / "b.txt").read_text() == "rel\n"
    assert "rel" in _read(ctx, "a/../a/b.txt").output
    # A symlink in cwd to a file elsewhere is written through, and keeps the file's mode.
    target = user / "target.txt"
    target.write_text("old\n")
    target.chmod(0o640)
    (ctx.cwd / "t").symlink_to(target)
    assert not _run(
        EditTool(), EditArgs(file_path="t", old_string="old", new_string="new"), ctx
    ).is_error
    assert target.read_text() == "new\n" and (ctx.cwd / "t").is_symlink()
    assert target.stat().st_mode & 0o777 == 0o640


def test_the_daemons_own_proc_entry_is_refused(ctx: ToolContext) -> None:
    ours = _read(ctx, "/proc/self/environ")
    assert ours.is_error and "daemon's own /proc entry" in ours.output
    # A thread's id names a /proc entry of the whole process too.
    tid = threading.get_native_id()
    assert "daemon's own /proc entry" in _read(ctx, f"/proc/{tid}/environ").output
    assert "daemon's own /proc entry" in _read(ctx, "/proc/thread-self/environ").output
    other = _read(ctx, "/proc/1/comm")  # another process's entry is an ordinary file
    assert not other.is_error, other.output


def test_a_fifo_is_not_read_and_does_not_hang(ctx: ToolContext) -> None:
    os.mkfifo(ctx.cwd / "pipe")
    res = _read(ctx, "pipe")
    assert res.is_error and "not a regular file" in res.output


def test_what_was_really_opened_is_checked(ctx: ToolContext) -> None:
    # A symlink swapped in after the path was resolved: the descriptor tells the truth.
    from agent_threads.tools.base import ToolFailure
    from agent_threads.tools.files import _check_opened

    fd = os.open(_home(ctx) / "state.db", os.O_RDONLY)
    try:
        with pytest.raises(ToolFailure, match="inside supervise's state directory"):
            _check_opened(ctx, fd, "innocent.txt", write=False)
    finally:
        os.close(fd)
