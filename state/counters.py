"""Hook counters: how often each hook of a process has fired, and every statement on them.

The limits (supervisor/limits.py) decide on a `Counter`; this module loads and saves them.
A counter is written only inside `state.fires.commit_fires`, with the fires it counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import Insert

from state import tables as t
from state.db import Store
from state.processes import ACTIVE


@dataclass(frozen=True, slots=True)
class Counter:
    """A hook's history on one process: fires counted against max_spawns, and refusals."""

    fires: int = 0
    refused: int = 0


@dataclass(frozen=True, slots=True)
class HookCounter:
    """A `hook_counter` row."""

    process_id: int
    hook: str
    fires: int
    refused: int

    @property
    def counter(self) -> Counter:
        return Counter(self.fires, self.refused)


_C = t.hook_counter.c

_OF_PROCESS = select(_C.hook, _C.fires, _C.refused).where(_C.process_id == bindparam("pid"))
# One query for every process the daemon recovers: a thousand single reads cost seconds.
_OF_ACTIVE = select(_C.process_id, _C.hook, _C.fires, _C.refused).where(
    _C.process_id.in_(select(t.process.c.id).where(t.process.c.state.in_(ACTIVE)))
)


def counters_in(conn: Connection, process_id: int) -> dict[str, Counter]:
    """One process's counters by hook, in the caller's transaction."""
    return {
        hook: Counter(fires, refused)
        for hook, fires, refused in conn.execute(_OF_PROCESS, {"pid": process_id})
    }


def load_counters(store: Store, process_id: int) -> dict[str, Counter]:
    """One process's counters by hook (none yet: empty)."""
    with store.read() as conn:
        return counters_in(conn, process_id)


def load_active_counters(store: Store) -> dict[int, dict[str, Counter]]:
    """The counters of every process not known to have ended, by process id, in one query."""
    out: dict[int, dict[str, Counter]] = {}
    with store.read() as conn:
        for row in conn.execute(_OF_ACTIVE):
            rec = HookCounter(*row)
            out.setdefault(rec.process_id, {})[rec.hook] = rec.counter
    return out


def save_counters(conn: Connection, process_id: int, changed: Mapping[str, Counter]) -> None:
    """Upsert the given counters of one process, in the caller's transaction."""
    if not changed:
        return
    rows = [
        {"process_id": process_id, "hook": hook, "fires": c.fires, "refused": c.refused}
        for hook, c in changed.items()
    ]
    conn.execute(_upsert(conn.dialect.name), rows)


@cache
def _upsert(dialect: str) -> Insert:
    """The dialect's upsert, built once on first use (the dialect modules cost `ps` start-up)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        pg = postgresql.insert(t.hook_counter)
        return pg.on_conflict_do_update(
            index_elements=[_C.process_id, _C.hook],
            set_={"fires": pg.excluded.fires, "refused": pg.excluded.refused},
        )
    from sqlalchemy.dialects import sqlite

    lite = sqlite.insert(t.hook_counter)
    return lite.on_conflict_do_update(
        index_elements=[_C.process_id, _C.hook],
        set_={"fires": lite.excluded.fires, "refused": lite.excluded.refused},
    )
