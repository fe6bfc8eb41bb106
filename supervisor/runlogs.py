"""`supervise logs`: a process's output, every run of it, each after a separator line.

A process restarted by its policy is a chain of runs, each with its own output.log. `logs`
prints them in order; a process that ran once prints exactly what it wrote, as before. `-n`
counts lines across runs, from the newest back; `-f` follows the newest run and, when it
ends and the daemon records a next run, waits for that one to start and follows it too.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from state.paths import StatePaths
from state.settings import Settings
from supervise.errors import SuperviseError, UserError
from supervisor.rundir import RunDir
from supervisor.running import RECORD_WAIT_S, err

if TYPE_CHECKING:
    from state.db import Store
    from state.processes import ProcessRecord


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
    paths.ensure()
    store = open_state_store(paths.db, settings.store, readonly=True)
    runs, several = _runs(store, args.id, args.run)
    out = sys.stdout.buffer
    last = runs[-1]
    _, source = _source(paths, last)
    if not source.exists() and not several:
        raise SuperviseError(f"process {last.id} has no output file ({source} is gone)")
    if args.lines is not None:
        for i, lines in _tail(paths, runs, args.lines) if args.lines else []:
            if several:
                out.write(separator(runs[i]))
            out.write(b"".join(line.encode() + b"\n" for line in lines))
        out.flush()
        offset = source.stat().st_size if source.exists() else 0
    else:
        offset = _print_all(paths, runs, out, several=several)
    if args.follow:
        with contextlib.suppress(KeyboardInterrupt):
            _follow(store, paths, last, offset, out, one_run=args.run is not None)
    return 0


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
    out: BinaryIO,
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
