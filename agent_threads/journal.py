"""One running thread's saves, through `state`: its entries (scrubbed of credentials first)
and the moves of its status. The statements and the checks that go with them (an append to
a thread a person cancelled raises ThreadStopped) live in state.entries and state.threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from agent_threads.transcript import AssistantReply, Body, Entry, decode
from state import entries as entry_store
from state import threads as thread_store
from state.db import Store
from state.outbox import ActionWrite
from state.threads import ThreadRecord, ThreadStatus
from supervise.errors import MessagesArrived, StateError

Redact = Callable[[str], str]


def _scrub(value: Any, redact: Redact) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _scrub(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, redact) for v in value]
    return value


class Journal:
    """Appends entries and moves the status of one running thread."""

    def __init__(
        self,
        store: Store,
        thread_id: int,
        *,
        redact: Redact = lambda s: s,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.thread_id = thread_id
        self.redact = redact
        self.clock = clock
        # Every `user` entry up to `known` is in the loop's hands; one saved after it by
        # another writer (a repeat of the failure: state/repeats.py) is handed to the loop
        # before its next reply is saved, or queues the thread again as it ends. `own`: the
        # loop's saves past a gap (background tasks save too, from worker threads).
        self.known = 0
        self.own: set[int] = set()
        self.lock = threading.Lock()
        self.requeued = False  # the last `finish` queued it again for a new message

    def entries(self) -> list[Entry]:
        found = [decode(r) for r in entry_store.read_entries(self.store, self.thread_id)]
        with self.lock:
            self.known, self.own = (found[-1].seq if found else 0), set()
        return found

    def _saw(self, seq: int) -> None:
        with self.lock:
            if seq == self.known + 1:
                self.known = seq
                while self.known + 1 in self.own:
                    self.own.discard(self.known + 1)
                    self.known += 1
            elif seq > self.known:
                self.own.add(seq)

    def _arrived(self) -> list[Entry]:
        """The messages others saved since `known`: the loop has every other entry (its own
        saves), or gets it from the save in flight."""
        with self.lock:
            records = entry_store.read_entries(self.store, self.thread_id, self.known)
            if records:
                self.known = max(self.known, records[-1].seq)
                self.own = {n for n in self.own if n > self.known}
        return [decode(r) for r in records if r.kind == "user"]

    def info(self) -> ThreadRecord:
        record = thread_store.get_thread(self.store, self.thread_id)
        if record is None:
            raise StateError(f"thread t{self.thread_id} vanished from the state database")
        return record

    def append(self, body: Body) -> Entry:
        """Save one entry (scrubbed); raises ThreadStopped if the thread is no longer running."""
        scrubbed: dict[str, Any] = _scrub(body.to_json(), self.redact)
        # A reply answers what the model saw: with a message saved since, it is dropped and
        # the model asked again (MessagesArrived carries the new messages to the loop).
        told_after = self.known if isinstance(body, AssistantReply) else None
        try:
            record = entry_store.append_entry(
                self.store,
                self.thread_id,
                body.kind,
                scrubbed,
                self.clock(),
                told_after=told_after,
            )
        except MessagesArrived as exc:
            raise MessagesArrived(str(exc), self._arrived()) from None
        self._saw(record.seq)
        return decode(record)

    def record_model(self, name: str) -> None:
        """Remember which model a thread got, for `ps` and `thread show`."""
        thread_store.record_model(self.store, self.thread_id, name)

    def finish(
        self,
        status: ThreadStatus,
        *,
        error: str | None = None,
        waiting: str | None = None,
        actions: Sequence[ActionWrite] = (),
    ) -> bool:
        """Move a running thread to `status` (with `actions`, its notifications); False if
        someone else already moved it. A thread completed with a message it has not seen is
        queued again (`requeued`), and its notifications are not sent: it has not finished."""
        self.requeued = False
        if status == "completed":
            got = thread_store.complete_unless_told(
                self.store, self.thread_id, self.known, self.clock(), actions=actions
            )
            self.requeued = got == "queued"
            return got is not None
        return thread_store.finish_thread(
            self.store,
            self.thread_id,
            status,
            self.clock(),
            error=error and self.redact(error),
            waiting=waiting,
            actions=actions,
        )
