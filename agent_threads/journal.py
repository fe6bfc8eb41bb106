"""A thread's saved state: its row and its entries, read and written through the Store.

Every append checks, in the same transaction, that the thread is still `running`: a person
who cancels a thread from the CLI stops it at its next save, even before the daemon's task
is cancelled, and nothing is written after the cancel.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_threads.entries import Entry
from state.db import Store
from supervise.errors import StateError, ThreadStopped

TERMINAL = ("completed", "failed", "cancelled")

Redact = Callable[[str], str]


@dataclass(frozen=True)
class ThreadInfo:
    """The thread row's columns the loop and its wiring read."""

    id: int
    status: str
    process_id: int | None
    hook: str | None
    trigger: str
    depth: int
    prompt: str
    model: str | None
    cwd: str | None
    permissions: str | None
    turns: int
    segment_started_at: float | None
    parent_thread_id: int | None
    hooks: str | None


_COLUMNS = ", ".join(ThreadInfo.__dataclass_fields__)


def read_thread(store: Store, thread_id: int) -> ThreadInfo:
    with store.sql_read() as conn:
        row = conn.execute(f"SELECT {_COLUMNS} FROM thread WHERE id = ?", (thread_id,)).fetchone()
    if row is None:
        raise StateError(f"thread t{thread_id} vanished from the state database")
    return ThreadInfo(*row)


def read_entries(store: Store, thread_id: int, after: int = 0) -> list[Entry]:
    with store.sql_read() as conn:
        rows = conn.execute(
            "SELECT seq, kind, at, data FROM entry WHERE thread_id = ? AND seq > ? ORDER BY seq",
            (thread_id, after),
        )
        return [Entry(seq, kind, at, json.loads(data)) for seq, kind, at, data in rows]


def _scalar(conn: sqlite3.Connection, sql: str, *args: Any) -> Any:
    row = conn.execute(sql, args).fetchone()
    return None if row is None else row[0]


def _scrub(value: Any, redact: Redact) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _scrub(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, redact) for v in value]
    return value


class Journal:
    """Appends entries and moves the status of one running thread."""

    def __init__(
        self,
        store: Store,
        thread_id: int,
        *,
        redact: Redact = lambda s: s,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.thread_id = thread_id
        self.redact = redact
        self.clock = clock

    def entries(self) -> list[Entry]:
        return read_entries(self.store, self.thread_id)

    def info(self) -> ThreadInfo:
        return read_thread(self.store, self.thread_id)

    def append(self, kind: str, data: dict[str, Any]) -> Entry:
        """Save one entry; raises ThreadStopped if the thread is no longer running."""
        data = _scrub(data, self.redact)
        at = self.clock()
        with self.store.sql_write() as conn:
            status = _scalar(conn, "SELECT status FROM thread WHERE id = ?", self.thread_id)
            if status != "running":
                raise ThreadStopped(f"thread t{self.thread_id} is {status}")
            seq = _scalar(
                conn,
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM entry WHERE thread_id = ?",
                self.thread_id,
            )
            conn.execute(
                "INSERT INTO entry (thread_id, seq, kind, at, data) VALUES (?, ?, ?, ?, ?)",
                (self.thread_id, seq, kind, at, json.dumps(data, ensure_ascii=False)),
            )
            if kind == "assistant":
                conn.execute("UPDATE thread SET turns = turns + 1 WHERE id = ?", (self.thread_id,))
        return Entry(int(seq or 0), kind, at, data)

    def record_model(self, name: str) -> None:
        """Remember which model a thread got, for `ps` and `thread show`."""
        with self.store.sql_write() as conn:
            conn.execute(
                "UPDATE thread SET model = ? WHERE id = ? AND model IS NULL",
                (name, self.thread_id),
            )

    def finish(self, status: str, *, error: str | None = None, waiting: str | None = None) -> bool:
        """Move a running thread to `status`; False if someone else already moved it."""
        ended = self.clock() if status in TERMINAL else None
        with self.store.sql_write() as conn:
            cur = conn.execute(
                "UPDATE thread SET status = ?, error = ?, waiting = ?, ended_at = ?,"
                " segment_started_at = NULL WHERE id = ? AND status = 'running'",
                (status, error and self.redact(error), waiting, ended, self.thread_id),
            )
            return bool(cur.rowcount)


def append_external(
    store: Store,
    thread_id: int,
    items: Sequence[tuple[str, dict[str, Any]]],
    *,
    allowed: Sequence[str],
    status: str = "queued",
    clock: Callable[[], float] = time.time,
) -> str:
    """Entries a person adds from the CLI (a message, an approval), then requeue the thread.

    Returns the status the thread had; nothing is written unless it was in `allowed`.
    """
    with store.sql_write() as conn:
        before = _scalar(conn, "SELECT status FROM thread WHERE id = ?", thread_id)
        if before is None or before not in allowed:
            return str(before)
        seq = int(
            _scalar(conn, "SELECT COALESCE(MAX(seq), 0) FROM entry WHERE thread_id = ?", thread_id)
            or 0
        )
        now = clock()
        for kind, data in items:
            seq += 1
            conn.execute(
                "INSERT INTO entry (thread_id, seq, kind, at, data) VALUES (?, ?, ?, ?, ?)",
                (thread_id, seq, kind, now, json.dumps(data, ensure_ascii=False)),
            )
        conn.execute(
            "UPDATE thread SET status = ?, error = NULL, waiting = NULL, ended_at = NULL,"
            " turns = CASE WHEN ? THEN 0 ELSE turns END WHERE id = ?",
            (status, before in TERMINAL, thread_id),
        )
    return str(before)
