"""The thread commands: ask, send, approve, deny, cancel, thread show/retry.

They write what a person decided (a message, an approval) as entries, requeue the thread,
and wake the daemon by writing its `wake` file; the daemon's runner does the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from watchfiles import watch

from agent_threads.messages import answered_only
from agent_threads.transcript import Body, conversation, decode
from state.approvals import Decision
from state.db import Store, open_state_store
from state.entries import ExternalItem, append_external, read_entries
from state.paths import StatePaths
from state.settings import Settings
from state.threads import SETTLED, TERMINAL, ThreadRecord, ThreadStatus, get_thread
from supervise.errors import SettingError, UserError
from supervisor import transcriptview, views
from supervisor.daemonlock import running_pid
from supervisor.running import default_model, ensure_daemon, err, settings_hooks, show_warnings

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


@contextmanager
def _store(paths: StatePaths, settings: Settings, *, readonly: bool = False) -> Iterator[Store]:
    paths.ensure()
    store = open_state_store(paths.db, settings.store, readonly=readonly)
    try:
        yield store
    finally:
        store.close()


def _thread(store: Store, tid: int) -> ThreadRecord:
    record = get_thread(store, tid)
    if record is None:
        raise UserError(f"no thread t{tid}; `supervise ps` lists them")
    return record


# -- ask -----------------------------------------------------------------------------------


def cmd_ask(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from agent_threads.permissions import Layer, Profile
    from state.threads import NewThread, create_thread

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
    given, warned = settings_hooks(settings.hook_settings, args.plugin)
    show_warnings(warned)
    new = NewThread(
        trigger="user",
        depth=0,
        prompt=text,
        first_message=text,
        created_at=time.time(),
        model=model,
        cwd=str(cwd),
        permissions=json.dumps(profile.to_json()),
        hooks=json.dumps(given.to_json()),
    )
    with _store(paths, settings) as store:
        record = store.transact(lambda conn: create_thread(conn, new, rate))
    ensure_daemon(paths, settings.autostart)
    wake(paths)
    if record.not_before > new.created_at + 0.5:
        err(
            f"supervise: thread t{record.id} waits for the rate limit ({rate.text}) until "
            f"{views.local(record.not_before)}"
        )
    return _after_submit(args, paths, settings, record.id, 0)


def _after_submit(
    args: argparse.Namespace, paths: StatePaths, settings: Settings, tid: int, after: int
) -> int:
    if args.detach:
        print(json.dumps({"id": f"t{tid}"}) if args.json else f"t{tid}")
        return 0
    err(f"supervise: thread t{tid} queued; following it (Ctrl-C stops following, not the thread)")
    return follow_thread(paths, settings, tid, after=after)


# -- following a thread ---------------------------------------------------------------------


def follow_thread(
    paths: StatePaths,
    settings: Settings,
    tid: int,
    *,
    after: int = 0,
    out: Callable[[str], None] = print,
    timeout: float | None = None,
) -> int:
    """Print a thread's new entries until it settles; exit code 0, or 1 if it failed."""
    deadline = None if timeout is None else time.monotonic() + timeout
    warned = False

    def show(store: Store) -> ThreadRecord | None:
        nonlocal after
        # The status first: entries read after it include every one saved before it settled.
        t = get_thread(store, tid)
        for e in read_entries(store, tid, after):
            for line in transcriptview.entry_lines(decode(e), full=False):
                out(line)
            after = e.seq
        return t if t is not None and t.status in SETTLED else None

    try:
        with _store(paths, settings, readonly=True) as store:
            done = show(store)
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
                    done = show(store)
                    if done is not None or (deadline is not None and time.monotonic() > deadline):
                        break
                    if not warned and running_pid(paths.daemon_pid) is None:
                        warned = True
                        err(
                            "supervise: no daemon is running, so the thread waits; start one "
                            "with `supervise daemon` (Ctrl-C stops following)"
                        )
    except KeyboardInterrupt:
        err(f"\nsupervise: stopped following; thread t{tid} goes on (supervise thread show t{tid})")
        return 130
    if done is None:
        return 1
    return _settled(done)


def _settled(t: ThreadRecord) -> int:
    if t.status == "waiting_approval":
        err(
            f"supervise: thread t{t.id} waits for approval to run {t.waiting}: "
            f"supervise approve t{t.id}  |  supervise deny t{t.id} --reason '...'"
        )
        return 0
    if t.status == "completed":
        return 0
    err(f"supervise: thread t{t.id} {t.status}" + (f": {t.error}" if t.error else ""))
    return 1


# -- a person's decisions -------------------------------------------------------------------


def _decide(
    paths: StatePaths, settings: Settings, tid: int, decision: Decision, reason: str | None
) -> int:
    from agent_threads.loop import describe_call
    from agent_threads.transcript import Approval, pending_approval
    from state.approvals import decide

    with _store(paths, settings) as store:
        _thread(store, tid)
        done = decide(
            store,
            tid,
            pending=lambda records: pending_approval([decode(r) for r in records]),
            record=lambda call: _item(Approval(call.id, call.name, decision, "user", reason or "")),
            at=time.time(),
        )
    if done.call is None:
        raise UserError(f"thread t{tid} is {done.status}, not waiting for approval")
    ensure_daemon(paths, settings.autostart)
    wake(paths)
    print(f"t{tid}: {decision} {describe_call(done.call)}; the thread resumes")
    return 0


def _item(body: Body) -> ExternalItem:
    """A transcript entry as the state layer writes it: its kind and its JSON."""
    return (body.kind, body.to_json())


def cmd_approve(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    return _decide(paths, settings, thread_id(args.id), "approved", None)


def cmd_deny(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    return _decide(paths, settings, thread_id(args.id), "denied", args.reason)


def cmd_send(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from agent_threads.transcript import Approval, CommandSent, UserText, pending_approval

    tid = thread_id(args.id)
    text = " ".join(args.message).strip()
    if not text:
        raise UserError('the message is empty; write: supervise send t3 "try again"')
    with _store(paths, settings) as store:
        row = _thread(store, tid)
        items: list[ExternalItem] = []
        entries = [decode(r) for r in read_entries(store, tid)]
        call = pending_approval(entries) if row.status == "waiting_approval" else None
        if call is not None:
            # A reply instead of a decision: the call is not run, and the model reads why.
            reason = "the person answered with a message instead of approving"
            items.append(_item(Approval(call.id, call.name, "denied", "user", reason)))
        if text.startswith("/") and len(text) > 1 and not text.startswith("//"):
            # A slash command for the thread's extensions, run by the daemon; not a prompt.
            name, _, rest = text[1:].partition(" ")
            items.append(_item(CommandSent(name, rest.strip(), args.choice)))
        else:
            said = UserText(text.removeprefix("/") if text.startswith("//") else text)
            items.append(_item(said))
        last = entries[-1].seq if entries else 0
        allowed: tuple[ThreadStatus, ...] = (*TERMINAL, "waiting_approval")
        before = append_external(store, tid, items, allowed=allowed, at=time.time())
    if before not in allowed:
        raise UserError(
            f"thread t{tid} is {before}; send continues a finished or waiting thread "
            f"(wait for it, or supervise cancel t{tid})"
        )
    ensure_daemon(paths, settings.autostart)
    wake(paths)
    return _after_submit(args, paths, settings, tid, last)


def cmd_cancel(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from state.threads import cancel_thread

    tid = thread_id(args.id)
    with _store(paths, settings) as store:
        before = cancel_thread(store, tid, time.time())
    if before is None:
        raise UserError(f"no thread t{tid}; `supervise ps` lists them")
    if before in TERMINAL:
        raise UserError(f"thread t{tid} has already ended ({before})")
    wake(paths)
    print(f"t{tid}: cancelled")
    return 0


def cmd_retry(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from state.threads import set_model

    tid = thread_id(args.id)
    # Only --model changes the thread's model; the settings' does not override its own.
    model = default_model(Path.cwd(), settings.model) if args.model else None
    note = "retried by a person" + (f" with model {model}" if model else "")
    with _store(paths, settings) as store:
        _thread(store, tid)
        before = append_external(
            store, tid, [("note", {"text": note})], allowed=("failed", "cancelled"), at=time.time()
        )
        if before not in ("failed", "cancelled"):
            raise UserError(
                f"thread t{tid} is {before}; retry runs a failed or cancelled thread again "
                f"(supervise send t{tid} '...' continues a completed one)"
            )
        if model:
            set_model(store, tid, model)
    ensure_daemon(paths, settings.autostart)
    wake(paths)
    print(f"t{tid}: queued again" + (f" with {model}" if model else ""))
    return 0


def cmd_thread_show(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    tid = thread_id(args.id)
    if args.messages and args.follow:
        raise UserError("--messages prints what the next model call is sent, once: drop -f")
    with _store(paths, settings, readonly=True) as store:
        row = _thread(store, tid)
        if args.follow and not args.json:
            # What `thread show` prints, as it happens: the prompt first, the answer once settled.
            print("\n".join([views.thread_head(row), *transcriptview.prompt_lines(row)]))
            code = follow_thread(paths, settings, tid)
            done = get_thread(store, tid)
            if code != 130 and done is not None:
                entries = [decode(r) for r in read_entries(store, tid)]
                for line in transcriptview.final_lines(done, entries):
                    print(line)
            return code
        records = read_entries(store, tid)
    entries = [decode(r) for r in records]
    if args.messages:
        # The one projection the loop sends (before extensions' context transforms).
        messages = answered_only(conversation(entries))
        if args.json:
            print(json.dumps([{"type": type(m).__name__, **asdict(m)} for m in messages], indent=1))
        else:
            print("\n".join(transcriptview.message_lines(messages)))
    elif args.json:
        print(json.dumps(transcriptview.show_json(row, records), indent=1))
    else:
        print(transcriptview.show_text(row, entries))
    return 0
