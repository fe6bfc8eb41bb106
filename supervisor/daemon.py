"""The supervisor loop: watch run dirs, scan output, fire hooks, notice ends, arm timeouts.

Event-driven throughout: watchfiles (inotify) for new output and exit records, a pidfd per
process for a shim that dies without writing one, APScheduler date jobs for timeouts. The
blocking work of one process runs in a worker thread, one process at a time.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import anyio
from anyio.abc import TaskGroup
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from sqlmodel import col, select
from watchfiles import awatch

from state.db import Store
from state.errors import SuperviseError
from state.models import ProcessRow
from state.paths import StatePaths
from supervisor.daemonlock import DaemonLock
from supervisor.tracker import StepResult, Tracker

log = logging.getLogger("supervise.daemon")

WATCH_DEBOUNCE_MS = 100  # at most this long to batch a burst of writes
WATCH_STEP_MS = 5  # a quiet gap this long ends a batch: a lone line is seen within ~10 ms
READY_TIMEOUT_S = 10.0


class Daemon:
    """Owns the trackers and the background tasks; `serve()` runs until cancelled."""

    def __init__(
        self, paths: StatePaths, store: Store, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.paths = paths
        self.store = store
        self.clock = clock
        self.trackers: dict[int, Tracker] = {}
        self.pending: dict[int, set[str]] = {}
        self.wake = anyio.Event()
        self.watch_scopes: dict[int, anyio.CancelScope] = {}
        self.stop = anyio.Event()
        self.scheduler: AsyncIOScheduler | None = None
        self._tg: TaskGroup | None = None

    # -- queueing work ---------------------------------------------------------------------

    def enqueue(self, process_id: int, reason: str = "change") -> None:
        self.pending.setdefault(process_id, set()).add(reason)
        self.wake.set()

    async def serve(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Recover every known process, then follow events until cancelled."""
        self.scheduler = AsyncIOScheduler(event_loop=asyncio.get_running_loop(), timezone=UTC)
        self.scheduler.start()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                ready = anyio.Event()
                tg.start_soon(self._watch, ready)
                await self._await_watcher(ready)
                await self._recover()
                tg.start_soon(self._work)
                task_status.started()
                log.info("daemon ready on %s (pid %d)", self.paths.home, os.getpid())
        finally:
            self.scheduler.shutdown(wait=False)

    async def _recover(self) -> None:
        def load() -> list[int]:
            with self.store.read() as s:
                rows = s.exec(
                    select(ProcessRow.id).where(col(ProcessRow.state).in_(["starting", "running"]))
                ).all()
            return [r for r in rows if r is not None]

        ids = await anyio.to_thread.run_sync(load)
        log.info("recovering %d process(es) not known to have ended", len(ids))
        for pid in ids:
            self.enqueue(pid, "liveness")

    # -- watching files --------------------------------------------------------------------

    async def _watch(self, ready: anyio.Event) -> None:
        probe = self.paths.runs / f".probe-{os.getpid()}"
        async for changes in awatch(
            self.paths.runs,
            watch_filter=None,
            debounce=WATCH_DEBOUNCE_MS,
            step=WATCH_STEP_MS,
            stop_event=self.stop,
            recursive=True,
        ):
            for _change, path in changes:
                if not ready.is_set() and Path(path) == probe:
                    ready.set()
                    probe.unlink(missing_ok=True)
                pid = self._process_of(path)
                if pid is not None:
                    self.enqueue(pid)

    def _process_of(self, path: str) -> int | None:
        try:
            rel = Path(path).relative_to(self.paths.runs)
        except ValueError:
            return None
        head = rel.parts[0] if rel.parts else ""
        return int(head) if head.isdigit() else None

    async def _await_watcher(self, ready: anyio.Event) -> None:
        # The watcher is live once it reports a file we touch; only then is a scan of the
        # database sure to miss nothing (later changes will arrive as events).
        probe = self.paths.runs / f".probe-{os.getpid()}"
        with anyio.fail_after(READY_TIMEOUT_S):
            while not ready.is_set():
                probe.write_text(str(time.time()))
                with anyio.move_on_after(0.05):
                    await ready.wait()

    # -- the worker ------------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            await self.wake.wait()
            self.wake = anyio.Event()
            batch, self.pending = self.pending, {}
            for pid, reasons in batch.items():
                try:
                    res = await anyio.to_thread.run_sync(self._step, pid, reasons)
                except SuperviseError as exc:
                    log.error("process %d: %s", pid, exc)
                    continue
                if res is not None:
                    self._after(pid, res)

    def _step(self, pid: int, reasons: set[str]) -> StepResult | None:
        tracker = self.trackers.get(pid)
        if tracker is None:
            with self.store.read() as s:
                row = s.get(ProcessRow, pid)
            if row is None or row.state in ("exited", "lost"):
                return None
            try:
                tracker = self.trackers[pid] = Tracker(
                    self.store, self.paths, row, clock=self.clock
                )
            except FileNotFoundError:
                return None  # the CLI has not written spec.json yet; its write brings us back
            reasons = reasons | {"liveness"}
        due = [r.split(":", 1)[1] for r in reasons if r.startswith("timeout:")]
        return tracker.step(check_liveness="liveness" in reasons, timeouts_due=due)

    def _after(self, pid: int, res: StepResult) -> None:
        for o in res.outcomes:
            if o.recorded:
                what = f"spawned thread t{o.thread_id}" if o.spawned else f"refused ({o.reason})"
                log.info("process %d: hook %s (%s) fired: %s", pid, o.hook, o.trigger, what)
        if res.ended:
            self._forget(pid)
            return
        for hook, deadline in res.timeouts:
            self._arm_timeout(pid, hook, deadline)
        if res.watch_pid is not None and pid not in self.watch_scopes:
            self._watch_pid(pid, res.watch_pid)

    def _forget(self, pid: int) -> None:
        self.trackers.pop(pid, None)
        scope = self.watch_scopes.pop(pid, None)
        if scope is not None:
            scope.cancel()
        if self.scheduler is not None:
            for job in self.scheduler.get_jobs():
                if job.id.startswith(f"{pid}:"):
                    job.remove()

    # -- timeouts --------------------------------------------------------------------------

    def _arm_timeout(self, pid: int, hook: str, deadline: float) -> None:
        if deadline <= self.clock():
            self.enqueue(pid, f"timeout:{hook}")
            return
        assert self.scheduler is not None
        self.scheduler.add_job(
            self._timeout_due,
            "date",
            run_date=datetime.fromtimestamp(deadline, UTC),
            args=[pid, hook],
            id=f"{pid}:{hook}",
            replace_existing=True,
            misfire_grace_time=None,
        )

    async def _timeout_due(self, pid: int, hook: str) -> None:
        self.enqueue(pid, f"timeout:{hook}")

    # -- a process's end without an exit record -------------------------------------------

    def _watch_pid(self, pid: int, os_pid: int) -> None:
        try:
            fd = os.pidfd_open(os_pid)
        except (ProcessLookupError, OSError):
            self.enqueue(pid, "liveness")
            return
        scope = anyio.CancelScope()
        self.watch_scopes[pid] = scope
        assert self._tg is not None
        self._tg.start_soon(self._await_pid, pid, fd, scope)

    async def _await_pid(self, pid: int, fd: int, scope: anyio.CancelScope) -> None:
        try:
            with scope:
                await anyio.wait_readable(fd)
                self.watch_scopes.pop(pid, None)
                self.enqueue(pid, "liveness")
        finally:
            anyio.notify_closing(fd)
            os.close(fd)


def _raise_fd_limit() -> None:
    # One pidfd per supervised process: 1,000 processes outgrow the usual soft limit of 1,024.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, 1 << 20), hard))


def run_daemon(paths: StatePaths) -> int:
    """`supervise daemon`: hold the lock, recover, serve until SIGTERM or SIGINT."""
    paths.ensure()
    lock = DaemonLock(paths.daemon_pid)
    lock.acquire()
    _raise_fd_limit()
    store = Store(paths.db)
    daemon = Daemon(paths, store)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.serve)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info(
                        "received %s; stopping (supervised processes keep running)",
                        signal.Signals(signum).name,
                    )
                    daemon.stop.set()
                    tg.cancel_scope.cancel()
                    break

    try:
        anyio.run(main)
    finally:
        store.close()
        lock.release()
    return 0


def configure_logging(level: int = logging.INFO) -> None:
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S"
    )
    # Their per-batch chatter would drown ours.
    logging.getLogger("watchfiles").setLevel(logging.WARNING)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
