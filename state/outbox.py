"""The outbox: hook actions and notifications, recorded with their cause, done afterwards.

A row is inserted in the same transaction as what caused it (`insert_actions`, called by
state/fires.py for a fire and a crash loop, by state/threads.py for a thread's end or wait
for approval), so a daemon killed at any instant neither loses nor doubles one. The daemon
then does it (supervisor/outbox.py) and records how it went here. What to do and when to
try again is decided above this package; these are the statements.

- notify: pending -> done (sent, or carried by another row's message: `batch`) | failed
  (every attempt failed). A send that succeeded but whose record a SIGKILL lost is sent
  again: at-least-once on the network, one `done` in the record.
- run: pending -> running (committed before the command starts) -> done | failed. A row
  found `running` by the next daemon is failed, never run again: at most once.
- restart: pending -> done | failed; doing it twice is harmless (the restart path records
  run N+1 once), so it is retried like a notification.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from sqlalchemy import bindparam, func, inspect, select, update
from sqlalchemy.engine import Connection, Row

from state import tables as t
from state.db import Store

ActionKind = Literal["notify", "run", "restart"]
ActionStatus = Literal["pending", "running", "done", "failed"]
_A = t.action.c


@dataclass(frozen=True, slots=True)
class ActionWrite:
    """An action to record with its cause; the fire's id is set when the fire is written."""

    event: str  # fire | approval | thread_finished | crash_loop | test
    action: ActionKind
    target: str | None = None
    title: str = ""
    body: str = ""
    data: str | None = None  # JSON
    process_id: int | None = None
    thread_id: int | None = None


@dataclass(frozen=True, slots=True)
class ActionRecord:
    id: int
    fire_id: int | None
    thread_id: int | None
    process_id: int | None
    event: str
    action: str
    target: str | None
    title: str
    body: str
    data: str | None
    status: str
    attempts: int
    last_error: str | None
    next_at: float
    created_at: float
    done_at: float | None
    result: str | None
    batch: int | None

    @classmethod
    def from_row(cls, row: Row[Any]) -> ActionRecord:
        return cls(*cast(tuple[Any, ...], row))


_COLUMNS = [_A[f] for f in ActionRecord.__dataclass_fields__]
_SELECT = select(*_COLUMNS)


def insert_actions(
    conn: Connection, writes: Sequence[ActionWrite], now: float, fire_id: int | None = None
) -> None:
    """Record `writes` in the caller's transaction (that of their cause)."""
    if not writes:
        return
    conn.execute(
        t.action.insert(),
        [
            {
                "fire_id": fire_id,
                "thread_id": w.thread_id,
                "process_id": w.process_id,
                "event": w.event,
                "action": w.action,
                "target": w.target,
                "title": w.title,
                "body": w.body,
                "data": w.data,
                "status": "pending",
                "attempts": 0,
                "next_at": now,
                "created_at": now,
            }
            for w in writes
        ],
    )


def add_actions(store: Store, writes: Sequence[ActionWrite], now: float) -> None:
    with store.write() as conn:
        insert_actions(conn, writes, now)


def list_actions(store: Store, limit: int | None = None) -> list[ActionRecord]:
    """The newest `limit` actions (all if None), oldest first."""
    query = _SELECT.order_by(_A.id.desc())
    if limit is not None:
        query = query.limit(limit)
    with store.read() as conn:
        if not inspect(conn).has_table("action"):  # a database no daemon of schema 8 opened
            return []
        return [ActionRecord.from_row(r) for r in reversed(conn.execute(query).all())]


def due_actions(store: Store, now: float, skip: Sequence[int] = ()) -> list[ActionRecord]:
    """Pending actions whose time has come, oldest first (`skip`: those in hand)."""
    query = _SELECT.where(_A.status == "pending", _A.next_at <= now).order_by(_A.id)
    if skip:
        query = query.where(_A.id.not_in(list(skip)))
    with store.read() as conn:
        return [ActionRecord.from_row(r) for r in conn.execute(query)]


def next_due(store: Store, skip: Sequence[int] = ()) -> float | None:
    """When the next pending action is due, if any is (`skip`: those in hand)."""
    query = select(func.min(_A.next_at)).where(_A.status == "pending")
    if skip:
        query = query.where(_A.id.not_in(list(skip)))
    with store.read() as conn:
        value = conn.execute(query).scalar()
        return None if value is None else float(value)


_START = (
    update(t.action)
    .where(_A.id == bindparam("b_id"), _A.status == "pending")
    .values(status="running", attempts=_A.attempts + 1)
)


def start_once(store: Store, action_id: int) -> bool:
    """Mark a `run:` action as started, committed before its command starts; False if it
    is not pending any more (done by another hand, or failed)."""
    with store.write() as conn:
        return conn.execute(_START, {"b_id": action_id}).rowcount > 0


def settle(
    store: Store,
    action_id: int,
    status: ActionStatus,
    now: float,
    *,
    error: str | None = None,
    result: str | None = None,
    next_at: float | None = None,
    attempted: bool = True,
    batch: Sequence[int] = (),
) -> None:
    """Record an attempt's outcome: `pending` again at `next_at` (a retry), or `done` /
    `failed` for good. `batch`: the other notifications this one's message carried (done
    with it)."""
    values: dict[str, Any] = {"status": status, "last_error": error}
    if result is not None:
        values["result"] = result
    if attempted:  # a `run:` counted its attempt when it started (`start_once`)
        values["attempts"] = _A.attempts + 1
    if status == "pending":
        values["next_at"] = now if next_at is None else next_at
    else:
        values["done_at"] = now
    with store.write() as conn:
        conn.execute(update(t.action).where(_A.id == action_id).values(**values))
        if batch:
            conn.execute(
                update(t.action)
                .where(_A.id.in_(list(batch)), _A.status == "pending")
                .values(
                    status="done",
                    done_at=now,
                    batch=action_id,
                    result=f"sent in the message of action {action_id}",
                )
            )


def sent_since(store: Store, target: str, since: float) -> list[float]:
    """When messages to `target` were sent since `since` (one per message, not per row
    a message carried), oldest first: what its rate counts."""
    query = (
        select(_A.done_at)
        .where(
            _A.action == "notify",
            _A.target == target,
            _A.status == "done",
            _A.batch.is_(None),
            _A.done_at >= since,
        )
        .order_by(_A.done_at)
    )
    with store.read() as conn:
        return [float(v) for v in conn.execute(query).scalars()]


def interrupted(store: Store, now: float) -> list[ActionRecord]:
    """At start-up: `run:` actions a dead daemon had started are failed, never run again
    (at most once: the command may have done its work). Returns them."""
    note = (
        "the daemon stopped while this command ran; not run again (at most once: it may "
        "have done its work)"
    )
    with store.write() as conn:
        rows = conn.execute(_SELECT.where(_A.status == "running")).all()
        conn.execute(
            update(t.action)
            .where(_A.status == "running")
            .values(status="failed", last_error=note, done_at=now)
        )
    return [ActionRecord.from_row(r) for r in rows]
