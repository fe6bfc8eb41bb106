"""Dispatch: which queued thread runs when. In-process today, behind a small interface.

A thread is claimed (queued -> running) in one UPDATE, so two dispatchers could never run
it twice; a run is `run(thread_id, resumed)`, which is all the loop needs. When dispatch
moves to a durable engine (DBOS over PostgreSQL: workflow id = thread id, its queues for
concurrency and rate), `ThreadRunner.run` stays as it is.

Event-driven: a new thread, a person's approve/send/cancel or a finished run sets `wake`;
the only timer is the next queued thread's not-before time.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskGroup

from state import threads as thread_store
from state.db import Store
from supervise.errors import StateError

log = logging.getLogger("supervise.threads")

IDLE_WAIT_S = 3600.0  # with nothing queued: wake for events only (this bounds the wait)
RETRY_S = 2.0  # a run that could not save its transcript resumes after this

RunFn = Callable[[int, bool], Awaitable[None]]


class Dispatcher:
    def __init__(
        self,
        store: Store,
        run: RunFn,
        *,
        concurrency: int = 4,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.run = run
        self.concurrency = max(1, concurrency)
        self.clock = clock
        self.wake = anyio.Event()
        self.active: dict[int, anyio.CancelScope] = {}

    def poke(self) -> None:
        """Something changed: look at the queue again."""
        self.wake.set()

    async def serve(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async with anyio.create_task_group() as tg:
            task_status.started()
            recovered = False
            failing: str | None = None  # when and why claiming first failed
            while True:
                try:
                    if not recovered:
                        for tid in await anyio.to_thread.run_sync(self._recover):
                            self._start(tg, tid, resumed=True)
                        recovered = True
                    await self._reconcile()
                    free = self.concurrency - len(self.active)
                    claimed, due = await anyio.to_thread.run_sync(self._claim_and_due, free)
                except (StateError, OSError) as exc:
                    # A full disk or a locked database must not take the daemon down with
                    # it: the queue is unchanged (the claim is one statement), so look again.
                    failing = failing or f"{time.strftime('%H:%M:%S')}: {exc}"
                    log.error(
                        "claiming queued threads failed: %s; claiming again in %gs", exc, RETRY_S
                    )
                    free, claimed, due = 0, [], self.clock() + RETRY_S
                else:
                    if failing:
                        log.warning(
                            "claiming queued threads works again (failing since %s)", failing
                        )
                        failing = None
                for tid in claimed:
                    self._start(tg, tid, resumed=False)
                wait = IDLE_WAIT_S if due is None else max(0.0, due - self.clock())
                if free - len(claimed) <= 0 and not failing:
                    wait = IDLE_WAIT_S  # full: a finished run wakes us
                with anyio.move_on_after(min(wait, IDLE_WAIT_S) + 0.005):
                    await self.wake.wait()
                self.wake = anyio.Event()

    def _start(self, tg: TaskGroup, thread_id: int, *, resumed: bool) -> None:
        scope = anyio.CancelScope()
        self.active[thread_id] = scope
        tg.start_soon(self._one, thread_id, resumed, scope)

    async def _one(self, thread_id: int, resumed: bool, scope: anyio.CancelScope) -> None:
        try:
            failing: str | None = None  # when and why a save first failed
            with scope:
                while True:
                    try:
                        await self.run(thread_id, resumed)
                        if failing:
                            # On a full disk the first report could not reach the log either.
                            log.warning(
                                "thread t%d: ran on after failing since %s", thread_id, failing
                            )
                        return
                    except (StateError, OSError) as exc:
                        # A full disk or a locked database: what is saved is consistent
                        # (each entry commits alone), so resume from it once space returns,
                        # as a restarted daemon would. A person's cancel still stops it.
                        failing = failing or f"{time.strftime('%H:%M:%S')}: {exc}"
                        log.error("thread t%d: %s; resuming in %gs", thread_id, exc, RETRY_S)
                        resumed = True
                        await anyio.sleep(RETRY_S)
        except Exception as exc:
            # Our bug: say so on the thread (it can be retried) and keep serving the others.
            log.exception("thread t%d: the runner failed", thread_id)
            with contextlib.suppress(Exception):
                await anyio.to_thread.run_sync(self._fail, thread_id, f"internal error: {exc!r}")
        finally:
            self.active.pop(thread_id, None)
            self.poke()

    def _fail(self, thread_id: int, error: str) -> None:
        thread_store.fail_thread(self.store, thread_id, error, self.clock())

    async def _reconcile(self) -> None:
        """Cancel the runs of threads a person cancelled from the CLI."""
        if not self.active:
            return
        ids = list(self.active)
        found = await anyio.to_thread.run_sync(thread_store.statuses, self.store, ids)
        for tid, status in found.items():
            if status != "running" and tid in self.active:
                log.info("thread t%d is %s: stopping its run", tid, status)
                self.active[tid].cancel()

    def _recover(self) -> list[int]:
        """Threads that were running when the daemon stopped: resume up to the limit."""
        keep = thread_store.requeue_running(self.store, self.concurrency)
        if keep:
            log.info("resuming %d thread(s) that were running", len(keep))
        return keep

    def _claim_and_due(self, free: int) -> tuple[list[int], float | None]:
        # One hop to a worker thread, not two: the loop turns once per finished run.
        claimed = thread_store.claim_next_thread(self.store, free, self.clock())
        return claimed, thread_store.next_due(self.store)
