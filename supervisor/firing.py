"""Committing fires: what each fire becomes (the limits decide), then ONE transaction of the
state layer (`state.fires.commit_fires`) records it with the output position, the hook
counters, the new threads and the process's end, so a daemon killed at any instant and
restarted neither misses nor repeats a fire.

An end also asks the restart policy (supervisor/restarts.py) what follows, on the chain's
history read in that same transaction: the next run is recorded with the end, or the end is
a crash loop and the on_crash_loop fires go with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import cast

from agent_threads.spawn import FireFacts, render_prompt, render_repeat
from state import fires
from state.counters import Counter
from state.db import Store
from state.fires import FirePlan, FireWrite, JoinThread, PlanInput, RestartPlan
from state.outbox import ActionWrite
from state.processes import ProcessEnd, TailState
from state.repeats import SeenThread
from state.runs import NextRun, RunHistory, RunRow
from state.threads import NewThread
from supervisor import dedup, restarts
from supervisor.ending import RUN_DIR_GONE
from supervisor.hookspec import Hook, Limits
from supervisor.limits import Verdict, decide
from supervisor.notices import ProcessFacts, Route, crash_loop_actions, fire_actions
from supervisor.redaction import redact_text
from supervisor.restarts import CrashLoop, Decision, Restart, RestartSpec, RunFact
from supervisor.triggers import FireKey


@dataclass(frozen=True)
class FireEvent:
    """A hook's trigger happened; `key` makes it unique across restarts."""

    hook: Hook
    key: FireKey
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
    key: FireKey  # the fire's key: which thread a recorded one spawned


@dataclass(frozen=True)
class RestartStep:
    """What an end's commit needs to decide whether a next run follows."""

    spec: RestartSpec | None  # the process's policy (None: `no`)
    crash_keys: Sequence[FireKey]  # the on_crash_loop fires a crash loop would make
    crash_events: Callable[[CrashLoop], list[FireEvent]]  # ... and the fires themselves
    # The run was started in an earlier boot than this one: a reboot ended it, and
    # `restarts.after_reboot` decides (autostart: the program's, None for any other process).
    rebooted: bool = False
    autostart: bool | None = None


@dataclass(frozen=True)
class Notify:
    """Whom a process's fires and crash loop tell, and how they name it (notices.py)."""

    proc: ProcessFacts
    route: Route


@dataclass(frozen=True)
class EndCommitted:
    outcomes: list[Outcome]
    counters: dict[str, Counter]
    decision: Decision | None  # what the restart policy decided (None: not asked)
    next_run: int | None  # the id of the run recorded after this one


def run_fact(row: RunRow) -> RunFact:
    """A run's row as the restart decision sees it: any end but success is a failure."""
    cause: restarts.Cause = "run"
    for known in restarts.CAUSES:
        if row.cause == known:
            cause = known
    ended = row.ended_at if row.ended_at is not None else row.started_at
    return RunFact(row.started_at, ended, row.result != "success", cause)


def plan_restart(
    spec: RestartSpec | None,
    history: RunHistory,
    *,
    rebooted: bool = False,
    autostart: bool | None = None,
) -> tuple[Decision, RestartPlan]:
    """What follows the last run of `history` (pure): the decision and what to record."""
    last = history.runs[-1]
    stop: restarts.StopRequest | None = None
    if history.stop_request in ("stop", "restart", "hook"):
        stop = cast(restarts.StopRequest, history.stop_request)
    decision: Decision
    if rebooted and last.end_reason != RUN_DIR_GONE:
        decision = restarts.after_reboot(spec, autostart=autostart, stop=stop)
    else:
        decision = restarts.decide(
            spec,
            [run_fact(r) for r in history.runs],
            stop=stop,
            # A run dir deleted under it: someone removed the process on purpose.
            restartable=last.end_reason != RUN_DIR_GONE,
        )
    if isinstance(decision, Restart):
        # A boot start is due when the run ended: already past, so at once.
        at = (last.ended_at or 0.0) if decision.cause == "boot" else decision.at
        return decision, RestartPlan(NextRun(at, decision.cause, decision.after_thread))
    if isinstance(decision, CrashLoop):
        return decision, RestartPlan(state="crash-loop")
    return decision, RestartPlan()


def commit_fires(
    store: Store,
    process_id: int,
    events: Sequence[FireEvent],
    *,
    limits: Limits,
    expect_offset: int | None,
    tail: TailState | None = None,
    end: ProcessEnd | None = None,
    redact: Callable[[str], str] = redact_text,
    notify: Notify | None = None,
) -> tuple[list[Outcome], dict[str, Counter]]:
    """Apply the limits to `events` and record everything in one transaction.

    Args:
        store: the state database.
        process_id: whose hooks fired.
        events: the fires, in the order they happened.
        limits: the process's effective limits.
        expect_offset: the saved output offset this work started from; a mismatch means
            another writer moved it, and nothing is written.
        tail: the tailing bookkeeping that commits with the fires.
        end: how the process ended, if it did.
        redact: masks credentials in what the fires save (default: by their form alone).

    Returns:
        What each event became, and the hook counters after them.

    Raises:
        StateError: the process is not recorded, or its saved offset moved.
    """
    done = commit_end(
        store,
        process_id,
        events,
        limits=limits,
        expect_offset=expect_offset,
        tail=tail,
        end=end,
        redact=redact,
        notify=notify,
    )
    return done.outcomes, done.counters


def commit_end(
    store: Store,
    process_id: int,
    events: Sequence[FireEvent],
    *,
    limits: Limits,
    expect_offset: int | None,
    tail: TailState | None = None,
    end: ProcessEnd | None = None,
    redact: Callable[[str], str] = redact_text,
    restart: RestartStep | None = None,
    notify: Notify | None = None,
) -> EndCommitted:
    """`commit_fires`, and with an end and a `restart` step, what follows it: the next run
    recorded, or a crash loop with its on_crash_loop fires, in the same transaction."""
    masked = [_masked(ev, redact) for ev in events]
    outcomes: list[Outcome] = []
    decided: list[Decision] = []

    def after_end(history: RunHistory) -> RestartPlan:
        decided.clear()  # run again when PostgreSQL retries the transaction
        assert restart is not None
        decision, plan = plan_restart(
            restart.spec, history, rebooted=restart.rebooted, autostart=restart.autostart
        )
        decided.append(decision)
        return plan

    def plan(given: PlanInput) -> FirePlan:
        outcomes.clear()  # run again when PostgreSQL retries the transaction
        todo = masked
        if restart is not None and decided and isinstance(decided[0], CrashLoop):
            todo = masked + [_masked(ev, redact) for ev in restart.crash_events(decided[0])]
        # A thread is created when this commits, whenever its trigger happened (an exit found
        # at a restart): its created_at, and the rate limiter's window, count from now.
        planned = _plan(todo, given, limits, time.time(), notify)
        outcomes.extend(planned.outcomes)
        loop: tuple[ActionWrite, ...] = ()
        if notify is not None and decided and isinstance(decided[0], CrashLoop):
            loop = crash_loop_actions(notify.proc, notify.route, decided[0].text())
        return FirePlan(planned.writes, planned.counters, loop)

    keys = [ev.key.text for ev in masked]  # the key's text is what the database holds
    if restart is not None:
        keys += [k.text for k in restart.crash_keys]
    # (The on_crash_loop fires of a crash loop are made inside the transaction, after this
    # lookup: they are never deduplicated.)
    dedup_keys = [k for ev in masked if (k := _lookup(ev)) is not None]
    done = fires.commit_fires(
        store,
        process_id,
        keys,
        plan,
        rate=limits.rate,
        expect_offset=expect_offset,
        tail=tail,
        end=end,
        restart=after_end if restart is not None else None,
        restart_policy=restart is not None
        and (
            (restart.spec is not None and restart.spec.policy != "no")
            or (restart.rebooted and restart.autostart is True)
        ),
        dedup_keys=dedup_keys,
    )
    thread_of = {f.key: f.thread_id for f in done.fires}
    result = [
        replace(o, thread_id=thread_of.get(o.key.text)) if o.recorded else o for o in outcomes
    ]
    return EndCommitted(result, done.counters, decided[0] if decided else None, done.next_run)


@dataclass(frozen=True)
class _Planned:
    outcomes: list[Outcome]
    writes: list[FireWrite]
    counters: dict[str, Counter]


def _occurrence(ev: FireEvent) -> dedup.Occurrence:
    f = ev.facts
    return dedup.Occurrence(ev.hook.name, ev.hook.kind, ev.exit_code, f.signal, f.matched_line)


def _lookup(ev: FireEvent) -> str | None:
    """The dedup key `ev` looks an open thread up by (None: its hook has no `dedup:`)."""
    if ev.hook.dedup is None or ev.refuse is not None:
        return None
    return dedup.lookup_key(ev.hook.dedup, _occurrence(ev))


def _in_plan(write: int, now: float) -> SeenThread:
    # A thread this plan creates, as a repeat later in the same plan sees it: its id is not
    # known yet, so it is named by its write's index, as a negative id (-1: write 0).
    return SeenThread(-(write + 1), True, now, None, 1)


def _join(verdict: dedup.Join, ev: FireEvent) -> JoinThread:
    message = None
    if verdict.tell:
        when = time.strftime("%H:%M:%S", time.localtime(ev.at))
        last = verdict.nth - 1 == dedup.MAX_REPEAT_MESSAGES
        message = render_repeat(ev.facts, nth=dedup.ordinal(verdict.nth), when=when, last=last)
    if verdict.thread_id < 0:
        return JoinThread(write=-verdict.thread_id - 1, message=message)
    return JoinThread(thread_id=verdict.thread_id, message=message)


def _repeat(ev: FireEvent, threads: dict[str, SeenThread]) -> FireWrite | None:
    """A repeat of a failure (a hook's `dedup:`): the fire that joins its open thread
    (`deduplicated`) or falls in its cooldown (`cooldown`); None: neither, the limits decide.
    A join counts in `threads`, under every key that names its thread."""
    look = _lookup(ev)
    if look is None or ev.hook.dedup is None:
        return None
    verdict = dedup.decide(ev.hook.dedup, threads.get(look), ev.at)
    if isinstance(verdict, dedup.Fresh):
        return None
    reason = "deduplicated" if isinstance(verdict, dedup.Join) else "cooldown"
    write = FireWrite(ev.key.text, ev.hook.name, ev.hook.kind, ev.at, ev.detail, ev.exit_code)
    if isinstance(verdict, dedup.Cooldown):
        return replace(write, reason=reason, about_thread=verdict.thread_id)
    for key, known in threads.items():
        if known.thread_id == verdict.thread_id:
            threads[key] = replace(known, fires=verdict.nth)
    return replace(write, reason=reason, join=_join(verdict, ev))


def _plan(
    events: Sequence[FireEvent],
    given: PlanInput,
    limits: Limits,
    now: float,
    notify: Notify | None = None,
) -> _Planned:
    """What each event becomes, given the counters, the keys already recorded and the
    threads its dedup keys name. Pure but for the fence token the prompt draws. A repeat
    that joins a thread acts on nothing: telling its thread is the point of `dedup:`."""
    counters = dict(given.counters)
    seen = set(given.recorded)
    threads = dict(given.seen)  # by dedup key: what a repeat would join, as the plan goes
    outcomes, writes = [], []
    for ev in events:
        name, trigger = ev.hook.name, ev.hook.kind
        if ev.key.text in seen:
            outcomes.append(Outcome(name, trigger, False, "duplicate", None, False, ev.key))
            continue
        repeat = _repeat(ev, threads)
        if repeat is not None:
            seen.add(ev.key.text)
            writes.append(repeat)
            outcomes.append(Outcome(name, trigger, False, repeat.reason, None, True, ev.key))
            continue
        verdict: Verdict
        reason: str | None
        if ev.refuse is not None:
            verdict, reason = "refuse", ev.refuse
        else:
            d = decide(counters.get(name, Counter()), ev.hook.max_spawns, given.depth, limits)
            counters[name] = d.counter
            verdict, reason = d.verdict, d.reason
        if verdict == "suppress":
            outcomes.append(Outcome(name, trigger, False, reason, None, False, ev.key))
            continue
        seen.add(ev.key.text)
        # A hook with no instructions has no agent: its fire only acts.
        spawns = verdict == "spawn" and ev.hook.spawns_thread
        thread = _new_thread(ev, given.depth, now) if spawns else None
        actions = _actions(ev, notify, spawns) if verdict == "spawn" else ()
        if thread is not None:
            # What a later repeat in this plan joins: by its own key, and as any thread.
            made = _in_plan(len(writes), now)
            threads[dedup.ANY_THREAD] = made
            if thread.dedup_key is not None:
                threads[thread.dedup_key] = made
        writes.append(
            FireWrite(
                ev.key.text,
                name,
                trigger,
                ev.at,
                ev.detail,
                ev.exit_code,
                reason,
                thread,
                actions=actions,
            )
        )
        outcomes.append(Outcome(name, trigger, thread is not None, reason, None, True, ev.key))
    return _Planned(outcomes, writes, counters)


def _actions(ev: FireEvent, notify: Notify | None, spawns: bool) -> tuple[ActionWrite, ...]:
    """A fire's actions: its hook's own `run:` and `restart:` even without settings."""
    if notify is None:
        return ()
    return fire_actions(
        ev.hook,
        notify.proc,
        notify.route,
        detail=ev.detail,
        exit_code=ev.exit_code,
        matched_line=ev.facts.matched_line,
        tail=ev.facts.output_tail,
        spawns=spawns,
        at=ev.at,
    )


def _new_thread(ev: FireEvent, depth: int, now: float) -> NewThread:
    # The fence token is chosen now and the first message saved with the thread, in the
    # fire's transaction: a replay sends the same text, and the process's output never
    # reaches the system prompt (which is `prompt`, the hook file's words only).
    prompt = render_prompt(ev.facts)
    spec = ev.hook.dedup
    return NewThread(
        trigger=ev.hook.kind,
        depth=depth + 1,
        prompt=prompt.system,
        first_message=prompt.message,
        created_at=now,
        hook=ev.hook.name,
        dedup_key=None if spec is None else dedup.dedup_key(spec, _occurrence(ev)),
    )
