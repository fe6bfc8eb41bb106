"""Runs of a restarted process: the chain of process rows, and every statement on it.

Each run is its own `process` row (its own run dir, output, offset, exit record, hook
counters and fires), linked to the chain's first run by `first_id`, numbered by `run_no`;
(first_id, run_no) is unique, so two writers can never record the same run twice. The exit's
transaction (`state.fires.commit_fires`) reads the chain's history here, and records the next
run as `backoff` with the time it is due; the daemon claims it (`backoff` -> `starting`, one
UPDATE) when it starts it. What a person asks (`supervise stop`, `supervise restart`) is a
short transaction here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, func, or_, select
from sqlalchemy.engine import Connection

from state import tables as t
from state.db import Store
from state.processes import ACTIVE, ProcessRecord
from state.threads import TERMINAL
from supervise.errors import StateError

_P = t.process.c


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run of a chain, as the restart decision reads it."""

    id: int
    run_no: int
    state: str
    cause: str
    started_at: float
    ended_at: float | None
    result: str | None
    end_reason: str | None


@dataclass(frozen=True, slots=True)
class RunHistory:
    """Read inside an exit's transaction: the chain's runs up to the one ending (last, with
    its end already written), and what a person asked of that one."""

    runs: list[RunRow]
    stop_request: str | None


@dataclass(frozen=True, slots=True)
class NextRun:
    """The run to record after the one that ended."""

    due_at: float
    cause: str  # restart | manual | boot
    after_thread: bool = False


_RUN_COLUMNS = [_P[f] for f in RunRow.__dataclass_fields__]
_FULL = [_P[f] for f in ProcessRecord.__dataclass_fields__]
_CHAIN_OF = (
    select(func.coalesce(_P.first_id, _P.id), _P.run_no, _P.stop_request)
    .where(_P.id == bindparam("b_id"))
    .with_for_update()
)
_HISTORY = (
    select(*_RUN_COLUMNS)
    .where(_P.first_id == bindparam("b_first"), _P.run_no <= bindparam("b_upto"))
    .order_by(_P.run_no)
)
_CHAIN = select(*_FULL).where(_P.first_id == bindparam("b_first")).order_by(_P.run_no)
_NEWEST = (
    select(*_FULL).where(_P.first_id == bindparam("b_first")).order_by(_P.run_no.desc()).limit(1)
)
_GET = select(*_FULL).where(_P.id == bindparam("b_id"))
_PENDING = select(*_FULL).where(_P.state == "backoff").order_by(_P.due_at, _P.id)
# The newest run of each chain whose runs bear this name.
_latest = (
    select(_P.first_id, func.max(_P.run_no).label("top"))
    .where(_P.name == bindparam("b_name"))
    .group_by(_P.first_id)
    .subquery()
)
_NAMED = (
    select(*_FULL)
    .join(_latest, and_(_P.first_id == _latest.c.first_id, _P.run_no == _latest.c.top))
    .order_by(_P.started_at, _P.id)
)
_INSERT = t.process.insert().returning(_P.id)
# Parameters named b_*: a bind named like a column is reserved for the SET clause.
_CLAIM = (
    t.process.update()
    .where(_P.id == bindparam("b_id"), _P.state == "backoff")
    .values(state="starting")
    .returning(*_FULL)
)
_HURRY = (
    t.process.update()
    .where(_P.id == bindparam("b_id"), _P.state == "backoff")
    .values(due_at=bindparam("b_now"), cause="manual", after_thread=False)
    .returning(*_FULL)
)
_CANCEL = t.process.delete().where(_P.id == bindparam("b_id"), _P.state == "backoff")
_REQUEST = (
    t.process.update()
    .where(_P.id == bindparam("b_id"), _P.state.in_(ACTIVE))
    .values(stop_request=bindparam("b_what"))
    .returning(*_FULL)
)
_UNFINISHED = (
    # By the run's on_exit fires: the threads they spawned, and the open threads they joined
    # (a hook's `dedup:`), which are the threads working on this exit too.
    select(func.count(t.thread.c.id.distinct()))
    .select_from(
        t.fire.join(t.process, _P.id == t.fire.c.process_id).join(
            t.thread, t.thread.c.id == t.fire.c.thread_id
        )
    )
    .where(
        _P.first_id == bindparam("b_first"),
        _P.run_no == bindparam("b_run"),
        t.fire.c.trigger == "on_exit",
        or_(t.fire.c.spawned.is_(True), t.fire.c.reason == "deduplicated"),
        t.thread.c.status.not_in(TERMINAL),
    )
)


def history_in(conn: Connection, process_id: int) -> RunHistory:
    """The chain of `process_id` up to it, oldest first (locks its row on PostgreSQL)."""
    row = conn.execute(_CHAIN_OF, {"b_id": process_id}).first()
    if row is None:
        raise StateError(f"process {process_id} vanished from the state database")
    first, run_no, stop = row
    runs = [RunRow(*r) for r in conn.execute(_HISTORY, {"b_first": first, "b_upto": run_no})]
    return RunHistory(runs, stop)


def run_history(store: Store, process_id: int) -> RunHistory:
    """`history_in`, in a transaction of its own."""
    with store.read() as conn:
        return history_in(conn, process_id)


def insert_next_run(conn: Connection, prev_id: int, nxt: NextRun, now: float) -> int:
    """Record the run after `prev_id` as `backoff`, in the caller's transaction.

    It runs what `prev_id` ran: the launch record is copied as it is (the daemon names the
    new id in it when it starts the run), and its environment is `prev_id`'s, sealed anew
    then. Raises IntegrityError (StateError from the Store) when that run is recorded
    already: the unique (first_id, run_no).
    """
    prev = conn.execute(_GET, {"b_id": prev_id}).one()
    values: dict[str, Any] = {
        "name": prev.name,
        "command": prev.command,
        "argv": prev.argv,
        "cwd": prev.cwd,
        "state": "backoff",
        "boot_id": prev.boot_id,
        "started_at": now,  # when it was recorded; the start sets it again
        "depth": prev.depth,
        "parent_thread_id": prev.parent_thread_id,
        "spec": prev.spec,
        "first_id": prev.first_id if prev.first_id is not None else prev.id,
        "run_no": prev.run_no + 1,
        "cause": nxt.cause,
        "due_at": nxt.due_at,
        "after_thread": nxt.after_thread,
    }
    return int(conn.execute(_INSERT, values).scalar_one())


def record_next_run(store: Store, prev_id: int, nxt: NextRun, now: float) -> ProcessRecord:
    """`supervise restart` of a process whose last run ended: record the next run.

    Raises:
        StateError: that run is recorded already (another restart came first).
    """

    def txn(conn: Connection) -> ProcessRecord:
        # Locks the run (PostgreSQL) as the exit's commit does: one of them records the next.
        first, run_no, _ = conn.execute(_CHAIN_OF, {"b_id": prev_id}).one()
        taken = conn.execute(_HISTORY, {"b_first": first, "b_upto": run_no + 1}).all()
        if any(r.run_no > run_no for r in taken):
            raise StateError(
                f"process {first}: run {run_no + 1} is recorded already (another restart?)"
            )
        new_id = insert_next_run(conn, prev_id, nxt, now)
        return ProcessRecord.from_row(conn.execute(_GET, {"b_id": new_id}).one())

    return store.transact(txn)


def chain_runs(store: Store, first_id: int) -> list[ProcessRecord]:
    """Every run of a chain, oldest first."""
    with store.read() as conn:
        return [ProcessRecord.from_row(r) for r in conn.execute(_CHAIN, {"b_first": first_id})]


def newest_run(store: Store, first_id: int) -> ProcessRecord | None:
    with store.read() as conn:
        row = conn.execute(_NEWEST, {"b_first": first_id}).first()
    return None if row is None else ProcessRecord.from_row(row)


def runs_named(store: Store, name: str) -> list[ProcessRecord]:
    """The newest run of every chain with a run named `name`, in the order they started."""
    with store.read() as conn:
        return [ProcessRecord.from_row(r) for r in conn.execute(_NAMED, {"b_name": name})]


def pending_runs(store: Store) -> list[ProcessRecord]:
    """Runs recorded but not started (`backoff`), the first due first."""
    with store.read() as conn:
        return [ProcessRecord.from_row(r) for r in conn.execute(_PENDING)]


def claim_run(
    store: Store,
    run_id: int,
    *,
    started_at: float,
    started_boot: float | None,
    boot_id: str,
    spec: str,
    env_key: str,
) -> ProcessRecord | None:
    """Take a pending run to start it (`backoff` -> `starting`); None if it is not pending
    any more (a person stopped it, or it was claimed)."""
    params = {
        "b_id": run_id,
        "started_at": started_at,
        "started_boot": started_boot,
        "boot_id": boot_id,
        "spec": spec,
        "env_key": env_key,
    }
    with store.write() as conn:
        row = conn.execute(_CLAIM, params).first()
    return None if row is None else ProcessRecord.from_row(row)


def hurry_run(store: Store, run_id: int, now: float) -> ProcessRecord | None:
    """`supervise restart` of a pending run: due now, counted as a person's start (the
    crash-loop count starts over), without waiting for threads. None if not pending."""
    with store.write() as conn:
        row = conn.execute(_HURRY, {"b_id": run_id, "b_now": now}).first()
    return None if row is None else ProcessRecord.from_row(row)


def cancel_run(store: Store, run_id: int) -> bool:
    """`supervise stop` of a pending run: it is never started (its row goes: nothing ran)."""
    with store.write() as conn:
        return bool(conn.execute(_CANCEL, {"b_id": run_id}).rowcount)


def request_stop(store: Store, run_id: int, what: str) -> ProcessRecord | None:
    """Note what a person asks of a running run (`stop`, `restart`), read by its exit's
    commit; None if it is not running (any more)."""
    with store.write() as conn:
        row = conn.execute(_REQUEST, {"b_id": run_id, "b_what": what}).first()
    return None if row is None else ProcessRecord.from_row(row)


def unfinished_exit_threads(store: Store, pending: ProcessRecord) -> int:
    """The threads the on_exit hooks of the run before `pending` spawned that have not
    finished (completed, failed or cancelled): `restart.after_thread` waits for them."""
    params = {"b_first": pending.chain, "b_run": pending.run_no - 1}
    with store.read() as conn:
        return int(conn.execute(_UNFINISHED, params).scalar_one())


def get_run(store: Store, run_id: int) -> ProcessRecord | None:
    with store.read() as conn:
        row = conn.execute(_GET, {"b_id": run_id}).first()
    return None if row is None else ProcessRecord.from_row(row)
