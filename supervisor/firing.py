"""Committing fires: the saved output position, the hook counters, the fire rows and the
new thread rows go in ONE transaction, so a daemon killed at any instant and restarted
neither misses nor repeats a fire.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agent_threads.spawn import FireFacts, render_prompt
from state.db import Store
from state.models import ProcessRow
from state.ratelimit import not_before
from supervise.errors import StateError
from supervisor.hookspec import Hook, Limits, Rate
from supervisor.limits import Counter, decide
from supervisor.redaction import redact_text

_PROCESS_COLUMNS = frozenset(ProcessRow.model_fields)  # names safe to put in an UPDATE


@dataclass(frozen=True)
class FireEvent:
    """A hook's trigger happened; `key` makes it unique across restarts."""

    hook: Hook
    key: str
    at: float
    detail: str
    facts: FireFacts
    exit_code: int | None = None
    refuse: str | None = None  # refused before limits apply (e.g. `lost`: code unknown)


def _masked(ev: FireEvent, redact: Callable[[str], str] = redact_text) -> FireEvent:
    """What the process printed may hold a credential: masked before it is saved (the fire's
    detail, and the thread's prompt), by its form, and by value where `redact` knows the
    process's own environment."""
    f = ev.facts
    # One text, not line by line: a PEM key spans lines.
    tail = redact("\n".join(f.output_tail)).split("\n") if f.output_tail else []
    line = redact(f.matched_line) if f.matched_line is not None else None
    facts = replace(f, command=redact(f.command), output_tail=tail, matched_line=line)
    return replace(ev, detail=redact(ev.detail), facts=facts)


@dataclass(frozen=True)
class Outcome:
    hook: str
    trigger: str
    spawned: bool
    reason: str | None
    thread_id: int | None
    recorded: bool


def load_all_counters(store: Store, process_ids: list[int]) -> dict[int, dict[str, Counter]]:
    """Every listed process's hook counters (empty for none yet), in one query."""
    out: dict[int, dict[str, Counter]] = {pid: {} for pid in process_ids}
    with store.sql_read() as conn:
        rows = conn.execute(
            "SELECT process_id, hook, fires, refused FROM hook_counter WHERE process_id IN"
            " (SELECT id FROM process WHERE state IN ('starting', 'running'))"
        )
        for pid, hook, fires, refused in rows:
            if pid in out:
                out[pid][hook] = Counter(fires, refused)
    return out


def load_counters(store: Store, process_id: int) -> dict[str, Counter]:
    with store.sql_read() as conn:
        rows = conn.execute(
            "SELECT hook, fires, refused FROM hook_counter WHERE process_id = ?", (process_id,)
        )
        return {hook: Counter(fires, refused) for hook, fires, refused in rows}


def commit_fires(
    store: Store,
    process_id: int,
    events: Sequence[FireEvent],
    *,
    limits: Limits,
    expect_offset: int | None,
    changes: Mapping[str, Any],
    redact: Callable[[str], str] = redact_text,
) -> tuple[list[Outcome], dict[str, Counter]]:
    """Apply the limits to `events` and record everything in one transaction.

    Args:
        store: the state database.
        process_id: whose hooks fired.
        events: the fires, in the order they happened.
        limits: the process's effective limits.
        expect_offset: the saved output offset this work started from; a mismatch means
            another writer moved it, and nothing is written.
        changes: columns of the process row that commit with the fires (offset, exit).
        redact: masks credentials in what the fires save (default: by their form alone).

    Returns:
        What each event became, and the hook counters after them.
    """
    # Plain sqlite3, not the ORM: recovery commits hundreds of these back to back, and
    # SQLAlchemy's per-statement work was most of their cost.
    with store.sql_write() as conn:
        row = conn.execute(
            "SELECT log_offset, depth FROM process WHERE id = ?", (process_id,)
        ).fetchone()
        if row is None:
            raise StateError(f"process {process_id} vanished from the state database")
        offset, depth = row
        if expect_offset is not None and offset != expect_offset:
            raise StateError(
                f"process {process_id}: saved offset moved ({offset} != {expect_offset}); "
                "is a second daemon running on this state directory?"
            )
        counters = {
            hook: Counter(fires, refused)
            for hook, fires, refused in conn.execute(
                "SELECT hook, fires, refused FROM hook_counter WHERE process_id = ?", (process_id,)
            )
        }
        before = dict(counters)
        # A thread is created when this commits, whenever its trigger happened (an exit found
        # at a restart): its created_at, and the rate limiter's window, count from now.
        txn = _Txn(conn, process_id, int(depth), limits, counters, redact, time.time())
        outcomes = [txn.apply(ev) for ev in events]
        for hook, c in counters.items():
            if c != before.get(hook):
                conn.execute(
                    "INSERT INTO hook_counter (process_id, hook, fires, refused)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (process_id, hook) DO UPDATE"
                    " SET fires = excluded.fires, refused = excluded.refused",
                    (process_id, hook, c.fires, c.refused),
                )
        if changes:
            unknown = set(changes) - _PROCESS_COLUMNS
            if unknown:
                raise ValueError(f"not columns of process: {sorted(unknown)}")  # our bug
            cols = ", ".join(f"{name} = ?" for name in changes)
            conn.execute(f"UPDATE process SET {cols} WHERE id = ?", (*changes.values(), process_id))
    return outcomes, counters


def scheduled_start(conn: sqlite3.Connection, at: float, rate: Rate) -> float:
    """When a thread created at `at` may start under the limiter all threads share."""
    # Only starts inside the window can delay this one (indexed on not_before).
    recent = [
        r[0]
        for r in conn.execute(
            "SELECT not_before FROM thread WHERE not_before > ? ORDER BY not_before DESC LIMIT ?",
            (at - rate.per_seconds, rate.count),
        )
    ]
    return not_before(sorted(recent), at, rate)


@dataclass
class _Txn:
    conn: sqlite3.Connection
    process_id: int
    depth: int
    limits: Limits
    counters: dict[str, Counter]
    redact: Callable[[str], str]
    now: float

    def apply(self, ev: FireEvent) -> Outcome:
        ev = _masked(ev, self.redact)
        name, trigger = ev.hook.name, ev.hook.kind
        dup = self.conn.execute("SELECT id FROM fire WHERE key = ?", (ev.key,)).fetchone()
        if dup is not None:
            return Outcome(name, trigger, False, "duplicate", None, False)
        verdict: str
        reason: str | None
        if ev.refuse is not None:
            verdict, reason = "refuse", ev.refuse
        else:
            d = decide(
                self.counters.get(name, Counter()), ev.hook.max_spawns, self.depth, self.limits
            )
            self.counters[name] = d.counter
            verdict, reason = d.verdict, d.reason
        if verdict == "suppress":
            return Outcome(name, trigger, False, reason, None, False)
        spawned = verdict == "spawn"
        fire_id = self._insert(
            "INSERT INTO fire (key, process_id, hook, trigger, at, detail, exit_code, spawned,"
            " reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                ev.key,
                self.process_id,
                name,
                trigger,
                ev.at,
                ev.detail,
                ev.exit_code,
                spawned,
                reason,
            ),
        )
        thread_id = None
        if spawned:
            thread_id = self._new_thread(ev, fire_id)
            self.conn.execute("UPDATE fire SET thread_id = ? WHERE id = ?", (thread_id, fire_id))
        return Outcome(name, trigger, spawned, reason, thread_id, True)

    def _new_thread(self, ev: FireEvent, fire_id: int) -> int:
        start = scheduled_start(self.conn, self.now, self.limits.rate)
        # The fence token is chosen now and the first message saved with the thread, in
        # this transaction: a replay sends the same text, and the process's output never
        # reaches the system prompt (which is `prompt`, the hook file's words only).
        prompt = render_prompt(ev.facts)
        thread_id = self._insert(
            "INSERT INTO thread (process_id, hook, trigger, depth, status, created_at, not_before,"
            " prompt, fire_id) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?)",
            (
                self.process_id,
                ev.hook.name,
                ev.hook.kind,
                self.depth + 1,
                self.now,
                start,
                prompt.system,
                fire_id,
            ),
        )
        self.conn.execute(
            "INSERT INTO entry (thread_id, seq, kind, at, data) VALUES (?, 1, 'user', ?, ?)",
            (thread_id, self.now, json.dumps({"text": prompt.message}, ensure_ascii=False)),
        )
        return thread_id

    def _insert(self, sql: str, params: tuple[Any, ...]) -> int:
        cursor = self.conn.execute(sql, params)
        assert cursor.lastrowid is not None
        return cursor.lastrowid
