"""The real CLI against real children: run, detach, logs, stop, signals, bad commands."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Daemon, Env, first_line, wait_for, wait_until


def test_run_attached_shows_output_and_exits_with_child_code(env: Env) -> None:
    r = env.cli("run", "--", sys.executable, "-c", "print('hello'); import sys; sys.exit(3)")
    assert r.returncode == 3, r.stderr
    assert "hello" in r.stdout
    p = env.ps()["processes"][0]
    assert p["state"] == "exited" and p["exit_code"] == 3 and p["result"] == "exit-code"
    assert (env.home / "daemon.pid").exists()  # run started a daemon
    # `run` waited for the daemon to commit the exit (it asked, with `attached`), not in vain.
    assert "has not recorded" not in r.stderr
    assert (env.home / "runs" / str(p["id"]) / "recorded").exists()


def test_a_detached_end_costs_no_marker_file(env: Env, daemon: Daemon) -> None:
    # Creating a file costs ~1 ms on ext4: at recovery, a thousand of them cost a second.
    pid = env.run_d("true")["id"]
    env.wait_state(pid, "exited")
    assert not (env.home / "runs" / str(pid) / "recorded").exists()


def test_run_detached_json_name_cwd_env(
    env: Env, daemon: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FROM_CLI", "cli-value")  # the child inherits the CLI's environment
    sub = env.work / "sub"
    sub.mkdir()
    code = "import os; print(os.getcwd(), os.environ['GREETING'], os.environ['FROM_CLI'])"
    r = env.cli(
        "run",
        "-d",
        "--json",
        "--name",
        "greeter",
        "--cwd",
        str(sub),
        "--env",
        "GREETING=hi there",
        "--",
        sys.executable,
        "-c",
        code,
        check=True,
    )
    out = json.loads(r.stdout)
    assert set(out) == {"id", "pid", "name"} and out["name"] == "greeter"
    assert isinstance(out["pid"], int)
    env.wait_state(out["id"], "exited")
    logs = env.cli("logs", str(out["id"]), check=True).stdout
    assert logs.strip() == f"{sub} hi there cli-value"
    spec = json.loads((env.home / "runs" / str(out["id"]) / "spec.json").read_text())
    assert spec["env_keys"] == ["GREETING"] and "hi there" not in json.dumps(spec)


def test_logs_tail_and_follow(env: Env, daemon: Daemon) -> None:
    script = (
        "import time\nfor i in range(5): print('line', i, flush=True)\n"
        "time.sleep(0.5)\nprint('last')"
    )
    pid = env.run_d(sys.executable, "-c", script)["id"]
    follow = env.cli("logs", str(pid), "-f", timeout=20)
    assert follow.stdout.splitlines() == [f"line {i}" for i in range(5)] + ["last"]
    assert env.cli("logs", str(pid), "-n", "2").stdout.splitlines() == ["line 4", "last"]


def test_command_not_found_is_exit_2_and_records_nothing(env: Env) -> None:
    r = env.cli("run", "-d", "--", "no-such-program-xyz", "arg")
    assert r.returncode == 2
    assert "command not found: no-such-program-xyz" in r.stderr
    assert "Traceback" not in r.stderr
    assert env.ps()["processes"] == []
    assert not any((env.home / "runs").iterdir())


def test_bad_usage_is_exit_2(env: Env) -> None:
    assert env.cli("run", "-d").returncode == 2
    r = env.cli("run", "-d", "--env", "NOEQUALS", "--", "true")
    assert r.returncode == 2 and "KEY=VALUE" in r.stderr
    r = env.cli("logs", "999")
    assert r.returncode == 2 and "no process 999" in r.stderr


def _output(env: Env, pid: int, text: str) -> str:
    """Until the process's output.log holds `text`; the output."""
    log = env.home / "runs" / str(pid) / "output.log"
    return wait_for(
        lambda: log.read_text() if log.exists() else "",
        lambda out: text in out,
        what=f"{text!r} in {log}",
    )


def _child_pid(env: Env, pid: int) -> int:
    path = env.home / "runs" / str(pid) / "child.pid"
    return int(wait_until(lambda: path.exists() and path.read_text().strip(), what=str(path)))


def test_stop_sends_term_to_the_whole_group(env: Env, daemon: Daemon) -> None:
    # The child starts a grandchild; both must go on TERM.
    script = (
        "import subprocess, sys, time\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(g.pid, flush=True)\ntime.sleep(60)\n"
    )
    pid = env.run_d(sys.executable, "-c", script)["id"]
    grand = int(_output(env, pid, "\n").strip())
    r = env.cli("stop", str(pid), "--grace", "5", check=True)
    assert "killed by SIGTERM" in r.stdout
    p = env.wait_state(pid, "exited")
    assert p["signal"] == "SIGTERM" and p["result"] == "signal" and p["exit_code"] == 143
    wait_until(lambda: not _alive(grand), what=f"grandchild {grand} gone")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_stop_int_reaches_python_as_keyboardinterrupt(env: Env, daemon: Daemon) -> None:
    script = (
        "import time\nprint('ready', flush=True)\ntry:\n    time.sleep(60)\n"
        "except KeyboardInterrupt:\n    print('got KeyboardInterrupt', flush=True)\n"
        "    raise SystemExit(7)\n"
    )
    pid = env.run_d(sys.executable, "-c", script)["id"]
    _output(env, pid, "ready")
    env.cli("stop", str(pid), "--signal", "INT", "--grace", "5", check=True)
    p = env.wait_state(pid, "exited")
    assert p["exit_code"] == 7
    assert "got KeyboardInterrupt" in env.cli("logs", str(pid)).stdout


def test_stop_escalates_to_kill_after_grace(env: Env, daemon: Daemon) -> None:
    script = (
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\ntime.sleep(60)\n"
    )
    pid = env.run_d(sys.executable, "-c", script)["id"]
    _output(env, pid, "ready")
    start = time.monotonic()
    r = env.cli("stop", str(pid), "--grace", "0.5", check=True)
    assert time.monotonic() - start < 30  # killed after its grace, not after its 60 s sleep
    assert "SIGKILL" in r.stderr and "killed by SIGKILL" in r.stdout
    assert env.wait_state(pid, "exited")["signal"] == "SIGKILL"
    r = env.cli("stop", str(pid))
    assert r.returncode == 1 and "not running" in r.stderr


def test_stop_refuses_a_reused_pid(env: Env, daemon: Daemon) -> None:
    pid = env.run_d(sys.executable, "-c", "import time; time.sleep(60)")["id"]
    _child_pid(env, pid)
    db = env.home / "state.db"
    # Pretend the recorded start time belongs to another process that had this pid.
    subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
                "c.execute('update process set pid_started = pid_started - 100'); c.commit()"
            ),
            str(db),
        ],
        check=True,
    )
    r = env.cli("stop", str(pid))
    assert r.returncode == 1 and "not running" in r.stderr
    assert _alive(_child_pid(env, pid))


def test_state_dir_is_private(env: Env) -> None:
    env.extra["SUPERVISE_AUTOSTART"] = "0"  # the state dir is made by the CLI: no daemon needed
    env.cli("run", "-d", "--", "true", check=True)
    assert (env.home.stat().st_mode & 0o777) == 0o700
    assert ((env.home / "state.db").stat().st_mode & 0o777) == 0o600


def test_corrupt_state_db_names_the_file(env: Env) -> None:
    env.home.mkdir(mode=0o700)
    (env.home / "state.db").write_bytes(b"this is not sqlite" * 100)
    r = env.cli("ps")
    assert r.returncode == 1  # a failure at run time, not bad usage
    assert str(env.home / "state.db") in r.stderr and "Traceback" not in r.stderr


def test_locked_state_db_is_a_clear_error(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    env.extra["SUPERVISE_AUTOSTART"] = "0"  # a database is all it needs: no daemon
    env.cli("run", "-d", "--", "true", check=True)
    monkeypatch.setenv("SUPERVISE_DB_TIMEOUT", "0.5")
    holder = sqlite3.connect(env.home / "state.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another program holds the write lock
    try:
        r = env.cli("run", "-d", "--", "true")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # A runtime failure (exit 1), not bad usage (exit 2): retrying later works.
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"{env.home / 'state.db'}: the state database stayed locked" in r.stderr
    assert len(env.ps()["processes"]) == 1  # nothing half-recorded, nothing lost


@contextlib.contextmanager
def _attached(env: Env, *cmd: str) -> Iterator[subprocess.Popen[str]]:
    cli = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "run", "--", *cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env.env,
        cwd=env.work,
        start_new_session=True,  # its own "terminal" session, signalled as a whole below
    )
    with cli:
        try:
            yield cli
        finally:
            if cli.poll() is None:  # a failed test must not leave it for a later test's GC
                cli.kill()


def test_ctrl_c_detaches_and_leaves_the_process_running(env: Env, daemon: Daemon) -> None:
    sleeper = "import time; print('up', flush=True); time.sleep(60)"
    with _attached(env, sys.executable, "-c", sleeper) as cli:
        assert cli.stdout is not None
        assert first_line(cli.stdout, what="the child's first line") == "up\n"
        os.killpg(cli.pid, signal.SIGINT)  # Ctrl-C reaches the terminal's foreground group
        _out, err = cli.communicate(timeout=30)
    assert cli.returncode == 130 and "detached; process 1 keeps running" in err
    assert env.process(1)["state"] == "running"
    assert _alive(_child_pid(env, 1))


def test_process_survives_its_terminal_closing(env: Env, daemon: Daemon) -> None:
    sleeper = "import time; print('up', flush=True); time.sleep(60)"
    with _attached(env, sys.executable, "-c", sleeper) as cli:
        assert cli.stdout is not None
        assert first_line(cli.stdout, what="the child's first line") == "up\n"
        os.killpg(cli.pid, signal.SIGHUP)  # what closing the terminal sends its session
        cli.communicate(timeout=30)
    assert env.process(1)["state"] == "running"
    child = _child_pid(env, 1)
    assert _alive(child)
    assert os.getsid(child) != cli.pid  # not in the terminal's session: no hangup reaches it


def test_binary_and_invalid_utf8_output(env: Env, daemon: Daemon) -> None:
    hooks = env.write(
        "h.json",
        json.dumps({"hooks": [{"on_output_match": {"pattern": "ERR"}, "instructions": "x"}]}),
    )
    script = "import sys; sys.stdout.buffer.write(bytes(range(256)) + b'\\n\\xff\\xfeERR \\x80\\n')"
    pid = env.run_d(sys.executable, "-c", script, hooks=hooks)["id"]
    env.wait_state(pid, "exited")
    (fire,) = env.fires()
    assert fire["detail"] == "\ufffd\ufffdERR \ufffd"


def test_daemon_sigterm_stops_it_and_leaves_processes_running(env: Env, daemon: Daemon) -> None:
    pid = env.run_d("sleep", "30")["id"]
    assert daemon.proc is not None
    proc = daemon.proc
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    assert "stopping (supervised processes keep running)" in daemon.log.read_text()
    assert _alive(_child_pid(env, pid))


def test_newer_schema_is_refused_with_a_clear_error(env: Env) -> None:
    import sqlite3

    env.extra["SUPERVISE_AUTOSTART"] = "0"  # a database is all it needs: no daemon
    env.cli("run", "-d", "--", "true", check=True)
    with sqlite3.connect(env.home / "state.db") as db:
        db.execute("update meta set value = '99' where key = 'schema_version'")
    r = env.cli("run", "-d", "--", "true")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "schema version 99 is newer" in r.stderr and "upgrade supervise" in r.stderr
