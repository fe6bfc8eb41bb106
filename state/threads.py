"""Thread records: the one place a thread's state lives, and every statement on `thread`.

`create_thread` is the ONE path that creates a thread, for hook fires (inside the fire's
transaction) and for `ask` alike: it applies the shared rate limiter and saves the first
message in the same transaction, so a replay sends the same text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, get_args

from sqlalchemy import bindparam, select, text
from sqlalchemy.engine import Connection, Row

from state import tables as t
from state.db import Store
from state.ratelimit import Rate, not_before

ThreadStatus = Literal["queued", "running", "waiting_approval", "completed", "failed", "cancelled"]
THREAD_STATUSES: tuple[ThreadStatus, ...] = get_args(ThreadStatus)
TERMINAL: tuple[ThreadStatus, ...] = ("completed", "failed", "cancelled")
# Settled: nothing will happen until a person acts (or never).
SETTLED: tuple[ThreadStatus, ...] = (*TERMINAL, "waiting_approval")
ThreadTrigger = Literal["on_exit", "on_output_match", "on_timeout", "user"]


@dataclass(frozen=True)
class ThreadRecord:
    """A thread row. Times are epoch seconds.

    created_at: when the thread was created (committed). not_before: when the shared rate
    limiter lets it start. ended_at: when it last reached a terminal status.
    """

    id: int
    process_id: int | None
    hook: str | None
    trigger: str
    depth: int
    status: ThreadStatus
    created_at: float
    not_before: float
    prompt: str
    fire_id: int | None
    model: str | None
    cwd: str | None
    permissions: str | None
    error: str | None
    waiting: str | None
    turns: int
    segment_started_at: float | None
    ended_at: float | None
    parent_thread_id: int | None
    hooks: str | None

    @classmethod
    def from_row(cls, row: Row[tuple[object, ...]]) -> ThreadRecord:
        return cls(**row._asdict())


@dataclass(frozen=True)
class NewThread:
    """What a new thread starts from: its system prompt and its first message."""

    trigger: ThreadTrigger
    depth: int
    prompt: str  # the system prompt: the hook file's words, or the person's question
    first_message: str  # saved as entry 1 (kind `user`)
    created_at: float
    process_id: int | None = None
    hook: str | None = None
    fire_id: int | None = None
    model: str | None = None
    cwd: str | None = None
    permissions: str | None = None  # JSON
    hooks: str | None = None  # JSON
    parent_thread_id: int | None = None


_RECENT = (
    select(t.thread.c.not_before)
    .where(t.thread.c.not_before > bindparam("since"))
    .order_by(t.thread.c.not_before.desc())
    .limit(bindparam("n"))
)


def scheduled_start(conn: Connection, at: float, rate: Rate) -> float:
    """When a thread created at `at` may start under the limiter all threads share."""
    # Only starts inside the window can delay this one (indexed on not_before).
    recent = conn.execute(_RECENT, {"since": at - rate.per_seconds, "n": rate.count}).scalars()
    return not_before(sorted(recent), at, rate)


def create_thread(conn: Connection, new: NewThread, rate: Rate) -> ThreadRecord:
    """Create a queued thread and its first message, in the caller's write transaction.

    On PostgreSQL the limiter's read and the insert are serialized by a transaction-scoped
    advisory lock: two hosts creating threads at once must not both take the same slot.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(7352002)"))
    start = scheduled_start(conn, new.created_at, rate)
    values = {
        "process_id": new.process_id,
        "hook": new.hook,
        "trigger": new.trigger,
        "depth": new.depth,
        "status": "queued",
        "created_at": new.created_at,
        "not_before": start,
        "prompt": new.prompt,
        "fire_id": new.fire_id,
        "model": new.model,
        "cwd": new.cwd,
        "permissions": new.permissions,
        "hooks": new.hooks,
        "parent_thread_id": new.parent_thread_id,
        "turns": 0,
    }
    row = conn.execute(t.thread.insert().values(values).returning(*t.thread.c)).one()
    conn.execute(
        t.entry.insert().values(
            thread_id=row.id,
            seq=1,
            kind="user",
            at=new.created_at,
            data=json.dumps({"text": new.first_message}, ensure_ascii=False),
        )
    )
    return ThreadRecord.from_row(row)


_LIST_THREADS = select(*t.thread.c).order_by(t.thread.c.created_at, t.thread.c.id)
_LIST_THREADS_OF = (
    select(*t.thread.c)
    .where(t.thread.c.process_id == bindparam("pid"))
    .order_by(t.thread.c.created_at, t.thread.c.id)
)


def list_threads(store: Store, process_id: int | None = None) -> list[ThreadRecord]:
    """Every thread (or one process's), in the order they were created."""
    with store.read() as conn:
        if process_id is None:
            rows = conn.execute(_LIST_THREADS)
        else:
            rows = conn.execute(_LIST_THREADS_OF, {"pid": process_id})
        return [ThreadRecord.from_row(r) for r in rows]
