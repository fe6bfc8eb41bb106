"""The real logrotate on a run's output.log while its child writes marked lines: every mark
fires exactly once (issue #13, item 9).

logrotate's default `create` mode renames output.log and creates a new, empty one; the child
keeps writing to the renamed file through its stdout. The daemon reads that file (it holds
it open) to the process's end, and the new output.log from its start.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import Daemon, Env, first_line, wait_for, wait_until

from state.fires import FireRecord
from supervisor.tailing import LogReader, TailPos

LINES = 1500
# /usr/sbin is not on every user's PATH.
LOGROTATE = shutil.which("logrotate") or shutil.which("logrotate", path="/usr/sbin")

pytestmark = pytest.mark.skipif(
    LOGROTATE is None, reason="needs logrotate (apt-get install logrotate); CI installs it"
)


def _hooks(env: Env) -> Path:
    hook = {
        "name": "m",
        "on_output_match": {"pattern": "^MARK "},
        "instructions": "x",
        "max_spawns": LINES + 10,
    }
    return env.write("hooks.json", json.dumps({"hooks": [hook], "limits": {"rate": "1/hour"}}))


def _logrotate_conf(env: Env, pid: int, keep: int = 3) -> tuple[Path, Path]:
    # logrotate's defaults: `create` (rename, then a new empty file), no copytruncate.
    log = env.home / "runs" / str(pid) / "output.log"
    body = f"{log} {{\n    create\n    rotate {keep}\n    missingok\n}}\n"
    conf = env.write("logrotate.conf", body)
    return conf, env.work / "logrotate.state"


def _rotate(conf: Path, state: Path) -> None:
    assert LOGROTATE is not None
    subprocess.run([LOGROTATE, "-f", "-s", str(state), str(conf)], check=True, timeout=30)


def _wait_output(env: Env, pid: int, text: str) -> None:
    log = env.home / "runs" / str(pid) / "output.log"
    wait_for(
        lambda: log.read_text() if log.exists() else "",
        lambda out: text in out,
        what=f"{text!r} in {log}",
    )


def _writer(pause: float) -> str:
    # Bursts with pauses: the daemon finds the file idle between them and waits for the next
    # write, which is when a watch on output.log's path missed the renamed file.
    return (
        "import time\n"
        f"for n in range({LINES}):\n"
        "    print('MARK', n, flush=True)\n"
        "    print('noise', flush=True)\n"
        f"    if n % 25 == 0: time.sleep({pause})\n"
    )


def _check_every_mark_fired_once(env: Env, pid: int) -> None:
    env.wait_state(pid, "exited", timeout=60)

    def missing(fires: list[FireRecord]) -> str:
        got = {f.detail for f in fires}
        lost = [n for n in range(LINES) if f"MARK {n}" not in got]
        return f"{len(lost)} of {LINES} marks not fired; the first: {lost[:5]}"

    seen = wait_for(env.seen_fires, lambda fires: len(fires) >= LINES, what=f"{LINES} fires")
    assert len(seen) == LINES, missing(seen)
    fires = env.fires()
    by = Counter(str(f["detail"]) for f in fires)
    assert sorted(by) == sorted(f"MARK {n}" for n in range(LINES))
    assert max(by.values()) == 1, [d for d, c in by.items() if c > 1][:5]


def test_logrotate_create_mode_loses_no_fire(env: Env, daemon: Daemon) -> None:
    pid = env.run_d(sys.executable, "-u", "-c", _writer(0.1), hooks=_hooks(env))["id"]
    conf, state = _logrotate_conf(env, pid)
    rotations = 0
    while env.seen_processes()[0].state == "running" and rotations < 60:
        _rotate(conf, state)
        rotations += 1
        time.sleep(0.1)  # the scenario: logrotate runs every 0.1 s (a cron job, sped up)
    assert rotations >= 3, "the writer ended before logrotate could rotate its log"
    # Rotated past `rotate 3`: the child's first file was deleted, still written, still read.
    _check_every_mark_fired_once(env, pid)
    assert "output.log was renamed" in daemon.log.read_text()


def test_logrotate_with_daemon_sigkills_loses_and_repeats_nothing(env: Env, daemon: Daemon) -> None:
    rng = random.Random()
    pid = env.run_d(sys.executable, "-u", "-c", _writer(0.1), hooks=_hooks(env))["id"]
    # Generations enough that the child's file outlives the run: had logrotate deleted it
    # after the process ended and while no daemon ran, its unread lines would be gone.
    conf, state = _logrotate_conf(env, pid, keep=20)
    for round in range(4):  # rotations and kills at random points (the chaos, not a wait)
        time.sleep(rng.uniform(0.1, 0.4))
        _rotate(conf, state)
        time.sleep(rng.uniform(0.0, 0.3))
        daemon.kill(signal.SIGKILL)
        if round % 2:
            _rotate(conf, state)  # renamed while no daemon held the file
        daemon.start()
    _check_every_mark_fired_once(env, pid)


def test_both_files_are_read_after_a_rotation(env: Env, daemon: Daemon) -> None:
    flag = env.work / "rotated"
    script = (
        "import os, time\nprint('noise', flush=True)\n"
        f"while not os.path.exists({str(flag)!r}): time.sleep(0.05)\n"
        "print('noise after', flush=True)\ntime.sleep(1)\n"  # idle: waits for a write
        "print('MARK end', flush=True)\ntime.sleep(0.5)\n"
    )
    pid = env.run_d(sys.executable, "-c", script, hooks=_hooks(env))["id"]
    conf, state = _logrotate_conf(env, pid)
    _wait_output(env, pid, "noise")
    _rotate(conf, state)
    # Another writer (not the child) appends to the output.log logrotate created.
    with open(env.home / "runs" / str(pid) / "output.log", "r+") as f:
        f.write("MARK other\n")
    flag.touch()
    env.wait_state(pid, "exited")
    fires = env.wait_fires(2, what="both fires")
    assert sorted(f["detail"] for f in fires) == ["MARK end", "MARK other"]
    # `logs` shows the child's own output, from the file it wrote to (renamed now).
    logs = env.cli("logs", str(pid), check=True).stdout
    assert logs == "noise\nnoise after\nMARK end\n"
    assert env.cli("logs", str(pid), "-n", "1", check=True).stdout == "MARK end\n"
    (env.home / "runs" / str(pid) / "output.log").unlink()  # as with logrotate's `nocreate`
    assert env.cli("logs", str(pid), check=True).stdout == logs


def test_attached_run_and_logs_f_show_the_lines_after_a_rotation(env: Env, daemon: Daemon) -> None:
    flag = env.work / "rotated"
    script = (
        "import os, time\nprint('before', flush=True)\n"
        f"while not os.path.exists({str(flag)!r}): time.sleep(0.05)\n"
        "for n in range(3):\n    print('after', n, flush=True)\n    time.sleep(0.3)\n"
    )
    attached = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "run", "--", sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        env=env.env,
        cwd=env.work,
    )
    pid = wait_until(env.seen_processes, what="the process recorded")[0].id
    _wait_output(env, pid, "before")
    follow = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "logs", str(pid), "-f"],
        stdout=subprocess.PIPE,
        text=True,
        env=env.env,
        cwd=env.work,
    )
    # `logs -f` holds the file before the rotation: it has printed what was there.
    assert follow.stdout is not None
    assert first_line(follow.stdout, what="logs -f printing what was there") == "before\n"
    _rotate(*_logrotate_conf(env, pid))
    flag.touch()
    out, _ = attached.communicate(timeout=60)
    followed, _ = follow.communicate(timeout=60)
    want = "before\nafter 0\nafter 1\nafter 2\n"
    assert out == want and "before\n" + followed == want


def test_the_new_output_log_is_read_while_the_process_runs(env: Env, daemon: Daemon) -> None:
    script = "import time\nwhile True:\n    print('noise', flush=True)\n    time.sleep(0.1)\n"
    pid = env.run_d(sys.executable, "-c", script, hooks=_hooks(env))["id"]
    _wait_output(env, pid, "noise")
    _rotate(*_logrotate_conf(env, pid))
    with open(env.home / "runs" / str(pid) / "output.log", "a") as f:
        f.write("MARK other\n")
    fires = env.wait_fires(1, what="the fire from the new output.log")
    assert [f["detail"] for f in fires] == ["MARK other"]
    assert env.process(pid)["state"] == "running"
    env.cli("stop", str(pid), check=True)


def test_reader_follows_its_file_through_renames_and_finds_it_again(tmp_path: Path) -> None:
    """In-process: the daemon's reader keeps the renamed file; a new one finds it by inode."""
    log = tmp_path / "output.log"
    writer = open(log, "ab", buffering=0)  # noqa: SIM115  # the child's stdout
    writer.write(b"one\n")
    reader = LogReader(log, follow=True)
    got = reader.read(TailPos(), final=False)
    log.rename(tmp_path / "output.log.1")
    log.write_bytes(b"new file\n")
    writer.write(b"two\n")
    got = reader.read(got.pos, final=False)
    assert (got.data, got.restarted, reader.moved) == (b"two\n", None, True)
    assert reader.held.read_bytes() == b"one\ntwo\n"
    # A daemon restarted finds the file by the saved inode, not by its name.
    again = LogReader(log, follow=True)
    assert again.adopt(got.pos.inode, [log, tmp_path / "output.log.1"]) == tmp_path / "output.log.1"
    writer.write(b"three\n")
    assert again.read(got.pos, final=False).data == b"three\n"
    writer.close()
    reader.close()
    again.close()
