"""Program files through the real CLI and a real daemon: `up` starts them, a second `up`
applies only what changed, `down` stops them as a person's stop, a bad file starts nothing;
and a simulated reboot (every run's boot id made an earlier boot's, its processes killed as
a shutdown kills them) brings back the autostart programs and the `always` processes, once,
across daemon SIGKILLs."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from conftest import Daemon, Env, wait_for, wait_until

# Each program prints what it was started with, then waits: its marker finds it in `ps`.
BODY = (
    "import os, sys, time\n"
    "print(sys.argv[1], os.environ.get('GREETING'), os.environ.get('PORT'), flush=True)\n"
    "time.sleep(120)\n"
)


def program_file(
    env: Env, programs: dict[str, Any], name: str = "supervise.yaml", **top: Any
) -> Path:
    """A program file in YAML (JSON is YAML) running BODY per program, marker = its name."""
    body: dict[str, Any] = dict(top)
    prog = str(env.work / "prog.py")
    body["programs"] = {
        n: {"command": [sys.executable, prog, marker(env, n)], **p} for n, p in programs.items()
    }
    (env.work / "prog.py").write_text(BODY)
    return env.write(name, json.dumps(body, indent=1))


def marker(env: Env, name: str) -> str:
    """Names a program's OS process: unique per test (tests run side by side)."""
    return f"{name}-{env.work.parent.name}"


def up(env: Env, *args: str) -> dict[str, dict[str, Any]]:
    r = env.cli("up", "--json", *args)
    assert r.returncode == 0, r.stderr
    return {p["name"]: p for p in json.loads(r.stdout)["programs"]}


def running(env: Env, name: str) -> list[psutil.Process]:
    """The live OS processes of program `name` (its marker in their command line)."""
    mark = marker(env, name)
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if cmd[-1:] == [mark] and len(cmd) == 3 and proc.status() != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def output(env: Env, process: int) -> str:
    return (env.home / "runs" / str(process) / "output.log").read_text()


def test_up_starts_all_and_a_second_up_changes_only_what_changed(env: Env, daemon: Daemon) -> None:
    env.write(".env", "GREETING=hello\n")
    env.write("web.env", "GREETING=hi-web\n")
    pf = program_file(
        env,
        {"web": {"env_file": "web.env", "env": {"PORT": 8000}}, "worker": {}, "cron": {}},
        env_file=".env",
    )
    first = up(env)
    assert {n: p["action"] for n, p in first.items()} == dict.fromkeys(
        ("web", "worker", "cron"), "started"
    )
    web = first["web"]["process"]
    wait_until(lambda: output(env, web), what="web's output")
    # env_file: the file-level one, then the program's (its value wins), then env:.
    assert output(env, web) == f"web-{env.work.parent.name} hi-web 8000\n"
    worker = first["worker"]["process"]
    wait_until(lambda: output(env, worker), what="worker's output")
    assert output(env, worker) == f"worker-{env.work.parent.name} hello None\n"
    pids = {n: p["pid"] for n, p in first.items()}
    # Nothing changed: nothing started, nothing stopped.
    again = up(env)
    assert {n: (p["action"], p["process"], p["pid"]) for n, p in again.items()} == {
        n: ("unchanged", first[n]["process"], pids[n]) for n in first
    }
    # Only web's env file changed: only web is restarted; the others keep their pids.
    env.write("web.env", "GREETING=changed\n")
    third = up(env)
    assert third["web"]["action"] == "restarted" and third["web"]["process"] != web
    assert [third[n]["action"] for n in ("worker", "cron")] == ["unchanged", "unchanged"]
    assert [p.pid for p in running(env, "worker")] == [pids["worker"]]
    assert [p.pid for p in running(env, "cron")] == [pids["cron"]]
    new_web = third["web"]["process"]
    wait_until(lambda: output(env, new_web), what="the new web's output")
    assert output(env, new_web) == f"web-{env.work.parent.name} changed 8000\n"
    wait_until(lambda: [p.pid for p in running(env, "web")] == [third["web"]["pid"]],
               what="only the new web running")  # fmt: skip
    # The old web was stopped by a person (up), and is not restarted.
    assert env.wait_state(web, "exited")["signal"] == "SIGTERM"
    # ps, logs, stop by the program's name.
    assert "changed 8000" in env.cli("logs", "web", check=True).stdout
    # Removed from the file: stopped by `up`; `up NAME` touches NAME alone.
    program_file(env, {"web": {"env_file": "web.env", "env": {"PORT": 8000}}, "worker": {}},
                 env_file=".env")  # fmt: skip
    only = up(env, "worker")
    assert list(only) == ["worker"] and only["worker"]["action"] == "unchanged"
    assert running(env, "cron")
    fourth = up(env, "-f", str(pf))
    assert fourth["cron"]["action"] == "stopped"
    wait_until(lambda: not running(env, "cron"), what="cron stopped")
    assert [fourth[n]["action"] for n in ("web", "worker")] == ["unchanged", "unchanged"]


def test_down_stops_them_as_a_person_and_inline_hooks_fire(env: Env, daemon: Daemon) -> None:
    hooks = {
        "hooks": [
            {"name": "hello", "on_output_match": {"pattern": "api-"}, "instructions": "look"},
            {"name": "gone", "on_exit": {}, "instructions": "why did it stop?"},
        ],
        "restart": "always",
    }
    program_file(env, {"api": {"hooks": hooks}, "db": {}})
    started = up(env)
    api = started["api"]["process"]
    # The inline output hook fires on the program's output.
    fires = env.wait_fires(1, what="api's output hook")
    assert [(f["process_id"], f["hook"]) for f in fires] == [(api, "hello")]
    r = env.cli("down")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"api: stopped (process {api}; killed by SIGTERM")
    assert lines[1].startswith("db: stopped")
    for name in ("api", "db"):
        assert env.wait_state(started[name]["process"], "exited")["state"] == "exited"
    fires = env.wait_fires(2, what="api's on_exit")
    gone = next(f for f in fires if f["hook"] == "gone")
    assert "stopped by supervise stop" in gone["detail"]
    # restart: always, yet a person's stop: no next run.
    time.sleep(0.5)
    assert [p.id for p in env.seen_processes()] == sorted(p["process"] for p in started.values())
    again = env.cli("down", "--json", check=True)
    assert {p["action"] for p in json.loads(again.stdout)["programs"]} == {"not running"}


def test_a_bad_program_file_is_file_line_exit_2_and_starts_nothing(env: Env) -> None:
    env.write(
        "supervise.yaml",
        "programs:\n"
        "  web:\n"
        f"    command: {sys.executable} -c 'import time; time.sleep(60)'\n"
        "  worker:\n"
        "    comand: ./worker.sh\n"
        "    autostart: maybe\n"
        "    hooks:\n"
        "      hooks:\n"
        "        - name: x\n"
        "          on_exi: {}\n"
        "          instructions: x\n",
    )
    r = env.cli("up")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    path = env.work / "supervise.yaml"
    assert f"{path}:4: programs.worker has no command" in r.stderr
    assert f"{path}:5: unknown key 'comand' in programs.worker; did you mean 'command'?" in r.stderr
    assert f"{path}:6: programs.worker.autostart must be true or false" in r.stderr
    assert f"{path}:10: unknown key 'on_exi' in hooks[0]; did you mean 'on_exit'?" in r.stderr
    # Nothing started: not web (which was fine), not even a daemon.
    assert not (env.home / "runs").exists() or not any((env.home / "runs").iterdir())
    assert not (env.home / "daemon.pid").exists() or "daemon" not in env.cli("ps").stdout
    missing = env.cli("up", "-f", "nope.yaml")
    assert missing.returncode == 2 and "nope.yaml: cannot read program file" in missing.stderr


def test_a_program_name_taken_by_another_file_is_an_error_naming_both(
    env: Env, daemon: Daemon
) -> None:
    program_file(env, {"web": {}})
    up(env)
    other = env.work / "other"
    other.mkdir()
    (other / "supervise.yaml").write_text(
        json.dumps({"programs": {"web": {"command": "sleep 60"}}})
    )
    r = env.cli("up", cwd=other)
    assert r.returncode == 2
    assert f"program 'web' of {other / 'supervise.yaml'} clashes with live process" in r.stderr
    assert f"from program file {env.work / 'supervise.yaml'}" in r.stderr
    # `down` of the other file touches nothing of the first.
    assert env.cli("down", cwd=other, check=True).stdout == "web: not running\n"
    assert len(running(env, "web")) == 1


# -- after a reboot ------------------------------------------------------------------------


def reboot(env: Env, daemon: Daemon) -> None:
    """What a reboot does to the state dir: no daemon, every process gone (the shutdown
    SIGKILLs shim and child alike: no exit record), and every run's boot id an earlier
    boot's (the kernel's boot_id changes at each boot; the tests cannot reboot)."""
    daemon.kill(signal.SIGKILL)
    from supervisor.identity import is_same

    for p in env.seen_processes():
        # The shim first: killed after its child, it could still write an exit record.
        for pid, started in ((p.shim_pid, p.shim_started), (p.pid, p.pid_started)):
            if pid is not None and is_same(pid, started):
                os.kill(pid, signal.SIGKILL)
    with sqlite3.connect(env.home / "state.db") as db:
        db.execute("UPDATE process SET boot_id = 'an-earlier-boot'")
    wait_until(lambda: not any(running(env, n) for n in ("web", "batch", "always", "onfail")),
               what="every process gone")  # fmt: skip


def test_after_a_reboot_autostart_programs_and_always_processes_start_once(
    env: Env, daemon: Daemon
) -> None:
    program_file(env, {"web": {"restart": "on-failure"}, "batch": {"autostart": False}})
    up(env)
    prog = str(env.work / "prog.py")
    always = env.cli("run", "-d", "--json", "--restart", "always", "--name", "always", "--",
                     sys.executable, prog, marker(env, "always"), check=True)  # fmt: skip
    onfail = env.cli("run", "-d", "--json", "--restart", "on-failure", "--name", "onfail", "--",
                     sys.executable, prog, marker(env, "onfail"), check=True)  # fmt: skip
    ids = {"always": json.loads(always.stdout)["id"], "onfail": json.loads(onfail.stdout)["id"]}
    wait_until(lambda: all(running(env, n) for n in ("web", "batch", "always", "onfail")),
               what="all four running")  # fmt: skip
    reboot(env, daemon)

    # The daemon the boot starts is SIGKILLed: once the moment it has recorded a boot start
    # (maybe before it started it), once at a random moment; then one runs. Each comes back
    # once.
    def boot_daemon() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "supervisor", "daemon"],
            env=env.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    proc = boot_daemon()
    wait_until(lambda: any(p.cause == "boot" for p in env.seen_processes()),
               what="a boot start recorded")  # fmt: skip
    proc.kill()
    proc.wait(10)
    proc = boot_daemon()
    time.sleep(random.uniform(0.1, 0.8))
    proc.kill()
    proc.wait(10)
    daemon.start()

    def booted() -> dict[str, list[Any]]:
        rows = env.seen_processes()
        return {n: [p for p in rows if p.name == n] for n in ("web", "batch", "always", "onfail")}

    rows = wait_for(
        booted,
        lambda r: all(len(r[n]) == 2 and r[n][1].pid for n in ("web", "always")),
        what="web and always started again",
    )
    time.sleep(1.0)  # a second start would show by now
    rows = booted()
    for name in ("web", "always"):
        first, second = rows[name]
        assert first.state == "lost" and second.cause == "boot" and second.chain == first.chain
        assert second.state == "running"
        assert [p.pid for p in running(env, name)] == [second.pid]
        assert output(env, second.id) == f"{name}-{env.work.parent.name} None None\n"
    # autostart: false, and on-failure (a reboot is no failure of the process): not started.
    for name in ("batch", "onfail"):
        assert [p.state for p in rows[name]] == ["lost"] and not running(env, name)
    assert rows["always"][0].id == ids["always"]
    assert "started again after a reboot" in env.cli("logs", "web", check=True).stdout
    # `up` afterwards: web runs the same definition, batch is started (a person asked).
    after = up(env)
    assert after["web"]["action"] == "unchanged" and after["batch"]["action"] == "started"


def test_a_start_whose_starter_died_before_saving_its_pids_is_saved_by_the_daemon(
    env: Env, start_daemon: Callable[[], Daemon]
) -> None:
    """What a daemon SIGKILLed right after starting a boot (or restart) run leaves, and a
    CLI killed right after starting the shim: the run dir has the pids, the row has none."""
    env.extra["SUPERVISE_AUTOSTART"] = "0"
    program_file(env, {"web": {}})
    web = up(env)["web"]
    with sqlite3.connect(env.home / "state.db") as db:
        db.execute(
            "UPDATE process SET state = 'starting', pid = NULL, pid_started = NULL, "
            "shim_pid = NULL, shim_started = NULL"
        )
    start_daemon()
    row = env.wait_state(web["process"], "running")
    assert row["pid"] == web["pid"]
    # So the next `up` knows it, and `down` stops it.
    assert up(env)["web"] == {**web, "action": "unchanged", "note": None}
    assert env.cli("down", check=True).stdout.startswith("web: stopped")
    wait_until(lambda: not running(env, "web"), what="web stopped")
