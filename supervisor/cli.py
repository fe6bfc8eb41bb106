"""The `supervise` command: parse, call one function, map errors to exit codes in `main()`."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from state.paths import StatePaths
from state.settings import Settings, load_settings
from supervise.errors import HookFileError, SuperviseError
from supervisor import views
from supervisor.daemonlock import running_pid
from supervisor.redaction import make_redact
from supervisor.running import cmd_run, err

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
  supervise stop 7 --grace 5            (by id or by name: supervise stop worker)
  supervise restart worker
  supervise run --restart on-failure -- ./worker.sh
  supervise up / supervise down       (the programs of ./supervise.yaml; -f FILE for another)
  supervise fires
  supervise hooks check hooks.yaml
  supervise hooks check .claude/settings.json ./my-plugin   (Claude Code's: what runs, what not)
  supervise run --settings .claude/settings.json --plugin ./my-plugin -- make test
  supervise examples ./demo           (example hook files, the quickstart, the systemd unit)
state: $SUPERVISE_HOME (default $XDG_STATE_HOME/supervise, else ~/.local/state/supervise)
`run` and `up` start a daemon when none runs, unless SUPERVISE_AUTOSTART=0.
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
        help="extra environment variable; repeatable; wins over --env-file",
    )
    r.add_argument(
        "--env-file",
        action="append",
        default=[],
        metavar="FILE",
        help="dotenv file of variables for the process; repeatable (a later file wins), "
        "over the hook file's env_file",
    )
    r.add_argument(
        "--buffered",
        action="store_true",
        help="leave a Python child's stdout block-buffered (by default supervise sets "
        "PYTHONUNBUFFERED=1 unless it is set, so each line and its hooks come when printed)",
    )
    _restart_flags(r)
    r.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command")

    dm = sub.add_parser(
        "daemon",
        help="run the supervisor loop in the foreground (daemon stop: stop it)",
        description="Run the supervisor loop in the foreground (systemd runs it at "
        "boot). On start it recovers every process: fires the on_exit hooks of those "
        "that ended while it was down, resumes tailing the others, starts pending "
        "restarts. `supervise daemon stop` stops the running daemon (supervised "
        "processes keep running).",
    )
    dm.add_argument("action", nargs="?", choices=["stop"], help="stop the running daemon")

    ps = sub.add_parser(
        "ps",
        help="list processes and threads",
        description="Processes (one row per process, its newest run; RUN and RESTARTS count "
        "its runs) and threads, with their states; a thread waiting for approval shows the "
        "call it wants to make.",
    )
    ps.add_argument("--json", action="store_true", help="one JSON object: processes, threads")
    ps.add_argument(
        "--all", action="store_true", help="every run of a restarted process, not the newest"
    )

    lg = sub.add_parser(
        "logs",
        help="print a process's output (every run of it)",
        description="The process's output as it wrote it (stdout and stderr interleaved, "
        "unmasked: it is the process's own), each run after a `--- supervise: run N ---` line. "
        "Times (--timestamps, --since) are those of the chunk each line was read in: when "
        "the file was last written before the daemon read it, so a line's time is its write "
        "or up to ~0.2 s later, and lines read together share one. Output written while no "
        "daemon ran has the time of its last write; with -f, new lines are stamped as `logs` "
        "reads them. Output from before supervise recorded read times has none: "
        "--timestamps prints it unstamped, --since shows such a run whole unless it ended "
        "before then.",
    )
    lg.add_argument("id", metavar="ID|NAME", help=_ID_HELP)
    lg.add_argument(
        "-f", "--follow", action="store_true", help="keep printing until it ends (and restarts)"
    )
    lg.add_argument("-n", "--lines", type=int, metavar="N", help="only the last N lines")
    lg.add_argument("--run", type=int, metavar="N", help="only run N of a restarted process")
    lg.add_argument(
        "-t",
        "--timestamps",
        action="store_true",
        help="begin each line with when it was read (ISO 8601, local time, milliseconds)",
    )
    lg.add_argument(
        "--since",
        metavar="WHEN",
        help="only output read since WHEN: a duration back from now (30s, 10m, 2h, 1d) or "
        "a date-time (2026-11-26T09:30, local unless it names its offset)",
    )

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

    st = sub.add_parser(
        "stop",
        help="stop a process: TERM to its group, KILL after --grace (no restart follows)",
        description="Signal the process's group (TERM, then KILL after --grace). A stop by a "
        "person ends its restarts (a pending one is cancelled) and its on_exit hooks are told; "
        "`supervise restart` starts it again.",
    )
    st.add_argument("id", metavar="ID|NAME", help=_ID_HELP)
    st.add_argument("--signal", default="TERM", help="signal to send first (default TERM)")
    st.add_argument("--grace", type=float, default=10.0, help="seconds before KILL (default 10)")

    rs = sub.add_parser(
        "restart",
        help="start a process again (stopping it first if it runs)",
        description="Start the process's next run now: a running one is stopped first (TERM, "
        "KILL after --grace), a pending restart starts at once, an ended one starts again. "
        "A person's restart starts the crash-loop count over.",
    )
    rs.add_argument("id", metavar="ID|NAME", help=_ID_HELP)
    rs.add_argument("--signal", default="TERM", help="signal to send first (default TERM)")
    rs.add_argument("--grace", type=float, default=10.0, help="seconds before KILL (default 10)")

    up = sub.add_parser(
        "up",
        help="start a program file's programs; again: apply what changed",
        description="Start the programs of a program file (like a Procfile or a pm2 ecosystem\n"
        "file): each runs as a supervised process named after the program. Run again, it\n"
        "starts what is not running, leaves alone what is unchanged, restarts a program whose\n"
        "definition changed (command, cwd, env, env files' values, hooks, restart, autostart)\n"
        "and stops one removed from the file. Only this file's programs are touched.",
        epilog=UP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _program_flags(up, "only these programs (the others, and removed ones, are left alone)")
    up.add_argument("--json", action="store_true", help="a JSON object: what was done to each")

    dw = sub.add_parser(
        "down",
        help="stop a program file's programs",
        description="Stop the running programs started from a program file, as `supervise stop`\n"
        "does (TERM, KILL after --grace; no restart follows, on_exit hooks are told a person\n"
        "stopped them). The file need not read any more: the processes record it.",
        epilog=DOWN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _program_flags(dw, "only these programs")
    dw.add_argument("--json", action="store_true", help="a JSON object: what was done to each")

    fi = sub.add_parser(
        "fires",
        help="every hook fire, refused ones with their reason",
        description="Every time a hook fired, oldest first: the process and run, the hook and "
        "its trigger, when, what came of it (the thread it spawned; the open thread a "
        "repeat was deduplicated into, or the ended one whose cooldown it fell in (a hook's "
        "dedup:); or why it was refused: max_spawns, depth, lost, stopped_by_user) and the "
        "matched line or exit.",
    )
    fi.add_argument("--json", action="store_true", help="a JSON list of the fires")
    fi.add_argument(
        "--process", metavar="ID|NAME", help="only this process's fires (every run of it)"
    )

    from supervisor.notifycli import add_parsers as notify_parsers

    notify_parsers(sub)

    pr = sub.add_parser(
        "prune",
        help="remove ended runs' records and run dirs, by age or count",
        description="Remove ended runs (their process rows, fires, threads and transcripts, "
        "and runs/ID/ with output.log and its read times) older than --older-than (by end "
        "time) and/or beyond the newest --keep ended runs of each name; with both, a run must "
        "be both. Never a running, starting or pending run, one with an unfinished thread, or "
        "a run of a process still restarting that ended in the last day. A process keeps its "
        "id when its first runs go (ps, logs and restart take it). Safe while the daemon runs; "
        "a prune interrupted midway is finished by the next.",
    )
    pr.add_argument(
        "--older-than", metavar="DURATION", help="ended before this long ago: 7d, 12h, 30m"
    )
    pr.add_argument(
        "--keep", type=int, metavar="N", help="keep the newest N ended runs of each name"
    )
    pr.add_argument("--dry-run", action="store_true", help="print what would go; remove nothing")
    pr.add_argument("--json", action="store_true", help="a JSON object of what was removed")

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
    from supervisor.completion import SHELLS, PrintScript  # light: shtab loads when it prints

    cp = sub.add_parser(
        "completion",
        help="print a shell completion script: bash, zsh or fish",
        description="Print the completion script of SHELL, made from this CLI's own parser "
        "(every subcommand and flag; files where an argument is a file). A TAB runs only the "
        "shell. Install: bash: `supervise completion bash > "
        "~/.local/share/bash-completion/completions/supervise`; zsh: `supervise completion zsh "
        "> ~/.zfunc/_supervise` (with fpath+=(~/.zfunc) before compinit); fish: `supervise "
        "completion fish > ~/.config/fish/completions/supervise.fish`.",
    )
    # Printed while parsing (as --version): no settings read, no state dir, no dispatch entry.
    cp.add_argument(
        "shell", metavar="SHELL", choices=SHELLS, action=PrintScript, help="bash, zsh or fish"
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


_ID_HELP = "the id ps shows (or any run's id), or the process's name"


UP_EPILOG = """\
examples:
  supervise up                        (./supervise.yaml, .yml or .json)
  supervise up -f deploy/programs.yaml
  supervise up web                    (only web: started, restarted if changed, or left alone)
  supervise up --json
a program file:
  env_file: .env                      (optional: for every program)
  programs:
    web:
      command: python -m http.server 8000
      cwd: site                       (relative to the file)
      env: {PORT: "8000"}
      env_file: .env.web
      hooks: hooks.yaml               (or a hook file's body inline)
      restart: always
    worker:
      command: [./worker.sh, --queue, jobs]
      restart: {policy: on-failure, delay: 2s}
      autostart: false                (not started again after a reboot)
After a reboot, the daemon starts again the programs with autostart: true (the default).
"""

DOWN_EPILOG = """\
examples:
  supervise down                      (every program of ./supervise.yaml)
  supervise down -f deploy/programs.yaml worker
  supervise up                        (starts them again)
"""


def _program_flags(p: argparse.ArgumentParser, names_help: str) -> None:
    p.add_argument(
        "-f",
        "--file",
        metavar="FILE",
        help="the program file (default: supervise.yaml, .yml or .json here)",
    )
    p.add_argument("names", nargs="*", metavar="NAME", help=names_help)
    p.add_argument("--grace", type=float, default=10.0, help="seconds before KILL (default 10)")


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


def _restart_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--restart",
        metavar="POLICY",
        choices=["no", "on-failure", "always"],
        help="restart it when it ends: no, on-failure, always (the hook file's restart: "
        "policy, its other values kept)",
    )
    p.add_argument(
        "--restart-delay",
        metavar="DURATION",
        help="the wait before the first restart, e.g. 1s or 500ms (it doubles per quick "
        "crash in a row, up to the policy's max_delay)",
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
        restarts = views.restart_counts(procs)
        print(
            json.dumps(
                {
                    "processes": [views.process_json(p, restarts[p.chain]) for p in procs],
                    "threads": [views.thread_json(t) for t in threads],
                },
                indent=1,
            )
        )
        return 0
    now = time.time()
    print("PROCESSES")
    print(views.process_table(procs, now, all_runs=args.all) if procs else "(none)")
    print("\nTHREADS")
    print(views.thread_table(threads, now, procs) if threads else "(none)")
    busy = any(p.state in (*ACTIVE, "backoff") for p in procs) or any(
        t.status in ("queued", "running") for t in threads
    )
    if busy and running_pid(paths.daemon_pid) is None:
        err(
            "supervise: no daemon is running, so states may be stale, hooks and threads wait; "
            "start one with `supervise daemon` (or any `supervise run`)"
        )
    return 0


def cmd_logs(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from supervisor.runlogs import cmd_logs  # asyncio and inotify: logs only

    return cmd_logs(args, paths, settings)


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
    from supervisor.restartcli import cmd_stop

    return cmd_stop(args, paths, settings)


def cmd_restart(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from supervisor.restartcli import cmd_restart

    return cmd_restart(args, paths, settings)


def cmd_fires(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from state.fires import list_fires

    redact = make_redact(os.environ)
    store = _store(paths, settings)
    runs: list[int] | None = None
    if args.process is not None:  # every run of it
        from state.runs import chain_runs
        from supervisor.restartcli import resolve

        runs = [r.id for r in chain_runs(store, resolve(store, args.process).chain)]
    found = list_fires(store, runs)
    fires = [replace(f, detail=redact(f.detail)) for f in found]
    if args.json:
        print(json.dumps([views.fire_json(f) for f in fires], indent=1))
    else:
        print(views.fire_table(fires) if fires else "(no fires)")
    return 0


def cmd_hooks(args: argparse.Namespace, _paths: StatePaths, settings: Settings) -> int:
    if args.hooks_command == "test":
        from supervisor.hooktest import cmd_hooks_test

        return cmd_hooks_test(args)
    from supervisor.hookcheck import cmd_hooks_check

    return cmd_hooks_check(args, settings.notify.targets)


def cmd_examples(args: argparse.Namespace, paths: StatePaths, _settings: Settings) -> int:
    from supervisor.examples import cmd_examples

    return cmd_examples(args, paths)


def cmd_daemon(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    if args.action == "stop":
        from supervisor.restartcli import cmd_daemon_stop

        return cmd_daemon_stop(args, paths, settings)
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
    "restart": cmd_restart,
    "fires": cmd_fires,
    "up": lambda a, p, s: __import__("supervisor.upcli").upcli.cmd_up(a, p, s),
    "down": lambda a, p, s: __import__("supervisor.upcli").upcli.cmd_down(a, p, s),
    "notify": lambda a, p, s: __import__("supervisor.notifycli").notifycli.cmd_notify(a, p, s),
    "prune": lambda a, p, s: __import__("supervisor.pruning").pruning.cmd_prune(a, p, s),
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
        if args.command not in ("hooks", "examples", "notify"):  # those that never read the state
            paths.ensure()
        return int(COMMANDS[args.command](args, paths, settings))
    except SuperviseError as exc:
        err(f"supervise: {exc}" if not isinstance(exc, HookFileError) else str(exc))
        return exc.exit_code
    except BrokenPipeError:
        return 0
