"""`supervise prune`: the records of ended runs, read to choose and deleted one run at a time.

A run's records are its `process` row, its hook counters, its fires, and the threads its
hooks spawned with their transcript entries: all deleted in ONE transaction per run, which
first checks again, on the row it locks, what made the run prunable when it was chosen (it
ended, none of its threads is unfinished, its chain is not restarting it). A prune killed at
any instant leaves either all of a run's records or none; its run dir is removed by the
caller after the commit, and a dir whose row is gone is harmless (nothing reads it) and is
removed by the next prune.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import bindparam, func, select
from sqlalchemy.engine import Connection

from state import tables as t
from state.db import Store
from state.processes import ENDED, ProcessRecord
from state.threads import TERMINAL

_P = t.process.c
_T = t.thread.c
_COLUMNS = [_P[f] for f in ProcessRecord.__dataclass_fields__]

_ALL = select(*_COLUMNS).order_by(_P.started_at, _P.id)
# Processes with a thread that may still run or is waiting for a person.
_BUSY = (
    select(_T.process_id).where(_T.process_id.is_not(None), _T.status.not_in(TERMINAL)).distinct()
)
_LOCK = select(*_COLUMNS).where(_P.id == bindparam("b_id")).with_for_update()
_UNFINISHED = select(func.count()).where(
    _T.process_id == bindparam("b_id"), _T.status.not_in(TERMINAL)
)
_LIVE_IN_CHAIN = select(func.count()).where(
    func.coalesce(_P.first_id, _P.id) == bindparam("b_first"), _P.state.not_in(ENDED)
)
_THREADS_OF = select(_T.id).where(_T.process_id == bindparam("b_id"))
_DEL_ENTRIES = t.entry.delete().where(
    t.entry.c.thread_id.in_(bindparam("b_threads", expanding=True))
)
_DEL_THREADS = t.thread.delete().where(_T.process_id == bindparam("b_id"))
_DEL_FIRES = t.fire.delete().where(t.fire.c.process_id == bindparam("b_id"))
_DEL_COUNTERS = t.hook_counter.delete().where(t.hook_counter.c.process_id == bindparam("b_id"))
_DEL_PROCESS = t.process.delete().where(_P.id == bindparam("b_id"))
# Its notifications and hook actions that are settled; one still pending is kept (it carries
# its own text and is done yet).
_DEL_ACTIONS = t.action.delete().where(
    t.action.c.process_id == bindparam("b_id"), t.action.c.status.in_(("done", "failed"))
)


@dataclass(frozen=True, slots=True)
class PruneView:
    """What choosing needs: every run, and the ids of runs with an unfinished thread."""

    runs: list[ProcessRecord]
    busy: frozenset[int]


@dataclass(frozen=True, slots=True)
class Pruned:
    """A run whose records were deleted, and the threads deleted with it."""

    run: ProcessRecord
    thread_ids: list[int]


def prune_view(store: Store) -> PruneView:
    """Every run (in the order they started) and the runs with an unfinished thread."""
    with store.read() as conn:
        runs = [ProcessRecord.from_row(r) for r in conn.execute(_ALL)]
        busy = frozenset(int(r[0]) for r in conn.execute(_BUSY))
    return PruneView(runs, busy)


def prune_run(store: Store, run_id: int, *, keep_live_after: float) -> Pruned | None:
    """Delete one ended run's records in one transaction; None (nothing deleted) if it is
    gone, not ended, has a queued, running or waiting thread, or belongs to a chain that
    still runs or restarts and ended after `keep_live_after` (the restart decision counts a
    live chain's recent runs)."""

    def txn(conn: Connection) -> Pruned | None:
        row = conn.execute(_LOCK, {"b_id": run_id}).first()
        if row is None:
            return None
        run = ProcessRecord.from_row(row)
        if run.state not in ENDED:
            return None
        if conn.execute(_UNFINISHED, {"b_id": run_id}).scalar_one():
            return None
        live = conn.execute(_LIVE_IN_CHAIN, {"b_first": run.chain}).scalar_one()
        if live and (run.ended_at is None or run.ended_at > keep_live_after):
            return None
        threads = [int(r[0]) for r in conn.execute(_THREADS_OF, {"b_id": run_id})]
        if threads:
            conn.execute(_DEL_ENTRIES, {"b_threads": threads})
        conn.execute(_DEL_FIRES, {"b_id": run_id})  # fires name its threads: before them
        conn.execute(_DEL_THREADS, {"b_id": run_id})
        conn.execute(_DEL_COUNTERS, {"b_id": run_id})
        conn.execute(_DEL_ACTIONS, {"b_id": run_id})
        conn.execute(_DEL_PROCESS, {"b_id": run_id})
        return Pruned(run, threads)

    return store.transact(txn)
