"""One running thread's saves, through `state`: its entries (scrubbed of credentials first)
and the moves of its status. The statements and the checks that go with them (an append to
a thread a person cancelled raises ThreadStopped) live in state.entries and state.threads."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from agent_threads.transcript import Body, Entry, decode
from state import entries as entry_store
from state import threads as thread_store
from state.db import Store
from state.outbox import ActionWrite
from state.threads import ThreadRecord, ThreadStatus
from supervise.errors import StateError

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

    def entries(self) -> list[Entry]:
        return [decode(r) for r in entry_store.read_entries(self.store, self.thread_id)]

    def info(self) -> ThreadRecord:
        record = thread_store.get_thread(self.store, self.thread_id)
        if record is None:
            raise StateError(f"thread t{self.thread_id} vanished from the state database")
        return record

    def append(self, body: Body) -> Entry:
        """Save one entry (scrubbed); raises ThreadStopped if the thread is no longer running."""
        scrubbed: dict[str, Any] = _scrub(body.to_json(), self.redact)
        record = entry_store.append_entry(
            self.store, self.thread_id, body.kind, scrubbed, self.clock()
        )
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
        someone else already moved it."""
        return thread_store.finish_thread(
            self.store,
            self.thread_id,
            status,
            self.clock(),
            error=error and self.redact(error),
            waiting=waiting,
            actions=actions,
        )
