"""A person's decision on a tool call a waiting thread asked to make: the one place it is
recorded (an `approval` entry, and the thread queued again, in one transaction)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

from sqlalchemy.engine import Connection

from state.db import Store
from state.entries import EntryRecord, ExternalItem, insert_entry, read_entries_in
from state.threads import ThreadStatus, lock_status, requeue

Decision = Literal["approved", "denied"]


class ToolCallLike(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...


C = TypeVar("C", bound=ToolCallLike)


@dataclass(frozen=True)
class Decided(Generic[C]):
    """What `decide` did: `call` is None (and nothing was written) unless the thread was
    waiting for approval of a call."""

    status: ThreadStatus | None  # the thread's status before; None: no such thread
    call: C | None


def decide(
    store: Store,
    thread_id: int,
    *,
    pending: Callable[[Sequence[EntryRecord]], C | None],
    record: Callable[[C], ExternalItem],
    at: float,
) -> Decided[C]:
    """Record a person's decision on the call a waiting thread wants to make, and queue the
    thread again. `pending` finds that call in the transcript and `record` writes the decision
    as its entry (the transcript's kinds and rules belong to agent_threads, passed in).

    The status check, the transcript read and the write are one transaction: two people
    deciding at once cannot both record a decision.
    """

    def run(conn: Connection) -> Decided[C]:
        before = lock_status(conn, thread_id)
        call = pending(read_entries_in(conn, thread_id)) if before == "waiting_approval" else None
        if call is None:
            return Decided(before, None)
        kind, data = record(call)
        insert_entry(conn, thread_id, kind, at, data)
        requeue(conn, thread_id, "queued", reset_turns=False)
        return Decided(before, call)

    return store.transact(run)
