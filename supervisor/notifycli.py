"""`supervise notify list` (the outbox: every notification and hook action, how it went),
`supervise notify test TARGET` and `supervise notify targets`."""

from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING, Any

from state.paths import StatePaths
from state.settings import Settings
from supervise.errors import SuperviseError, UserError
from supervisor.redaction import redact_text

if TYPE_CHECKING:  # the parsers are built for every command: no database code at import
    from state.outbox import ActionRecord


def add_parsers(sub: Any) -> None:
    """`notify` and its subcommands, on the CLI's subparsers."""
    nf = sub.add_parser(
        "notify",
        help="notifications and hook actions: list them, the targets, a test message",
        description="Notifications go to the targets of the settings file's [notify.targets] "
        "(Apprise URLs), named by hooks (notify: ops) and by [notify] default for the events "
        "in [notify] on.",
    )
    nsub = nf.add_subparsers(dest="notify_command", metavar="SUBCOMMAND", required=True)
    ls = nsub.add_parser(
        "list",
        help="every notification and hook action, and how it went",
        description="Every notification (a hook fired, a thread needs approval or finished, a "
        "crash loop) and every hook action (run:, restart:), oldest first: its event, target, "
        "status (pending, running, done, failed), attempts, last error and result. Target "
        "URLs are never shown; their names are.",
    )
    ls.add_argument("--json", action="store_true", help="a JSON list of them")
    ls.add_argument("--last", type=int, metavar="N", help="only the newest N")
    tst = nsub.add_parser(
        "test",
        help="send a test message to a target now",
        description="Send a short test message to TARGET's URLs, directly (no daemon needed); "
        "exit 1 if it failed, with the reason (URLs masked).",
    )
    tst.add_argument("target", metavar="TARGET", help="a target name from [notify.targets]")
    nsub.add_parser(
        "targets",
        help="list the targets, URLs masked",
        description="Each target of [notify.targets] with its URLs, secrets masked, and which "
        "events go to the default targets.",
    )


def action_json(a: ActionRecord) -> dict[str, Any]:
    return {
        "id": a.id,
        "fire_id": a.fire_id,
        "thread_id": f"t{a.thread_id}" if a.thread_id is not None else None,
        "process_id": a.process_id,
        "event": a.event,
        "action": a.action,
        "target": a.target,
        "title": a.title,
        "status": a.status,
        "attempts": a.attempts,
        "last_error": a.last_error,
        "result": a.result,
        "created_at": a.created_at,
        "done_at": a.done_at,
        "batch": a.batch,
    }


def cmd_list(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from state.db import open_state_store
    from state.outbox import list_actions
    from supervisor.views import iso, table

    if args.last is not None and args.last < 1:
        raise UserError(f"--last must be 1 or more, got {args.last}")
    store = open_state_store(paths.db, settings.store, readonly=True)
    try:
        rows = list_actions(store, args.last)
    finally:
        store.close()
    if args.json:
        print(json.dumps([action_json(a) for a in rows], indent=1))
        return 0
    if not rows:
        print("(no notifications or hook actions)")
        return 0
    lines = []
    for a in rows:
        what = a.action + (f" {a.target}" if a.target else "")
        about = f"fire {a.fire_id}" if a.fire_id else (f"t{a.thread_id}" if a.thread_id else "-")
        note = a.last_error if a.status != "done" and a.last_error else (a.result or "")
        note = redact_text(note.splitlines()[0] if note else "")[:70]
        lines.append(
            [
                str(a.id),
                iso(a.created_at) or "",
                a.event,
                about,
                what,
                a.status,
                str(a.attempts),
                note,
            ]
        )
    print(table(["ID", "AT", "EVENT", "OF", "ACTION", "STATUS", "TRIES", "RESULT"], lines))
    return 0


def cmd_notify(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from supervisor.notifysend import mask_url, send

    if args.notify_command == "list":
        paths.ensure()
        return cmd_list(args, paths, settings)
    targets = settings.notify.targets
    if args.notify_command == "targets":
        if not targets:
            print(f"(no targets: add [notify.targets] to {settings.config})")
            return 0
        for name, urls in targets.items():
            print(f"{name}: {', '.join(mask_url(u) for u in urls)}")
        if settings.notify.on:
            on = ", ".join(settings.notify.on)
            print(f"events {on} go to: {', '.join(settings.notify.default)}")
        return 0
    if args.target not in targets:
        known = ", ".join(targets) or f"none; add [notify.targets] to {settings.config}"
        raise UserError(f"no notify target {args.target!r}; known targets: {known}")
    urls = targets[args.target]
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    result = send(urls, "supervise: test notification", f"A test message from supervise ({stamp}).")
    shown = ", ".join(mask_url(u) for u in urls)
    if not result.ok:
        raise SuperviseError(f"sending to {args.target} ({shown}) failed: {result.error}")
    print(f"sent a test message to {args.target} ({shown})")
    return 0
