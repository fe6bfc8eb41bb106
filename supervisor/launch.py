"""Starting a supervised process: validate, record, create its run dir, start the shim.

The CLI calls this; a thread's RunProcess tool will too. Nothing is left half-recorded: if the
shim cannot start, the row and the run dir are removed again.

The daemon starts the next run of a restarted process with `start_run`: the run recorded by
the exit's commit (`backoff`), claimed in one UPDATE, started from the launch record and the
environment of the runs before it, exactly as they were started.

The launch record (hooks, permissions, shell hooks, extension pins) goes into the process's
row in the same transaction that creates it, with the key that opens env.json: the daemon
takes both from the DB, so nothing a tool writes into the run dir changes what a thread runs
under.
"""

from __future__ import annotations

import json
import os
import select
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from state.db import Store
from state.paths import StatePaths
from state.processes import (
    NewProcess,
    ProcessRecord,
    create_process,
    forget_process,
    mark_running,
)
from state.runs import chain_runs, claim_run
from supervise.errors import LaunchError, StateError, UserError
from supervisor.clocks import boot_clock
from supervisor.hookspec import HookFile, Limits
from supervisor.identity import boot_id, start_time
from supervisor.rundir import RunDir, new_env_key, seal_env, seal_env_with
from supervisor.runspec import Inherited, ProgramRef, RunSpec, SettingsHooks, renumbered

SHIM = Path(__file__).with_name("shim.sh")
READY_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class LaunchRequest:
    """What to run and how: argv, where, with which hooks, at which depth."""

    argv: Sequence[str]
    cwd: Path
    env: Mapping[str, str]
    hooks: HookFile = field(default_factory=HookFile)
    name: str | None = None
    env_keys: Sequence[str] = ()  # names given with --env or env files, kept in spec.json
    depth: int = 0
    parent_thread_id: int | None = None
    parent_limits: Limits | None = None  # a thread's process: keep the strictest limits
    inherited: Inherited | None = None  # a thread's process: what the thread passes on
    model_default: str | None = None  # its threads' model when nothing else names one
    settings_hooks: SettingsHooks = field(default_factory=SettingsHooks)  # run --settings
    # Python block-buffers stdout to a file: its lines (and their hooks) would come 8 KiB
    # at a time. PYTHONUNBUFFERED=1 unless the environment says otherwise; False drops it.
    unbuffered: bool = True
    # Put before argv when starting it (a thread's sandbox: `bwrap ... --`); not recorded
    # as the command.
    wrap: Sequence[str] = ()
    program: ProgramRef | None = None  # started by `supervise up` from a program file

    def child_env(self) -> dict[str, str]:
        """The environment the process starts with."""
        env = dict(self.env)
        if not self.unbuffered:
            env.pop("PYTHONUNBUFFERED", None)
        else:
            env.setdefault("PYTHONUNBUFFERED", "1")
        return env


def resolve_command(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> str:
    """The executable argv[0] names, found as a shell would.

    Raises:
        UserError: if there is no such command or it is not executable.
    """
    if not argv:
        raise UserError("no command given; write: supervise run -- CMD [ARGS...]")
    prog = argv[0]
    if "/" in prog:
        path = Path(prog) if os.path.isabs(prog) else cwd / prog
        if not path.exists():
            raise UserError(f"command not found: {prog} (no such file in {cwd}); check the path")
        if path.is_dir() or not os.access(path, os.X_OK):
            raise UserError(
                f"command not executable: {prog}; chmod +x it or run it via its interpreter"
            )
        return str(path)
    found = shutil.which(prog, path=env.get("PATH", os.defpath))
    if found is None:
        raise UserError(f"command not found: {prog}; check the name, or the PATH the process gets")
    return found


def launch(
    store: Store,
    paths: StatePaths,
    req: LaunchRequest,
    *,
    clock: Callable[[], float] = time.time,
) -> ProcessRecord:
    """Start `req` detached under a shim and return its row (state running).

    Raises:
        UserError: the command does not exist or the cwd is missing.
        LaunchError: the shim could not be started.
    """
    if not req.cwd.is_dir():
        raise UserError(f"working directory does not exist: {req.cwd}; pass an existing --cwd")
    resolve_command(req.argv, req.cwd, req.env)
    paths.ensure()
    hooks = req.hooks
    if req.parent_limits is not None:
        hooks = hooks.under(req.parent_limits)
    # All of it, sealed: its threads' tools get it less the model providers' keys, and what
    # they save is scrubbed of every credential in it (the process may print its own).
    env, env_key = seal_env(req.child_env())
    row = _insert_row(store, req, hooks, env_key, clock())
    run = RunDir(paths.run_dir(row.id))
    try:
        run.path.mkdir(mode=0o700)
        run.write_env(env)
        assert row.spec is not None
        run.write_spec(row.spec)
        shim_pid, child_pid = _start_shim(run, req)
    except BaseException as exc:
        forget_process(store, row.id)
        shutil.rmtree(run.path, ignore_errors=True)
        if isinstance(exc, OSError):
            raise LaunchError(f"cannot start {req.argv[0]}: {exc}") from exc
        raise
    return _started(store, row.id, shim_pid, child_pid)


def _insert_row(
    store: Store, req: LaunchRequest, hooks: HookFile, env_key: str, now: float
) -> ProcessRecord:
    new = NewProcess(
        name=req.name or Path(req.argv[0]).name,
        command=shlex.join(req.argv),
        argv=json.dumps(list(req.argv)),
        cwd=str(req.cwd),
        boot_id=boot_id(),
        started_at=now,
        started_boot=boot_clock(),
        depth=req.depth,
        parent_thread_id=req.parent_thread_id,
        env_key=env_key,
    )
    # The record names the id: written in the transaction that creates the row.
    return create_process(store, new, lambda row: _spec(row, req, hooks).text())


def _spec(row: ProcessRecord, req: LaunchRequest, hooks: HookFile) -> RunSpec:
    """The launch record: built here only."""
    return RunSpec(
        id=row.id,
        name=row.name,
        argv=tuple(req.argv),
        cwd=req.cwd,
        env_keys=tuple(req.env_keys),  # names only: values may be secrets
        depth=req.depth,
        parent_thread_id=req.parent_thread_id,
        started_at=row.started_at,
        hooks=hooks,
        unbuffered=req.unbuffered,
        model_default=req.model_default,
        settings_hooks=req.settings_hooks,
        inherited=req.inherited,
        wrap=tuple(req.wrap),
        program=req.program,
    )


def _start_shim(run: RunDir, req: LaunchRequest) -> tuple[int, int]:
    # Empty until the daemon reads output: its being there says read times are kept.
    os.close(os.open(run.times, os.O_WRONLY | os.O_CREAT, 0o600))
    log = os.open(run.output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    ready_r, ready_w = os.pipe()
    try:
        shim = subprocess.Popen(
            ["/bin/sh", str(SHIM), str(run.path), *req.wrap, *req.argv],
            stdin=ready_w,  # the shim reports the child's pid here; the child gets /dev/null
            stdout=log,
            stderr=log,
            cwd=req.cwd,
            env=req.child_env(),
            start_new_session=True,  # no controlling terminal: closing it sends no SIGHUP
        )
    finally:
        os.close(log)
        os.close(ready_w)
    try:
        child = _read_ready(ready_r)
    finally:
        os.close(ready_r)
    # The shim outlives us; Popen's finalizer must not warn about it, and we never wait.
    shim.returncode = 0
    return shim.pid, child


def _read_ready(fd: int) -> int:
    deadline = time.monotonic() + READY_TIMEOUT_S
    buf = b""
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise LaunchError(f"the shim did not report its child within {READY_TIMEOUT_S:g}s")
        chunk = os.read(fd, 64)
        if not chunk:
            raise LaunchError("the shim ended before starting the child; see its output.log")
        buf += chunk
    return int(buf)


def launched(paths: StatePaths, row: ProcessRecord) -> bool:
    """Whether a shim was started for this run: it writes shim.pid first thing."""
    return RunDir(paths.run_dir(row.id)).shim_pid.exists()


def start_run(
    store: Store,
    paths: StatePaths,
    row: ProcessRecord,
    *,
    clock: Callable[[], float] = time.time,
) -> ProcessRecord | None:
    """Start a run recorded by a restart: claim it if pending (`backoff` -> `starting`), then
    start it as its process was started. Also for a run claimed by a daemon that died before
    its shim started (no shim.pid): it is started then, once. Returns its row (running), or
    None when it is not pending any more (a person stopped it).

    Raises:
        LaunchError: it cannot be started (its directory is gone, its environment cannot be
            read); the caller records the run as lost.
    """
    if row.state == "backoff":
        if row.spec is None:
            raise LaunchError(f"process {row.id} has no launch record to restart from")
        now = clock()
        claimed = claim_run(
            store,
            row.id,
            started_at=now,
            started_boot=boot_clock(),
            boot_id=boot_id(),
            spec=renumbered(row.spec, row.id, now),
            env_key=new_env_key(),
        )
        if claimed is None:
            return None
        row = claimed
    if row.spec is None or row.env_key is None:
        raise LaunchError(f"process {row.id} has no launch record to restart from")
    spec = RunSpec.from_text(row.spec, f"process {row.id}'s launch record")
    env = _previous_env(store, paths, row)
    run = RunDir(paths.run_dir(row.id))
    try:
        run.path.mkdir(mode=0o700, exist_ok=True)  # exists: the last daemon died right here
        run.write_env(seal_env_with(env, row.env_key))
        run.write_spec(row.spec)
        req = LaunchRequest(
            argv=spec.argv, cwd=spec.cwd, env=env, unbuffered=spec.unbuffered, wrap=spec.wrap
        )
        if not req.cwd.is_dir():
            raise LaunchError(f"its working directory {req.cwd} does not exist any more")
        shim_pid, child_pid = _start_shim(run, req)
    except OSError as exc:
        raise LaunchError(f"cannot start {spec.argv[0]}: {exc}") from exc
    return _started(store, row.id, shim_pid, child_pid)


def _previous_env(store: Store, paths: StatePaths, row: ProcessRecord) -> dict[str, str]:
    """The environment the runs before `row` were started with: the newest env.json that
    opens with its run's key (a run dir removed by hand is skipped)."""
    problems = []
    for prev in reversed([r for r in chain_runs(store, row.chain) if r.run_no < row.run_no]):
        if prev.env_key is None:
            continue
        try:
            return RunDir(paths.run_dir(prev.id)).read_env(prev.env_key)
        except StateError as exc:
            problems.append(str(exc))
    raise LaunchError(
        "the environment it was started with cannot be read: "
        + ("; ".join(problems[:1]) or "no earlier run kept one")
    )


def _started(store: Store, process_id: int, shim_pid: int, child_pid: int) -> ProcessRecord:
    """Record the pids of a started run, each with its start time (pids are reused)."""
    return mark_running(
        store,
        process_id,
        pid=child_pid,
        pid_started=start_time(child_pid),
        shim_pid=shim_pid,
        shim_started=start_time(shim_pid),
    )
