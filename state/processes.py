"""Process records: one supervised process's row, and every statement on `process`.

A process is created `starting` (with its launch record, in one transaction), becomes
`running` once its pids are known, and ends `exited` (its exit record was read) or `lost`
(it ended without one, or its run dir went away). Its end is written by
`state.fires.commit_fires`, with the on_exit fires it produced, so neither is saved alone.

A restarted process is a chain of such rows, one per run (state/runs.py): the next run is
recorded `backoff` by the exit's commit, and becomes `starting` when the daemon starts it; a
run after which the policy gave up ends `crash-loop` instead of `exited`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal, cast, get_args

from sqlalchemy import bindparam, case, func, select
from sqlalchemy.engine import Connection, Row

from state import tables as t
from state.db import Store
from supervise.errors import StateError

ProcessState = Literal["starting", "running", "exited", "lost", "backoff", "crash-loop"]
PROCESS_STATES: tuple[ProcessState, ...] = get_args(ProcessState)
ACTIVE: tuple[ProcessState, ...] = ("starting", "running")  # not known to have ended
ENDED: tuple[ProcessState, ...] = ("exited", "lost", "crash-loop")  # ended: never again
EndState = Literal["exited", "lost", "crash-loop"]


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    """A process row. Times are epoch seconds; `log_*` is the tailing bookkeeping
    (state/tables.py says what each means)."""

    id: int
    name: str
    command: str
    argv: str  # JSON list
    cwd: str
    state: ProcessState
    pid: int | None
    pid_started: float | None
    shim_pid: int | None
    shim_started: float | None
    boot_id: str
    exit_code: int | None
    signal: str | None
    result: str | None
    end_reason: str | None
    started_at: float
    started_boot: float | None
    ended_at: float | None
    depth: int
    parent_thread_id: int | None
    log_offset: int
    log_inode: int | None
    log_head: str | None
    log_skipping: bool
    log_archived: int
    log_punched: int
    log_new_offset: int
    log_new_inode: int | None
    log_new_head: str | None
    log_new_skipping: bool
    spec: str | None
    env_key: str | None
    first_id: int | None  # the chain's first run (None: a row from before schema 6 = itself)
    run_no: int
    cause: str  # run | restart | manual (supervisor/restarts.py Cause)
    due_at: float | None  # backoff: when it may start
    after_thread: bool  # backoff: and once the previous run's on_exit threads are done
    stop_request: str | None  # stop | restart: what a person asked of this run

    @property
    def chain(self) -> int:
        """The id of the chain's first run: what names the process across its restarts."""
        return self.first_id if self.first_id is not None else self.id

    @classmethod
    def from_row(cls, row: Row[Any]) -> ProcessRecord:
        return cls(*cast(tuple[Any, ...], row))  # columns in field order: the cheap path

    @property
    def tail(self) -> TailState:
        return TailState(
            LogPosition(self.log_offset, self.log_inode, self.log_head, self.log_skipping),
            LogPosition(
                self.log_new_offset, self.log_new_inode, self.log_new_head, self.log_new_skipping
            ),
            self.log_archived,
            self.log_punched,
        )


@dataclass(frozen=True, slots=True)
class NewProcess:
    """What a process is recorded with before it is started."""

    name: str
    command: str
    argv: str  # JSON list
    cwd: str
    boot_id: str
    started_at: float
    started_boot: float | None = None
    depth: int = 0
    parent_thread_id: int | None = None
    env_key: str | None = None
    state: ProcessState = "starting"
    first_id: int | None = None  # None: a first run (it becomes its own id)
    run_no: int = 1
    cause: str = "run"
    due_at: float | None = None
    after_thread: bool = False


@dataclass(frozen=True, slots=True)
class LogPosition:
    """Where reading one output file stopped."""

    offset: int = 0
    inode: int | None = None
    head: str | None = None  # hash of the file's first line
    skipping: bool = False  # inside an over-long line whose prefix was already matched


@dataclass(frozen=True, slots=True)
class TailState:
    """The tailing bookkeeping of a process, saved with the fires it produced."""

    child: LogPosition  # the file the child writes to
    new: LogPosition  # the output.log that replaced it after a rename (logrotate)
    archived: int  # bytes rotated out before `child`'s offset 0
    punched: int  # output.log's head up to here was freed (copied to output.log.1)

    def columns(self) -> dict[str, Any]:
        return {
            "log_offset": self.child.offset,
            "log_inode": self.child.inode,
            "log_head": self.child.head,
            "log_skipping": self.child.skipping,
            "log_archived": self.archived,
            "log_punched": self.punched,
            "log_new_offset": self.new.offset,
            "log_new_inode": self.new.inode,
            "log_new_head": self.new.head,
            "log_new_skipping": self.new.skipping,
        }


@dataclass(frozen=True, slots=True)
class ProcessEnd:
    """How a process ended, saved with its on_exit fires."""

    state: EndState
    result: str  # success | exit-code | signal | lost, as systemd says
    ended_at: float
    exit_code: int | None = None
    signal: str | None = None
    end_reason: str | None = None  # why a lost process was given up
    # Pids learned from the run dir after the CLI died before writing them; None keeps the row's.
    pid: int | None = None
    shim_pid: int | None = None

    def columns(self) -> dict[str, Any]:
        cols = asdict(self)
        for name in ("pid", "shim_pid"):
            if cols[name] is None:
                del cols[name]
        return cols


_P = t.process.c
_COLUMNS = [_P[f] for f in ProcessRecord.__dataclass_fields__]

_GET = select(*_COLUMNS).where(_P.id == bindparam("b_id"))
# The order things happened; id breaks ties (and orders rows of one clock tick).
_LIST = select(*_COLUMNS).order_by(_P.started_at, _P.id)
_ACTIVE = select(*_COLUMNS).where(_P.state.in_(ACTIVE)).order_by(_P.started_at, _P.id)
_INSERT = t.process.insert().returning(_P.id)
# Parameters named b_*: a bind named like a column is reserved for the SET clause.
_SET_SPEC = (
    t.process.update()
    .where(_P.id == bindparam("b_id"))
    .values(first_id=func.coalesce(_P.first_id, _P.id))  # a first run heads its own chain
    .returning(*_COLUMNS)
)
_MARK_RUNNING = (
    t.process.update()
    .where(_P.id == bindparam("b_id"))
    .values(
        pid=bindparam("b_pid"),
        pid_started=bindparam("b_pid_started"),
        shim_pid=bindparam("b_shim_pid"),
        shim_started=bindparam("b_shim_started"),
        # The daemon may already have seen it end: never back to running.
        state=case((_P.state == "starting", "running"), else_=_P.state),
    )
    .returning(*_COLUMNS)
)
_DELETE = t.process.delete().where(_P.id == bindparam("b_id"))


def create_process(
    store: Store, new: NewProcess, spec: Callable[[ProcessRecord], str]
) -> ProcessRecord:
    """Record a process and its launch record (`spec`, which names its id) in one transaction."""

    def txn(conn: Connection) -> ProcessRecord:
        process_id = conn.execute(_INSERT, asdict(new)).scalar_one()
        row = conn.execute(_GET, {"b_id": process_id}).one()
        text = spec(ProcessRecord.from_row(row))
        return ProcessRecord.from_row(
            conn.execute(_SET_SPEC, {"b_id": process_id, "spec": text}).one()
        )

    return store.transact(txn)


def mark_running(
    store: Store,
    process_id: int,
    *,
    pid: int,
    pid_started: float | None,
    shim_pid: int,
    shim_started: float | None,
) -> ProcessRecord:
    """Save the pids of a started process; `starting` becomes `running`.

    Raises:
        StateError: the row is gone.
    """
    params = {
        "b_id": process_id,
        "b_pid": pid,
        "b_pid_started": pid_started,
        "b_shim_pid": shim_pid,
        "b_shim_started": shim_started,
    }
    with store.write() as conn:
        row = conn.execute(_MARK_RUNNING, params).first()
    if row is None:
        raise StateError(f"process {process_id} vanished from the state database ({store.where})")
    return ProcessRecord.from_row(row)


def forget_process(store: Store, process_id: int) -> None:
    """Delete a process that never started (its launch failed): nothing else refers to it."""
    with store.write() as conn:
        conn.execute(_DELETE, {"b_id": process_id})


def get_process(store: Store, process_id: int) -> ProcessRecord | None:
    with store.read() as conn:
        row = conn.execute(_GET, {"b_id": process_id}).first()
    return None if row is None else ProcessRecord.from_row(row)


def list_processes(store: Store) -> list[ProcessRecord]:
    """Every process, in the order they started."""
    with store.read() as conn:
        return [ProcessRecord.from_row(r) for r in conn.execute(_LIST)]


def active_processes(store: Store) -> list[ProcessRecord]:
    """The processes not known to have ended (`starting`, `running`): the daemon's to follow."""
    with store.read() as conn:
        return [ProcessRecord.from_row(r) for r in conn.execute(_ACTIVE)]
