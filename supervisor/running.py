"""`supervise run`: validate, start a daemon if needed, launch, follow, report threads."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from state.paths import StatePaths
from state.settings import Settings
from supervise.errors import HookFileError, UserError
from supervisor.daemonlock import running_pid
from supervisor.rundir import RunDir

if TYPE_CHECKING:  # both import the agent packages: `ps` and `logs` start without them
    from state.db import Store
    from supervisor.hookspec import HookFile
    from supervisor.runspec import SettingsHooks

HOOK_EXTENSIONS = (".yaml", ".yml", ".json")
RECORD_WAIT_S = 15.0


def err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def split_trailing_hooks(cmd: Sequence[str]) -> tuple[list[str], list[str]]:
    """Take `--hook FILE` (FILE ending .yaml/.yml/.json) off the end of a command line."""
    rest, hooks = list(cmd), list[str]()
    cmd = rest
    while True:
        if len(cmd) >= 3 and cmd[-2] == "--hook" and cmd[-1].endswith(HOOK_EXTENSIONS):
            hooks.insert(0, cmd[-1])
            del cmd[-2:]
        elif len(cmd) >= 2 and cmd[-1].startswith("--hook=") and cmd[-1].endswith(HOOK_EXTENSIONS):
            hooks.insert(0, cmd[-1].split("=", 1)[1])
            del cmd[-1]
        else:
            return cmd, hooks


def load_hooks(files: Sequence[str], notify_targets: Collection[str] | None = None) -> HookFile:
    """Load and merge the hook files given to one run; every problem of every file at once.
    `notify_targets`: the settings file's targets, which `notify:` must name."""
    from supervisor.hookspec import HookFile

    merged, problems = HookFile(), []
    if files:
        from supervisor.hookfile import load_hook_file
    for f in files:
        try:
            hf = load_hook_file(f, notify_targets=notify_targets)
        except HookFileError as exc:
            problems += exc.problems
            continue
        try:
            merged = merged.merge(hf)
        except ValueError as exc:
            problems.append(f"{f}: {exc}")
    if problems:
        raise HookFileError(problems)
    return merged


def with_restart_flags(hooks: HookFile, args: argparse.Namespace) -> HookFile:
    """`--restart POLICY` and `--restart-delay D` over the hook files' `restart:` (its other
    values kept), into the launch record, so every restart runs under them."""
    policy, delay = getattr(args, "restart", None), getattr(args, "restart_delay", None)
    if policy is None and delay is None:
        return hooks
    from dataclasses import replace

    from supervisor.restarts import RestartSpec, parse_duration

    spec = hooks.restart or RestartSpec()
    if policy is not None:
        spec = replace(spec, policy=policy)
    if delay is not None:
        try:
            seconds = parse_duration(delay)
        except ValueError as exc:
            raise UserError(f"--restart-delay {delay!r} must be {exc}") from None
        spec = replace(spec, delay=seconds, max_delay=max(spec.max_delay, seconds))
    if spec.policy == "no" and delay is not None:
        raise UserError("--restart-delay needs a restart policy: add --restart on-failure")
    return replace(hooks, restart=spec)


def _parse_env(pairs: Sequence[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--env {pair!r} must look like KEY=VALUE")
        env[key] = value
    return env


def _env_files(hooks: HookFile, given: Sequence[str]) -> dict[str, str]:
    """The variables of the hook files' `env_file:` (absolute already), then of each
    `--env-file`, a later file's winning; every file's problems at once.

    Raises:
        HookFileError: a file that cannot be read or parsed, `FILE:LINE: what; how to fix`.
    """
    if not hooks.env_files and not given:
        return {}
    from supervisor.envfile import read_env_files

    files = [(Path(f), f) for f in hooks.env_files]
    files += [(Path(f).expanduser(), f) for f in given]
    return read_env_files(files)


def ensure_daemon(paths: StatePaths, autostart: bool) -> None:
    """Start `supervise daemon` in the background unless one already holds the lock.

    The autostart setting (`SUPERVISE_AUTOSTART=0`) turns this off (when systemd runs the
    daemon).
    """
    if not autostart:
        return
    if running_pid(paths.daemon_pid) is not None:
        return
    paths.ensure()
    env = {**os.environ, "SUPERVISE_HOME": str(paths.home)}
    with open(paths.daemon_log, "ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "supervisor", "daemon"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd=paths.home,
            env=env,
            start_new_session=True,
        ).returncode = 0  # it outlives us; never waited for


def default_model(cwd: Path, name: str | None) -> str | None:
    """The model setting (checked already) with a relative script path made absolute."""
    if name is None:
        return None
    if name.startswith("scripted:"):
        script = Path(name.removeprefix("scripted:")).expanduser()
        return f"scripted:{cwd / script}"
    return name


def settings_hooks(
    path: Path | None, plugins: Sequence[str] = ()
) -> tuple[SettingsHooks, list[str]]:
    """Shell hooks and extensions from the hook_settings setting (`--settings FILE`, else
    `SUPERVISE_SETTINGS`) and the Claude Code plugins given with `--plugin DIR`; and the
    warnings about what they hold that will not be used.

    Raises:
        HookFileError: every file that cannot be read, `FILE:LINE: what; how to fix it`.
    """
    from supervisor.runspec import SettingsHooks

    if path is None and not plugins:
        return SettingsHooks(), []
    from supervisor.ccfiles import ClaudeHooks, load_plugins, load_settings_file

    got, problems = ClaudeHooks(), []
    if path is not None:
        try:
            got += load_settings_file(path)
        except HookFileError as exc:
            problems += exc.problems
    try:
        got += load_plugins(plugins)
    except HookFileError as exc:
        problems += exc.problems
    if problems:
        raise HookFileError(problems)
    return SettingsHooks(got.shell, got.extensions), [str(w) for w in got.warnings]


def show_warnings(lines: Sequence[str]) -> None:
    """What the files given to a command hold that will not be used, on stderr, each once."""
    for line in dict.fromkeys(lines):
        err(line)


def cmd_run(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    cmd, trailing = split_trailing_hooks(cmd)
    if not cmd:
        raise UserError("no command given; write: supervise run [--hook FILE] -- CMD [ARGS...]")
    targets = settings.notify.targets
    hooks = with_restart_flags(load_hooks([*args.hook, *trailing], targets), args)
    given, warned = settings_hooks(settings.hook_settings, args.plugin)
    extra_env = {**_env_files(hooks, args.env_file), **_parse_env(args.env)}
    cwd = Path(args.cwd).resolve() if args.cwd else Path.cwd()
    # Imported here: SQLAlchemy costs start-up that commands without the database skip.
    from state.db import open_state_store
    from supervisor.launch import LaunchRequest, launch, resolve_command

    paths.ensure()
    store = open_state_store(paths.db, settings.store)
    req = LaunchRequest(
        argv=cmd,
        cwd=cwd,
        env={**os.environ, **extra_env},
        hooks=hooks,
        name=args.name,
        env_keys=sorted(extra_env),
        unbuffered=not args.buffered,
        # The CLI's SUPERVISE_MODEL (or settings file) is the fallback for this run's threads:
        # the daemon may have been started from another shell.
        model_default=default_model(cwd, settings.model),
        settings_hooks=given,
    )
    resolve_command(req.argv, req.cwd, req.env)  # bad input starts nothing, not even a daemon
    show_warnings([*(str(w) for w in hooks.warnings), *warned])
    ensure_daemon(paths, settings.autostart)
    row = launch(store, paths, req)
    if args.detach:
        if args.json:
            print(json.dumps({"id": row.id, "pid": row.pid, "name": row.name}))
        else:
            print(
                f"started process {row.id} ({row.name}, pid {row.pid}); "
                f"supervise logs {row.id} -f to follow"
            )
        return 0
    return _attach(store, paths, row.id, (row.shim_pid, row.shim_started))


def _attach(
    store: Store, paths: StatePaths, pid: int, shim: tuple[int | None, float | None]
) -> int:
    # Here, not at the top: `ps` imports this module, and follow brings asyncio and inotify.
    from supervisor.follow import follow_output, wait_for_file

    run = RunDir(paths.run_dir(pid))
    with contextlib.suppress(OSError):
        run.attached.touch()  # asks the daemon to touch `recorded` when it has committed
    told: set[int] = set()
    try:
        record = follow_output(
            run, sys.stdout.buffer, shim=shim, on_news=lambda: _report_threads(store, pid, told)
        )
    except KeyboardInterrupt:
        err(
            f"\nsupervise: detached; process {pid} keeps running "
            f"(supervise logs {pid} -f to follow, supervise stop {pid} to stop)"
        )
        return 130
    if not _recorded(store, pid) and not wait_for_file(run.recorded, RECORD_WAIT_S):
        err(
            f"supervise: the daemon has not recorded the end of process {pid} yet "
            f"(is it running? see {paths.daemon_log}); its hooks fire when it does"
        )
    _report_threads(store, pid, told, final=True)
    _report_restart(store, pid)
    if record is None:
        err(f"supervise: process {pid} was lost (its shim vanished without an exit record)")
        return 1
    if record.signal:
        err(f"supervise: process {pid} was killed by {record.signal}")
    return record.exit_code


def _recorded(store: Store, pid: int) -> bool:
    from state.processes import ENDED, get_process

    row = get_process(store, pid)
    return row is not None and row.state in ENDED


def _report_restart(store: Store, pid: int) -> None:
    """Say what its restart policy made of the end: `run` follows the first run only."""
    import time

    from state.processes import get_process
    from state.runs import newest_run

    row = get_process(store, pid)
    if row is None:
        return
    if row.state == "crash-loop":
        err(f"supervise: process {row.chain} is in a crash loop: not restarted; see its fires")
        return
    nxt = newest_run(store, row.chain)
    if nxt is not None and nxt.run_no > row.run_no:
        due = max(0.0, (nxt.due_at or 0.0) - time.time())
        err(
            f"supervise: process {row.chain} restarts (run {nxt.run_no} in {due:.3g}s); "
            f"supervise logs {row.chain} -f follows it, supervise stop {row.chain} stops it"
        )


def _report_threads(store: Store, process_id: int, told: set[int], *, final: bool = False) -> None:
    """Name each thread the process's hooks spawned, once: as it happens (between output
    lines, on stderr), and at the end those not named yet, or all with their status."""
    from state.threads import list_threads

    for t in list_threads(store, process_id):
        if t.id in told and not final:
            continue
        told.add(t.id)
        if final:
            err(
                f"supervise: hook {t.hook} ({t.trigger}) spawned thread t{t.id} "
                f"[{t.status}]; supervise thread show t{t.id}"
            )
        else:
            err(
                f"supervise: >>> hook {t.hook} ({t.trigger}) fired: thread t{t.id} "
                f"spawned; follow it with: supervise thread show t{t.id} -f"
            )
