"""The thread commands: ask, send, approve, deny, cancel, thread show/retry.

They write what a person decided (a message, an approval) as entries, requeue the thread,
and wake the daemon by writing its `wake` file; the daemon's runner does the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from watchfiles import watch

from state.paths import StatePaths
from state.reader import Reader, Row
from state.settings import Settings
from supervise.errors import SettingError, UserError
from supervisor import views
from supervisor.daemonlock import running_pid
from supervisor.running import default_model, ensure_daemon, err, settings_hooks

SETTLED = ("completed", "failed", "cancelled", "waiting_approval")
_TICK_MS = 2000


def thread_id(text: str) -> int:
    raw = text[1:] if text.lower().startswith("t") else text
    if not raw.isdigit():
        raise UserError(f"thread id must look like t3, got {text!r}")
    return int(raw)


def wake(paths: StatePaths) -> None:
    """Tell the daemon its thread queue changed (inotify on the state directory)."""
    with open(paths.wake, "w") as f:
        f.write(str(time.time()))


def _store(paths: StatePaths) -> Any:
    from state.db import Store  # SQLModel: only the commands that write pay its import

    paths.ensure()
    return Store(paths.db)


def _thread(paths: StatePaths, tid: int) -> Row:
    paths.ensure()
    row = Reader(paths.db).thread(tid)
    if row is None:
        raise UserError(f"no thread t{tid}; `supervise ps` lists them")
    return row


# -- ask -----------------------------------------------------------------------------------


def cmd_ask(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from agent_threads.permissions import Layer, Profile
    from supervisor.firing import scheduled_start

    text = " ".join(args.prompt).strip()
    if not text:
        raise UserError('the prompt is empty; write: supervise ask "why did the job fail?"')
    cwd = Path.cwd()
    model = default_model(cwd, settings.model)
    rules, rate = settings.permissions, settings.rate
    try:
        layer = Layer.from_mapping(rules.as_mapping()) if rules is not None else None
    except ValueError as exc:  # a rule's syntax: the resolver checks only the table's shape
        raise SettingError(f"{settings.config}: permissions: {exc}") from None
    profile = Profile().inherit(layer)
    hooks = json.dumps(settings_hooks(settings.hook_settings).to_json())
    store = _store(paths)
    now = time.time()
    with store.sql_write() as conn:
        start = scheduled_start(conn, now, rate)
        cur = conn.execute(
            "INSERT INTO thread (trigger, depth, status, created_at, not_before, prompt, model,"
            " cwd, permissions, hooks, turns) VALUES ('user', 0, 'queued', ?, ?, ?, ?, ?, ?, ?, 0)",
            (now, start, text, model, str(cwd), json.dumps(profile.to_json()), hooks),
        )
        assert cur.lastrowid is not None
        tid = cur.lastrowid
        conn.execute(
            "INSERT INTO entry (thread_id, seq, kind, at, data) VALUES (?, 1, 'user', ?, ?)",
            (tid, now, json.dumps({"text": text}, ensure_ascii=False)),
        )
    store.close()
    ensure_daemon(paths, settings.autostart)
    wake(paths)
    if start > now + 0.5:
        err(
            f"supervise: thread t{tid} waits for the rate limit ({rate.text}) until "
            f"{views.local(start)}"
        )
    return _after_submit(args, paths, tid, 0)


def _after_submit(args: argparse.Namespace, paths: StatePaths, tid: int, after: int) -> int:
    if args.detach:
        print(json.dumps({"id": f"t{tid}"}) if args.json else f"t{tid}")
        return 0
    err(f"supervise: thread t{tid} queued; following it (Ctrl-C stops following, not the thread)")
    return follow_thread(paths, tid, after=after)


# -- following a thread ---------------------------------------------------------------------


def follow_thread(
    paths: StatePaths,
    tid: int,
    *,
    after: int = 0,
    out: Callable[[str], None] = print,
    timeout: float | None = None,
) -> int:
    """Print a thread's new entries until it settles; exit code 0, or 1 if it failed."""
    reader = Reader(paths.db)
    deadline = None if timeout is None else time.monotonic() + timeout
    warned = False

    def show() -> Row | None:
        nonlocal after
        for e in reader.entries(tid, after):
            for line in views.entry_lines(e, full=False):
                out(line)
            after = e["seq"]
        t = reader.thread(tid)
        return t if t is not None and t["status"] in SETTLED else None

    try:
        done = show()
        if done is None:
            for _ in watch(
                paths.home,
                watch_filter=lambda _c, p: os.path.basename(p).startswith("state.db"),
                debounce=20,
                step=5,
                rust_timeout=_TICK_MS,
                yield_on_timeout=True,
                recursive=False,
            ):
                done = show()
                if done is not None or (deadline is not None and time.monotonic() > deadline):
                    break
                if not warned and running_pid(paths.daemon_pid) is None:
                    warned = True
                    err(
                        "supervise: no daemon is running, so the thread waits; start one with "
                        "`supervise daemon` (Ctrl-C stops following)"
                    )
    except KeyboardInterrupt:
        err(f"\nsupervise: stopped following; thread t{tid} goes on (supervise thread show t{tid})")
        return 130
    if done is None:
        return 1
    return _settled(done)


def _settled(t: Row) -> int:
    tid = t["id"]
    status = t["status"]
    if status == "waiting_approval":
        err(
            f"supervise: thread t{tid} waits for approval to run {t['waiting']}: "
            f"supervise approve t{tid}  |  supervise deny t{tid} --reason '...'"
        )
        return 0
    if status == "completed":
        return 0
    err(f"supervise: thread t{tid} {status}" + (f": {t['error']}" if t["error"] else ""))
    return 1


# -- a person's decisions -------------------------------------------------------------------


def _pending(store: Any, tid: int) -> Any:
    from agent_threads.entries import pending_approval
    from agent_threads.journal import read_entries

    return pending_approval(read_entries(store, tid))


def _decide(
    paths: StatePaths, settings: Settings, tid: int, decision: str, reason: str | None
) -> int:
    from agent_threads.journal import append_external
    from agent_threads.loop import describe_call

    row = _thread(paths, tid)
    store = _store(paths)
    call = _pending(store, tid) if row["status"] == "waiting_approval" else None
    if call is None:
        raise UserError(f"thread t{tid} is {row['status']}, not waiting for approval")
    data = {"call_id": call.id, "name": call.name, "decision": decision, "by": "user"}
    if reason:
        data["reason"] = reason
    before = append_external(store, tid, [("approval", data)], allowed=["waiting_approval"])
    if before != "waiting_approval":
        raise UserError(f"thread t{tid} is {before}, not waiting for approval")
    ensure_daemon(paths, settings.autostart)
    wake(paths)
    print(f"t{tid}: {decision} {describe_call(call)}; the thread resumes")
    return 0


def cmd_approve(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    return _decide(paths, settings, thread_id(args.id), "approved", None)


def cmd_deny(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    return _decide(paths, settings, thread_id(args.id), "denied", args.reason)


def cmd_send(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from agent_threads.journal import append_external

    tid = thread_id(args.id)
    text = " ".join(args.message).strip()
    if not text:
        raise UserError('the message is empty; write: supervise send t3 "try again"')
    row = _thread(paths, tid)
    store = _store(paths)
    items: list[tuple[str, dict[str, Any]]] = []
    call = _pending(store, tid) if row["status"] == "waiting_approval" else None
    if call is not None:
        # A reply instead of a decision: the call is not run, and the model reads why.
        reason = "the person answered with a message instead of approving"
        items.append(
            (
                "approval",
                {
                    "call_id": call.id,
                    "name": call.name,
                    "decision": "denied",
                    "by": "user",
                    "reason": reason,
                },
            )
        )
    if text.startswith("/") and len(text) > 1 and not text.startswith("//"):
        # A slash command for the thread's extensions, run by the daemon; not a prompt.
        name, _, rest = text[1:].partition(" ")
        items.append(("command", {"name": name, "args": rest.strip(), "choice": args.choice}))
    else:
        items.append(("user", {"text": text.removeprefix("/") if text.startswith("//") else text}))
    last = max((e["seq"] for e in Reader(paths.db).entries(tid)), default=0)
    allowed = ["completed", "failed", "cancelled", "waiting_approval"]
    before = append_external(store, tid, items, allowed=allowed)
    if before not in allowed:
        raise UserError(
            f"thread t{tid} is {before}; send continues a finished or waiting thread "
            f"(wait for it, or supervise cancel t{tid})"
        )
    ensure_daemon(paths, settings.autostart)
    wake(paths)
    return _after_submit(args, paths, tid, last)


def cmd_cancel(args: argparse.Namespace, paths: StatePaths, _settings: Settings) -> int:
    tid = thread_id(args.id)
    _thread(paths, tid)
    store = _store(paths)
    with store.write() as s:
        cur = s.connection().exec_driver_sql(
            "UPDATE thread SET status = 'cancelled', error = 'cancelled by a person',"
            " waiting = NULL, ended_at = ? WHERE id = ?"
            " AND status IN ('queued', 'running', 'waiting_approval')",
            (time.time(), tid),
        )
        changed = bool(cur.rowcount)
    if not changed:
        raise UserError(f"thread t{tid} has already ended ({_thread(paths, tid)['status']})")
    wake(paths)
    print(f"t{tid}: cancelled")
    return 0


def cmd_retry(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from agent_threads.journal import append_external

    tid = thread_id(args.id)
    row = _thread(paths, tid)
    # Only --model changes the thread's model; the settings' does not override its own.
    model = default_model(Path.cwd(), settings.model) if args.model else None
    store = _store(paths)
    note = "retried by a person" + (f" with model {model}" if model else "")
    before = append_external(
        store, tid, [("note", {"text": note})], allowed=["failed", "cancelled"]
    )
    if before not in ("failed", "cancelled"):
        raise UserError(
            f"thread t{tid} is {row['status']}; retry runs a failed or cancelled thread again "
            f"(supervise send t{tid} '...' continues a completed one)"
        )
    if model:
        with store.write() as s:
            s.connection().exec_driver_sql("UPDATE thread SET model = ? WHERE id = ?", (model, tid))
    ensure_daemon(paths, settings.autostart)
    wake(paths)
    print(f"t{tid}: queued again" + (f" with {model}" if model else ""))
    return 0


def cmd_thread_show(args: argparse.Namespace, paths: StatePaths, _settings: Settings) -> int:
    tid = thread_id(args.id)
    row = _thread(paths, tid)
    reader = Reader(paths.db)
    if args.follow and not args.json:
        print(views.thread_head(row))
        return follow_thread(paths, tid)
    entries = reader.entries(tid)
    if args.json:
        print(json.dumps(views.thread_json(row, full=True, entries=entries), indent=1))
    else:
        print(views.thread_text(row, entries))
    return 0
