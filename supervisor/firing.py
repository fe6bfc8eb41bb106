"""Committing fires: the saved output position, the hook counters, the fire rows and the
new thread rows go in ONE transaction, so a daemon killed at any instant and restarted
neither misses nor repeats a fire.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlmodel import Session, col, select

from agent_threads.spawn import FireFacts, render_prompt
from state.db import Store
from state.errors import StateError
from state.models import FireRow, HookCounter, ProcessRow, ThreadRow
from supervisor.hookspec import Hook, Limits
from supervisor.limits import Counter, decide, not_before


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


@dataclass(frozen=True)
class Outcome:
    hook: str
    trigger: str
    spawned: bool
    reason: str | None
    thread_id: int | None
    recorded: bool


def load_counters(store: Store, process_id: int) -> dict[str, Counter]:
    with store.read() as s:
        rows = s.exec(select(HookCounter).where(HookCounter.process_id == process_id)).all()
    return {r.hook: Counter(r.fires, r.refused) for r in rows}


def commit_fires(
    store: Store,
    process_id: int,
    events: Sequence[FireEvent],
    *,
    limits: Limits,
    expect_offset: int | None,
    update: Callable[[ProcessRow], None],
) -> tuple[list[Outcome], dict[str, Counter]]:
    """Apply the limits to `events` and record everything in one transaction.

    Args:
        store: the state database.
        process_id: whose hooks fired.
        events: the fires, in the order they happened.
        limits: the process's effective limits.
        expect_offset: the saved output offset this work started from; a mismatch means
            another writer moved it, and nothing is written.
        update: changes to the process row that commit with the fires (offset, exit).

    Returns:
        What each event became, and the hook counters after them.
    """
    outcomes: list[Outcome] = []
    with store.write() as s:
        row = s.get(ProcessRow, process_id)
        if row is None:
            raise StateError(f"process {process_id} vanished from the state database")
        if expect_offset is not None and row.log_offset != expect_offset:
            raise StateError(
                f"process {process_id}: saved offset moved ({row.log_offset} != {expect_offset}); "
                "is a second daemon running on this state directory?"
            )
        counters = {
            c.hook: c
            for c in s.exec(select(HookCounter).where(HookCounter.process_id == process_id))
        }
        for ev in events:
            outcomes.append(_apply(s, row, ev, counters, limits))
        for c in counters.values():
            s.add(c)
        update(row)
        s.add(row)
    return outcomes, {h: Counter(c.fires, c.refused) for h, c in counters.items()}


def _apply(
    s: Session, row: ProcessRow, ev: FireEvent, counters: dict[str, HookCounter], limits: Limits
) -> Outcome:
    assert row.id is not None
    hc = counters.get(ev.hook.name)
    if hc is None:
        hc = counters[ev.hook.name] = HookCounter(process_id=row.id, hook=ev.hook.name)
    trigger = ev.hook.kind
    if s.exec(select(FireRow.id).where(FireRow.key == ev.key)).first() is not None:
        return Outcome(ev.hook.name, trigger, False, "duplicate", None, False)
    verdict: str
    reason: str | None
    if ev.refuse is not None:
        verdict, reason = "refuse", ev.refuse
    else:
        d = decide(Counter(hc.fires, hc.refused), ev.hook.max_spawns, row.depth, limits)
        hc.fires, hc.refused = d.counter.fires, d.counter.refused
        verdict, reason = d.verdict, d.reason
    if verdict == "suppress":
        return Outcome(ev.hook.name, trigger, False, reason, None, False)
    fire = FireRow(
        key=ev.key,
        process_id=row.id,
        hook=ev.hook.name,
        trigger=trigger,
        at=ev.at,
        detail=ev.detail,
        exit_code=ev.exit_code,
        spawned=verdict == "spawn",
        reason=reason,
    )
    s.add(fire)
    s.flush()
    thread_id = None
    if verdict == "spawn":
        thread_id = _new_thread(s, row, ev, fire, limits)
        fire.thread_id = thread_id
        s.add(fire)
    return Outcome(ev.hook.name, trigger, verdict == "spawn", reason, thread_id, True)


def _new_thread(s: Session, row: ProcessRow, ev: FireEvent, fire: FireRow, limits: Limits) -> int:
    recent = s.exec(
        select(ThreadRow.not_before)
        .order_by(col(ThreadRow.not_before).desc())
        .limit(limits.rate.count)
    ).all()
    start = not_before(sorted(recent), ev.at, limits.rate)
    thread = ThreadRow(
        process_id=row.id,
        hook=ev.hook.name,
        trigger=ev.hook.kind,
        depth=row.depth + 1,
        status="queued",
        created_at=ev.at,
        not_before=start,
        prompt=render_prompt(ev.facts),
        fire_id=fire.id,
    )
    s.add(thread)
    s.flush()
    assert thread.id is not None
    return thread.id
