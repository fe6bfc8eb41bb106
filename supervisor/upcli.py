"""`supervise up` and `supervise down`: a program file's programs, started and stopped.

programfile.py reads the file, programs.py decides what to do; this carries it out: a start
is `launch` (as `supervise run -d`, the program's name as the process name, its program
file and fingerprint in the launch record), a stop is `supervise stop`'s (so its on_exit
hooks are told a person stopped it, and no restart follows).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from state.paths import StatePaths
from state.settings import Settings
from supervise.errors import HookFileError, SuperviseError, UserError
from supervisor.daemonlock import running_pid
from supervisor.programfile import Program, ProgramFile, find_program_file, load_program_file
from supervisor.programs import Keep, Live, Replace, Start, Stop, plan_down, plan_up
from supervisor.running import default_model, ensure_daemon, err, settings_hooks, show_warnings

if TYPE_CHECKING:
    from state.db import Store
    from state.processes import ProcessRecord
    from supervisor.launch import LaunchRequest

END_WAIT_S = 10.0  # a replaced program's old run: the daemon records its end within this


@dataclass(frozen=True)
class Done:
    """One line of `up`/`down`'s report."""

    name: str
    action: str  # started | unchanged | restarted | stopped | not running
    process: int | None
    pid: int | None
    note: str = ""

    def line(self) -> str:
        where = f"process {self.process}" if self.process is not None else ""
        if self.pid is not None:
            where += f", pid {self.pid}"
        tail = "; ".join(x for x in (where, self.note) if x)
        return f"{self.name}: {self.action}" + (f" ({tail})" if tail else "")

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "action": self.action,
            "process": self.process,
            "pid": self.pid,
            "note": self.note or None,
        }


def live_processes(store: Store) -> list[Live]:
    """Every live chain's newest run (running, starting, or a restart pending), with the
    program file its launch record names."""
    from state.processes import active_processes
    from state.runs import pending_runs

    newest: dict[int, ProcessRecord] = {}
    for row in [*active_processes(store), *pending_runs(store)]:
        if row.chain not in newest or newest[row.chain].run_no < row.run_no:
            newest[row.chain] = row
    out = []
    for chain in sorted(newest):
        row = newest[chain]
        ref = _program_of(row)
        file, print_ = ref if ref else (None, None)
        out.append(Live(row.name, chain, file, print_, row.pid))
    return out


def _program_of(row: ProcessRecord) -> tuple[str, str] | None:
    """(file, fingerprint) of a program's launch record; None for any other process."""
    from supervisor.runspec import ProgramRef

    if row.spec is None:
        return None
    try:
        ref = ProgramRef.from_json(json.loads(row.spec).get("program"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return None if ref is None else (ref.file, ref.fingerprint)


def _store(paths: StatePaths, settings: Settings) -> Store:
    from state.db import open_state_store

    paths.ensure()
    return open_state_store(paths.db, settings.store)


def _request(p: Program, pf: ProgramFile, settings: Settings) -> LaunchRequest:
    from supervisor.launch import LaunchRequest, resolve_command
    from supervisor.runspec import ProgramRef

    given, warned = settings_hooks(settings.hook_settings)
    show_warnings([*(str(w) for w in p.hooks.warnings), *warned])
    req = LaunchRequest(
        argv=p.argv,
        cwd=p.cwd,
        env={**os.environ, **dict(p.env)},
        hooks=p.hooks,
        name=p.name,
        env_keys=p.env_keys,
        model_default=default_model(p.cwd, settings.model),
        settings_hooks=given,
        program=ProgramRef(str(pf.path), p.name, p.fingerprint, p.autostart),
    )
    try:
        resolve_command(req.argv, req.cwd, req.env)
    except UserError as exc:
        raise HookFileError([f"{pf.path}:{p.line}: program {p.name}: {exc}"]) from None
    return req


def cmd_up(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    pf = load_program_file(find_program_file(args.file, Path.cwd()))
    store = _store(paths, settings)
    actions = plan_up(pf.programs, str(pf.path), live_processes(store), args.names)
    # Every command checked before anything starts or stops: bad input changes nothing.
    requests = {
        a.program.name: _request(a.program, pf, settings)
        for a in actions
        if isinstance(a, Start | Replace)
    }
    if requests:
        ensure_daemon(paths, settings.autostart)
    done: list[Done] = []
    for a in actions:
        if isinstance(a, Stop):
            done.append(_stop(store, paths, a, args.grace, "removed from the file"))
        elif isinstance(a, Keep):
            done.append(Done(a.program.name, "unchanged", a.chain, a.pid))
        else:
            note = ""
            if isinstance(a, Replace):
                stopped = _stop(store, paths, Stop(a.program.name, a.chain, "down"), args.grace)
                _await_end(store, paths, a.chain)
                note = f"definition changed; was process {stopped.process}"
            row = _launch(store, paths, requests[a.program.name])
            action = "restarted" if isinstance(a, Replace) else "started"
            done.append(Done(a.program.name, action, row.id, row.pid, note))
    _report(args, pf.path, done)
    return 0


def cmd_down(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    path = find_program_file(args.file, Path.cwd())
    known: list[str] = []
    # A file that no longer reads (or is gone) can still be brought down: the launch
    # records name the file.
    with contextlib.suppress(HookFileError):
        known = load_program_file(path).names()
    store = _store(paths, settings)
    stops = plan_down(str(path), known, live_processes(store), args.names)
    done = [_stop(store, paths, s, args.grace) for s in stops]
    running = {d.name for d in done}
    for name in args.names or known:
        if name not in running:
            done.append(Done(name, "not running", None, None))
    _report(args, path, done)
    return 0


def _launch(store: Store, paths: StatePaths, req: LaunchRequest) -> ProcessRecord:
    from supervisor.launch import launch

    return launch(store, paths, req)


def _stop(store: Store, paths: StatePaths, s: Stop, grace: float, note: str = "") -> Done:
    from state.runs import newest_run
    from supervisor.restartcli import stop_run

    row = newest_run(store, s.chain)
    if row is None:  # never restarted: the chain is its first run alone
        from state.processes import get_process

        row = get_process(store, s.chain)
    if row is None:
        return Done(s.name, "not running", s.chain, None, note)
    try:
        said = stop_run(store, paths, row, grace=grace)
    except SuperviseError:  # it ended on its own (the daemon may not have recorded it yet)
        return Done(s.name, "not running", s.chain, None, "it had ended")
    how = said.split("stopped: ", 1)[-1] if "stopped: " in said else said
    return Done(s.name, "stopped", s.chain, None, "; ".join(x for x in (note, how) if x))


def _await_end(store: Store, paths: StatePaths, chain: int) -> None:
    """Until the daemon has recorded the stopped run's end (so `stop NAME` names one live
    process), if a daemon runs; bounded."""
    from state.processes import ENDED
    from state.runs import newest_run

    if running_pid(paths.daemon_pid) is None:
        return
    deadline = time.monotonic() + END_WAIT_S
    while time.monotonic() < deadline:
        row = newest_run(store, chain)
        if row is None or row.state in ENDED:
            return
        time.sleep(0.05)
    err(f"supervise: the daemon has not recorded the end of process {chain} yet")


def _report(args: argparse.Namespace, path: Path, done: list[Done]) -> None:
    if args.json:
        print(json.dumps({"file": str(path), "programs": [d.to_json() for d in done]}, indent=1))
        return
    if not done:
        print(f"nothing to do for {path}")
    for d in done:
        print(d.line())
