"""One supervised process as the daemon sees it: scan new output, fire hooks, notice the end.

Every method here blocks (files, SQLite, /proc) and runs in a worker thread; the daemon calls
them one at a time per process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from agent_threads.spawn import FireFacts
from state.counters import Counter, load_counters
from state.db import Store
from state.paths import StatePaths
from state.processes import (
    LogPosition,
    ProcessEnd,
    ProcessRecord,
    TailState,
    get_process,
    mark_running,
)
from supervise.errors import SuperviseError
from supervisor import clocks, ending, readtimes, schedule, silence, triggers
from supervisor.ending import RUN_DIR_GONE as RUN_DIR_GONE  # re-exported: the daemon's
from supervisor.ending import STARTING_GRACE_S as STARTING_GRACE_S
from supervisor.ending import End, LostReason
from supervisor.firing import FireEvent, Notify, Outcome, RestartStep, commit_end, commit_fires
from supervisor.hookspec import (
    Hook,
    Limits,
    OnExit,
    OnOutputMatch,
    OnResource,
    OnSchedule,
    OnSilence,
)
from supervisor.identity import boot_id, is_same, start_time
from supervisor.limits import exhausted
from supervisor.logcap import DEFAULT_MAX_LOG_BYTES, cap_due, plan_punch, punch
from supervisor.matching import Matcher
from supervisor.notices import ProcessFacts, Route
from supervisor.redaction import make_redact, redact_text
from supervisor.resources import ResourceAt
from supervisor.restarts import ByPerson, CrashLoop, Decision
from supervisor.rundir import ExitRecord, RunDir
from supervisor.runspec import RunSpec
from supervisor.tailing import Lines, LogReader, TailPos, tail_lines
from supervisor.triggers import LogOffset, NewLogOffset
from supervisor.wakes import ResourceDue

log = logging.getLogger("supervise.daemon")

VERIFY_EVERY_S = 1.0  # coalesced reads look for a rotated output.log at most this often


@dataclass
class StepResult:
    """What the event loop must do after a step."""

    ended: bool = False
    watch_pid: int | None = None  # a pid whose end we must hear about (pidfd)
    launched: bool = False  # both pids are known: the run dir has nothing more to announce
    read_output: bool = False  # new output was read (so more may be coming)
    read_bytes: int = 0  # how many (a fast writer is read less often: coalesce.py)
    commit_cpu_s: float = 0.0  # CPU spent committing (fires are rare: not a reading cost)
    # (hook, seconds from now): armed on the monotonic clock, so a wall-clock step cannot
    # move them; the boot clock decides when they are due.
    timeouts: list[tuple[str, float]] = field(default_factory=list)
    # on_silence and on_schedule timers to arm: (hook, seconds from now), monotonic.
    silences: list[tuple[str, float]] = field(default_factory=list)
    schedules: list[tuple[str, float]] = field(default_factory=list)
    recheck_at: float | None = None  # look again then, even if nothing happens
    outcomes: list[Outcome] = field(default_factory=list)
    decision: Decision | None = None  # at its end: what the restart policy decided
    next_run: int | None = None  # ... and the id of the run recorded to follow
    start_at: float | None = None  # a pending run: look again then (wall clock)
    waits_for_threads: bool = False  # a pending run: look again when a thread ends


class Tracker:
    """The daemon's view of one process, loaded from its row (with its launch record).

    It reads (the run dir, the output, the clocks, /proc), asks the pure decisions in
    triggers.py, ending.py and logcap.py what that means, and commits. The clocks are plain
    attributes: `clock` (wall time, what fires are told) and `instant` (both clocks, which
    timeouts are measured on); a test passes fakes.
    """

    def __init__(
        self,
        store: Store,
        paths: StatePaths,
        row: ProcessRecord,
        *,
        clock: Callable[[], float] = time.time,
        instant: Callable[[], clocks.Instant] = clocks.now,
        max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
        counters: dict[str, Counter] | None = None,
        route: Route | None = None,
    ) -> None:
        self.id = row.id
        self.store = store
        self.clock = clock
        self.instant = instant
        self.run = RunDir(paths.run_dir(row.id))
        # The launch record in the row, never spec.json (a tool could have written it); a
        # row from before schema 4 has none, and its spec.json is all there is.
        if row.spec is not None:
            spec = RunSpec.from_text(row.spec, f"process {row.id}'s launch record")
        else:
            spec = RunSpec.from_text(self.run.read_spec(), str(self.run.spec))
        self.env_key = row.env_key
        # Whom its fires tell; a hook's own run: and restart: act with no settings at all.
        self.notify = Notify(
            ProcessFacts(row.id, row.name, row.cwd, str(self.run.output)), route or Route()
        )
        self._redact: Callable[[str], str] | None = None
        self.hooks = spec.hooks
        self.program = spec.program
        self.command = row.command
        self.depth = row.depth
        self.started_at = row.started_at
        self.start = clocks.Instant(row.started_at, row.started_boot, row.boot_id)
        self.pid = row.pid
        self.pid_started = row.pid_started
        self.shim_pid = row.shim_pid
        self.shim_started = row.shim_started
        self.boot_id = row.boot_id
        self.pos = TailPos(row.log_offset, row.log_inode, row.log_head, row.log_skipping)
        self.reader = LogReader(self.run.output, follow=True)
        self._adopt_child_file()
        self.times = readtimes.Writer(self.run.times)  # when each chunk was read
        # The output.log logrotate created after renaming the child's file (see tailing.py).
        self.new_pos = TailPos(
            row.log_new_offset, row.log_new_inode, row.log_new_head, row.log_new_skipping
        )
        self.new_reader: LogReader | None = None
        if row.log_new_inode is not None:
            self.new_reader = LogReader(self.run.output, follow=True)
            self.new_reader.adopt(row.log_new_inode, [self.run.output, *self._rotated()])
        self.archived = row.log_archived
        self.saved_offset = row.log_offset
        self.punched = row.log_punched
        self.max_log_bytes = max_log_bytes
        self.match_hooks = triggers.match_hooks_of(self.hooks.hooks)
        self.matcher = Matcher(
            [h.trigger.pattern for h in self.match_hooks if isinstance(h.trigger, OnOutputMatch)]
        )
        self.counters = load_counters(store, self.id) if counters is None else counters
        self._budget_cache: list[int] | None = None
        self.timeouts_armed = False
        self.schedules_armed = False
        self.silence_hooks = [h for h in self.hooks.hooks if isinstance(h.trigger, OnSilence)]
        self.schedule_hooks = [h for h in self.hooks.hooks if isinstance(h.trigger, OnSchedule)]
        self.resource_hooks = [h for h in self.hooks.hooks if isinstance(h.trigger, OnResource)]
        # on_silence: the bytes written when the last output was seen, and when (None: not
        # read yet); the hooks with a timer running; the stretch each hook last fired for.
        self.written: int | None = None
        self.quiet_since: clocks.Instant | None = None
        self.silence_armed: set[str] = set()
        self._boot_now: str | None = None
        self.silence_fired: dict[str, int] = {}
        self.schedule_fired: dict[str, float] = {}  # hook -> the last scheduled time fired
        self._verify_due = 0.0  # monotonic
        self.exited_at: float | None = None  # the shim's record of the end, once read

    def _rotated(self) -> list[Path]:
        """Where logrotate may have renamed output.log to (output.log.1, output.log-DATE)."""
        try:
            return sorted(self.run.path.glob("output.log?*"))
        except OSError:
            return []

    def _adopt_child_file(self) -> None:
        """Hold open the file the child writes to, wherever it is now: output.log, unless it
        was renamed while no daemon held it (the shim's stdout is it, and so is the renamed
        file with the saved inode)."""
        shim = []
        if self.shim_pid is not None:
            shim = [Path(f"/proc/{self.shim_pid}/fd/1")]
        if self.pos.inode is None:
            # Nothing read yet: the shim's stdout is the child's file even if renamed already.
            if shim and is_same(self.shim_pid, self.shim_started):
                self.reader.adopt(None, shim)
            return
        if self.reader.adopt(self.pos.inode, [self.run.output]) is not None:
            return  # the common case: one open, as the first read would do anyway
        if not (shim and is_same(self.shim_pid, self.shim_started)):
            shim = []
        found = self.reader.adopt(self.pos.inode, [*shim, *self._rotated()])
        if found is not None:
            log.info("process %d: reading its output where it was renamed to: %s", self.id, found)
        else:
            log.warning(
                "process %d: the file it wrote its output to is gone (deleted by log rotation "
                "while no daemon held it?); what it wrote there after byte %d was never scanned",
                self.id,
                self.pos.offset,
            )

    @property
    def output_watch_path(self) -> str:
        """What to watch for the child's writes: the file held open, wherever it is now (an
        inotify watch on output.log's path would follow a renamed-away file no more)."""
        return str(self.reader.held)

    # -- facts ---------------------------------------------------------------------------

    def _facts(
        self, hook: Hook, at: float, tail_end: int | None, source: Path | None = None
    ) -> FireFacts:
        """What every fire of `hook` tells its thread; callers add the trigger's own facts."""
        return FireFacts(
            command=self.command,
            pid=self.pid,
            trigger=hook.kind,
            hook_name=hook.name,
            instructions=hook.instructions,
            runtime_s=at - self.started_at,
            purpose=self.hooks.purpose,
            context=self.hooks.context,
            output_tail=(
                tail_lines(self.reader.held, tail_end, floor=self.punched)
                if source is None
                else tail_lines(source, tail_end)
            ),
        )

    # -- the step --------------------------------------------------------------------------

    def step(
        self,
        *,
        check_liveness: bool,
        timeouts_due: list[str] | None = None,
        silences_due: list[str] | None = None,
        schedules_due: list[str] | None = None,
        resources_due: list[ResourceDue] | None = None,
    ) -> StepResult:
        """Scan new output, fire the timers woken, and settle the process if it ended."""
        res = StepResult()
        run_dir = self.run.path.is_dir()
        if run_dir and self._learn_pids():
            check_liveness = True  # the first moment its end can be watched (a pidfd)
        record = self._read_exit() if run_dir else None
        # Its output first, all of it if it ended (a run dir deleted: the file is held open).
        self._scan(final=not run_dir or record is not None, res=res)
        if (end := ending.end_of(run_dir=run_dir, record=record)) is not None:
            self._settle(end, res)
            return res
        if timeouts_due:
            self._fire_timeouts(timeouts_due, res)
        if resources_due:
            self._fire_resources(resources_due, res)
        if silences_due:
            self._fire_silences(silences_due, res)
        if schedules_due:
            self._fire_schedules(schedules_due, res)
        if check_liveness and not self._alive():
            record = self._read_exit()  # the shim may have written it just now
            self._scan(final=True, res=res)
            self._settle(ending.dead_end(record), res)
            return res
        if self.shim_pid is None and self.pid is None:
            # Recorded but never launched (the CLI died in between): lost once the grace ends.
            left = clocks.due_in(self.start, STARTING_GRACE_S, self.instant())
            res.recheck_at = self.clock() + left
            return res
        if check_liveness:
            # Reading /proc for this costs more than the rest of a small step: only when asked.
            res.watch_pid = self.shim_pid if is_same(self.shim_pid, self.shim_started) else self.pid
        res.launched = self.pid is not None and self.shim_pid is not None
        if not self.timeouts_armed:
            res.timeouts = self._pending_timeouts()
            self.timeouts_armed = True
        if not self.schedules_armed:
            # A fresh tracker (a new run, or a daemon started anew): a time missed meanwhile
            # fires now if recent (schedule.py), and each hook gets its timer.
            self.schedules_armed = True
            self._fire_schedules([h.name for h in self.schedule_hooks], res)
        self._arm_silences(res)
        return res

    def lose(self, reason: LostReason) -> StepResult:
        """Give the process up as lost (a restart that could not start): its end, the
        on_exit hooks that take any code, and what the restart policy makes of it."""
        res = StepResult()
        self._settle(ending.Lost(reason), res)
        return res

    def _read_exit(self) -> ExitRecord | None:
        record = self.run.read_exit()
        if record is not None:
            self.exited_at = record.ended_at
        return record

    def _learn_pids(self) -> bool:
        """Read pids the row lacks (the CLI has not written them yet) from the run dir."""
        learned = False
        if self.pid is None and (pid := self.run.read_pid("child")) is not None:
            self.pid, self.pid_started = pid, start_time(pid)
            learned = True
        if self.shim_pid is None and (pid := self.run.read_pid("shim")) is not None:
            self.shim_pid, self.shim_started = pid, start_time(pid)
            learned = True
        if learned and self.pid is not None and self.shim_pid is not None:
            # Its starter (the CLI, or a daemon starting a restart) died before saving them:
            # saved here, so the row says `running` with its pids (ps, stop, the next `up`).
            mark_running(
                self.store,
                self.id,
                pid=self.pid,
                pid_started=self.pid_started,
                shim_pid=self.shim_pid,
                shim_started=self.shim_started,
            )
        return learned

    def _alive(self) -> bool:
        known = ending.presumed_alive(
            same_boot=self.boot_id == boot_id(),
            launched=self.shim_pid is not None or self.pid is not None,
            # On the boot clock: a wall-clock step must not give up a launch in progress.
            since_start=clocks.elapsed(self.start, self.instant()),
        )
        if known is not None:
            return known
        return is_same(self.shim_pid, self.shim_started) or is_same(self.pid, self.pid_started)

    def read_output(self) -> StepResult:
        """Scan what was written since the last read, and nothing else: the step for a
        coalesced output event (the end, timeouts and liveness come by other events)."""
        res = StepResult()
        # A full check costs a stat and a read of the head: once a second, which notices a
        # rotation (and starts reading the new output.log) while the process still runs.
        now = time.monotonic()
        verify = now >= self._verify_due
        if verify:
            self._verify_due = now + VERIFY_EVERY_S
        self._scan(final=False, res=res, verify=verify)
        self._arm_silences(res)
        return res

    def close(self) -> None:
        self.times.close(time.monotonic())
        self.reader.close()
        if self.new_reader is not None:
            self.new_reader.close()

    def _budget(self) -> list[int]:
        # Counters change only in _commit, which drops this: a busy process reads often.
        if self._budget_cache is None:
            self._budget_cache = triggers.match_budget(self.match_hooks, self.counters)
        return self._budget_cache

    def _scan(self, *, final: bool, res: StepResult, verify: bool = True) -> None:
        """Scan what was written before this scan began; what comes during it is the next
        scan's (chasing the writer here made 60,000 reads of a few lines each)."""
        found = False
        while True:
            budget = self._budget()
            before = self.pos
            # No pattern left to look for: skip the bytes unread (the exit's tail reads the end).
            lines = self.reader.read(self.pos, final=final, skim=not any(budget), verify=verify)
            if lines.restarted:
                log.warning(
                    "process %d: output.log was %s; reading it from its start",
                    self.id,
                    lines.restarted,
                )
            if not lines.empty or lines.pos != before:
                self._commit_lines(lines, budget, res)
                res.read_output = res.read_output or lines.pos.offset != before.offset
                res.read_bytes += max(0, lines.pos.offset - before.offset)
            if lines.pos.offset != before.offset or lines.restarted:
                found = True
                self.times.note(
                    lines.pos.offset,
                    self.reader.mtime,
                    restarted=bool(lines.restarted),
                    now=time.monotonic(),
                )
            if not lines.more:
                break
            verify = False  # the rest of this read is the same file
        if not found or final:
            self.times.flush(time.monotonic())  # quiet, or ended: no entry waits for more
        if (self.reader.moved or self.new_reader is not None) and self.run.path.is_dir():
            self._scan_new(final=final, res=res)
        if self.silence_hooks:
            self._note_output()
        self._cap_log(res)

    def _scan_new(self, *, final: bool, res: StepResult) -> None:
        """Read the output.log that replaced the child's renamed file, from its start; when
        that one is renamed too, read it to its end, then its successor."""
        if self.new_reader is None:
            log.info(
                "process %d: output.log was renamed (rotated?); reading on in the file the "
                "process writes to, and the new output.log from its start",
                self.id,
            )
            self.new_reader = LogReader(self.run.output, follow=True)
            self.new_pos = TailPos()
        reader = self.new_reader
        while True:
            budget = self._budget()
            before = self.new_pos
            was_moved = reader.moved
            lines = reader.read(before, final=final or was_moved, skim=not any(budget))
            if not lines.empty or lines.pos != before:
                self._commit_new_lines(lines, budget, res)
            if lines.more:
                continue
            if not reader.moved:
                return
            if not was_moved:
                continue  # once more, as a final read: a last line without its newline counts
            # Rotated again: this one is read to its end; its successor starts at 0.
            reader.close()
            reader = self.new_reader = LogReader(self.run.output, follow=True)
            self.new_pos = TailPos()

    def _match_events(
        self,
        lines: Lines,
        budget: list[int],
        origin: LogOffset | NewLogOffset,
        source: Path | None = None,
    ) -> list[FireEvent]:
        """The fires of the lines' matches, keyed from `origin`: the key of `lines`' first
        byte (a position in the child's output, or one in a new output.log)."""
        matches = self.matcher.scan(lines.data, budget)
        if not matches:
            return []
        at = triggers.match_time(self.clock(), self.exited_at)
        fires = triggers.match_fires(
            self.id, self.match_hooks, matches, lines.data, lines.start, origin, at
        )
        return [self._event(f, source) for f in fires]

    def _event(self, fire: triggers.Fire, source: Path | None = None) -> FireEvent:
        """The fire with what every fire tells its thread (the output's tail is read here)."""
        facts = replace(
            self._facts(fire.hook, fire.at, fire.tail_end, source),
            exit_code=fire.exit_code,
            signal=fire.signal,
            matched_line=fire.matched_line,
            pattern=fire.pattern,
            timeout_s=fire.timeout_s,
            crash_loop=fire.crash_loop,
            ended_by_user=fire.ended_by_user,
            what_fired=fire.what_fired,
        )
        return FireEvent(
            fire.hook, fire.key, fire.at, fire.detail, facts, fire.exit_code, fire.refuse
        )

    def _commit_new_lines(self, lines: Lines, budget: list[int], res: StepResult) -> None:
        if lines.pos.inode is not None and lines.pos.inode == self.pos.inode:
            return  # output.log names the child's file again: it is read as that
        assert self.new_reader is not None
        # Its own keys: offsets in this file are not positions in the child's output.
        events = self._match_events(
            lines, budget, NewLogOffset(lines.pos.inode, lines.start), self.new_reader.held
        )
        first = lines.pos.inode != self.new_pos.inode
        self.new_pos = lines.pos
        if events or first or lines.restarted:
            self._commit(events, res)

    def _cap_log(self, res: StepResult) -> None:
        if not cap_due(self.max_log_bytes, self.pos.offset, self.punched):
            return
        if self.reader.moved or not self.reader.at_path():
            # Rotated by another tool, which bounds it: output.log.1 may be the child's file.
            return
        on_disk = self.reader.blocks * 512
        plan = plan_punch(on_disk, self.pos.offset, self.punched, self.max_log_bytes)
        if plan is None:
            return
        if self.saved_offset < plan.end:
            self._commit([], res)  # only bytes whose scan is saved may go: never rescan a hole
        try:
            punch(self.run.output, self.run.archive, plan, self.max_log_bytes)
        except OSError as exc:
            log.warning("process %d: cannot bound output.log: %s", self.id, exc)
            self.max_log_bytes = 0  # e.g. a filesystem without hole punching: stop trying
            return
        self.punched = plan.end
        self.times.drop_before(plan.end, time.monotonic())
        # The file's head is now a hole: fingerprint that, or it reads as rewritten.
        self.pos = replace(self.pos, head=None)
        self._commit([], res)

    def _commit_lines(self, lines: Lines, budget: list[int], res: StepResult) -> None:
        base = triggers.archived_after(self.archived, self.pos.offset, bool(lines.restarted))
        events = self._match_events(lines, budget, LogOffset(base + lines.start))
        if lines.restarted:
            self.punched = 0  # a new file: nothing of it was freed
        self.pos, self.archived = lines.pos, base
        unsaved = self.pos.offset - self.saved_offset
        if triggers.save_due(fired=bool(events), restarted=bool(lines.restarted), unsaved=unsaved):
            self._commit(events, res)

    def _commit(
        self,
        events: list[FireEvent],
        res: StepResult,
        end: ProcessEnd | None = None,
        restart: RestartStep | None = None,
    ) -> None:
        started = time.thread_time()
        pos, new = self.pos, self.new_pos
        tail = TailState(
            LogPosition(pos.offset, pos.inode, pos.head, pos.skipping),
            LogPosition(new.offset, new.inode, new.head, new.skipping),
            self.archived,
            self.punched,
        )
        self._budget_cache = None
        done = commit_end(
            self.store,
            self.id,
            events,
            limits=self.hooks.limits,
            expect_offset=self.saved_offset,
            tail=tail,
            end=end,
            # A crash loop's fires, made in the transaction, may quote the output too.
            redact=self._redactor() if events or restart else redact_text,
            restart=restart,
            notify=self.notify,
        )
        outcomes, self.counters = done.outcomes, done.counters
        if done.decision is not None:
            res.decision, res.next_run = done.decision, done.next_run
        self.saved_offset = pos.offset
        res.outcomes += outcomes
        res.commit_cpu_s += time.thread_time() - started
        if any(o.recorded for o in outcomes):
            # An attached `run` watches this file to name the thread as it happens.
            with contextlib.suppress(OSError):
                os.utime(self.run.attached)

    def _redactor(self) -> Callable[[str], str]:
        """Masks the process's own credentials too (a value given with `--env` has no form
        to know it by), read from env.json when it first fires: fires are rare."""
        if self._redact is None:
            self._redact = redact_text
            if self.env_key is not None:
                try:
                    self._redact = make_redact(self.run.read_env(self.env_key))
                except SuperviseError as exc:
                    log.warning("process %d: masking by form only: %s", self.id, exc)
        return self._redact

    def _ended_by_user(self) -> ByPerson | None:
        """Whether a person asked this run to end (`supervise stop`, or `supervise restart`
        of it running): each records its request before it signals, so it is committed
        before the exit can be seen. Read only when an on_exit hook could be told."""
        if not any(isinstance(h.trigger, OnExit) for h in self.hooks.hooks):
            return None
        row = get_process(self.store, self.id)
        asked = None if row is None else row.stop_request
        if asked == "stop":
            return "stop"
        return "restart" if asked == "restart" else None  # `hook`: no person

    def _settle(self, end: End, res: StepResult) -> None:
        """Commit the end and its on_exit fires, together."""
        now = self.clock()
        if isinstance(end, ending.Lost):
            log.warning("process %d: lost (%s); exit code unknown", self.id, end.reason)
            if end.reason == RUN_DIR_GONE and is_same(self.pid, self.pid_started):
                log.warning(
                    "process %d: pid %s still runs, no longer supervised; kill it if unwanted",
                    self.id,
                    self.pid,
                )
        fires = triggers.end_fires(
            self.id, self.hooks.hooks, end, now, ended_by_user=self._ended_by_user()
        )
        row_end = ending.process_end(end, now, pid=self.pid, shim_pid=self.shim_pid)

        def crash_events(loop: CrashLoop) -> list[FireEvent]:
            found = triggers.crash_loop_fires(self.id, self.hooks.hooks, end, loop, now)
            return [self._event(f) for f in found]

        restart = RestartStep(
            self.hooks.restart,
            triggers.crash_loop_keys(self.id, self.hooks.hooks),
            crash_events,
            # Started in an earlier boot: the reboot ended it (whatever its exit record says:
            # the shutdown's signals end every process).
            rebooted=self.boot_id != boot_id(),
            autostart=None if self.program is None else self.program.autostart,
        )
        self._commit([self._event(f) for f in fires], res, row_end, restart)
        res.ended = True
        # Only for an attached `run`, which made `attached` before it read the state: either
        # it saw this commit, or we see its mark.
        with contextlib.suppress(OSError):
            if self.run.attached.exists():
                self.run.recorded.touch()

    # -- timeouts ------------------------------------------------------------------------

    def _pending_timeouts(self) -> list[tuple[str, float]]:
        hooks, now = self.hooks.hooks, self.instant()
        arms = triggers.pending_timeouts(hooks, self.counters, self.start, now)
        return [(a.hook, a.seconds) for a in arms]

    def _fire_timeouts(self, names: list[str], res: StepResult) -> None:
        hooks, now, wall = self.hooks.hooks, self.instant(), self.clock()
        decision = triggers.timeout_fires(
            self.id, hooks, self.counters, names, self.start, now, wall
        )
        res.timeouts += [(a.hook, a.seconds) for a in decision.rearm]
        if decision.fires:
            self._commit([self._event(f) for f in decision.fires], res)

    # -- on_silence, on_schedule, on_resource --------------------------------------------

    def _note_output(self) -> None:
        """After a scan: has the child written since the last one? (The sizes are the
        reads' own fstat: no extra system call.)"""
        written = self.archived + self.reader.size
        if self.new_reader is not None:
            written += self.new_reader.size
        if self.written is None:
            # A daemon starting anew: the last write is the file's mtime.
            self.quiet_since = silence.last_output(
                self.start, written, self.reader.mtime, self.instant()
            )
        elif written != self.written:
            self.quiet_since = self._instant_now()
        self.written = written

    def _instant_now(self) -> clocks.Instant:
        """`instant()` without reading the boot id each time (it is read for every batch of
        a busy writer's output, and the boot id cannot change under a running daemon)."""
        if self._boot_now is None:
            first = self.instant()
            self._boot_now = first.boot_id
            return first
        return clocks.Instant(self.clock(), clocks.boot_clock(), self._boot_now)

    def _arm_silences(self, res: StepResult) -> None:
        """A timer for each on_silence hook without one, unless its stretch has fired."""
        if self.quiet_since is None or self.written is None:
            return
        for hook in self.silence_hooks:
            if hook.name in self.silence_armed or self.silence_fired.get(hook.name) == self.written:
                continue
            if exhausted(self.counters.get(hook.name, Counter()), hook.max_spawns):
                continue
            assert isinstance(hook.trigger, OnSilence)
            left = silence.check(hook.trigger.seconds, self.quiet_since, self.instant()).wait
            self.silence_armed.add(hook.name)
            res.silences.append((hook.name, left))

    def _fire_silences(self, names: list[str], res: StepResult) -> None:
        if self.quiet_since is None or self.written is None:
            return
        fires = []
        for hook in self.silence_hooks:
            if hook.name not in names:
                continue
            self.silence_armed.discard(hook.name)
            if self.silence_fired.get(hook.name) == self.written:
                continue
            assert isinstance(hook.trigger, OnSilence)
            now = self.instant()
            due = silence.check(hook.trigger.seconds, self.quiet_since, now)
            if not due.fire:  # output came since the timer was set: the rest of the wait
                self.silence_armed.add(hook.name)
                res.silences.append((hook.name, due.wait))
                continue
            # Told at the moment the silence reached its length, not when we got to it.
            at = min(self.clock(), self.quiet_since.wall + hook.trigger.seconds)
            said = f"printed nothing for {hook.trigger.seconds:g} s"
            key = triggers.FireKey(self.id, hook.name, silence.SilenceAt(self.written))
            fires.append(triggers.Fire(hook, key, at, said, what_fired=said))
            self.silence_fired[hook.name] = self.written
        if fires:
            self._commit([self._event(f) for f in fires], res)

    def _fire_schedules(self, names: list[str], res: StepResult) -> None:
        fires = []
        for hook in self.schedule_hooks:
            t = hook.trigger
            if hook.name not in names or not isinstance(t, OnSchedule):
                continue
            counter = self.counters.get(hook.name, Counter())
            d = schedule.decide(
                t.cron,
                t.timezone,
                since=self.started_at,
                fired=self.schedule_fired.get(hook.name),
                now=self.clock(),
            )
            if d.skipped:
                log.info(
                    "process %d: hook %s: %d earlier scheduled time(s) missed; only the latest "
                    "fires",
                    self.id,
                    hook.name,
                    d.skipped,
                )
            if d.due is not None:
                said = schedule.describe(d.due, t.cron, t.timezone)
                key = triggers.FireKey(self.id, hook.name, schedule.ScheduledAt(int(d.due)))
                fires.append(triggers.Fire(hook, key, d.due, said, what_fired=said))
                self.schedule_fired[hook.name] = d.due
                counter = Counter(counter.fires + 1, counter.refused)
            if d.wait is not None and not exhausted(counter, hook.max_spawns):
                res.schedules.append((hook.name, d.wait))
        if fires:
            self._commit([self._event(f) for f in fires], res)

    def _fire_resources(self, dues: list[ResourceDue], res: StepResult) -> None:
        by_name = {h.name: h for h in self.hooks.hooks}
        fires = []
        for due in dues:
            hook = by_name.get(due.hook)
            if hook is None:
                continue
            key = triggers.FireKey(self.id, hook.name, ResourceAt(int(due.since * 1000)))
            fires.append(triggers.Fire(hook, key, self.clock(), due.detail, what_fired=due.detail))
        if fires:
            self._commit([self._event(f) for f in fires], res)


def lose_unknown(
    store: Store, row: ProcessRecord, reason: LostReason, *, clock: Callable[[], float]
) -> None:
    """Mark a process lost whose hooks cannot be known (its run dir went with spec.json)."""
    log.warning(
        "process %d: lost (%s); its hooks went with it (spec.json), so no on_exit hook fired",
        row.id,
        reason,
    )
    end = ending.process_end(ending.Lost(reason), clock(), pid=None, shim_pid=None)
    commit_fires(store, row.id, [], limits=Limits(), expect_offset=row.log_offset, end=end)
