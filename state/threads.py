"""Thread records: the one place a thread's state lives, and every statement on `thread`.

`create_thread` is the ONE path that creates a thread, for hook fires (inside the fire's
transaction) and for `ask` alike: it applies the shared rate limiter and saves the first
message in the same transaction, so a replay sends the same text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast, get_args

from sqlalchemy import Boolean, bindparam, case, func, select, text, update
from sqlalchemy.engine import Connection, Row

from state import tables as t
from state.db import Store
from state.outbox import ActionWrite, insert_actions
from state.ratelimit import Rate, not_before

ThreadStatus = Literal["queued", "running", "waiting_approval", "completed", "failed", "cancelled"]
THREAD_STATUSES: tuple[ThreadStatus, ...] = get_args(ThreadStatus)
TERMINAL: tuple[ThreadStatus, ...] = ("completed", "failed", "cancelled")
# Settled: nothing will happen until a person acts (or never).
SETTLED: tuple[ThreadStatus, ...] = (*TERMINAL, "waiting_approval")
ThreadTrigger = Literal[
    "on_exit",
    "on_output_match",
    "on_timeout",
    "on_crash_loop",
    "on_silence",
    "on_schedule",
    "on_resource",
    "user",
]


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
    dedup_key: str | None = None  # a hook's `dedup:`: repeats of its failure join it

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
    dedup_key: str | None = None  # the fire's (a hook with `dedup:`)


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
        "dedup_key": new.dedup_key,
    }
    row = conn.execute(_INSERT_THREAD, values).one()
    first = json.dumps({"text": new.first_message}, ensure_ascii=False)
    conn.execute(
        _INSERT_FIRST,
        {"thread_id": row.id, "seq": 1, "kind": "user", "at": new.created_at, "data": first},
    )
    return ThreadRecord.from_row(row)


# Built once: a statement made per call is compiled and cache-keyed per call (half the cost
# of committing a fire that spawns).
_INSERT_THREAD = t.thread.insert().returning(*t.thread.c)
_INSERT_FIRST = t.entry.insert()


# -- reading ---------------------------------------------------------------------------------

_GET = select(t.thread).where(t.thread.c.id == bindparam("id"))
_ORDER = (t.thread.c.created_at, t.thread.c.id)  # the order things happened
_LIST_ALL = select(t.thread).order_by(*_ORDER)
_LIST_OF = select(t.thread).where(t.thread.c.process_id == bindparam("pid")).order_by(*_ORDER)
_NEXT_DUE = select(func.min(t.thread.c.not_before)).where(t.thread.c.status == "queued")
_STATUSES = select(t.thread.c.id, t.thread.c.status).where(
    t.thread.c.id.in_(bindparam("ids", expanding=True))
)
_LOCK_STATUS = select(t.thread.c.status).where(t.thread.c.id == bindparam("id")).with_for_update()


def get_thread(store: Store, thread_id: int) -> ThreadRecord | None:
    with store.read() as conn:
        row = conn.execute(_GET, {"id": thread_id}).first()
    return None if row is None else ThreadRecord.from_row(row)


def list_threads(store: Store, process_id: int | None = None) -> list[ThreadRecord]:
    """Every thread (or one process's), in the order they were created."""
    with store.read() as conn:
        if process_id is None:
            rows = conn.execute(_LIST_ALL)
        else:
            rows = conn.execute(_LIST_OF, {"pid": process_id})
        return [ThreadRecord.from_row(r) for r in rows]


def next_due(store: Store) -> float | None:
    """When the earliest queued thread may start; None with nothing queued."""
    with store.read() as conn:
        due = conn.execute(_NEXT_DUE).scalar()
    return None if due is None else float(due)


def statuses(store: Store, ids: Sequence[int]) -> dict[int, ThreadStatus]:
    """The status of each of `ids` that exists."""
    if not ids:
        return {}
    with store.read() as conn:
        rows = conn.execute(_STATUSES, {"ids": list(ids)})
        return {int(r.id): cast(ThreadStatus, r.status) for r in rows}


def lock_status(conn: Connection, thread_id: int) -> ThreadStatus | None:
    """A thread's status, its row locked until the caller's transaction ends (PostgreSQL;
    SQLite's BEGIN IMMEDIATE already serializes writers). None: no such thread."""
    status = conn.execute(_LOCK_STATUS, {"id": thread_id}).scalar()
    return None if status is None else cast(ThreadStatus, status)


# -- the dispatcher's moves ------------------------------------------------------------------
# (Parameters of UPDATE statements are named b_*: SQLAlchemy reserves the column names.)

_DUE = (
    select(t.thread.c.id)
    .where(t.thread.c.status == "queued", t.thread.c.not_before <= bindparam("b_now"))
    .order_by(t.thread.c.not_before, t.thread.c.id)
    .limit(bindparam("b_n"))
    # Two dispatchers (two hosts on one PostgreSQL) skip each other's rows instead of both
    # taking them; SQLite renders no FOR UPDATE and serializes writers instead.
    .with_for_update(skip_locked=True)
)
_CLAIM = (
    update(t.thread)
    .where(t.thread.c.id.in_(_DUE.scalar_subquery()), t.thread.c.status == "queued")
    .values(
        status="running",
        # A resumed run keeps the start of its wall-clock budget.
        segment_started_at=func.coalesce(t.thread.c.segment_started_at, bindparam("b_now")),
    )
    .returning(t.thread.c.id)
)


def claim_next_thread(store: Store, n: int, now: float) -> list[int]:
    """Move up to `n` due queued threads to running, in one statement; their ids, sorted.

    No thread is claimed twice, by this process or another host's dispatcher.
    """
    if n <= 0:
        return []

    def claim(conn: Connection) -> list[int]:
        return sorted(int(i) for i in conn.execute(_CLAIM, {"b_now": now, "b_n": n}).scalars())

    return store.transact(claim)


_RUNNING = (
    select(t.thread.c.id).where(t.thread.c.status == "running").order_by(t.thread.c.id)
).with_for_update()
_REQUEUE = (
    update(t.thread)
    .where(t.thread.c.id.in_(bindparam("b_ids", expanding=True)), t.thread.c.status == "running")
    .values(status="queued")
)


def requeue_running(store: Store, keep: int) -> list[int]:
    """Daemon recovery: of the threads left running, keep the first `keep` (their ids) and
    queue the rest again."""

    def requeue(conn: Connection) -> list[int]:
        ids = [int(i) for i in conn.execute(_RUNNING).scalars()]
        if ids[keep:]:
            conn.execute(_REQUEUE, {"b_ids": ids[keep:]})
        return ids[:keep]

    return store.transact(requeue)


_FINISH = (
    update(t.thread)
    .where(t.thread.c.id == bindparam("b_id"), t.thread.c.status == "running")
    .values(
        status=bindparam("b_status"),
        error=bindparam("b_error"),
        waiting=bindparam("b_waiting"),
        ended_at=bindparam("b_ended_at"),
        segment_started_at=None,
    )
)


def finish_thread(
    store: Store,
    thread_id: int,
    status: ThreadStatus,
    now: float,
    *,
    error: str | None = None,
    waiting: str | None = None,
    actions: Sequence[ActionWrite] = (),
) -> bool:
    """Move a running thread to `status`, recording `actions` (its notifications) in the
    same transaction; False if someone else already moved it (a person cancelled it)."""
    ended = now if status in TERMINAL else None
    values = {"b_id": thread_id, "b_status": status, "b_error": error, "b_waiting": waiting}
    with store.write() as conn:
        moved = conn.execute(_FINISH, {**values, "b_ended_at": ended}).rowcount > 0
        if moved:  # its notifications go with the move, or not at all
            insert_actions(conn, actions, now)
        return moved


_USER_AFTER = select(func.count()).where(
    t.entry.c.thread_id == bindparam("id"),
    t.entry.c.seq > bindparam("after"),
    t.entry.c.kind == "user",
)
_TOLD_AGAIN = (
    update(t.thread)
    .where(t.thread.c.id == bindparam("b_id"))
    .values(status="queued", error=None, waiting=None, ended_at=None, segment_started_at=None)
)


def complete_unless_told(
    store: Store,
    thread_id: int,
    seen: int,
    now: float,
    *,
    actions: Sequence[ActionWrite] = (),
) -> ThreadStatus | None:
    """A running thread's loop finished, having every message up to seq `seen`: it is
    completed (recording `actions`, its notifications, with it), or queued again when a
    message was saved after it (a repeat of its failure, state/repeats.py), so that it
    answers it. Returns the status it got; None if it was no longer running (a person
    cancelled it)."""

    def finish(conn: Connection) -> ThreadStatus | None:
        # Locked first, then read: a repeat's transaction holds this lock while it saves its
        # message (PostgreSQL reads the entries after the lock, as they were committed).
        if lock_status(conn, thread_id) != "running":
            return None
        if int(conn.execute(_USER_AFTER, {"id": thread_id, "after": seen}).scalar_one()):
            conn.execute(_TOLD_AGAIN, {"b_id": thread_id})
            return "queued"
        values = {"b_id": thread_id, "b_status": "completed", "b_error": None}
        conn.execute(_FINISH, {**values, "b_waiting": None, "b_ended_at": now})
        insert_actions(conn, actions, now)  # it finished: its notice goes with it
        return "completed"

    return store.transact(finish)


def fail_thread(store: Store, thread_id: int, error: str, now: float) -> bool:
    """A running thread failed outside its loop (our bug); False if it had moved on."""
    return finish_thread(store, thread_id, "failed", now, error=error)


ACTIVE: tuple[ThreadStatus, ...] = ("queued", "running", "waiting_approval")
_CANCEL = (
    update(t.thread)
    .where(t.thread.c.id == bindparam("b_id"), t.thread.c.status.in_(ACTIVE))
    .values(
        status="cancelled", error=bindparam("b_error"), waiting=None, ended_at=bindparam("b_now")
    )
)


def cancel_thread(store: Store, thread_id: int, now: float) -> ThreadStatus | None:
    """A person cancels a thread; returns the status it had (it is cancelled now if that was
    queued, running or waiting_approval). None: no such thread."""

    def cancel(conn: Connection) -> ThreadStatus | None:
        before = lock_status(conn, thread_id)
        if before in ACTIVE:
            conn.execute(
                _CANCEL, {"b_id": thread_id, "b_error": "cancelled by a person", "b_now": now}
            )
        return before

    return store.transact(cancel)


_REQUEUE_ONE = (
    update(t.thread)
    .where(t.thread.c.id == bindparam("b_id"))
    .values(
        status=bindparam("b_status"),
        error=None,
        waiting=None,
        ended_at=None,
        # A finished thread that runs again gets its whole turn budget back.
        turns=case((bindparam("b_reset", type_=Boolean), 0), else_=t.thread.c.turns),
    )
)


def requeue(conn: Connection, thread_id: int, status: ThreadStatus, *, reset_turns: bool) -> None:
    """Queue a thread again after a person's word, in the caller's transaction."""
    conn.execute(_REQUEUE_ONE, {"b_id": thread_id, "b_status": status, "b_reset": reset_turns})


_ADD_TURN = (
    update(t.thread).where(t.thread.c.id == bindparam("b_id")).values(turns=t.thread.c.turns + 1)
)


def add_turn(conn: Connection, thread_id: int) -> None:
    """Count one model reply, in the transaction that saves it."""
    conn.execute(_ADD_TURN, {"b_id": thread_id})


_RECORD_MODEL = (
    update(t.thread)
    .where(t.thread.c.id == bindparam("b_id"), t.thread.c.model.is_(None))
    .values(model=bindparam("b_model"))
)
_SET_MODEL = (
    update(t.thread).where(t.thread.c.id == bindparam("b_id")).values(model=bindparam("b_model"))
)


def record_model(store: Store, thread_id: int, model: str) -> None:
    """Remember which model a thread got (the first time), for `ps` and `thread show`."""
    with store.write() as conn:
        conn.execute(_RECORD_MODEL, {"b_id": thread_id, "b_model": model})


def set_model(store: Store, thread_id: int, model: str) -> None:
    """A person chose another model for the thread's next run (`thread retry --model`)."""
    with store.write() as conn:
        conn.execute(_SET_MODEL, {"b_id": thread_id, "b_model": model})
