"""When each chunk of output was read (supervisor/readtimes.py): the index's format and its
writer's rules, on real files; then `logs --timestamps` and `--since` through the real CLI
and a real daemon: across runs, with -f, for output written while the daemon was down, and
for a run from before read times were kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from conftest import Daemon, Env, wait_for, wait_until

from supervisor.readtimes import MIN_GAP_S, Mark, Times, Writer, parse
from supervisor.runlogs import Stamper, View, parse_since

# -- the index ------------------------------------------------------------------------------


def test_parse_skips_torn_lines_and_starts_over_where_the_file_did() -> None:
    text = b"10 1.5\n2junk\n20 2.5\n20 2.6\n35 3.0\n7 4"  # the last: being written
    # 20 again: a start over (the writer never repeats an end); `7 4` has no newline yet.
    assert parse(text) == [Mark(20, 2.6), Mark(35, 3.0)]
    assert parse(b"10 1.0\n0 5.0\n4 6.0\n") == [Mark(0, 5.0), Mark(4, 6.0)]  # truncated
    assert parse(b"") == [] and parse(b"10 nan\n-1 2.0\n") == []


def test_each_byte_has_its_chunks_time_and_unread_ones_the_files() -> None:
    times = Times([Mark(10, 1.0), Mark(25, 2.0)], after=9.0)
    assert [times.at(o) for o in (0, 9, 10, 24, 25, 99)] == [1.0, 1.0, 2.0, 2.0, 9.0, 9.0]
    assert times.start_since(1.5, 0) == 10 and times.start_since(0.5, 3) == 3
    assert times.start_since(5.0, 0) == 25  # only what no mark covers yet


def read_marks(path: Path) -> list[Mark]:
    return parse(path.read_bytes())


def test_the_writer_folds_reads_within_the_gap_and_writes_when_quiet(tmp_path: Path) -> None:
    index = tmp_path / "output.times"
    index.touch()
    w = Writer(index)
    w.note(10, 100.0, restarted=False, now=0.0)  # after a quiet spell: at once
    assert read_marks(index) == [Mark(10, 100.0)]
    w.note(20, 100.02, restarted=False, now=0.02)
    w.note(30, 100.05, restarted=False, now=0.05)  # folded: one entry, the later time
    assert read_marks(index) == [Mark(10, 100.0)]
    w.note(40, 100.12, restarted=False, now=MIN_GAP_S + 0.01)
    assert read_marks(index) == [Mark(10, 100.0), Mark(40, 100.12)]
    w.note(50, 100.15, restarted=False, now=0.15)
    w.flush(0.17)  # the next read found nothing: no entry waits for more
    assert read_marks(index)[-1] == Mark(50, 100.15)
    w.close(0.2)
    # A daemon killed before its offset was saved reads bytes again: they keep their time.
    again = Writer(index)
    again.note(30, 200.0, restarted=False, now=5.0)
    again.note(50, 200.0, restarted=False, now=5.1)
    assert read_marks(index)[-1] == Mark(50, 100.15)
    again.note(60, 200.0, restarted=False, now=5.2)
    assert read_marks(index)[-1] == Mark(60, 200.0)
    # Truncated under the reader: a start over, and the new file's bytes from 0.
    again.note(5, 300.0, restarted=True, now=6.0)
    again.close(6.1)
    assert read_marks(index) == [Mark(0, 300.0), Mark(5, 300.0)]


def test_a_torn_entry_stays_apart_and_no_index_means_no_times(tmp_path: Path) -> None:
    index = tmp_path / "output.times"
    index.write_bytes(b"10 1.0\n2")  # power lost mid-entry
    w = Writer(index)
    w.note(20, 2.0, restarted=False, now=0.0)
    w.close(0.0)
    assert index.read_bytes() == b"10 1.0\n2\n20 2.000\n"
    assert read_marks(index) == [Mark(10, 1.0), Mark(20, 2.0)]
    # A run from before read times were kept: nothing is created for it.
    old = tmp_path / "old.times"
    Writer(old).note(10, 1.0, restarted=False, now=0.0)
    assert not old.exists()


def test_marks_of_freed_bytes_go_with_them(tmp_path: Path) -> None:
    index = tmp_path / "output.times"
    index.touch()
    w = Writer(index)
    for i in range(1, 6):
        w.note(i * 100, float(i), restarted=False, now=float(i))
    w.drop_before(300, 10.0)
    assert read_marks(index) == [Mark(400, 4.0), Mark(500, 5.0)]
    w.note(600, 6.0, restarted=False, now=11.0)  # written to the new file
    w.close(12.0)
    assert read_marks(index)[-1] == Mark(600, 6.0) and len(read_marks(index)) == 3


def test_since_reads_durations_and_local_or_offset_date_times() -> None:
    now = 1_800_000_000.0
    assert parse_since("10m", now) == now - 600 and parse_since("1d", now) == now - 86400
    local = datetime(2026, 11, 26, 9, 30).astimezone().timestamp()
    assert parse_since("2026-11-26T09:30", now) == local
    assert (
        parse_since("2026-11-26 09:30:00+00:00", now)
        == datetime.fromisoformat("2026-11-26T09:30:00+00:00").timestamp()
    )


def test_view_and_stamper_keep_lines_whole() -> None:
    import io

    view = View(timestamps=True, since=50.0)
    assert view.line(40.0, b"old\n") is None and view.line(None, b"x\n") == b"x\n"
    assert view.line(60.0, b"new\n") == View(True).line(60.0, b"new\n")
    out = io.BytesIO()
    s = Stamper(out, View(timestamps=True), mid_line=True, dropping=False)
    s.write(b"rest\nnext li")
    s.write(b"ne\n")
    lines = out.getvalue().split(b"\n")
    assert lines[0] == b"rest" and lines[1].endswith(b" next line") and lines[2] == b""
    dropped = io.BytesIO()
    s = Stamper(dropped, View(since=time.time() + 3600), mid_line=False, dropping=False)
    s.write(b"a\nb")
    assert dropped.getvalue() == b""


# -- through the CLI ------------------------------------------------------------------------


def stamped(line: str) -> tuple[float, str]:
    when, _, text = line.partition(" ")
    return datetime.fromisoformat(when).timestamp(), text


BURSTS = "import time\nprint('one', flush=True)\ntime.sleep(0.6)\nprint('two', flush=True)\n"


def test_timestamps_and_since_across_runs(env: Env, daemon: Daemon) -> None:
    began = time.time()
    policy = {"policy": "on-failure", "delay": "0s", "max_restarts": 1, "within": "1h"}
    hooks = env.write("r.json", json.dumps({"restart": policy}))
    child = BURSTS + "raise SystemExit(1)\n"
    first = int(env.run_d(sys.executable, "-c", child, hooks=hooks, name="b")["id"])
    wait_for(
        lambda: [p for p in env.seen_processes() if p.chain == first],
        lambda rs: len(rs) == 2 and rs[-1].state == "crash-loop",
        what="both runs",
    )
    assert (env.home / "runs" / str(first) / "output.times").stat().st_size > 0
    out = env.cli("logs", "b", "-t", check=True).stdout.splitlines()
    assert out[0].startswith("--- supervise: run 1") and out[3].startswith("--- supervise: run 2")
    got = [stamped(line) for line in out if not line.startswith("---")]
    assert [t for _, t in got] == ["one", "two", "one", "two"]
    times = [at for at, _ in got]
    assert began - 0.01 <= times[0] and times == sorted(times) and times[-1] <= time.time()
    assert 0.5 <= times[1] - times[0] < 3.0  # each line its own read, not one shared time
    # --since a moment between run 2's lines: only its second line, after its separator.
    since = datetime.fromtimestamp((times[2] + times[3]) / 2).isoformat()
    out = env.cli("logs", "b", "--since", since, check=True).stdout.splitlines()
    assert out[1:] == ["two"] and out[0].startswith("--- supervise: run 2")
    # -n with times counts the lines shown; and a duration back from now.
    assert env.cli("logs", "b", "-t", "-n", "1", check=True).stdout.endswith(" two\n")
    assert env.cli("logs", "b", "--since", "1h", check=True).stdout.count("one\n") == 2
    r = env.cli("logs", "b", "--since", "yesterday")
    assert r.returncode == 2 and "--since 'yesterday': expected a duration" in r.stderr
    assert "Traceback" not in r.stderr


def test_follow_stamps_lines_as_they_come(env: Env, daemon: Daemon) -> None:
    go = env.work / "go"
    child = f"import os, time\nprint('early', flush=True)\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.02)\nprint('late', flush=True)\n"  # noqa: E501
    pid = int(env.run_d(sys.executable, "-c", child)["id"])
    wait_until(lambda: b"early" in (env.home / "runs" / str(pid) / "output.log").read_bytes())
    cmd = [sys.executable, "-m", "supervisor", "logs", str(pid), "-f", "-t", "--since", "1h"]
    with subprocess.Popen(
        cmd, env=env.env, cwd=env.work, stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.endswith(" early\n")
        before = time.time()
        go.touch()
        late = proc.stdout.readline()
        proc.wait(10)
    at, text = stamped(late.rstrip("\n"))
    assert text == "late" and before - 0.01 <= at <= time.time()


def test_output_written_while_the_daemon_was_down_has_its_write_time(
    env: Env, daemon: Daemon
) -> None:
    go = env.work / "go"
    child = f"import os, time\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.02)\nprint('meanwhile', flush=True)\ntime.sleep(30)\n"  # noqa: E501
    pid = int(env.run_d(sys.executable, "-c", child)["id"])
    env.wait_state(pid, "running")
    daemon.kill()
    go.touch()
    out = env.home / "runs" / str(pid) / "output.log"
    wait_until(lambda: out.read_bytes() == b"meanwhile\n")
    written = out.stat().st_mtime
    time.sleep(1.0)  # the daemon comes back well after the write
    daemon.start()
    index = env.home / "runs" / str(pid) / "output.times"
    wait_until(lambda: index.read_bytes().endswith(b"\n"), what="the read's entry")
    at, text = stamped(env.cli("logs", str(pid), "-t", check=True).stdout.rstrip("\n"))
    assert text == "meanwhile" and abs(at - written) < 0.01  # not when the daemon read it
    env.cli("stop", str(pid), "--grace", "1", check=True)


def test_a_run_from_before_read_times_shows_without_them(env: Env, daemon: Daemon) -> None:
    pid = int(env.run_d("sh", "-c", "echo old")["id"])
    env.wait_state(pid, "exited")
    os.unlink(env.home / "runs" / str(pid) / "output.times")  # as a run dir made before
    r = env.cli("logs", str(pid), "-t", check=True)
    assert r.stdout == "old\n" and "has no read times" in r.stderr and "without times" in r.stderr
    r = env.cli("logs", str(pid), "--since", "1h", check=True)
    assert r.stdout == "old\n" and "shown whole" in r.stderr
    later = datetime.fromtimestamp(time.time() + 1).isoformat()
    assert env.cli("logs", str(pid), "--since", later, check=True).stdout == ""


def test_prune_removes_the_index_with_the_output(env: Env, daemon: Daemon) -> None:
    pid = int(env.run_d("sh", "-c", "echo x")["id"])
    env.wait_state(pid, "exited")
    run = env.home / "runs" / str(pid)
    assert (run / "output.times").read_bytes().endswith(b"\n")
    env.cli("prune", "--keep", "0", check=True)
    assert not run.exists()


@pytest.mark.parametrize("value", ["-5m", "10x", "2026-13-01"])
def test_bad_since_is_exit_2(env: Env, value: str) -> None:
    r = env.cli("logs", "1", "--since", value)
    assert r.returncode == 2 and "--since" in r.stderr and "Traceback" not in r.stderr
