"""What each event tells people, and who: the outbox rows (state/outbox.py) a fire, a crash
loop, a thread's wait for approval or its end makes. Pure: the callers record the rows in
the transaction of their cause.

Who: a hook's own `notify:` targets for its fires (and for its thread's approval and end),
plus the settings file's `[notify] default` targets for the events listed in `on`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from agent_threads.loop import LoopEnd
from agent_threads.transcript import AssistantReply, Entry, FinalRewritten
from state.db import Store
from state.outbox import ActionWrite
from state.settings import NotifySettings
from state.threads import ThreadRecord
from supervise.errors import SuperviseError
from supervisor.hookactions import FireFactsEnv
from supervisor.hookspec import Hook

MAX_BODY = 3500  # most services cut a message near 4,000 characters
TAIL_LINES = 10
# A fire's notice is planned before its thread has an id: the outbox names it when it sends.
SPAWNED = "A thread was spawned to look into it."


@dataclass(frozen=True)
class ProcessFacts:
    """The process a fire is about, as a notice and a `run:` command name it."""

    id: int
    name: str
    cwd: str
    output: str  # its output.log


@dataclass(frozen=True)
class Route:
    """Which events go to the default targets."""

    on: frozenset[str] = frozenset()
    default: tuple[str, ...] = ()

    @classmethod
    def of(cls, settings: NotifySettings) -> Route:
        return cls(frozenset(settings.on), settings.default)

    def targets(self, event: str, own: Sequence[str] = ()) -> tuple[str, ...]:
        extra = self.default if event in self.on else ()
        return tuple(dict.fromkeys((*own, *extra)))


def _clip(text: str, limit: int = MAX_BODY) -> str:
    return text if len(text) <= limit else text[: limit - 20] + "\n... (cut)"


def naming_thread(body: str, thread_id: int | None) -> str:
    """A fire's notice with the thread it spawned named (`thread_id` None: as it was)."""
    if thread_id is None:
        return body
    named = (
        f"Thread t{thread_id} was spawned to look into it: `supervise thread show t{thread_id}`."
    )
    return body.replace(SPAWNED, named, 1)


def fire_actions(
    hook: Hook,
    proc: ProcessFacts,
    route: Route,
    *,
    detail: str,
    exit_code: int | None,
    matched_line: str | None,
    tail: Sequence[str],
    spawns: bool,
    at: float,
) -> tuple[ActionWrite, ...]:
    """The rows of one fire that took effect (its text already masked of credentials)."""
    rows: list[ActionWrite] = []
    title = f"supervise: hook {hook.name} fired on {proc.name} (process {proc.id})"
    lines = [f"Hook {hook.name} ({hook.kind}) fired on process {proc.id} ({proc.name}): {detail}"]
    if matched_line is not None:
        lines.append(f"Matched line: {matched_line}")
    if exit_code is not None:
        lines.append(f"Exit code: {exit_code}")
    if spawns:
        lines.append(SPAWNED)
    if tail:
        lines += ["", f"Last {min(len(tail), TAIL_LINES)} lines:", *tail[-TAIL_LINES:]]
    body = _clip("\n".join(lines))
    for target in route.targets("fire", hook.notify):
        rows.append(ActionWrite("fire", "notify", target, title, body, process_id=proc.id))
    if hook.run is not None:
        # The fire's id is known once it is written: the worker adds it to the variables.
        facts = FireFactsEnv(
            hook=hook.name,
            trigger=hook.kind,
            process_id=proc.id,
            process_name=proc.name,
            fire_id=0,
            output=proc.output,
            exit_code=exit_code,
            matched_line=matched_line,
            detail=detail,
        )
        data = {"command": hook.run.to_json(), "cwd": proc.cwd, "facts": facts.__dict__}
        title = f"run for hook {hook.name}"
        rows.append(
            ActionWrite("fire", "run", None, title, data=json.dumps(data), process_id=proc.id)
        )
    if hook.restart:
        title = f"restart for hook {hook.name}"
        rows.append(ActionWrite("fire", "restart", None, title, process_id=proc.id))
    return tuple(rows)


def crash_loop_actions(proc: ProcessFacts, route: Route, what: str) -> tuple[ActionWrite, ...]:
    title = f"supervise: {proc.name} (process {proc.id}) is in a crash loop"
    body = (
        f"Process {proc.id} ({proc.name}): {what}; it is no longer restarted.\n"
        f"`supervise logs {proc.id}` shows its output; `supervise restart {proc.id}` starts "
        "it again."
    )
    return tuple(
        ActionWrite("crash_loop", "notify", t, title, body, process_id=proc.id)
        for t in route.targets("crash_loop")
    )


def final_answer(entries: Sequence[Entry]) -> str | None:
    """The thread's last word: its final reply (as rewritten by a hook, if one did)."""
    for entry in reversed(entries):
        body = entry.body
        if isinstance(body, FinalRewritten) and body.content.strip():
            return body.content
        if isinstance(body, AssistantReply) and body.content.strip():
            return body.content
    return None


def thread_actions(
    thread: ThreadRecord, end: LoopEnd, entries: Sequence[Entry], route: Route, own: Sequence[str]
) -> tuple[ActionWrite, ...]:
    """A thread waits for approval, or finished: what to tell, given its hook's targets."""
    tid = f"t{thread.id}"
    about = f"thread {tid}" + (f" (hook {thread.hook}" if thread.hook else " (")
    about += f", process {thread.process_id})" if thread.process_id is not None else ")"
    if end.status == "waiting_approval":
        event = "approval"
        title = f"supervise: {tid} needs approval"
        body = (
            f"The {about} asks to run: {end.waiting}\n"
            f"Approve: supervise approve {tid}\n"
            f"Deny:    supervise deny {tid} --reason '...'\n"
            f"Look first: supervise thread show {tid}"
        )
    elif end.status in ("completed", "failed"):
        event = "thread_finished"
        answer = final_answer(entries)
        title = f"supervise: {tid} {end.status}"
        parts = [f"The {about} {end.status}."]
        if end.error:
            parts.append(f"Error: {end.error}")
        parts += ["", answer] if answer else ["", "(it gave no final answer)"]
        parts += ["", f"Transcript: supervise thread show {tid}"]
        body = "\n".join(parts)
    else:
        return ()
    return tuple(
        ActionWrite(
            event,
            "notify",
            t,
            title,
            _clip(body),
            process_id=thread.process_id,
            thread_id=thread.id,
        )
        for t in route.targets(event, own)
    )


class ThreadNotices:
    """The runner's `notices`: a thread's hook's own targets (read from its process's launch
    record, once per process), plus the defaults. Called in a worker thread."""

    def __init__(self, store: Store, route: Route) -> None:
        self.store = store
        self.route = route
        self.own: dict[tuple[int, str], tuple[str, ...]] = {}

    def __call__(
        self, thread: ThreadRecord, end: LoopEnd, entries: list[Entry]
    ) -> Sequence[ActionWrite]:
        own: tuple[str, ...] = ()
        if thread.process_id is not None and thread.hook:
            key = (thread.process_id, thread.hook)
            if key not in self.own:
                self.own[key] = self._hook_targets(thread.process_id, thread.hook)
            own = self.own[key]
        if not own and not self.route.on:
            return ()
        return thread_actions(thread, end, entries, self.route, own)

    def _hook_targets(self, process_id: int, hook: str) -> tuple[str, ...]:
        from state.processes import get_process
        from supervisor.runspec import RunSpec

        row = get_process(self.store, process_id)
        if row is None or row.spec is None:
            return ()
        try:
            spec = RunSpec.from_text(row.spec, f"process {process_id}'s launch record")
        except SuperviseError:
            return ()
        found = next((h for h in spec.hooks.hooks if h.name == hook), None)
        return found.notify if found is not None else ()
