"""Running one thread: prepare its loop, run it within its budget, record how it ended.

The wiring that knows about processes and hook files (which model, which permissions, the
RunProcess launcher) is passed in as `prepare`, so this package never imports the
supervisor.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio

from agent_threads.journal import Journal, Redact
from agent_threads.loop import LoopConfig, LoopEnd, run_loop
from agent_threads.transcript import Entry, Note, UserText
from state.db import Store
from state.outbox import ActionWrite
from state.threads import ThreadRecord
from supervise.errors import SuperviseError, ThreadStopped

log = logging.getLogger("supervise.threads")

HOOK_KICKOFF = (
    "The process hook described in your instructions has fired. Deal with it as they say."
)


@dataclass(frozen=True)
class Prepared:
    """A thread ready to run: its loop's configuration and its opening message."""

    cfg: LoopConfig
    first_message: str = HOOK_KICKOFF
    # What to scrub from its transcript, when its tools see secrets the runner's does not
    # know (a process's own environment).
    redact: Redact | None = None


Prepare = Callable[[ThreadRecord], Prepared]
# What a thread's end (or wait for approval) is to tell people: outbox rows recorded with
# the status it moves to, in one transaction (given the thread, how it ended, its entries).
Notices = Callable[[ThreadRecord, LoopEnd, list[Entry]], Sequence[ActionWrite]]


class ThreadRunner:
    """Runs threads by id; `run` never raises for a thread's own failure."""

    def __init__(
        self,
        store: Store,
        prepare: Prepare,
        *,
        redact: Redact = lambda s: s,
        clock: Callable[[], float] = time.time,
        notices: Notices | None = None,
    ) -> None:
        self.store = store
        self.prepare = prepare
        self.redact = redact
        self.clock = clock
        self.notices = notices

    async def run(self, thread_id: int, resumed: bool) -> None:
        journal = Journal(self.store, thread_id, redact=self.redact, clock=self.clock)
        try:
            end = await self._run(journal, resumed)

            def finish() -> bool:
                actions: Sequence[ActionWrite] = ()
                if self.notices is not None:
                    actions = self.notices(journal.info(), end, journal.entries())
                return journal.finish(
                    end.status, error=end.error, waiting=end.waiting, actions=actions
                )

            done = await anyio.to_thread.run_sync(finish)
            if done and journal.requeued:
                log.info("thread t%d: queued again for a message that came as it ended", thread_id)
            elif done:
                log.info("thread t%d: %s%s", thread_id, end.status, _why(end))
        except ThreadStopped as exc:
            log.info("thread t%d stopped: %s", thread_id, exc)

    async def _run(self, journal: Journal, resumed: bool) -> LoopEnd:
        def load() -> tuple[ThreadRecord, Prepared | SuperviseError]:
            info = journal.info()
            try:
                return info, self.prepare(info)
            except SuperviseError as exc:
                return info, exc

        info, prepared = await anyio.to_thread.run_sync(load)  # one hop: they run back to back
        if isinstance(prepared, SuperviseError):
            return LoopEnd("failed", error=str(prepared))
        cfg = prepared.cfg
        if prepared.redact is not None:
            journal.redact = prepared.redact
        await anyio.to_thread.run_sync(journal.record_model, cfg.model.name)
        entries = await anyio.to_thread.run_sync(journal.entries)
        if not entries:
            entries = [
                await anyio.to_thread.run_sync(journal.append, UserText(prepared.first_message))
            ]
        elif resumed:
            note = "resumed from the saved transcript (the daemon restarted, or could not save it)"
            entries.append(await anyio.to_thread.run_sync(journal.append, Note(note)))
        started = info.segment_started_at or self.clock()
        left = started + cfg.budget_s - self.clock()
        with anyio.move_on_after(max(left, 0.0)):
            return await run_loop(journal, cfg, entries, info.turns)
        why = (
            f"wall-clock budget of {cfg.budget_s:g}s used up (agent.timeout or "
            "SUPERVISE_THREAD_TIMEOUT); `supervise thread retry` runs it again"
        )
        await anyio.to_thread.run_sync(journal.append, Note(why))
        return LoopEnd("failed", error=why)


def _why(end: LoopEnd) -> str:
    if end.error:
        return f" ({end.error})"
    if end.waiting:
        return f" (wants {end.waiting})"
    return ""
