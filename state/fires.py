"""Fire records, and `commit_fires`: the exactly-once transaction of the daemon.

The saved output position, the hook counters, the fire rows, the threads they spawn and
the process's end go in ONE transaction, so a daemon killed at any instant and restarted
neither misses nor repeats a fire. Whether a fire spawns, is refused or is dropped is decided
by the caller's `planner` (supervisor/limits.py decides; state/ only stores), run inside the
transaction on what it holds: the counters and the keys already recorded.

With an end, the caller's `restart` planner (supervisor/restarts.py decides) is asked first,
on the chain's history read in the same transaction, whether a next run follows; that run
is recorded there too (state/runs.py), so an exit is restarted once, whenever the daemon dies.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection, Row

from state import tables as t
from state.counters import Counter, counters_in, save_counters
from state.db import Store
from state.outbox import ActionWrite, insert_actions
from state.processes import ProcessEnd, TailState
from state.ratelimit import Rate
from state.repeats import SeenThread, seen_threads, tell_thread
from state.runs import NextRun, RunHistory, history_in, insert_next_run
from state.threads import NewThread, create_thread
from supervise.errors import StateError


@dataclass(frozen=True, slots=True)
class FireRecord:
    """A fire row: a hook's trigger happened (`spawned`, or refused with `reason`)."""

    id: int
    key: str
    process_id: int
    hook: str
    trigger: str
    at: float
    detail: str  # the matched line, the exit, the timeout
    exit_code: int | None
    spawned: bool
    reason: str | None
    thread_id: int | None
    # Listings only: which run of which process (its first run's id) it belongs to.
    run_no: int | None = field(default=None, compare=False)
    first_id: int | None = field(default=None, compare=False)

    @classmethod
    def from_row(cls, row: Row[Any]) -> FireRecord:
        return cls(*cast(tuple[Any, ...], row))  # columns in field order: the cheap path


@dataclass(frozen=True, slots=True)
class JoinThread:
    """A repeat joining an open thread (a hook's `dedup:`): the thread already recorded
    (`thread_id`), or the one an earlier write of the same plan creates (`write`, its index)."""

    thread_id: int | None = None
    write: int | None = None
    message: str | None = None  # what the thread is told (None: recorded only)


@dataclass(frozen=True, slots=True)
class FireWrite:
    """A fire to record; `thread` (its fire_id left None) is the thread it spawns, if any."""

    key: str
    hook: str
    trigger: str
    at: float
    detail: str
    exit_code: int | None = None
    reason: str | None = None  # why it was refused
    thread: NewThread | None = None
    join: JoinThread | None = None  # reason `deduplicated`: the thread it joins
    about_thread: int | None = None  # reason `cooldown`: the thread that ended just before
    actions: tuple[ActionWrite, ...] = ()  # the outbox rows it makes (notify, run, restart)

    @property
    def spawned(self) -> bool:
        return self.thread is not None


@dataclass(frozen=True, slots=True)
class PlanInput:
    """What the planner decides on, read inside the transaction."""

    depth: int  # the process's depth: its threads run at depth + 1
    counters: Mapping[str, Counter]  # by hook
    recorded: frozenset[str]  # the keys, of those asked about, that are already fires
    # By dedup key asked about: the latest thread of the process with it (none: absent).
    seen: Mapping[str, SeenThread] = field(default_factory=dict)
    end_state: str | None = None  # `crash-loop`: the restart planner gave up on this end


@dataclass(frozen=True, slots=True)
class FirePlan:
    writes: Sequence[FireWrite]
    counters: Mapping[str, Counter]  # every hook's counter after the writes
    actions: Sequence[ActionWrite] = ()  # outbox rows of no fire (a crash loop's notice)


# Run inside the transaction, maybe more than once (a retried PostgreSQL transaction): it
# must be a pure function of its input.
Planner = Callable[[PlanInput], FirePlan]


@dataclass(frozen=True, slots=True)
class RestartPlan:
    """What follows an end: the next run to record, and the end's state if not as given."""

    next_run: NextRun | None = None
    state: str | None = None  # `crash-loop`: the policy gave up after this run


# Run inside the transaction before the fire planner, maybe more than once (a retried
# PostgreSQL transaction): it must be a pure function of its input.
RestartPlanner = Callable[[RunHistory], RestartPlan]


@dataclass(frozen=True, slots=True)
class Committed:
    fires: list[FireRecord]  # the recorded fires, in the plan's order
    counters: dict[str, Counter]  # by hook, after the commit
    next_run: int | None = None  # the run recorded after this end


_F = t.fire.c
_P = t.process.c
_COLUMNS = [_F[f] for f in FireRecord.__dataclass_fields__ if f not in ("run_no", "first_id")]

_LIST = (
    select(*[*_COLUMNS, _P.run_no, _P.first_id])
    .select_from(t.fire.outerjoin(t.process, _P.id == _F.process_id))
    .order_by(_F.at, _F.id)
)
_LIST_OF = _LIST.where(_F.process_id.in_(bindparam("pids", expanding=True)))
_RECORDED = select(_F.key).where(_F.key.in_(bindparam("keys", expanding=True)))
_INSERT = t.fire.insert().returning(*_COLUMNS)
_SET_THREAD = (
    t.fire.update()
    .where(_F.id == bindparam("b_id"))
    .values(thread_id=bindparam("b_thread"))
    .returning(*_COLUMNS)
)
# Locks the row (PostgreSQL): a second daemon on this process waits here, then fails the
# offset check below.
_LOCK = (
    select(_P.log_offset, _P.depth, _P.stop_request)
    .where(_P.id == bindparam("b_id"))
    .with_for_update()
)
# Parameters named b_*: the other parameters given name the columns to set.
_UPDATE = t.process.update().where(_P.id == bindparam("b_id"))


def list_fires(store: Store, process_id: int | Sequence[int] | None = None) -> list[FireRecord]:
    """Every fire (or those of one process, or of several: the runs of a restarted one), in
    the order they happened, each with its run's number."""
    with store.read() as conn:
        if process_id is None:
            rows = conn.execute(_LIST)
        else:
            ids = [process_id] if isinstance(process_id, int) else list(process_id)
            rows = conn.execute(_LIST_OF, {"pids": ids})
        return [FireRecord.from_row(r) for r in rows]


def commit_fires(
    store: Store,
    process_id: int,
    keys: Sequence[str],
    planner: Planner,
    *,
    rate: Rate,
    expect_offset: int | None,
    tail: TailState | None = None,
    end: ProcessEnd | None = None,
    restart: RestartPlanner | None = None,
    restart_policy: bool = True,
    dedup_keys: Sequence[str] = (),
) -> Committed:
    """Record what `planner` decides about the fires `keys`, with the process's new tail
    position and end, in one transaction.

    Args:
        store: the state database.
        process_id: whose hooks fired.
        keys: the keys of the fires planned (the planner is told which are recorded already).
        planner: decides the fires to write and the counters after them.
        rate: the shared limiter every spawned thread goes through.
        expect_offset: the saved output offset this work started from; a mismatch means
            another writer moved it, and nothing is written. None: no check.
        tail: the tailing bookkeeping to save; None leaves it.
        end: how the process ended; None: it has not.
        restart: with an end, decides (before `planner`) what follows it: a next run to
            record, or the end's state (`crash-loop`).
        restart_policy: False when the process has no restart policy: `restart` is then
            asked only after a person's `supervise restart`.
        dedup_keys: the dedup keys of the fires (state/repeats.py): the planner is told the
            latest thread of the process with each.

    Raises:
        StateError: the process is not recorded, or its saved offset moved.
    """

    def txn(conn: Connection) -> Committed:
        depth, asked = _lock(conn, process_id, expect_offset)
        columns = {**(tail.columns() if tail else {}), **(end.columns() if end else {})}
        if columns:
            conn.execute(_UPDATE, {"b_id": process_id, **columns})
        after = RestartPlan()
        # Without a policy, only a person's `supervise restart` makes a next run: the
        # history is read (a query per end) only when it can matter.
        if (
            restart is not None
            and end is not None
            and (restart_policy or asked in ("restart", "hook"))
        ):
            after = restart(history_in(conn, process_id))
            if after.state is not None:
                conn.execute(_UPDATE, {"b_id": process_id, "state": after.state})
        counters = counters_in(conn, process_id)
        fires: list[FireRecord] = []
        # A crash loop is planned even without on_crash_loop hooks: it may notify.
        if keys or after.state is not None:
            recorded = frozenset(
                conn.execute(_RECORDED, {"keys": list(keys)}).scalars() if keys else ()
            )
            seen = seen_threads(conn, process_id, dedup_keys)
            plan = planner(
                PlanInput(depth, dict(counters), recorded, seen=seen, end_state=after.state)
            )
            changed = {h: c for h, c in plan.counters.items() if counters.get(h) != c}
            save_counters(conn, process_id, changed)
            made: list[int | None] = []  # the thread each write made, by index
            for w in plan.writes:
                fires.append(_write(conn, process_id, w, rate, made))
                made.append(fires[-1].thread_id if w.spawned else None)
            insert_actions(conn, plan.actions, time.time())
            counters = {**counters, **plan.counters}
        next_id = None
        if after.next_run is not None:
            assert end is not None
            next_id = insert_next_run(conn, process_id, after.next_run, end.ended_at)
        return Committed(fires, counters, next_id)

    return store.transact(txn)


def _lock(conn: Connection, process_id: int, expect_offset: int | None) -> tuple[int, str | None]:
    """Lock the process row, check its saved offset; returns its depth and what a person
    asked of it (stop, restart)."""
    row = conn.execute(_LOCK, {"b_id": process_id}).first()
    if row is None:
        raise StateError(f"process {process_id} vanished from the state database")
    offset, depth, asked = row
    if expect_offset is not None and offset != expect_offset:
        raise StateError(
            f"process {process_id}: saved offset moved ({offset} != {expect_offset}); "
            "is a second daemon running on this state directory?"
        )
    return int(depth), asked


def _joined(w: FireWrite, made: Sequence[int | None]) -> int | None:
    """The thread a fire refers to without spawning it: the one it joins, or the one whose
    cooldown it fell in."""
    if w.join is None:
        return w.about_thread
    if w.join.thread_id is not None:
        return w.join.thread_id
    assert w.join.write is not None and made[w.join.write] is not None, "joins a later write"
    return made[w.join.write]


def _write(
    conn: Connection, process_id: int, w: FireWrite, rate: Rate, made: Sequence[int | None] = ()
) -> FireRecord:
    values = {
        "key": w.key,
        "process_id": process_id,
        "hook": w.hook,
        "trigger": w.trigger,
        "at": w.at,
        "detail": w.detail,
        "exit_code": w.exit_code,
        "spawned": w.spawned,
        "reason": w.reason,
    }
    row = conn.execute(_INSERT, values).one()
    if w.thread is None:
        insert_actions(conn, w.actions, time.time(), fire_id=row.id)
        other = _joined(w, made)
        if other is None:
            return FireRecord.from_row(row)
        if w.join is not None and w.join.message is not None:
            tell_thread(conn, other, w.join.message, w.at)
        return FireRecord.from_row(
            conn.execute(_SET_THREAD, {"b_id": row.id, "b_thread": other}).one()
        )
    new = replace(w.thread, process_id=process_id, fire_id=row.id)
    thread = create_thread(conn, new, rate)
    # Its notices name the thread it spawned (the plan could not know its id).
    actions = [replace(a, thread_id=thread.id) for a in w.actions]
    insert_actions(conn, actions, time.time(), fire_id=row.id)
    return FireRecord.from_row(
        conn.execute(_SET_THREAD, {"b_id": row.id, "b_thread": thread.id}).one()
    )
