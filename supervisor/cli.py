"""The `supervise` command: parse, call one function, map errors to exit codes in `main()`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from state.paths import StatePaths
from state.settings import Settings, load_settings
from supervise.errors import HookFileError, SuperviseError, UserError
from supervisor import views
from supervisor.daemonlock import running_pid
from supervisor.redaction import make_redact
from supervisor.rundir import RunDir
from supervisor.running import cmd_run, err
from supervisor.stopping import parse_signal, stop_process

if TYPE_CHECKING:  # imported when used: --help and `hooks` never load SQLAlchemy
    from state.db import Store
    from state.processes import ProcessRecord

EPILOG = """\
examples:
  supervise run --hook hooks.yaml -- python manage.py migrate
  supervise run -- python manage.py migrate --hook hooks.yaml   (a trailing --hook FILE is ours)
  supervise run -d --json -- ./long-job.sh
  supervise ps
  supervise logs 7 -f
  supervise thread show t3            (transcript; -f follows it)
  supervise approve t3 / deny t3 --reason "not on prod"
  supervise ask "why did the nightly job fail?"
  supervise send t3 "now fix it"
  supervise stop 7 --grace 5
  supervise fires
  supervise hooks check hooks.yaml
  supervise hooks check .claude/settings.json ./my-plugin   (Claude Code's: what runs, what not)
  supervise run --settings .claude/settings.json --plugin ./my-plugin -- make test
  supervise examples ./demo           (example hook files, the quickstart, the systemd unit)
state: $SUPERVISE_HOME (default $XDG_STATE_HOME/supervise, else ~/.local/state/supervise)
`run` starts a daemon when none runs, unless SUPERVISE_AUTOSTART=0.
SUPERVISE_MAX_LOG_BYTES (default 64 MiB) bounds each output.log on disk; older output moves
to output.log.1. Threads: SUPERVISE_MODEL (openai:M, anthropic:M, scripted:FILE),
SUPERVISE_MAX_THREADS (4), SUPERVISE_MAX_TURNS (50), SUPERVISE_THREAD_TIMEOUT (1800 s),
SUPERVISE_STREAM (1), SUPERVISE_RATE (10/minute), SUPERVISE_SANDBOX (auto: tools run
under bwrap where it works; required; off), or the same keys in
$SUPERVISE_CONFIG (default ~/.config/supervise/settings.toml). Keys: OPENAI_API_KEY,
OPENAI_BASE_URL, ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, read by the daemon.
Exit codes: 0 ok, 1 the thing asked about failed, 2 bad usage or input.
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="supervise",
        description="A process supervisor whose hooks spawn agent execution threads.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action=_Version, help="print the version and exit")
    p.set_defaults(model=None, settings=None)  # --model, --settings: on some commands only
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    r = sub.add_parser(
        "run",
        help="start a supervised process (detached; follows its output)",
        description="Start CMD detached under a shim; its hooks spawn threads. "
        "Attached by default: shows the output, exits with the child's code; "
        "Ctrl-C detaches and leaves it running. A trailing `--hook FILE` "
        "(.yaml/.yml/.json) after the command is taken as supervise's option.",
    )
    r.add_argument(
        "--hook",
        action="append",
        default=[],
        metavar="FILE",
        help="hook file (YAML or JSON); repeatable",
    )
    r.add_argument("--name", help="a name for ps (default: the program's name)")
    _settings_flag(r)
    _plugin_flag(r)
    r.add_argument("-d", "--detach", action="store_true", help="return at once")
    r.add_argument("--json", action="store_true", help='with -d: print {"id", "pid", "name"}')
    r.add_argument("--cwd", help="working directory of the process (default: here)")
    r.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="K=V",
        help="extra environment variable; repeatable",
    )
    r.add_argument(
        "--buffered",
        action="store_true",
        help="leave a Python child's stdout block-buffered (by default supervise sets "
        "PYTHONUNBUFFERED=1 unless it is set, so each line and its hooks come when printed)",
    )
    r.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command")

    sub.add_parser(
        "daemon",
        help="run the supervisor loop in the foreground",
        description="Run the supervisor loop in the foreground (systemd runs it at "
        "boot). On start it recovers every process: fires the on_exit hooks of those "
        "that ended while it was down, resumes tailing the others.",
    )

    ps = sub.add_parser("ps", help="list processes and threads")
    ps.add_argument("--json", action="store_true")

    lg = sub.add_parser("logs", help="print a process's output")
    lg.add_argument("id", type=int)
    lg.add_argument("-f", "--follow", action="store_true", help="keep printing until it ends")
    lg.add_argument("-n", "--lines", type=int, metavar="N", help="only the last N lines")

    th = sub.add_parser("thread", help="inspect and retry threads")
    thsub = th.add_subparsers(dest="thread_command", metavar="SUBCOMMAND", required=True)
    show = thsub.add_parser(
        "show", help="a thread's prompt, transcript (tool calls, results, decisions) and usage"
    )
    show.add_argument("id", help="thread id, e.g. t3")
    show.add_argument("--json", action="store_true", help="prompt, entries, status, usage")
    show.add_argument(
        "--messages",
        action="store_true",
        help="the conversation as the next model call is sent it (before extensions' "
        "context transforms); with --json, as objects",
    )
    show.add_argument(
        "-f", "--follow", action="store_true", help="print new entries until the thread settles"
    )
    retry = thsub.add_parser("retry", help="run a failed or cancelled thread again")
    retry.add_argument("id", help="thread id, e.g. t3")
    retry.add_argument("--model", metavar="M", help="e.g. openai:gpt-4.1-mini")

    ask = sub.add_parser(
        "ask",
        help="start a thread with your prompt",
        description="Start a thread with your prompt (through the shared rate limiter) and "
        "follow it until it answers, fails or waits for approval. Its tools run here; "
        "permissions come from the settings file (unlisted tools ask).",
    )
    ask.add_argument("prompt", nargs="+", help="what to ask")
    ask.add_argument("--model", metavar="M", help="provider:name (default: SUPERVISE_MODEL)")
    _settings_flag(ask)
    _plugin_flag(ask)
    _detach_flags(ask)

    snd = sub.add_parser(
        "send",
        help="continue a finished or waiting thread with a message",
        description="Add a message to a finished or waiting thread and run it again. To a "
        "thread waiting for approval, a message is a refusal of the pending call. A message "
        "starting with / runs an extension's command (/pop); start with // to send a / text.",
    )
    snd.add_argument("id", help="thread id, e.g. t3")
    snd.add_argument("message", nargs="+", help='text, or a command such as "/pop"')
    snd.add_argument(
        "--choice", type=int, metavar="N", help="the answer a command's menu needs (1-based)"
    )
    _detach_flags(snd)

    ap = sub.add_parser("approve", help="let a waiting thread make the call it asked for")
    ap.add_argument("id", help="thread id, e.g. t3")
    dn = sub.add_parser("deny", help="refuse a waiting thread's call; the model is told why")
    dn.add_argument("id", help="thread id, e.g. t3")
    dn.add_argument("--reason", help="what the model reads")
    cn = sub.add_parser("cancel", help="stop a thread (its running tool is killed)")
    cn.add_argument("id", help="thread id, e.g. t3")

    st = sub.add_parser("stop", help="stop a process: TERM to its group, KILL after --grace")
    st.add_argument("id", type=int)
    st.add_argument("--signal", default="TERM", help="signal to send first (default TERM)")
    st.add_argument("--grace", type=float, default=10.0, help="seconds before KILL (default 10)")

    fi = sub.add_parser("fires", help="every hook fire, refused ones with their reason")
    fi.add_argument("--json", action="store_true")
    fi.add_argument("--process", type=int, metavar="ID", help="only this process's fires")

    hk = sub.add_parser("hooks", help="hook file tools")
    hksub = hk.add_subparsers(dest="hooks_command", metavar="SUBCOMMAND", required=True)
    chk = hksub.add_parser(
        "check",
        help="validate hook files, Claude Code settings files and plugins: every error with "
        "FILE:LINE, the shell hooks that will run, and what will not (and why)",
        description="Validate each FILE: a hook file, a Claude Code settings file or plugin "
        "hooks.json, or a plugin directory. Prints the shell hooks its threads will run and a "
        "warning for each thing that will not be used (an event that never fires here, "
        "another handler type, an ignored field, a settings key supervise does not read). "
        "Exit 0 with warnings only; 2 on an error.",
    )
    chk.add_argument("files", nargs="+", metavar="FILE", help="a file, or a plugin directory")
    tst = hksub.add_parser(
        "test",
        help="replay an event through a file's shell hooks and print what they decide",
        description="Run the shell hooks of FILE (a hook file's agent.hooks and agent.plugins, "
        "a Claude Code settings file's or plugin hooks.json's hooks, or a plugin directory's) "
        "for one event, as a thread would, and print each run and the decision.",
    )
    tst.add_argument("file", metavar="FILE")
    tst.add_argument("--event", required=True, help="PreToolUse, PostToolUse, ...")
    tst.add_argument("--tool", help="the tool name; then --input is the tool's input")
    tst.add_argument(
        "--input",
        help="JSON: the tool's input with --tool, else Claude Code's event "
        '({"tool_name", "tool_input", "tool_response", "prompt"})',
    )
    ex = sub.add_parser(
        "examples",
        help="write the example hook files, quickstart and systemd unit into DIR",
        description="Write the files installed with supervise into DIR (made if missing): "
        "example hook files, the quickstart's fake_migrate.py and scripted model, the "
        "stack.py extension, the hook file JSON Schema, the systemd unit. Overwrites nothing.",
    )
    ex.add_argument("dir", metavar="DIR")
    return p


class _Version(argparse.Action):
    """argparse's `version` action, but the version is looked up only when asked: importing
    importlib.metadata would add ~20 ms to every command."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = f"supervise {version('supervise')}"
        except PackageNotFoundError:  # a source tree on PYTHONPATH, never installed
            text = "supervise (version unknown: not installed; `pip install .`)"
        print(text)  # stdout, as argparse's own version action
        parser.exit()


def _settings_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--settings",
        metavar="FILE",
        help="a Claude Code settings file (.claude/settings.json) whose hooks its threads "
        "run (default: $SUPERVISE_SETTINGS); with the hook file's agent.hooks",
    )


def _plugin_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="DIR",
        help="a Claude Code plugin directory: its hooks/hooks.json runs in the threads, "
        "with CLAUDE_PLUGIN_ROOT; repeatable",
    )


def _detach_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-d", "--detach", action="store_true", help="return at once, print the id")
    p.add_argument("--json", action="store_true", help='with -d: print {"id": ...}')


# -- other commands ---------------------------------------------------------------------------


def _scrubbed(p: ProcessRecord, redact: Callable[[str], str]) -> ProcessRecord:
    """A process row with the values of this shell's credential variables masked."""
    command, given = redact(p.command), json.loads(p.argv)
    argv = [redact(a) for a in given]
    if command == p.command and argv == given:
        return p  # nothing masked, the common case: no copy
    return replace(p, command=command, argv=json.dumps(argv))


def cmd_ps(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from state.processes import ACTIVE, list_processes
    from state.threads import list_threads

    store = _store(paths, settings)
    redact = make_redact(os.environ)
    procs = [_scrubbed(p, redact) for p in list_processes(store)]
    threads = list_threads(store)
    if args.json:
        print(
            json.dumps(
                {
                    "processes": [views.process_json(p) for p in procs],
                    "threads": [views.thread_json(t) for t in threads],
                },
                indent=1,
            )
        )
        return 0
    now = time.time()
    print("PROCESSES")
    print(views.process_table(procs, now) if procs else "(none)")
    print("\nTHREADS")
    print(views.thread_table(threads, now) if threads else "(none)")
    busy = any(p.state in ACTIVE for p in procs) or any(
        t.status in ("queued", "running") for t in threads
    )
    if busy and running_pid(paths.daemon_pid) is None:
        err(
            "supervise: no daemon is running, so states may be stale, hooks and threads wait; "
            "start one with `supervise daemon` (or any `supervise run`)"
        )
    return 0


def _process(paths: StatePaths, settings: Settings, process_id: int) -> ProcessRecord:
    from state.processes import get_process

    row = get_process(_store(paths, settings), process_id)
    if row is None:
        raise UserError(f"no process {process_id}; `supervise ps` lists them")
    return row


def cmd_logs(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from supervisor.follow import child_output, follow_output  # asyncio and inotify: logs only

    row = _process(paths, settings, args.id)
    run = RunDir(paths.run_dir(args.id))
    shim = (row.shim_pid, row.shim_started)
    # The child's own file, also where logrotate renamed it (its lines keep going there).
    source = child_output(run, shim, row.log_inode)
    if not source.exists():
        raise SuperviseError(f"process {args.id} has no output file ({run.output} is gone)")
    out = sys.stdout.buffer
    # Output past max_log_bytes was moved to output.log.1; its place in output.log is a hole.
    offset = row.log_punched
    if offset and args.lines is None:
        err(f"supervise: the first {offset} bytes of output are in {run.archive} (max_log_bytes)")
    size = source.stat().st_size if source.exists() else 0
    if args.lines is not None:
        if args.lines < 0:
            raise UserError(f"-n must be 0 or more, got {args.lines}")
        from supervisor.tailing import tail_lines

        for line in tail_lines(source, size, args.lines, floor=offset) if args.lines else []:
            out.write(line.encode() + b"\n")
        out.flush()
        offset = size
    if args.follow:
        try:
            follow_output(run, out, offset=offset, shim=shim, source=source)
        except KeyboardInterrupt:
            return 0
    elif args.lines is None:
        with open(source, "rb") as f:
            f.seek(offset)
            while chunk := f.read(1 << 16):
                out.write(chunk)
        out.flush()
    return 0


def cmd_thread(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from supervisor import threadcli

    if args.thread_command == "retry":
        return threadcli.cmd_retry(args, paths, settings)
    return threadcli.cmd_thread_show(args, paths, settings)


def _threads(name: str) -> Any:
    def command(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
        from supervisor import threadcli

        return int(getattr(threadcli, name)(args, paths, settings))

    return command


def cmd_stop(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    row = _process(paths, settings, args.id)
    report = stop_process(
        row,
        RunDir(paths.run_dir(args.id)),
        sig=parse_signal(args.signal),
        grace=args.grace,
        say=lambda m: err(f"supervise: {m}"),
    )
    rec = report.record
    if rec is None:
        err(
            f"supervise: process {args.id} got {', '.join(report.sent)}; "
            "its end is not recorded yet"
        )
    else:
        how = f"killed by {rec.signal}" if rec.signal else f"exited with code {rec.exit_code}"
        print(f"process {args.id} stopped: {how}")
    return 0


def cmd_fires(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from state.fires import list_fires

    redact = make_redact(os.environ)
    found = list_fires(_store(paths, settings), args.process)
    fires = [replace(f, detail=redact(f.detail)) for f in found]
    if args.json:
        print(json.dumps([views.fire_json(f) for f in fires], indent=1))
    else:
        print(views.fire_table(fires) if fires else "(no fires)")
    return 0


def cmd_hooks(args: argparse.Namespace, _paths: StatePaths, _settings: Settings) -> int:
    if args.hooks_command == "test":
        from supervisor.hooktest import cmd_hooks_test

        return cmd_hooks_test(args)
    from supervisor.hookcheck import cmd_hooks_check

    return cmd_hooks_check(args)


def cmd_examples(args: argparse.Namespace, paths: StatePaths, _settings: Settings) -> int:
    from supervisor.examples import cmd_examples

    return cmd_examples(args, paths)


def cmd_daemon(_args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from supervisor.daemon import configure_logging, run_daemon

    configure_logging()
    return run_daemon(paths, settings)


def _store(paths: StatePaths, settings: Settings) -> Store:
    """The state database, to read: a command that only reads never creates or migrates it."""
    from state.db import open_state_store

    paths.ensure()
    return open_state_store(paths.db, settings.store, readonly=True)


COMMANDS: dict[str, Any] = {
    "run": cmd_run,
    "daemon": cmd_daemon,
    "ps": cmd_ps,
    "logs": cmd_logs,
    "thread": cmd_thread,
    "ask": _threads("cmd_ask"),
    "send": _threads("cmd_send"),
    "approve": _threads("cmd_approve"),
    "deny": _threads("cmd_deny"),
    "cancel": _threads("cmd_cancel"),
    "stop": cmd_stop,
    "fires": cmd_fires,
    "hooks": cmd_hooks,
    "examples": cmd_examples,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: every SuperviseError becomes its message and exit code, no traceback."""
    args = _parser().parse_args(argv)
    try:
        # Once, for the whole command: a bad setting is an error whatever the command.
        settings = load_settings(model=args.model, hook_settings=args.settings)
        paths = StatePaths(settings.home)
        if args.command not in ("hooks", "examples"):  # the two that never read the state
            paths.ensure()
        return int(COMMANDS[args.command](args, paths, settings))
    except SuperviseError as exc:
        err(f"supervise: {exc}" if not isinstance(exc, HookFileError) else str(exc))
        return exc.exit_code
    except BrokenPipeError:
        return 0
