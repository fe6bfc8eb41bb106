"""Coalesced output reading: the writer is not taxed, nothing written is left unread.

The end-to-end tests run a real daemon and read its inotify watches from /proc, the
kernel's own account of what each write of the child would notify.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import WAIT_S, Daemon, Env, Lines, match_hook, wait_until

from supervisor.coalesce import DUTY, FAST_BYTES_PER_S, MAX_GAP_S, MIN_GAP_S, next_gap, read_delay
from supervisor.inotify import IN_MODIFY, IN_ONESHOT
from supervisor.matching import Matcher
from supervisor.tailing import LogReader, TailPos


def test_gap_keeps_reading_to_its_share_of_a_core() -> None:
    assert next_gap(0.0) == MIN_GAP_S  # a cheap batch: read again soon
    assert next_gap(0.002) == pytest.approx(0.002 / DUTY)
    assert next_gap(5.0) == MAX_GAP_S  # however costly, a line waits at most this long


def test_only_a_fast_writer_waits_longer_for_its_next_read() -> None:
    # A service's lines (14 KB in a second) are read in the very next batch.
    assert read_delay(14_000, 1.0) == 0.0
    assert read_delay(300, MIN_GAP_S) == 0.0
    # A firehose (440 KB in 20 ms) waits the longest gap: each read then brings enough bytes
    # that the per-batch cost no longer dominates.
    assert read_delay(440_000, MIN_GAP_S) == MAX_GAP_S
    assert read_delay(int(FAST_BYTES_PER_S * 0.02) - 1, 0.02) == 0.0
    assert read_delay(10_000, 0.0) == 0.0  # a first read has no rate yet


def test_a_read_stops_at_what_was_there_when_it_began(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    log.write_bytes(b"x" * 99 + b"\n")
    reader = LogReader(log)
    first = reader.read(TailPos(), final=False, chunk=40, verify=False)
    assert first.more and first.pos.offset < 100
    rest = reader.read(first.pos, final=False, chunk=1000, verify=False)
    assert not rest.more and rest.pos.offset == 100
    reader.close()


def test_small_buffers_match_as_large_ones_do() -> None:
    # Below a few KiB one alternation of all patterns screens the buffer first.
    pats = ["ERROR", "^panic:", "(?i)warn", r"took \d+ms$", "a|b"]
    m = Matcher(pats)
    lines = [b"ok", b"ERROR x", b"panic: y", b"a panic: no", b"WARNing", b"took 12ms", b"zz"]
    small = b"\n".join(lines) + b"\n"
    big = small + b"filler line\n" * 2000
    got_small = [(x.start, x.end, x.pattern) for x in m.scan(small, [9] * len(pats))]
    got_big = [(x.start, x.end, x.pattern) for x in m.scan(big, [9] * len(pats))]
    assert got_small == got_big[: len(got_small)] and len(got_small) == 6
    assert m.scan(b"nothing here\n", [9] * len(pats)) == []


def _watches(daemon_pid: int) -> list[tuple[int, int]]:
    """(inode, mask) of every inotify watch the daemon holds, from /proc/PID/fdinfo."""
    out = []
    for fd in os.listdir(f"/proc/{daemon_pid}/fdinfo"):
        try:
            text = Path(f"/proc/{daemon_pid}/fdinfo/{fd}").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("inotify wd:"):
                fields = dict(f.split(":", 1) for f in line.split()[1:])
                out.append((int(fields["ino"], 16), int(fields["mask"], 16)))
    return out


def test_a_running_child_writes_unwatched(env: Env, daemon: Daemon) -> None:
    hooks = env.write("h.json", json.dumps({"hooks": [match_hook("^MARK", "m")]}))
    script = "import time\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.01)\n"
    pid = env.run_d(sys.executable, "-c", script, hooks=hooks)["id"]
    run = env.home / "runs" / str(pid)
    wait_until(lambda: (run / "output.log").stat().st_size > 100, what="output")
    assert daemon.proc is not None
    dir_ino, out_ino = run.stat().st_ino, (run / "output.log").stat().st_ino

    def settled() -> bool:
        # Once started, the run dir is not watched (a folder watch taxes every write of
        # its files), and output.log only by one-shot watches.
        w = _watches(daemon.proc.pid)  # type: ignore[union-attr]
        return all(ino != dir_ino for ino, _ in w)

    wait_until(settled, what="the run dir's watch removed")
    for _ in range(20):
        for ino, mask in _watches(daemon.proc.pid):
            if ino == out_ino:
                assert mask & IN_MODIFY and mask & IN_ONESHOT, hex(mask)
        time.sleep(0.01)


def test_every_line_fires_while_the_writer_runs(env: Env, daemon: Daemon) -> None:
    # Lines at irregular short intervals, the last one followed by silence: a write that
    # lands between a read and the watch armed again must not wait for the next write.
    n = 40
    body = {"limits": {"rate": "1000/second"}, "hooks": [match_hook("^MARK", "m", n)]}
    hooks = env.write("h.json", json.dumps(body))
    script = (
        "import random, time\nrandom.seed(7)\n"
        f"for i in range({n}):\n"
        "    print('MARK', i, flush=True)\n"
        "    time.sleep(random.choice([0, 0.001, 0.004, 0.013]))\n"
        "time.sleep(60)\n"
    )
    pid = env.run_d(sys.executable, "-c", script, hooks=hooks)["id"]
    wait_until(lambda: len(env.fires()) == n, what=f"{n} fires while the writer sleeps")
    assert env.process(pid)["state"] == "running"
    assert sorted(int(f["detail"].split()[1]) for f in env.fires()) == list(range(n))
    # Quiet again: the daemon waits on a one-shot watch and reads nothing (no polling).
    assert daemon.proc is not None
    dpid = daemon.proc.pid
    out_ino = (env.home / "runs" / str(pid) / "output.log").stat().st_ino
    wait_until(
        lambda: any(ino == out_ino and mask & IN_ONESHOT for ino, mask in _watches(dpid)),
        what="a one-shot watch on the quiet output",
    )
    proc = psutil.Process(dpid)
    before = sum(proc.cpu_times()[:2])
    time.sleep(1.0)
    assert sum(proc.cpu_times()[:2]) - before < 0.05


def test_a_fast_writers_last_line_fires_whether_it_stays_or_ends(env: Env) -> None:
    # 40,000 lines as fast as one write per line goes (well over 1 MB/s: read every 100 ms),
    # then one marked line: the process that stays quiet has it read by the next batches, the
    # one that ends by its exit.
    body = {"hooks": [match_hook("^LAST", "last", 2)]}
    hooks = env.write("h.json", json.dumps(body))
    script = (
        "import sys, time\n"
        "for i in range(40000):\n"
        "    print('2026-11-24T00:00:00 INFO GET /api/v1/items 200 in 12ms', i)\n"
        "print('LAST', sys.argv[1])\n"
        "if sys.argv[1] == 'stays':\n"
        "    time.sleep(60)\n"
    )
    for how in ("stays", "ends"):
        env.run_d(sys.executable, "-c", script, how, hooks=hooks)
    wait_until(lambda: len(env.fires()) == 2, what="the last line of both fast writers")
    assert sorted(f["detail"] for f in env.fires()) == ["LAST ends", "LAST stays"]


def test_an_attached_run_names_a_thread_while_the_child_runs(env: Env, daemon: Daemon) -> None:
    body = {"hooks": [match_hook("deadlock", "dl")], "agent": {"model": "scripted:turns.yaml"}}
    hooks = env.write("h.json", json.dumps(body))
    env.write("turns.yaml", "- content: looked at it\n")
    go = env.work / "go"
    script = (
        "import os, time\nprint('ERROR: deadlock detected', flush=True)\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.02)\n"
        "print('after', flush=True)\n"
    )
    argv = ["run", "--hook", str(hooks), "--", sys.executable, "-c", script]
    cli = subprocess.Popen(
        [sys.executable, "-m", "supervisor", *argv],
        env=env.env,
        cwd=env.work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert cli.stdout is not None
    lines = Lines(cli.stdout)
    with cli:
        try:
            what = "the attached run to name the spawned thread"
            while (line := lines.next(what=what)) and "spawned" not in line:
                pass
            seen = lines.seen
            # Named while the child still waits: the go file does not exist yet.
            assert not go.exists()
            assert seen[0] == "ERROR: deadlock detected\n", seen
            assert "hook dl (on_output_match) fired: thread t1" in seen[-1], seen
            go.touch()
            assert lines.next(what="the child's line after the go file") == "after\n"
            assert cli.wait(timeout=WAIT_S) == 0
        finally:
            if cli.poll() is None:  # a failed test must not leave it waiting
                cli.kill()


def test_a_python_child_is_unbuffered_unless_asked(env: Env, daemon: Daemon) -> None:
    # print() to a file is block-buffered: without PYTHONUNBUFFERED the line, and its hook,
    # would wait for 8 KiB more output or the child's end.
    hooks = env.write("h.json", json.dumps({"hooks": [match_hook("^MARK", "m")]}))
    go = env.work / "go"
    script = (
        "import os, sys, time\nprint('MARK', os.environ.get('PYTHONUNBUFFERED'))\n"
        "open(sys.argv[1], 'w').close()\n"  # printed: to output.log, or to its own buffer
        f"while not os.path.exists({str(go)!r}): time.sleep(0.02)\n"
    )
    env.extra["PYTHONUNBUFFERED"] = "1"  # as in many shells and images: --buffered drops it
    env.extra.pop("PYTHONUNBUFFERED")
    first = env.run_d(sys.executable, "-c", script, "printed-1", hooks=hooks)["id"]
    wait_until(lambda: len(env.fires()) == 1, what="the fire while the child runs")
    assert env.fires()[0]["detail"] == "MARK 1"
    env.extra["PYTHONUNBUFFERED"] = "1"
    out = env.cli("run", "-d", "--json", "--buffered", "--hook", str(hooks), "--")
    assert out.returncode == 2  # no command: nothing started
    second = json.loads(
        env.cli(
            "run", "-d", "--json", "--buffered", "--hook", str(hooks), "--",
            sys.executable, "-c", script, "printed-2", check=True,
        ).stdout
    )["id"]  # fmt: skip
    wait_until((env.work / "printed-2").exists, what="the buffered child's print")
    # Printed, yet nothing reached output.log: the line waits in the child's own buffer.
    assert (env.home / "runs" / str(second) / "output.log").stat().st_size == 0
    go.touch()
    env.wait_state(second, "exited")
    assert [f["detail"] for f in env.fires() if f["process_id"] == second] == ["MARK None"]
    env.wait_state(first, "exited")
