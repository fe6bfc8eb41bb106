"""Transcript entries: every statement on `entry`, and the checks that go with an append.

An entry is saved before the thread's next step, so a thread can always be rebuilt from its
entries. `append_entry` checks in the same transaction that the thread is still `running`: a
person who cancels a thread stops it at its next save, and nothing is written after the cancel.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from sqlalchemy import bindparam, func, select
from sqlalchemy.engine import Connection

from state import tables as t
from state.db import Store
from state.threads import TERMINAL, ThreadStatus, add_turn, lock_status, requeue
from supervise.errors import MessagesArrived, ThreadStopped

# What each kind's data holds is documented in agent_threads/entries.py.
EntryKind = Literal[
    "user",
    "assistant",
    "tool_start",
    "tool_pid",
    "tool_result",
    "approval",
    "note",
    "hook",
    "context",
    "system_hook",
    "injected",
    "retry",
    "final",
    "command",
    "command_result",
    "custom",
]
ENTRY_KINDS: tuple[EntryKind, ...] = get_args(EntryKind)


@dataclass(frozen=True)
class EntryRecord:
    """One saved transcript entry; `data` is the kind's JSON object, decoded."""

    seq: int
    kind: EntryKind
    at: float
    data: dict[str, Any]


_READ = (
    select(t.entry.c.seq, t.entry.c.kind, t.entry.c.at, t.entry.c.data)
    .where(t.entry.c.thread_id == bindparam("id"), t.entry.c.seq > bindparam("after"))
    .order_by(t.entry.c.seq)
)
_LAST_SEQ = select(func.coalesce(func.max(t.entry.c.seq), 0)).where(
    t.entry.c.thread_id == bindparam("id")
)
_INSERT = t.entry.insert().values(
    thread_id=bindparam("b_id"),
    seq=bindparam("b_seq"),
    kind=bindparam("b_kind"),
    at=bindparam("b_at"),
    data=bindparam("b_data"),
)


def read_entries(store: Store, thread_id: int, after: int = 0) -> list[EntryRecord]:
    """A thread's entries after seq `after`, in order."""
    with store.read() as conn:
        return read_entries_in(conn, thread_id, after)


def read_entries_in(conn: Connection, thread_id: int, after: int = 0) -> list[EntryRecord]:
    """`read_entries` inside the caller's transaction."""
    rows = conn.execute(_READ, {"id": thread_id, "after": after})
    return [
        EntryRecord(int(r.seq), cast(EntryKind, r.kind), float(r.at), json.loads(r.data))
        for r in rows
    ]


_MESSAGES_AFTER = select(func.count()).where(
    t.entry.c.thread_id == bindparam("id"),
    t.entry.c.seq > bindparam("after"),
    t.entry.c.kind == "user",
)


def messages_after(conn: Connection, thread_id: int, after: int) -> int:
    """How many `user` entries a thread has after seq `after`, in the caller's transaction."""
    return int(conn.execute(_MESSAGES_AFTER, {"id": thread_id, "after": after}).scalar_one())


def last_seq(store: Store, thread_id: int) -> int:
    """The seq of a thread's last entry (0: none)."""
    with store.read() as conn:
        return int(conn.execute(_LAST_SEQ, {"id": thread_id}).scalar_one())


def insert_entry(conn: Connection, thread_id: int, kind: EntryKind, at: float, data: Any) -> int:
    """Append one entry in the caller's transaction (it holds the thread's row); its seq."""
    seq = int(conn.execute(_LAST_SEQ, {"id": thread_id}).scalar_one()) + 1
    text = json.dumps(data, ensure_ascii=False)
    values = {"b_id": thread_id, "b_seq": seq, "b_kind": kind, "b_at": at, "b_data": text}
    conn.execute(_INSERT, values)
    return seq


def append_entry(
    store: Store,
    thread_id: int,
    kind: EntryKind,
    data: dict[str, Any],
    at: float,
    *,
    told_after: int | None = None,
) -> EntryRecord:
    """Save one entry of a running thread (an `assistant` entry counts a turn).
    `told_after`: the caller has every message up to this seq; a message saved after it
    (a repeat of the failure, state/repeats.py) means this entry is not saved.

    Raises:
        ThreadStopped: the thread is no longer running (a person cancelled it); nothing
            was written.
        MessagesArrived: a message was saved after `told_after`; nothing was written.
    """

    def append(conn: Connection) -> int:
        # The row lock keeps a person's cancel or message from interleaving on PostgreSQL.
        status = lock_status(conn, thread_id)
        if status != "running":
            raise ThreadStopped(f"thread t{thread_id} is {status}")
        if told_after is not None and messages_after(conn, thread_id, told_after):
            raise MessagesArrived(f"thread t{thread_id}: a message came after {told_after}")
        seq = insert_entry(conn, thread_id, kind, at, data)
        if kind == "assistant":
            add_turn(conn, thread_id)
        return seq

    return EntryRecord(store.transact(append), kind, at, data)


ExternalItem = tuple[EntryKind, dict[str, Any]]


def append_external(
    store: Store,
    thread_id: int,
    items: Sequence[ExternalItem],
    *,
    allowed: Sequence[ThreadStatus],
    at: float,
    status: ThreadStatus = "queued",
) -> ThreadStatus | None:
    """Entries a person adds from the CLI (a message, an approval, a note), then the thread is
    queued again, in one transaction.

    Returns the status the thread had (None: no such thread); nothing is written unless it
    was one of `allowed`.
    """

    def append(conn: Connection) -> ThreadStatus | None:
        before = lock_status(conn, thread_id)
        if before is None or before not in allowed:
            return before
        for kind, data in items:
            insert_entry(conn, thread_id, kind, at, data)
        requeue(conn, thread_id, status, reset_turns=before in TERMINAL)
        return before

    return store.transact(append)
