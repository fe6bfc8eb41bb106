"""`supervise restart`, `stop` and `daemon stop`, and naming a process by id or by name.

A process restarted by its policy is a chain of runs, each its own row (state/runs.py). An
id names the chain of its run; a name names the newest chain with a run of that name (the
one still live, if several share it: two live ones are ambiguous). What is acted on is the
chain's newest run.

A person's stop ends the restart loop: `stop_request` is set on the run before it is
signalled, and the exit's commit reads it; a pending run (`backoff`) is cancelled. A restart
asks the daemon for the next run: at once after the running run ends, or now for a pending
or ended one; the daemon starts it (one launcher for every restart, so it is started once).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import time
from typing import TYPE_CHECKING

from state.paths import StatePaths
from state.settings import Settings
from supervise.errors import SuperviseError, UserError
from supervisor.daemonlock import running_pid
from supervisor.inotify import IN_CREATE, IN_MOVED_TO, Inotify
from supervisor.rundir import RunDir
from supervisor.running import ensure_daemon, err
from supervisor.stopping import parse_signal, stop_process

if TYPE_CHECKING:
    from state.db import Store
    from state.processes import ProcessRecord

START_WAIT_S = 15.0  # `restart` waits this long for the daemon to start the next run
PID_WAIT_S = 10.0  # `stop` of a run the daemon is starting: its pid comes within this
DAEMON_STOP_WAIT_S = 30.0


def resolve(store: Store, ref: str) -> ProcessRecord:
    """The newest run of the process `ref` names: an id (any run of it), or a name.

    Raises:
        UserError: nothing has that id or name, or several live processes share the name.
    """
    from state.processes import ENDED, get_process
    from state.runs import newest_run, runs_named

    if ref.isdigit():
        row = get_process(store, int(ref))
        if row is None:
            # The id people know is the chain's first run's, which `prune` may have removed
            # while later runs stay: the chain still answers to it.
            kept = newest_run(store, int(ref))
            if kept is None:
                raise UserError(f"no process {ref}; `supervise ps` lists them")
            return kept
        return newest_run(store, row.chain) or row
    chains = runs_named(store, ref)
    if not chains:
        raise UserError(f"no process named {ref!r}; `supervise ps` lists them (NAME column)")
    live = [c for c in chains if c.state not in ENDED]
    if len(live) > 1:
        ids = ", ".join(f"{c.chain} ({c.state})" for c in live)
        raise UserError(
            f"{len(live)} live processes are named {ref!r}: {ids}; name one by its id, "
            f"e.g. supervise stop {live[-1].chain}"
        )
    return live[0] if live else chains[-1]


def _writable(paths: StatePaths, settings: Settings) -> Store:
    from state.db import open_state_store

    paths.ensure()
    return open_state_store(paths.db, settings.store)


def _wake(paths: StatePaths) -> None:
    """Tell the daemon a run was recorded or hurried (it looks for pending runs)."""
    with contextlib.suppress(OSError), open(paths.wake, "w") as f:
        f.write(str(time.time()))


def _await_pid(store: Store, row: ProcessRecord) -> ProcessRecord:
    """A run the daemon claimed is started within moments: wait for its pid."""
    from state.processes import get_process

    deadline = time.monotonic() + PID_WAIT_S
    while row.pid is None and row.state == "starting" and time.monotonic() < deadline:
        time.sleep(0.05)  # the daemon is between its claim and the shim: milliseconds
        row = get_process(store, row.id) or row
    return row


def cmd_stop(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    store = _writable(paths, settings)
    row = resolve(store, args.id)
    sig = parse_signal(args.signal)
    print(stop_run(store, paths, row, sig=sig, grace=args.grace))
    return 0


def stop_run(
    store: Store,
    paths: StatePaths,
    row: ProcessRecord,
    *,
    sig: signal.Signals = signal.SIGTERM,
    grace: float = 10.0,
) -> str:
    """A person's stop of the newest run `row` of a process (`stop`, and `up`/`down` of a
    program): it ends its restarts, and its on_exit hooks are told a person stopped it.
    Returns what to print.

    Raises:
        SuperviseError: it is not running (exit 1).
    """
    from state.runs import cancel_run, request_stop

    if grace < 0:
        raise UserError(f"--grace must be 0 or more seconds, got {grace:g}")
    if row.state == "backoff":
        if cancel_run(store, row.id):
            return (
                f"process {row.chain} ({row.name}): its restart (run {row.run_no}) is "
                "cancelled; it stays stopped (supervise restart starts it again)"
            )
        row = resolve(store, str(row.id))  # the daemon started it meanwhile: stop that
    if row.state in ("starting", "running"):
        row = request_stop(store, row.id, "stop") or row  # no restart after this end
        row = _await_pid(store, row)
    elif row.run_no > 1:
        raise SuperviseError(
            f"process {row.chain} ({row.name}) is not running (run {row.run_no}: {row.state}); "
            "nothing to stop"
        )
    report = stop_process(
        row,
        RunDir(paths.run_dir(row.id)),
        sig=sig,
        grace=grace,
        say=lambda m: err(f"supervise: {m}"),
    )
    rec = report.record
    if rec is None:
        return f"process {row.id} got {', '.join(report.sent)}; its end is not recorded yet"
    how = f"killed by {rec.signal}" if rec.signal else f"exited with code {rec.exit_code}"
    which = f"process {row.chain}" + (f" (run {row.run_no})" if row.run_no > 1 else "")
    return f"{which} stopped: {how}"


def cmd_restart(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from state.processes import ENDED
    from state.runs import NextRun, hurry_run, record_next_run, request_stop

    store = _writable(paths, settings)
    row = resolve(store, args.id)
    sig = parse_signal(args.signal)
    if args.grace < 0:
        raise UserError(f"--grace must be 0 or more seconds, got {args.grace:g}")
    ensure_daemon(paths, settings.autostart)
    now = time.time()
    run_no = row.run_no
    if row.state == "backoff" and hurry_run(store, row.id, now) is not None:
        _wake(paths)
    elif row.state in ENDED:
        run_no = record_next_run(store, row.id, NextRun(now, "manual"), now).run_no
        _wake(paths)
    elif row.state in ("starting", "running"):
        asked = request_stop(store, row.id, "restart")
        run_no = row.run_no + 1
        if asked is not None:
            row = _await_pid(store, asked)
            with contextlib.suppress(SuperviseError):  # it ended on its own: restarted anyway
                stop_process(
                    row,
                    RunDir(paths.run_dir(row.id)),
                    sig=sig,
                    grace=args.grace,
                    say=lambda m: err(f"supervise: {m}"),
                )
    started = await_run(store, paths, row.chain, run_no, START_WAIT_S)
    name = f"process {row.chain} ({row.name})"
    if started is None:
        hint = "" if running_pid(paths.daemon_pid) else " (no daemon runs: `supervise daemon`)"
        print(f"{name}: run {run_no} is recorded and starts when the daemon gets to it{hint}")
        return 0
    new, pid = started
    where = f"pid {pid}" if pid is not None else f"state {new.state}"
    print(f"{name} restarted: run {new.run_no} is process {new.id} ({where})")
    return 0 if pid is not None else 1


def await_run(
    store: Store, paths: StatePaths, chain: int, run_no: int, seconds: float
) -> tuple[ProcessRecord, int | None] | None:
    """Wait until run `run_no` of `chain` has started (its child's pid) or ended; None if it
    has not within `seconds`. Woken by its run dir and child.pid appearing (inotify)."""
    from state.processes import ENDED
    from state.runs import chain_runs

    deadline = time.monotonic() + seconds
    ino = Inotify()
    watched: set[int] = set()
    seen = False
    try:
        with contextlib.suppress(OSError):
            ino.add(str(paths.runs), IN_CREATE | IN_MOVED_TO)
        while True:
            row = next((r for r in chain_runs(store, chain) if r.run_no == run_no), None)
            if row is None and seen:
                return None  # a pending run a person cancelled
            if row is not None:
                seen = True
                run = RunDir(paths.run_dir(row.id))
                if (pid := run.read_pid("child")) is not None:
                    return row, pid
                if row.state in ENDED:
                    return row, None
                if row.id not in watched:
                    with contextlib.suppress(OSError):
                        ino.add(str(run.path), IN_CREATE | IN_MOVED_TO)
                        watched.add(row.id)
                        continue  # look again: it may have come before the watch
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            # A run that could not start ends with no file event: look again each second.
            if select.select([ino.fd], [], [], min(left, 1.0))[0]:
                ino.read()
    finally:
        ino.close()


def cmd_daemon_stop(_args: argparse.Namespace, paths: StatePaths, _settings: Settings) -> int:
    """SIGTERM to the daemon of this state dir; wait until it has let go of its lock."""
    pid = running_pid(paths.daemon_pid)
    if pid is None:
        print(f"no daemon runs on {paths.home}")
        return 0
    if pid <= 0:
        raise SuperviseError(f"a daemon holds {paths.daemon_pid} but its pid is not in it")
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        print(f"no daemon runs on {paths.home}")
        return 0
    try:
        os.kill(pid, signal.SIGTERM)
        ended = select.select([fd], [], [], DAEMON_STOP_WAIT_S)[0]
    finally:
        os.close(fd)
    if not ended:
        raise SuperviseError(
            f"the daemon (pid {pid}) did not stop within {DAEMON_STOP_WAIT_S:g}s; "
            f"see {paths.daemon_log}, or kill -9 {pid}"
        )
    print(
        f"daemon (pid {pid}) stopped; supervised processes keep running, and the next "
        "daemon catches up on what they did meanwhile (restarts included)"
    )
    return 0
