"""The supervisor loop: watch run dirs, scan output, fire hooks, notice ends, arm timeouts.

Event-driven throughout: a pidfd per process for its end (the shim writes exit.json, then
exits), event-loop timers for timeouts and retries (monotonic: a wall-clock step moves none),
and inotify for the rest. The blocking work runs in a worker thread, processes one after
the other.

Output is read in coalesced batches, because a watch costs the writer: with an IN_MODIFY
watch on output.log (or any inotify watch on its folder) every write() of the child pays
the kernel's notification, and a child that writes a line at a time ran 1.5x slower with
nobody even reading the events (bench/). So a run dir is watched only until its process has
started, and output.log is in one of two states:
- busy: the last read found new bytes. No watch at all; the next output batch reads it again
  (for a process writing over 1 MB/s, the first batch 100 ms on: `coalesce.read_delay`).
- idle: the last read found nothing. A one-shot IN_MODIFY watch is armed, then the file is
  read once more (a write may have come between); the first write after that costs the
  writer one event and makes the process busy again.
Output batches start no sooner than `coalesce.next_gap` after the last one ended, which
keeps the daemon's share of a core small however many processes write; a quiet daemon has
every process idle and does nothing.

Restarts: a run the restart policy recorded after an exit (`backoff`) is stepped like any
process: `restarts.start_due` says whether it may start, and it is started (launch.start_run)
or given a timer for its due time; one waiting for threads (`restart.after_thread`) is looked
at again when a thread ends. Recovery finds pending runs in the database, so a restart
decided before a SIGKILL is started once by the next daemon.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import shutil
import signal
import time
from collections.abc import Callable, Mapping

import anyio
from anyio.abc import TaskGroup

from agent_threads.dispatch import Dispatcher
from agent_threads.runner import ThreadRunner
from state.counters import Counter, load_active_counters
from state.db import Store, open_state_store
from state.paths import StatePaths
from state.processes import (
    ENDED,
    ProcessRecord,
    active_processes,
    forget_process,
    get_process,
)
from state.runs import pending_runs, unfinished_exit_threads
from state.settings import Settings
from supervise.errors import LaunchError, StateError, SuperviseError
from supervisor import resources, restarts, wakes
from supervisor.coalesce import next_gap, read_delay
from supervisor.daemonlock import DaemonLock
from supervisor.ending import NOT_STARTED
from supervisor.firing import Outcome
from supervisor.hookspec import OnResource
from supervisor.inotify import (
    IN_CLOSE_WRITE,
    IN_CREATE,
    IN_DELETE,
    IN_IGNORED,
    IN_MODIFY,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_ONESHOT,
    IN_ONLYDIR,
    IN_Q_OVERFLOW,
    Event,
    Inotify,
)
from supervisor.launch import launched, start_run
from supervisor.limits import exhausted
from supervisor.notices import Route, ThreadNotices
from supervisor.outbox import Outbox
from supervisor.redaction import RedactingFilter, make_redact
from supervisor.sampler import Sampler
from supervisor.threadhost import ThreadHost
from supervisor.tracker import RUN_DIR_GONE, StepResult, Tracker, lose_unknown
from supervisor.wakes import (
    CHANGE,
    LIVENESS,
    OUTPUT,
    ResourceDue,
    ScheduleDue,
    SilenceDue,
    TimeoutDue,
    Timer,
    Wake,
)

log = logging.getLogger("supervise.daemon")

STEP_SLICE_S = 0.02  # one worker hop steps processes for this long, then the loop runs
CATCH_UP_S = 30.0  # threads wait at most this long for recovery's first pass
RETRY_S = 2.0  # after a failed step (disk full, database locked): try that process again
MAX_TIMER_S = 60.0  # a timeout timer wakes at least this often (see _arm_timeout)
COALESCE_S = 0.001  # after a wake-up, let a burst of control events collapse
# No IN_MODIFY: output has its own one-shot watch (see the module's docstring).
RUN_DIR_EVENTS = IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE
OUTPUT_EVENTS = IN_MODIFY | IN_ONESHOT
QUIET_FILES = {"recorded", "attached"}  # no news about the process


class Daemon:
    """Owns the trackers and the background tasks; `serve()` runs until cancelled."""

    def __init__(
        self,
        paths: StatePaths,
        store: Store,
        *,
        settings: Settings,
        env: Mapping[str, str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`env` is the daemon's environment: the model providers' keys, and what tools
        get when a thread has no process of its own."""
        self.paths = paths
        self.settings = settings
        host = ThreadHost(store, paths, settings, env)
        self.route = Route.of(settings.notify)
        runner = ThreadRunner(
            store,
            host.prepare,
            redact=make_redact(env),
            clock=clock,
            notices=ThreadNotices(store, self.route),
        )
        self.outbox = Outbox(
            store, paths, settings.notify, env=env, restarted=self.enqueue, clock=clock
        )

        async def run_thread(thread_id: int, resumed: bool) -> None:
            try:
                await runner.run(thread_id, resumed)
            finally:
                self.outbox.poke()  # its approval or end may notify
                self._thread_ended()

        self.dispatcher = Dispatcher(
            store, run_thread, concurrency=self.settings.max_threads, clock=clock
        )
        self.store = store
        self.clock = clock
        self.trackers: dict[int, Tracker] = {}
        self.prefetched: dict[int, ProcessRecord] = {}
        self.prefetched_counters: dict[int, dict[str, Counter]] = {}
        self.max_log_bytes = settings.max_log_bytes
        self.pending: dict[int, set[Wake]] = {}
        self.wake = anyio.Event()
        self.caught_up = anyio.Event()
        self.failing: dict[int, str] = {}  # process id -> when and why its step first failed
        self.watch_scopes: dict[int, anyio.CancelScope] = {}
        self.inotify = Inotify()  # control: runs/, the home dir, run dirs until started
        self.runs_wd = -1
        self.home_wd = -1
        self.watched: dict[int, int] = {}  # process id -> watch descriptor
        self.wd_pid: dict[int, int] = {}
        self.outputs = Inotify()  # one-shot watches on output.log, read in batches
        self.out_wd: dict[int, int] = {}  # process id -> its armed (unfired) output watch
        self.out_wd_pid: dict[int, int] = {}
        # Read again in the first output batch from the given monotonic time (the docstring).
        self.busy: dict[int, float] = {}
        self.last_read: dict[int, float] = {}  # monotonic time of each busy process's last read
        self.output_ready = False
        self.output_drained = anyio.Event()
        self.output_due = 0.0  # monotonic time before which output is not read again
        self.timers: dict[tuple[int, Timer], asyncio.TimerHandle] = {}  # (process id, timer)
        # Pending runs waiting for the threads of the exit before them (restart.after_thread).
        self.waiting_runs: set[int] = set()
        self.rescan_runs = False  # the CLI wrote `wake`: a run may have been recorded
        # on_resource: each (process, hook)'s stretch over its threshold, between samples;
        # the sampler sleeps on `sample_wake` while no tracked process has such a hook.
        self.stretches: dict[tuple[int, str], resources.Stretch] = {}
        self.sample_wake = anyio.Event()
        self._tg: TaskGroup | None = None

    # -- queueing work ---------------------------------------------------------------------

    def enqueue(self, process_id: int, reason: Wake = CHANGE) -> None:
        self.pending.setdefault(process_id, set()).add(reason)
        self.wake.set()

    async def serve(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Recover every known process, then follow events until cancelled."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                # Watches are live when added: recovery's scan then misses nothing.
                self._watch_runs()
                await self._recover()
                tg.start_soon(self._read_events)
                tg.start_soon(self._watch_outputs)
                tg.start_soon(self._work)
                tg.start_soon(self._sample_resources)
                # Settle what happened while the daemon was down before threads start: the
                # catch-up's commits would compete with their runs (1,000 processes: +1 s).
                if not self.pending:
                    self.caught_up.set()
                with anyio.move_on_after(CATCH_UP_S):
                    await self.caught_up.wait()
                await tg.start(self.dispatcher.serve)
                tg.start_soon(self.outbox.serve)
                task_status.started()
                log.info("daemon ready on %s (pid %d)", self.paths.home, os.getpid())
        finally:
            for timer in self.timers.values():
                timer.cancel()
            self.inotify.close()
            self.outputs.close()
            for tracker in self.trackers.values():
                tracker.close()

    async def _recover(self) -> None:
        def load() -> tuple[list[int], list[int]]:
            # One query for all: a thousand single-row reads cost seconds at start-up.
            self.prefetched = {r.id: r for r in active_processes(self.store)}
            counters = load_active_counters(self.store)
            self.prefetched_counters = {pid: counters.get(pid, {}) for pid in self.prefetched}
            active = list(self.prefetched)
            pending = pending_runs(self.store)  # restarts decided, not started yet
            self.prefetched.update({r.id: r for r in pending})
            return active, [r.id for r in pending]

        ids, pending = await anyio.to_thread.run_sync(load)
        log.info("recovering %d process(es) not known to have ended", len(ids))
        if pending:
            log.info("%d restart(s) pending", len(pending))
        for pid in ids:
            self._watch_dir(pid)
            self.enqueue(pid, LIVENESS)
        for pid in pending:
            self.enqueue(pid)

    def _thread_ended(self) -> None:
        """A thread ended: the runs waiting for their exit's threads may start."""
        for pid in self.waiting_runs:
            self.enqueue(pid)
        self.waiting_runs.clear()

    # -- watching files --------------------------------------------------------------------

    def _watch_runs(self) -> None:
        # A run dir deleted or moved away must not leave its process "running" forever.
        self.runs_wd = self.inotify.add(
            str(self.paths.runs), IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR
        )
        # The CLI writes `wake` after it queued, approved or cancelled a thread.
        self.home_wd = self.inotify.add(str(self.paths.home), IN_CLOSE_WRITE | IN_MOVED_TO)

    def _watch_dir(self, pid: int) -> None:
        if pid in self.watched:
            return
        try:
            wd = self.inotify.add(str(self.paths.run_dir(pid)), RUN_DIR_EVENTS)
        except OSError:
            return  # not created yet: its IN_CREATE in runs/ brings us back
        self.watched[pid] = wd
        self.wd_pid[wd] = pid

    def _unwatch_dir(self, pid: int) -> None:
        wd = self.watched.pop(pid, None)
        if wd is not None:
            self.wd_pid.pop(wd, None)
            self.inotify.remove(wd)

    def _arm_output(self, pid: int) -> bool:
        """Watch output.log for its next write (once); False if it is not there yet."""
        if pid in self.out_wd:
            return True  # armed, and nothing was written since
        tracker = self.trackers.get(pid)
        # The file the child writes to, wherever logrotate renamed it (tracker.py).
        if tracker is not None:
            path = tracker.output_watch_path
        else:
            path = str(self.paths.run_dir(pid) / "output.log")
        try:
            wd = self.outputs.add(path, OUTPUT_EVENTS)
        except OSError:
            return False  # not created yet: the run dir's watch brings us back
        self.out_wd[pid] = wd
        self.out_wd_pid[wd] = pid
        return True

    def _settle_output(self, pid: int, res: StepResult) -> None:
        """After a read: busy if it found bytes; else idle, which a last read confirms."""
        if res.read_output:
            now = time.monotonic()
            since = now - self.last_read.get(pid, now)
            self.busy[pid] = now + read_delay(res.read_bytes, since)
            self.last_read[pid] = now
        elif pid not in self.out_wd and self._arm_output(pid):
            self.busy[pid] = 0.0
        else:
            self.last_read.pop(pid, None)

    def _disarm_output(self, pid: int) -> None:
        wd = self.out_wd.pop(pid, None)
        if wd is not None:
            self.outputs.remove(wd)

    async def _watch_outputs(self) -> None:
        # Says that output waits, without reading it: the worker reads the events when the
        # gap allows, and until then the kernel holds them at no cost.
        while True:
            await anyio.wait_readable(self.outputs.fd)
            self.output_ready = True
            self.wake.set()
            await self.output_drained.wait()
            self.output_drained = anyio.Event()

    def _output_waits(self) -> bool:
        return self.output_ready or bool(self.busy)

    def _output_due(self) -> float:
        """When the next output batch may start: the gap after the last one, and for busy
        processes alone, the first of their own read times."""
        if self.output_ready or not self.busy:
            return self.output_due
        return max(self.output_due, min(self.busy.values()))

    def _take_outputs(self, batch: dict[int, set[Wake]]) -> None:
        """Add an output read for each busy process and each one written to since its watch
        was armed."""
        now = time.monotonic()
        for pid in [p for p, due in self.busy.items() if due <= now]:
            del self.busy[pid]
            batch.setdefault(pid, set()).add(OUTPUT)
        if not self.output_ready:
            return
        self.output_ready = False
        for ev in self.outputs.read():
            if ev.mask & IN_Q_OVERFLOW:
                log.warning("inotify queue overflowed; reading every tracked process's output")
                self.out_wd.clear()
                for tracked in self.trackers:
                    batch.setdefault(tracked, set()).add(OUTPUT)
            elif ev.mask & IN_IGNORED:
                self.out_wd_pid.pop(ev.wd, None)  # the one-shot watch is gone
            elif (owner := self.out_wd_pid.get(ev.wd)) is not None:
                if self.out_wd.get(owner) == ev.wd:
                    del self.out_wd[owner]
                batch.setdefault(owner, set()).add(OUTPUT)
        self.output_drained.set()

    async def _read_events(self) -> None:
        while True:
            await anyio.wait_readable(self.inotify.fd)
            for ev in self.inotify.read():
                self._on_event(ev)
            # Let a burst of writes collapse: the kernel merges identical unread events.
            await anyio.sleep(COALESCE_S)

    def _on_event(self, ev: Event) -> None:
        if ev.mask & IN_Q_OVERFLOW:
            log.warning("inotify queue overflowed; rescanning every tracked process")
            for pid in list(self.watched):
                self.enqueue(pid)
            return
        if ev.wd == self.home_wd:
            if ev.name == self.paths.wake.name:
                self.dispatcher.poke()
                # `supervise restart` recorded a run, or a person cancelled a thread a
                # pending run waits for.
                self.rescan_runs = True
                self.wake.set()
            return
        if ev.wd == self.runs_wd:
            if ev.name.isdigit() and ev.mask & (IN_DELETE | IN_MOVED_FROM):
                self.enqueue(int(ev.name), LIVENESS)  # its step finds the run dir gone
            elif ev.name.isdigit():
                self._watch_dir(int(ev.name))
                self.enqueue(int(ev.name))
            return
        owner = self.wd_pid.get(ev.wd)
        if owner is None:
            return
        if ev.mask & IN_IGNORED:
            self.watched.pop(owner, None)
            self.wd_pid.pop(ev.wd, None)
        elif ev.name not in QUIET_FILES and not ev.name.endswith(".tmp"):
            self.enqueue(owner)

    # -- the worker ------------------------------------------------------------------------

    async def _wait_for_work(self) -> bool:
        """Until there is work; whether output is due. Any other work (an end, a timeout, a
        new process) runs at once; output waits for the gap after the last output batch."""
        while True:
            due = self._output_waits() and time.monotonic() >= self._output_due()
            if self.pending or due or self.rescan_runs:
                return due
            if not self._output_waits():
                await self.wake.wait()
            else:
                # A timer that sets the event, not a cancel scope: a busy writer ends a wait
                # every gap, and anyio's cancellation cost ~0.2 ms of the loop's CPU each time.
                wait = max(0.0, self._output_due() - time.monotonic())
                timer = asyncio.get_running_loop().call_later(wait, self.wake.set)
                try:
                    await self.wake.wait()
                finally:
                    timer.cancel()
            self.wake = anyio.Event()

    async def _work(self) -> None:
        while True:
            output = await self._wait_for_work()
            if self.rescan_runs:
                self.rescan_runs = False
                for row in await anyio.to_thread.run_sync(pending_runs, self.store):
                    self.enqueue(row.id)
            batch, self.pending = self.pending, {}
            if output:
                self._take_outputs(batch)
            items = list(batch.items())
            cpu = 0.0
            while items:
                done, used = await anyio.to_thread.run_sync(self._steps, items)
                cpu += used
                items = items[len(done) :]
                for pid, res in done:
                    if isinstance(res, Exception):
                        self._failed(pid, res)
                        continue
                    if pid in self.failing:
                        # Said again once it works: on a full disk the first report could not
                        # be written to daemon.log either.
                        log.warning(
                            "process %d: saved again (failing since %s)", pid, self.failing.pop(pid)
                        )
                    if res is not None:
                        self._after(pid, res)
            if output:
                self.output_due = time.monotonic() + next_gap(cpu)
            self.caught_up.set()  # the first batch holds every process recovery found

    def _steps(
        self, items: list[tuple[int, set[Wake]]]
    ) -> tuple[list[tuple[int, StepResult | Exception | None]], float]:
        """Step processes in order for one slice of time: a hop to a worker thread per
        process cost more than most steps (a thousand at recovery). Also returns the CPU
        seconds reading took (commits left out: a fire must not delay the next reads)."""
        done: list[tuple[int, StepResult | Exception | None]] = []
        cpu0 = time.thread_time()
        until = time.monotonic() + STEP_SLICE_S
        for pid, reasons in items:
            try:
                done.append((pid, self._step(pid, reasons)))
            except Exception as exc:
                done.append((pid, exc))
            if time.monotonic() >= until:
                break
        used = time.thread_time() - cpu0
        return done, used - sum(r.commit_cpu_s for _, r in done if isinstance(r, StepResult))

    def _failed(self, pid: int, exc: Exception) -> None:
        # A full disk, a locked database, our bug: one process's trouble must not stop the
        # others. Its tracker may have moved past work that was never committed, so it is
        # rebuilt from the saved state, as after a crash.
        self.failing.setdefault(pid, f"{time.strftime('%H:%M:%S')}: {exc}")
        if isinstance(exc, SuperviseError):
            log.error("process %d: %s; retrying in %gs", pid, exc, RETRY_S)
        else:
            log.error("process %d: step failed; retrying in %gs", pid, RETRY_S, exc_info=exc)
        self._drop_tracker(pid)
        self._arm_after(pid, LIVENESS, RETRY_S, "retry")

    def _drop_tracker(self, pid: int) -> None:
        tracker = self.trackers.pop(pid, None)
        if tracker is not None:
            tracker.close()

    def _step(self, pid: int, reasons: set[Wake]) -> StepResult | None:
        tracker = self.trackers.get(pid)
        if tracker is not None and wakes.only_output(reasons):
            return tracker.read_output()
        if tracker is None:
            row = self.prefetched.pop(pid, None)
            if row is None:
                row = get_process(self.store, pid)
            if row is None or row.state in ENDED:
                return None
            if row.state == "backoff" or (
                row.state == "starting" and row.cause != "run" and not launched(self.paths, row)
            ):
                started = self._start_pending(row)
                if not isinstance(started, ProcessRecord):
                    return started
                row = started
            try:
                tracker = self.trackers[pid] = Tracker(
                    self.store,
                    self.paths,
                    row,
                    clock=self.clock,
                    max_log_bytes=self.max_log_bytes,
                    counters=self.prefetched_counters.pop(pid, None),
                    route=self.route,
                )
            except FileNotFoundError:
                if row.state == "running" and not self.paths.run_dir(pid).is_dir():
                    lose_unknown(self.store, row, RUN_DIR_GONE, clock=self.clock)
                    return StepResult(ended=True)
                return None  # the CLI has not written spec.json yet; its write brings us back
            reasons = reasons | {LIVENESS}
        return tracker.step(
            check_liveness=wakes.check_liveness(reasons),
            timeouts_due=wakes.timeouts_due(reasons),
            silences_due=wakes.silences_due(reasons),
            schedules_due=wakes.schedules_due(reasons),
            resources_due=wakes.resources_due(reasons),
        )

    def _start_pending(self, row: ProcessRecord) -> ProcessRecord | StepResult | None:
        """A run a restart recorded: start it if due (its row, running), or say when to look
        again (a StepResult); None if there is nothing to start any more."""
        self.waiting_runs.discard(row.id)
        if row.state == "backoff":
            waits = unfinished_exit_threads(self.store, row) if row.after_thread else 0
            due = row.due_at if row.due_at is not None else 0.0
            when = restarts.start_due(due_at=due, now=self.clock(), unfinished_threads=waits)
            if isinstance(when, restarts.WaitUntil):
                return StepResult(start_at=when.at)
            if isinstance(when, restarts.WaitForThreads):
                return StepResult(waits_for_threads=True)
        elif row.stop_request is not None:
            # Claimed by a daemon that died before starting it, then stopped by a person.
            log.info("process %d: stopped before it started; forgetting it", row.id)
            forget_process(self.store, row.id)
            shutil.rmtree(self.paths.run_dir(row.id), ignore_errors=True)
            return None
        try:
            started = start_run(self.store, self.paths, row, clock=self.clock)
        except (LaunchError, StateError) as exc:
            log.warning("process %d: run %d could not start: %s", row.id, row.run_no, exc)
            claimed = get_process(self.store, row.id)
            if claimed is None or claimed.state != "starting":
                return None
            tracker = Tracker(self.store, self.paths, claimed, clock=self.clock)
            try:
                return tracker.lose(NOT_STARTED)
            finally:
                tracker.close()
        if started is None:
            return None  # stopped by a person before it was due
        log.info(
            "process %d: started run %d of process %d (pid %s)",
            started.id,
            started.run_no,
            started.chain,
            started.pid,
        )
        return started

    def _log_decision(self, pid: int, res: StepResult) -> None:
        d = res.decision
        if isinstance(d, restarts.Restart):
            log.info(
                "process %d: %s restart as process %s in %.3gs",
                pid,
                {"manual": "a person's", "boot": "after a reboot, a"}.get(d.cause, "the policy's"),
                res.next_run,
                max(0.0, d.at - self.clock()),
            )
        elif isinstance(d, restarts.CrashLoop):
            log.warning("process %d: %s; not restarting it", pid, d.text())
        elif isinstance(d, restarts.NoRestart) and d.reason != "policy no":
            log.info("process %d: not restarted (%s)", pid, d.reason)

    def _after_restart(self, pid: int, res: StepResult) -> bool:
        """What a step says about restarts; True for a pending run (nothing else to do)."""
        if res.decision is not None:
            self._log_decision(pid, res)
        if res.next_run is not None:
            self.enqueue(res.next_run)  # its step starts it, or arms its timer
        if res.start_at is not None:
            self._arm(pid, CHANGE, res.start_at, "start")
            return True
        if res.waits_for_threads:
            self.waiting_runs.add(pid)
            return True
        return False

    def _after(self, pid: int, res: StepResult) -> None:
        if any(o.recorded for o in res.outcomes) or res.decision is not None:
            self.outbox.poke()  # their actions and notifications
        if self._after_restart(pid, res):
            return
        if not res.ended:
            self._settle_output(pid, res)
        if any(o.spawned for o in res.outcomes):
            self.dispatcher.poke()
        _log_outcomes(pid, res.outcomes)
        if res.ended:
            self._forget(pid)
            return
        self._arm_hooks(pid, res)
        if res.recheck_at is not None:
            self._arm(pid, LIVENESS, res.recheck_at, "recheck")
        if res.watch_pid is not None and pid not in self.watch_scopes:
            self._watch_pid(pid, res.watch_pid)
        if res.launched and pid in self.watch_scopes:
            # Its end now comes by pidfd, its output by the one-shot watch: a watch on the
            # run dir would only tax every write of the child.
            self._unwatch_dir(pid)

    def _arm_hooks(self, pid: int, res: StepResult) -> None:
        """The timers of on_timeout, on_silence and on_schedule hooks; the sampler for
        on_resource ones."""
        for hook, delay in res.timeouts:
            self._arm_timeout(pid, hook, delay)
        for hook, delay in res.silences:
            self._arm_capped(pid, SilenceDue(hook), delay)
        for hook, delay in res.schedules:
            self._arm_capped(pid, ScheduleDue(hook), delay)
        tracker = self.trackers.get(pid)
        if tracker is not None and tracker.resource_hooks:
            self.sample_wake.set()

    def _forget(self, pid: int) -> None:
        self._drop_tracker(pid)
        self._unwatch_dir(pid)
        self._disarm_output(pid)
        self.busy.pop(pid, None)
        self.last_read.pop(pid, None)
        scope = self.watch_scopes.pop(pid, None)
        if scope is not None:
            scope.cancel()
        for key in [k for k in self.timers if k[0] == pid]:
            self.timers.pop(key).cancel()
        for stretch in [k for k in self.stretches if k[0] == pid]:
            del self.stretches[stretch]

    # -- timeouts --------------------------------------------------------------------------

    def _arm_timeout(self, pid: int, hook: str, delay: float) -> None:
        """Look at timeout `hook` of process `pid` in `delay` seconds. A long wait wakes
        every MAX_TIMER_S: the tracker decides on the boot clock, which also counts a
        suspend (the event loop's clock does not), and returns the rest to arm again."""
        due = TimeoutDue(hook)
        self._arm_after(pid, due, min(delay, MAX_TIMER_S), due)

    def _arm_capped(self, pid: int, due: SilenceDue | ScheduleDue, delay: float) -> None:
        """As `_arm_timeout`, for on_silence and on_schedule: at most MAX_TIMER_S at once,
        so a wall-clock step (a schedule) or a suspend is noticed; the tracker decides."""
        self._arm_after(pid, due, min(delay, MAX_TIMER_S), due)

    # -- on_resource -----------------------------------------------------------------------

    async def _sample_resources(self) -> None:
        """One sampler for every process with on_resource hooks: sample their trees in a
        worker thread, decide each hook's stretch here (pure), and wake the process whose
        hook fires, so its step commits the fire."""
        sampler = Sampler()
        while True:
            watched = {
                pid: t for pid, t in self.trackers.items() if t.resource_hooks and t.pid is not None
            }
            if not watched:
                self.sample_wake = anyio.Event()
                await self.sample_wake.wait()
                continue
            roots = {pid: t.pid for pid, t in watched.items() if t.pid is not None}
            try:
                usages = await anyio.to_thread.run_sync(sampler.sample, roots)
            except Exception as exc:  # our bug, or /proc unreadable: never the daemon's end
                log.error("sampling resources failed; trying again", exc_info=exc)
                await anyio.sleep(resources.MAX_INTERVAL_S)
                continue
            mono, wall = time.monotonic(), self.clock()
            hooks: list[OnResource] = []
            for pid, tracker in watched.items():
                usage = usages.get(pid)
                for hook in tracker.resource_hooks:
                    assert isinstance(hook.trigger, OnResource)
                    hooks.append(hook.trigger)
                    counter = tracker.counters.get(hook.name, Counter())
                    if usage is None or exhausted(counter, hook.max_spawns):
                        continue
                    key = (pid, hook.name)
                    before = self.stretches.get(key) or resources.initial(counter != Counter())
                    step = resources.step(hook.trigger, before, usage, mono, wall)
                    self.stretches[key] = step.stretch
                    since = step.stretch.over_since_wall
                    if step.fire and since is not None:
                        said = resources.describe(hook.trigger, usage)
                        self.enqueue(pid, ResourceDue(hook.name, since, said))
            await anyio.sleep(resources.interval(hooks))

    def _arm(self, pid: int, reason: Wake, when: float, name: Timer) -> None:
        """Enqueue `reason` for process `pid` at wall-clock time `when`."""
        self._arm_after(pid, reason, when - self.clock(), name)

    def _arm_after(self, pid: int, reason: Wake, delay: float, name: Timer) -> None:
        """Enqueue `reason` for process `pid` in `delay` seconds (at once if 0 or less),
        replacing its timer `name`. Counted on the event loop's monotonic clock: a
        wall-clock step neither hastens nor delays it."""
        old = self.timers.pop((pid, name), None)
        if old is not None:
            old.cancel()
        if delay <= 0:
            self.enqueue(pid, reason)
            return
        self.timers[(pid, name)] = asyncio.get_running_loop().call_later(
            delay, self._due, pid, reason, name
        )

    def _due(self, pid: int, reason: Wake, name: Timer) -> None:
        self.timers.pop((pid, name), None)
        self.enqueue(pid, reason)

    # -- a process's end without an exit record -------------------------------------------

    def _watch_pid(self, pid: int, os_pid: int) -> None:
        try:
            fd = os.pidfd_open(os_pid)
        except (ProcessLookupError, OSError):
            self.enqueue(pid, LIVENESS)
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
                self.enqueue(pid, LIVENESS)
        finally:
            anyio.notify_closing(fd)
            os.close(fd)


def _log_outcomes(pid: int, outcomes: list[Outcome]) -> None:
    for o in outcomes:
        if o.recorded:
            what = f"spawned thread t{o.thread_id}" if o.spawned else f"refused ({o.reason})"
            if not o.spawned and o.reason is None:
                what = "no agent; its actions follow"
            elif o.reason in ("deduplicated", "cooldown"):  # a hook's `dedup:`
                how = "deduplicated into" if o.reason == "deduplicated" else "cooldown after"
                what = f"{how} thread t{o.thread_id}"
            log.info("process %d: hook %s (%s) fired: %s", pid, o.hook, o.trigger, what)


def _raise_fd_limit() -> None:
    # One pidfd per supervised process: 1,000 processes outgrow the usual soft limit of 1,024.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, 1 << 20), hard))


def run_daemon(paths: StatePaths, settings: Settings) -> int:
    """`supervise daemon`: hold the lock, recover, serve until SIGTERM or SIGINT."""
    paths.ensure()
    lock = DaemonLock(paths.daemon_pid)
    lock.acquire()
    _raise_fd_limit()
    store = open_state_store(paths.db, settings.store)
    daemon = Daemon(paths, store, settings=settings, env=dict(os.environ))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.serve)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info(
                        "received %s; stopping (supervised processes keep running)",
                        signal.Signals(signum).name,
                    )
                    tg.cancel_scope.cancel()
                    break

    try:
        anyio.run(main)
    finally:
        store.close()
        lock.release()
    return 0


def configure_logging(level: int = logging.INFO, env: Mapping[str, str] | None = None) -> None:
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S"
    )
    scrub = RedactingFilter(make_redact(os.environ if env is None else env))
    for handler in logging.getLogger().handlers:
        handler.addFilter(scrub)
    # Their per-batch chatter would drown ours.
    logging.getLogger("watchfiles").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # request lines: noise in our log
    logging.getLogger("apprise").setLevel(logging.WARNING)  # each send: our outbox says it
