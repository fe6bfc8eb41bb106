"""`supervise logs`: a process's output, every run of it, each after a separator line.

A process restarted by its policy is a chain of runs, each with its own output.log. `logs`
prints them in order; a process that ran once prints exactly what it wrote, as before. `-n`
counts lines across runs, from the newest back; `-f` follows the newest run and, when it
ends and the daemon records a next run, waits for that one to start and follows it too.

`--timestamps` and `--since` read each run's index of read times (readtimes.py): each line
gets the time of the chunk it was read in; a run without an index (from before they were
kept) shows without times, and under `--since` whole unless it ended before then. With
`-f`, what comes is stamped as it is read here.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from state.paths import StatePaths
from state.settings import Settings
from supervise.errors import SuperviseError, UserError
from supervisor import readtimes
from supervisor.rundir import RunDir
from supervisor.running import RECORD_WAIT_S, err

if TYPE_CHECKING:
    from state.db import Store
    from state.processes import ProcessRecord
    from supervisor.follow import Sink

TAIL_BYTES = 1 << 20  # -n with times reads at most this much from a run's end (as tail_lines)


@dataclass(frozen=True, slots=True)
class View:
    """How lines are shown: stamped with their time, and from when on."""

    timestamps: bool = False
    since: float | None = None  # unix time

    @property
    def plain(self) -> bool:
        return not self.timestamps and self.since is None

    def line(self, at: float | None, line: bytes) -> bytes | None:
        """`line` as shown (None: before `since`). A line without a time (from before times
        were kept, whose run `since` did not rule out) is shown unstamped."""
        if self.since is not None and at is not None and at < self.since:
            return None
        if self.timestamps and at is not None:
            return readtimes.stamp(at) + b" " + line
        return line


def parse_since(text: str, now: float) -> float:
    """`--since`: a duration back from `now` (30s, 10m, 2h, 1d) or an ISO date-time (local
    time unless it names an offset), as unix time.

    Raises:
        UserError: neither.
    """
    from supervisor.restarts import parse_duration

    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UserError(
            f"--since {text!r}: expected a duration back from now (30s, 10m, 2h, 1d) or a "
            "date-time such as 2026-11-26T09:30 or '2026-11-26 09:30:00+01:00'"
        ) from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as `ps` shows times
    return when.timestamp()


class Stamper:
    """What `-f` writes through when lines are shown with times or from a time: each line
    is stamped (and kept or dropped) when its first bytes are read here."""

    def __init__(self, out: BinaryIO, view: View, *, mid_line: bool, dropping: bool) -> None:
        self.out, self.view = out, view
        self.mid_line, self.dropping = mid_line, dropping

    def write(self, data: bytes) -> int:
        now = time.time()
        for piece in _pieces(data):
            shown: bytes | None = piece
            if not self.mid_line:
                shown = self.view.line(now, piece)
                self.dropping = shown is None
            if shown is not None and not self.dropping:
                self.out.write(shown)
            self.mid_line = not piece.endswith(b"\n")
        return len(data)

    def flush(self) -> None:
        self.out.flush()

    def new_run(self) -> None:
        self.mid_line = self.dropping = False


def _pieces(data: bytes) -> list[bytes]:
    """`data` cut after each newline (the last piece may lack one)."""
    parts = [p + b"\n" for p in data.split(b"\n")]
    parts[-1] = parts[-1][:-1]
    return parts if parts[-1] else parts[:-1]


def separator(r: ProcessRecord) -> bytes:
    """The line before a run's output, when there are several: which run, when, how it ended."""
    from supervisor.views import local

    how = ""
    if r.state == "lost":
        how = f": lost ({r.end_reason})" if r.end_reason else ": lost"
    elif r.state in ("exited", "crash-loop"):
        how = f": killed by {r.signal}" if r.signal else f": exited {r.exit_code}"
        if r.state == "crash-loop":
            how += ", a crash loop (not restarted)"
    cause = {
        "restart": ", restarted",
        "manual": ", restarted by a person",
        "boot": ", started again after a reboot",
    }.get(r.cause, "")
    return (
        f"--- supervise: run {r.run_no} (process {r.id}{cause}), "
        f"started {local(r.started_at)}{how} ---\n"
    ).encode()


def _source(paths: StatePaths, r: ProcessRecord) -> tuple[RunDir, Path]:
    from supervisor.follow import child_output

    run = RunDir(paths.run_dir(r.id))
    # The child's own file, also where logrotate renamed it (its lines keep going there).
    return run, child_output(run, (r.shim_pid, r.shim_started), r.log_inode)


def _tail(paths: StatePaths, runs: list[ProcessRecord], n: int) -> list[tuple[int, list[str]]]:
    """The last `n` lines across `runs`, newest back: (index in runs, its lines)."""
    from supervisor.tailing import tail_lines

    out: list[tuple[int, list[str]]] = []
    left = n
    for i in range(len(runs) - 1, -1, -1):
        if left <= 0:
            break
        _, source = _source(paths, runs[i])
        size = source.stat().st_size if source.exists() else 0
        lines = tail_lines(source, size, left, floor=runs[i].log_punched)
        out.insert(0, (i, lines))
        left -= len(lines)
    return out


def _copy(source: Path, offset: int, out: BinaryIO) -> None:
    with open(source, "rb") as f:
        f.seek(offset)
        while chunk := f.read(1 << 16):
            out.write(chunk)


def cmd_logs(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from state.db import open_state_store

    if args.lines is not None and args.lines < 0:
        raise UserError(f"-n must be 0 or more, got {args.lines}")
    view = View(
        args.timestamps, None if args.since is None else parse_since(args.since, time.time())
    )
    paths.ensure()
    store = open_state_store(paths.db, settings.store, readonly=True)
    runs, several = _runs(store, args.id, args.run)
    out = sys.stdout.buffer
    last = runs[-1]
    _, source = _source(paths, last)
    if not source.exists() and not several:
        raise SuperviseError(f"process {last.id} has no output file ({source} is gone)")
    state = (False, False)  # (mid-line, dropping) where printing stopped
    if not view.plain:
        offset, state = _print_viewed(paths, runs, out, several=several, view=view, n=args.lines)
    elif args.lines is not None:
        for i, lines in _tail(paths, runs, args.lines) if args.lines else []:
            if several:
                out.write(separator(runs[i]))
            out.write(b"".join(line.encode() + b"\n" for line in lines))
        out.flush()
        offset = source.stat().st_size if source.exists() else 0
    else:
        offset = _print_all(paths, runs, out, several=several)
    if args.follow:
        sink: Sink = out
        if not view.plain:
            sink = Stamper(out, view, mid_line=state[0], dropping=state[1])
        with contextlib.suppress(KeyboardInterrupt):
            _follow(store, paths, last, offset, sink, one_run=args.run is not None)
    return 0


def _print_viewed(
    paths: StatePaths,
    runs: list[ProcessRecord],
    out: BinaryIO,
    *,
    several: bool,
    view: View,
    n: int | None,
) -> tuple[int, tuple[bool, bool]]:
    """Every run's lines with their times, those since `view.since` (the last `n` of them);
    returns the offset the last run's output ends at, and whether it ended mid-line (and
    that line was dropped)."""
    kept: deque[tuple[int, bytes]] = deque(maxlen=n)
    offset, state = 0, (False, False)
    for i, r in enumerate(runs):
        run, src = _source(paths, r)
        times = readtimes.load(run.times, src)
        offset, state = src.stat().st_size if src.exists() else r.log_punched, (False, False)
        if not _has_lines_since(r, times, view):
            continue
        head = several and n is None  # its separator: at once, or before its first line
        if head and view.since is None:
            out.write(separator(r))
            head = False
        if not src.exists():
            continue
        for end, line, text in _viewed_lines(src, r, times, view, n):
            offset, state = end, (not line.endswith(b"\n"), text is None)
            if text is None:
                continue
            if n is not None:
                kept.append((i, text))
                continue
            if head:
                out.write(separator(r))
                head = False
            out.write(text)
    last = -1
    for i, text in kept:
        if several and i != last:
            out.write(separator(runs[i]))
            last = i
        out.write(text)
    out.flush()
    return offset, state


def _has_lines_since(r: ProcessRecord, times: readtimes.Times | None, view: View) -> bool:
    """False for a run without times that ended before `since`; a run without times is
    said to be shown whole, or without times."""
    if times is not None:
        return True
    if view.since is not None and (r.ended_at or math.inf) < view.since:
        return False
    what = "shown whole" if view.since is not None else "shown without times"
    err(f"supervise: run {r.run_no} of process {r.chain} has no read times (its output was "
        f"written before supervise kept them): {what}")  # fmt: skip
    return True


def _viewed_lines(
    src: Path, r: ProcessRecord, times: readtimes.Times | None, view: View, n: int | None
) -> Iterator[tuple[int, bytes, bytes | None]]:
    """(offset after it, line, the line as shown or None) from where lines since
    `view.since` may begin (with `n`: within the last TAIL_BYTES)."""
    start = r.log_punched
    if times is not None and view.since is not None:
        start = times.start_since(view.since, start)
    if n is not None:
        start = max(start, src.stat().st_size - TAIL_BYTES)
    for at, line in readtimes.lines_from(src, readtimes.line_start(src, start, r.log_punched)):
        shown = view.line(None if times is None else times.at(at), line)
        yield at + len(line), line, shown


def _runs(store: Store, ref: str, run_no: int | None) -> tuple[list[ProcessRecord], bool]:
    """The runs to print (those that started; only `run_no` if given), and whether the
    process has several runs (then each gets a separator line)."""
    from state.runs import chain_runs
    from supervisor.restartcli import resolve

    newest = resolve(store, ref)
    every = chain_runs(store, newest.chain) or [newest]
    runs = [r for r in every if r.state != "backoff"] or every  # a pending run wrote nothing
    if run_no is not None:
        runs = [r for r in runs if r.run_no == run_no]
        if not runs:
            raise UserError(
                f"process {newest.chain} has no run {run_no} that started; it has runs "
                f"1 to {newest.run_no}"
            )
    return runs, len(every) > 1 and run_no is None


def _print_all(
    paths: StatePaths, runs: list[ProcessRecord], out: BinaryIO, *, several: bool
) -> int:
    """Every run's output in order; returns the offset the last one's output ends at."""
    offset = 0
    for r in runs:
        run, src = _source(paths, r)
        if several:
            out.write(separator(r))
        # Output past max_log_bytes was moved to output.log.1; its place is a hole.
        if r.log_punched:
            err(f"supervise: the first {r.log_punched} bytes of output of run {r.run_no} "
                f"are in {run.archive} (max_log_bytes)")  # fmt: skip
        if src.exists():
            _copy(src, r.log_punched, out)
        offset = src.stat().st_size if src.exists() else r.log_punched
    out.flush()
    return offset


def _follow(
    store: Store,
    paths: StatePaths,
    row: ProcessRecord,
    offset: int,
    out: Sink,
    *,
    one_run: bool,
) -> None:
    """Follow run `row` from `offset`; then each next run the daemon records, until a run
    ends with none after it (`one_run`: that run only)."""
    from state.processes import get_process
    from state.runs import chain_runs
    from supervisor.follow import follow_output, wait_for_file
    from supervisor.restartcli import await_run

    while True:
        run, source = _source(paths, row)
        with contextlib.suppress(OSError):
            run.attached.touch()  # asks the daemon to touch `recorded` once the end is in
        shim = (row.shim_pid, row.shim_started)
        if shim[0] is None and (pid := run.read_pid("shim")) is not None:
            from supervisor.identity import start_time

            shim = (pid, start_time(pid))  # just started: the row may not name it yet
        follow_output(run, out, offset=offset, shim=shim, source=source)
        if one_run or not _restarts(row):
            return  # no policy restarts it: where `logs -f` always stopped
        done = get_process(store, row.id)
        if done is None or done.state not in ("exited", "lost", "crash-loop"):
            wait_for_file(run.recorded, RECORD_WAIT_S)
        nxt = next((r for r in chain_runs(store, row.chain) if r.run_no == row.run_no + 1), None)
        if nxt is None:
            return
        started = await_run(store, paths, row.chain, nxt.run_no, math.inf)
        if started is None:
            return  # a person stopped it before it started
        row = started[0]
        if isinstance(out, Stamper):
            out.new_run()  # a line of ours: never stamped
            out.out.write(separator(row))
        else:
            out.write(separator(row))
        out.flush()
        offset = 0


def _restarts(row: ProcessRecord) -> bool:
    from supervisor.runspec import RunSpec

    if row.spec is None:
        return False
    try:
        spec = RunSpec.from_text(row.spec, "launch record")
    except SuperviseError:
        return False
    return spec.hooks.restart is not None and spec.hooks.restart.policy != "no"
