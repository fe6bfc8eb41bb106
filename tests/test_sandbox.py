"""The tools' sandbox (bubblewrap): policy parsing, the argv, and real confinement.

Confinement is tested with the real bwrap, in-process through the Bash tool and end to end
through the daemon and CLI. Only where bwrap is not installed do those tests skip (CI
installs it: .ci/run).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
import yaml
from conftest import Daemon, Env, wait_until
from test_threads_e2e import results, run_hooked, script, settled

from agent_threads.sandbox import Mounts, SandboxError, bwrap_args, resolve
from agent_threads.tools.base import ToolContext, ToolResult
from agent_threads.tools.bash import BashArgs, BashTool
from state.sandboxpolicy import SandboxConfigError, SandboxPolicy
from state.settings import load_settings
from supervise.errors import UserError
from supervisor.hookfile import parse_hook_text

BWRAP = shutil.which("bwrap")
needs_bwrap = pytest.mark.skipif(
    BWRAP is None, reason="bwrap is not installed (apt-get install bubblewrap)"
)

# Policy: what the hook file and settings say


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (None, SandboxPolicy()),
        ("off", SandboxPolicy(mode="off")),
        ("Required", SandboxPolicy(mode="required")),
        (False, SandboxPolicy(mode="off")),  # YAML reads a bare `off` as false
        ({"network": False}, SandboxPolicy(network=False)),
        (
            {"mode": "required", "network": True, "write": ["/data", "~/out"]},
            SandboxPolicy("required", True, ("/data", "~/out")),
        ),
    ],
)
def test_policy_forms(raw: Any, want: SandboxPolicy) -> None:
    assert SandboxPolicy.parse(raw) == want
    assert SandboxPolicy.from_json(want.to_json()) == want


@pytest.mark.parametrize(
    ("raw", "key", "text"),
    [
        ("sometimes", "", "must be off, auto or required, got 'sometimes'"),
        (3, "", "must be off, auto, required or a mapping"),
        ({"mode": "on"}, "mode", "must be off, auto or required, got 'on'"),
        ({"network": "no"}, "network", "must be true or false, got 'no'"),
        ({"write": "/data"}, "write", "must be a list of directories"),
        ({"write": ["rel/dir"]}, "write", "must hold absolute paths, got 'rel/dir'"),
        ({"netwrk": False}, "netwrk", "is not a sandbox setting"),
    ],
)
def test_bad_policies_name_the_key(raw: Any, key: str, text: str) -> None:
    with pytest.raises(SandboxConfigError) as err:
        SandboxPolicy.parse(raw)
    assert err.value.key == key and text in str(err.value)


def test_sub_agents_only_get_stricter() -> None:
    parent = SandboxPolicy("auto", False, ("/a", "/b"))
    # A child asking for less confinement keeps its parent's.
    loose = SandboxPolicy("off", True, ("/a", "/etc"))
    assert loose.within(parent) == SandboxPolicy("auto", False, ("/a",))
    # A child asking for more gets it.
    assert SandboxPolicy("required").within(parent) == SandboxPolicy(
        "required", False, ("/a", "/b")
    )
    assert SandboxPolicy("off").within(SandboxPolicy("required")).mode == "required"
    assert SandboxPolicy("off").within(None) == SandboxPolicy("off")
    # Unsaid values come from the settings.
    assert SandboxPolicy().over(SandboxPolicy("off", False, ("/x",))) == SandboxPolicy(
        "auto", False, ("/x",)
    )


def test_hook_file_sandbox_errors_at_file_line() -> None:
    text = "purpose: x\nagent:\n  sandbox:\n    mode: auto\n    network: maybe\n"
    with pytest.raises(UserError) as err:
        parse_hook_text(text, "h.yaml")
    assert str(err.value) == (
        "h.yaml:5: agent.sandbox.network must be true or false, got 'maybe'; write network: false"
    )
    with pytest.raises(UserError, match=r"h.yaml:3: agent.sandbox must be off, auto or"):
        parse_hook_text("purpose: x\nagent:\n  sandbox: sometimes\n", "h.yaml")
    hf = parse_hook_text("purpose: x\nagent:\n  sandbox: off\n", "h.yaml")
    assert hf.agent.sandbox == SandboxPolicy("off")


def test_settings_file_and_variable(tmp_path: Path) -> None:
    cfg = tmp_path / "settings.toml"
    cfg.write_text('[sandbox]\nmode = "required"\nnetwork = false\nwrite = ["/srv/data"]\n')
    env = {"SUPERVISE_CONFIG": str(cfg)}
    assert load_settings(env).sandbox == SandboxPolicy("required", False, ("/srv/data",))
    assert load_settings({**env, "SUPERVISE_SANDBOX": "off"}).sandbox.mode == "off"
    with pytest.raises(UserError, match="SUPERVISE_SANDBOX must be off, auto or required"):
        load_settings({**env, "SUPERVISE_SANDBOX": "maybe"})
    cfg.write_text('sandbox = "sometimes"\n')
    with pytest.raises(UserError, match=r"settings.toml: sandbox must be off, auto or required"):
        load_settings(env)
    assert load_settings({"SUPERVISE_CONFIG": str(tmp_path / "none.toml")}).sandbox.mode == "auto"


def test_argv_drops_capabilities_and_hides_the_state_dir() -> None:
    m = Mounts(cwd=Path("/w"), home=Path("/h"), visible=(Path("/h/runs/1/output.log"),))
    args = bwrap_args(SandboxPolicy(network=False), m)
    joined = " ".join(args)
    assert "--cap-drop ALL" in joined  # as root, bwrap would keep every capability
    assert "--unshare-net" in args and "--die-with-parent" in args
    # The state dir is hidden after the working dir is bound, then made read-only.
    assert joined.index("--bind /w /w") < joined.index("--tmpfs /h") < joined.index("--remount-ro")
    assert "--unshare-net" not in bwrap_args(SandboxPolicy(network=True), m)
    supervised = bwrap_args(SandboxPolicy(), m, supervised=True)
    assert "--new-session" not in supervised and "--die-with-parent" not in supervised
    with pytest.raises(SandboxError, match="inside SUPERVISE_HOME"):
        bwrap_args(SandboxPolicy(), Mounts(cwd=Path("/h/runs/1"), home=Path("/h")))


# The Bash tool under the real bwrap


@pytest.fixture
def place(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(home, work): a state dir with a database and an output log, and a working dir."""
    home, work = tmp_path / "home", tmp_path / "work"
    (home / "runs" / "1").mkdir(parents=True)
    (home / "state.db").write_text("secret state")
    (home / "runs" / "1" / "output.log").write_text("the process said hi\n")
    (home / "runs" / "1" / "spec.json").write_text("{}")
    work.mkdir()
    yield home, work


def bash(
    command: str,
    home: Path,
    work: Path,
    policy: SandboxPolicy = SandboxPolicy(),  # noqa: B008 (frozen)
    env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> ToolResult:
    output = home / "runs" / "1" / "output.log"
    base = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")}
    base.update(env or {})
    sandbox = resolve(policy, home, (output,), search_path=base["PATH"])
    tool_env = {**base, "SUPERVISE_HOME": str(home), "SUPERVISE_OUTPUT": str(output)}
    ctx = ToolContext(thread_id=1, cwd=work, env=tool_env, sandbox=sandbox)

    async def go() -> ToolResult:
        return await BashTool().run(BashArgs(command=command, timeout=timeout), ctx)

    return anyio.run(go)


@needs_bwrap
def test_bash_writes_only_in_its_working_dir_and_tmp(place: tuple[Path, Path]) -> None:
    home, work = place
    outside = work.parent / "outside"
    outside.mkdir()
    mark = f"supervise-sandbox-test-{os.getpid()}"
    etc, root = Path("/etc") / mark, Path.home() / mark
    try:
        r = bash(
            f"touch /etc/{mark}; touch ~/{mark}; touch {outside}/x; "
            "touch here && echo > /tmp/t && echo wrote",
            home,
            work,
        )
        # /etc and ~ are read-only; the sandbox's /tmp is its own, so `outside` is not there.
        assert r.output.count("Read-only file system") == 2, r.output
        assert f"{outside}/x': No such file or directory" in r.output
        assert "wrote" in r.output
        assert not etc.exists() and not root.exists() and not (outside / "x").exists()
        assert (work / "here").exists()
    finally:
        etc.unlink(missing_ok=True)
        root.unlink(missing_ok=True)


@needs_bwrap
def test_bash_cannot_see_or_touch_the_state_dir(place: tuple[Path, Path]) -> None:
    home, work = place
    r = bash(
        'ls -A "$SUPERVISE_HOME"; cat "$SUPERVISE_HOME/state.db"; '
        'ls "$SUPERVISE_HOME/runs/1"; echo x > "$SUPERVISE_HOME/runs/1/spec.json"; '
        'tail -n 1 "$SUPERVISE_OUTPUT"; echo more >> "$SUPERVISE_OUTPUT"',
        home,
        work,
    )
    lines = r.output.splitlines()
    # Only the path to the triggering process's output log is there, read-only.
    assert lines[0] == "runs"
    assert "state.db: No such file or directory" in lines[1]
    assert lines[2] == "output.log"
    assert "spec.json: Read-only file system" in r.output
    assert "the process said hi" in r.output
    assert r.output.count("Read-only file system") == 2
    assert (home / "state.db").read_text() == "secret state"
    assert (home / "runs" / "1" / "spec.json").read_text() == "{}"
    assert (home / "runs" / "1" / "output.log").read_text() == "the process said hi\n"


@needs_bwrap
def test_bash_state_dir_hidden_even_when_the_cwd_holds_it(tmp_path: Path) -> None:
    # The default SUPERVISE_HOME (~/.local/state/supervise) lies under a project run from ~.
    home = tmp_path / ".local" / "state" / "supervise"
    home.mkdir(parents=True)
    (home / "state.db").write_text("secret")
    r = bash(
        f"cat {home}/state.db; ls -A {home}; touch {home}/x; touch mine && echo ok", home, tmp_path
    )
    assert "secret" not in r.output and "ok" in r.output
    assert not (home / "x").exists() and (tmp_path / "mine").exists()


@needs_bwrap
def test_network_per_policy(place: tuple[Path, Path]) -> None:
    home, work = place
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        accepted: list[bytes] = []

        def serve() -> None:
            server.settimeout(30)
            with contextlib.suppress(OSError):
                conn, _ = server.accept()
                with conn:
                    accepted.append(conn.recv(100))

        t = threading.Thread(target=serve)
        t.start()
        probe = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo hello >&3 && echo connected"
        off = bash(probe, home, work, SandboxPolicy(network=False))
        assert "connected" not in off.output and off.is_error, off.output
        assert not accepted
        on = bash(probe, home, work, SandboxPolicy(network=True))
        assert "connected" in on.output, on.output
        t.join(30)
        assert accepted == [b"hello\n"]


@needs_bwrap
def test_timeout_kills_the_whole_sandboxed_tree(place: tuple[Path, Path]) -> None:
    home, work = place
    nap = f"300.{os.getpid()}"

    # A background child, and one in its own session that a group kill alone would miss.
    def sleeping() -> list[psutil.Process]:
        return [
            p
            for p in psutil.process_iter(["cmdline"])
            if (p.info["cmdline"] or [])[:2] == ["sleep", nap]
        ]

    try:
        r = bash(f"sleep {nap} & setsid sleep {nap} & sleep {nap}", home, work, timeout=1000)
        assert "timed out after 1s" in r.output
        wait_until(lambda: not sleeping(), what="every sleep killed")
    finally:
        for p in sleeping():  # only if the test failed: leave nothing behind
            p.kill()


def test_required_without_bwrap_refuses(place: tuple[Path, Path]) -> None:
    home, _ = place
    path, bwrap = os.environ["PATH"], "/nonexistent/bwrap"  # the bwrap setting
    with pytest.raises(SandboxError, match="required but the sandbox cannot run"):
        resolve(SandboxPolicy("required"), home, bwrap=bwrap, search_path=path)
    assert resolve(SandboxPolicy("off"), home, bwrap=bwrap, search_path=path).bwrap is None
    # A bwrap that is there but cannot make namespaces (a container without CAP_SYS_ADMIN):
    # the probe's own message is the reason given.
    broken = home.parent / "bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\n"
        "exit 1\n"
    )
    broken.chmod(0o755)
    bwrap = str(broken)
    with pytest.raises(SandboxError, match="Creating new namespace failed: Operation not"):
        resolve(SandboxPolicy("required"), home, bwrap=bwrap, search_path=path)
    assert resolve(SandboxPolicy("auto"), home, bwrap=bwrap, search_path=path).warning is not None


def test_auto_without_bwrap_warns_once(place: tuple[Path, Path]) -> None:
    home, work = place
    output = home / "runs" / "1" / "output.log"
    sandbox = resolve(SandboxPolicy(), home, (output,), bwrap="/nonexistent/bwrap")
    assert sandbox.bwrap is None and sandbox.warning is not None
    ctx = ToolContext(thread_id=1, cwd=work, env=dict(os.environ), sandbox=sandbox)

    async def go() -> list[ToolResult]:
        return [await BashTool().run(BashArgs(command="echo hi"), ctx) for _ in range(2)]

    first, second = anyio.run(go)
    assert first.output.startswith("[warning: commands run WITHOUT a sandbox")
    assert second.output == "hi"


@needs_bwrap
def test_off_runs_unsandboxed(place: tuple[Path, Path]) -> None:
    home, work = place
    r = bash('cat "$SUPERVISE_HOME/state.db"', home, work, SandboxPolicy("off"))
    assert r.output == "secret state"


# Through the real daemon and CLI


def sandbox_hooks(env: Env, turns: Path, sandbox: Any) -> Path:
    body = {
        "purpose": "test the sandbox",
        "hooks": [{"name": "done", "on_exit": {}, "instructions": "Look at the output."}],
        "agent": {
            "model": f"scripted:{turns.name}",
            "permissions": {"allow": ["Bash", "RunProcess"]},
            "sandbox": sandbox,
        },
    }
    return env.write("hooks.yaml", yaml.safe_dump(body))


@needs_bwrap
def test_thread_bash_is_confined_end_to_end(env: Env, daemon: Daemon) -> None:
    mark = f"supervise-sandbox-e2e-{os.getpid()}"
    command = (
        f"touch /etc/{mark} ~/{mark}; ls -A $SUPERVISE_HOME; cat $SUPERVISE_HOME/state.db; "
        "touch made-here && echo done"
    )
    turns = script(
        env,
        [
            {"tool_calls": [{"name": "Bash", "arguments": {"command": command}}]},
            {"content": "checked"},
        ],
    )
    try:
        run_hooked(env, sandbox_hooks(env, turns, {"mode": "required", "network": False}))
        t = settled(env, "t1", "completed")
    finally:
        for p in (Path("/etc") / mark, Path.home() / mark):
            p.unlink(missing_ok=True)
    out = results(t)[0]["output"]
    assert out.count("Read-only file system") == 2, out
    assert "state.db: No such file or directory" in out
    assert out.splitlines()[2] == "runs"  # only the way to the output log
    assert "done" in out and (env.work / "made-here").exists()


def test_required_fails_the_thread_when_bwrap_cannot_run(env: Env, start_daemon: Any) -> None:
    env.extra["SUPERVISE_BWRAP"] = "/nonexistent/bwrap"
    d: Daemon = start_daemon()
    turns = script(env, [{"tool_calls": [{"name": "Bash", "arguments": {"command": "echo x"}}]}])
    run_hooked(env, sandbox_hooks(env, turns, "required"))
    t = settled(env, "t1", "failed")
    assert "agent.sandbox is required but the sandbox cannot run" in t["error"]
    assert "install bubblewrap" in t["error"]
    assert not results(t)  # nothing ran unconfined
    # auto: runs, and says so once in the transcript and in the daemon's log
    turns = script(
        env,
        [
            {"tool_calls": [{"name": "Bash", "arguments": {"command": "echo one"}}]},
            {"tool_calls": [{"name": "Bash", "arguments": {"command": "echo two"}}]},
            {"content": "ran"},
        ],
        name="auto.yaml",
    )
    run_hooked(env, sandbox_hooks(env, turns, "auto"))
    t = settled(env, "t2", "completed")
    first, second = (r["output"] for r in results(t))
    assert first.startswith("[warning: commands run WITHOUT a sandbox") and first.endswith("one")
    assert second == "two"
    wait_until(lambda: "WARNING commands run WITHOUT a sandbox" in d.log.read_text(), what="log")


@needs_bwrap
def test_runprocess_child_runs_in_the_thread_sandbox(env: Env, daemon: Daemon) -> None:
    mark = f"supervise-sandbox-child-{os.getpid()}"
    child = f"touch /etc/{mark} || echo refused; touch child-was-here; sleep 0.2"
    turns = script(
        env,
        [
            {"tool_calls": [{"name": "RunProcess", "arguments": {"command": child}}]},
            {"content": "started"},
        ],
    )
    try:
        run_hooked(env, sandbox_hooks(env, turns, {"mode": "required", "network": False}))
        settled(env, "t1", "completed")
        env.wait_state(2, "exited")
    finally:
        (Path("/etc") / mark).unlink(missing_ok=True)
    log = (env.home / "runs" / "2" / "output.log").read_text()
    assert "Read-only file system" in log and "refused" in log
    assert (env.work / "child-was-here").exists()
    spec = json.loads((env.home / "runs" / "2" / "spec.json").read_text())
    assert spec["parent_sandbox"] == {"mode": "required", "network": False, "write": []}
    assert spec["argv"] == ["/bin/sh", "-c", child]  # the sandbox is not the command


@needs_bwrap
def test_stop_reaches_a_sandboxed_child(env: Env, daemon: Daemon) -> None:
    code = (
        "import pathlib,signal,sys,time\n"
        "def bye(*a):\n    pathlib.Path('got-term').write_text('bye')\n    sys.exit(7)\n"
        "signal.signal(signal.SIGTERM, bye)\ntime.sleep(60)\n"
    )
    # `python3` from PATH, not sys.executable: a venv under /tmp (a CI clone there) is hidden
    # by the sandbox's private /tmp.
    argv = ["python3", "-c", code]
    turns = script(
        env,
        [
            {"tool_calls": [{"name": "RunProcess", "arguments": {"command": argv}}]},
            {"content": "started"},
        ],
    )
    run_hooked(env, sandbox_hooks(env, turns, "required"))
    settled(env, "t1", "completed")
    env.wait_state(2, "running")
    wait_until(
        lambda: any(
            (p.info["cmdline"] or [])[-1:] == [code] for p in psutil.process_iter(["cmdline"])
        ),
        what="child started",
    )
    env.cli("stop", "2", check=True)
    p = env.wait_state(2, "exited")
    # The child's own SIGTERM handler ran: the signal reached it through bwrap. What is
    # recorded is bwrap's end (killed by the same SIGTERM), not the child's own code.
    assert (env.work / "got-term").read_text() == "bye"
    assert p["signal"] == "SIGTERM" and p["exit_code"] == 143


@needs_bwrap
def test_a_sub_agent_cannot_turn_its_sandbox_off(env: Env, daemon: Daemon) -> None:
    mark = f"supervise-sandbox-sub-{os.getpid()}"
    child_turns = script(
        env,
        [
            {"tool_calls": [{"name": "Bash", "arguments": {"command": f"touch /etc/{mark}"}}]},
            {"content": "child done"},
        ],
        name="child.yaml",
    )
    inner = {
        "hooks": [{"name": "inner", "on_exit": {}, "instructions": "child work"}],
        "agent": {
            "model": f"scripted:{child_turns}",
            "permissions": {"allow": ["Bash"]},
            "sandbox": {"mode": "off", "network": True},  # asks for less: not granted
        },
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
    try:
        run_hooked(env, sandbox_hooks(env, turns, {"mode": "required", "network": False}))
        t = settled(env, "t2", "completed")
    finally:
        (Path("/etc") / mark).unlink(missing_ok=True)
    assert "Read-only file system" in results(t)[0]["output"]
    spec = json.loads((env.home / "runs" / "2" / "spec.json").read_text())
    assert spec["parent_sandbox"]["network"] is False


@needs_bwrap
def test_a_sandboxed_tool_dies_with_the_daemon(env: Env, daemon: Daemon) -> None:
    nap = f"300.{os.getpid()}"

    def sleeping() -> list[psutil.Process]:
        return [
            p
            for p in psutil.process_iter(["cmdline"])
            if (p.info["cmdline"] or [])[:2] == ["sleep", nap]
        ]

    # setsid: out of the tool's process group, so only the sandbox's PID namespace ends it.
    command = f"echo x >> slow; setsid sleep {nap} & sleep {nap}"
    turns = script(
        env,
        [
            {"tool_calls": [{"name": "Bash", "arguments": {"command": command}}]},
            {"content": "finished"},
        ],
    )
    try:
        run_hooked(env, sandbox_hooks(env, turns, "required"))
        wait_until(lambda: len(sleeping()) == 2, what="slow tool running")
        daemon.kill(signal.SIGKILL)
        # bwrap --die-with-parent: nothing of the tool runs on without the daemon.
        wait_until(lambda: not sleeping(), what="the tool ended with the daemon")
        daemon.start()
        t = settled(env, "t1", "completed")
    finally:
        for p in sleeping():  # only if the test failed: leave nothing behind
            p.kill()
    assert [r["status"] for r in results(t)] == ["interrupted"]
    assert (env.work / "slow").read_text() == "x\n"  # never run again


@needs_bwrap
def test_git_hooks_and_config_stay_read_only(place: tuple[Path, Path]) -> None:
    home, work = place
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    r = bash(
        "git init -q . && echo before > f && git add f && echo committed",
        home,
        work,
        SandboxPolicy("off"),
    )
    assert "committed" in r.output, r.output
    config = (work / ".git" / "config").read_text()
    r = bash(
        "echo 'touch pwned' > .git/hooks/post-checkout; git config core.fsmonitor 'touch pwned'; "
        "rm -rf .git/hooks; echo after > f; "
        "git -c user.name=t -c user.email=t@t commit -qam work && echo committed",
        home,
        work,
    )
    # The work itself goes on: objects, index and refs are written.
    assert "committed" in r.output, r.output
    assert not (work / ".git" / "hooks" / "post-checkout").exists()
    assert (work / ".git" / "hooks").is_dir()
    assert (work / ".git" / "config").read_text() == config
