"""One thread per failure, in the fire's transaction: which thread of a process a repeated
fire would join, and the join itself (its message saved to that thread).

supervisor/dedup.py decides (pure) on what `seen_threads` reads; `state.fires.commit_fires`
calls both inside its one transaction, so a daemon killed at any instant neither loses a
join nor makes it twice. The thread's row is locked before it is judged open: a thread that
finishes at that moment either takes the message (its runner queues it again, see
`state.threads.finish_thread`) or ended before the fire, and never half of both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import bindparam, func, or_, select
from sqlalchemy.engine import Connection

from state import tables as t
from state.entries import insert_entry
from state.threads import ACTIVE, TERMINAL, lock_status

ANY_THREAD = ""  # the lookup key meaning any thread of the process (`dedup: process`)


@dataclass(frozen=True, slots=True)
class SeenThread:
    """The latest thread of a process with a fire's dedup key."""

    thread_id: int
    open: bool  # queued, running or waiting for approval
    created_at: float
    ended_at: float | None  # when it ended (None while open)
    fires: int  # fires it holds: the one that started it and the repeats that joined it


_T = t.thread.c
_P = t.process.c
_F = t.fire.c
_CHAIN = select(_P.first_id).where(_P.id == bindparam("b_pid"))
_OF_CHAIN = _T.process_id.in_(select(_P.id).where(_P.first_id == bindparam("b_first")))
_KEY = or_(
    bindparam("b_any", type_=t.thread.c.dedup_key.type) == "", _T.dedup_key == bindparam("b_key")
)
_OPEN = (
    select(_T.id, _T.created_at)
    .where(_OF_CHAIN, _KEY, _T.status.in_(ACTIVE))
    .order_by(_T.id.desc())
    .limit(1)
)
_ENDED = (
    select(_T.id, _T.created_at, _T.ended_at)
    .where(_OF_CHAIN, _KEY, _T.status.in_(TERMINAL), _T.ended_at.is_not(None))
    .order_by(_T.ended_at.desc(), _T.id.desc())
    .limit(1)
)
_FIRES = select(func.count()).where(
    _F.thread_id == bindparam("b_tid"), or_(_F.spawned.is_(True), _F.reason == "deduplicated")
)


def seen_threads(conn: Connection, process_id: int, keys: Sequence[str]) -> dict[str, SeenThread]:
    """For each dedup key, the latest thread of the process (every run of a restarted one)
    that has it: the newest open one, else the one that ended last. ANY_THREAD: any key.

    An open thread's row stays locked until the caller's transaction ends (PostgreSQL)."""
    if not keys:
        return {}
    first = conn.execute(_CHAIN, {"b_pid": process_id}).scalar()
    first = process_id if first is None else int(first)
    out: dict[str, SeenThread] = {}
    for key in dict.fromkeys(keys):
        params = {"b_first": first, "b_any": key, "b_key": key}
        row = conn.execute(_OPEN, params).first()
        # Locked, then judged again: it may have finished since the read above.
        if row is not None and lock_status(conn, int(row.id)) in ACTIVE:
            n = int(conn.execute(_FIRES, {"b_tid": row.id}).scalar_one())
            out[key] = SeenThread(int(row.id), True, float(row.created_at), None, n)
            continue
        ended = conn.execute(_ENDED, params).first()
        if ended is not None:
            n = int(conn.execute(_FIRES, {"b_tid": ended.id}).scalar_one())
            out[key] = SeenThread(
                int(ended.id), False, float(ended.created_at), float(ended.ended_at), n
            )
    return out


def tell_thread(conn: Connection, thread_id: int, message: str, at: float) -> None:
    """Save a repeat's message to an open thread (locked by `seen_threads`, or created in
    this transaction). A queued thread reads it when it starts, one waiting for approval
    after the decision, a running one at its next model call or instead of finishing."""
    insert_entry(conn, thread_id, "user", at, {"text": message})
