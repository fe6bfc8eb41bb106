"""Which hooks fire, and under which key: pure decisions, no I/O, no clock reads.

The tracker reads the run dir, the output and the clocks, calls these, turns each `Fire` into
a `FireEvent` (adding what only reading the output tells: its tail) and commits. A fire's key
makes it unique across restarts: its `text` is what the database holds, so the format is
frozen (keys committed by earlier versions must still deduplicate).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from state.counters import Counter
from supervisor import clocks
from supervisor.dedup import SCAN_BUDGET as DEDUP_SCAN_BUDGET
from supervisor.ending import End, Exited
from supervisor.hookspec import Hook, OnCrashLoop, OnExit, OnOutputMatch, OnTimeout
from supervisor.limits import scan_budget
from supervisor.matching import LineMatch
from supervisor.restarts import ByPerson, CrashLoop
from supervisor.rundir import ExitRecord

TIMER_SLACK_S = 0.05  # a timeout woken this early is due: timers may wake a hair before
LOST_DETAIL = "lost: exit code unknown"
# A person asked (`fires` shows it): what ended the run, by the request noted on it.
USER_DETAIL: dict[ByPerson, str] = {
    "stop": "stopped by supervise stop",
    "restart": "restarted by supervise restart",
}
SAVE_EVERY = 64 * 1024 * 1024  # bytes scanned without a fire before the offset is saved anyway


@dataclass(frozen=True)
class LogOffset:
    """A match at byte `offset` of everything the child wrote (its archived part included)."""

    offset: int

    @property
    def text(self) -> str:
        return f"@{self.offset}"

    def plus(self, n: int) -> LogOffset:
        return replace(self, offset=self.offset + n)


@dataclass(frozen=True)
class NewLogOffset:
    """A match at byte `offset` of the output.log logrotate created (inode `inode`): offsets
    in that file are not positions in the child's output, so its keys are its own."""

    inode: int | None
    offset: int

    @property
    def text(self) -> str:
        return f"@i{self.inode}+{self.offset}"

    def plus(self, n: int) -> NewLogOffset:
        return replace(self, offset=self.offset + n)


class _KeyPart(Protocol):
    """A trigger's own part of a key (silence.SilenceAt, schedule.ScheduledAt, ...)."""

    @property
    def text(self) -> str: ...


FireKind = Literal["exit", "timeout", "crash-loop"] | LogOffset | NewLogOffset | _KeyPart


@dataclass(frozen=True)
class FireKey:
    """What makes a fire unique: the process, the hook, and which trigger (a match: where)."""

    process_id: int
    hook: str
    kind: FireKind

    @property
    def text(self) -> str:
        tail = self.kind if isinstance(self.kind, str) else self.kind.text
        return f"{self.process_id}:{self.hook}:{tail}"


@dataclass(frozen=True)
class Fire:
    """One fire to commit, with its trigger's own facts; the tracker adds the common ones."""

    hook: Hook
    key: FireKey
    at: float
    detail: str
    exit_code: int | None = None  # the fire's (an on_exit fire of a known exit)
    refuse: str | None = None  # refused before limits apply (`lost`: the code is unknown)
    signal: str | None = None
    timeout_s: float | None = None
    matched_line: str | None = None
    pattern: str | None = None
    tail_end: int | None = None  # the output tail ends here (a match: after its line)
    crash_loop: str | None = None  # an on_crash_loop fire: how many restarts, how fast
    # An on_exit fire: a person ended the run (`supervise stop`, or `supervise restart` of a
    # running one); a hook with `stopped_by_user: false` refuses both.
    ended_by_user: ByPerson | None = None
    # on_silence, on_schedule, on_resource: what fired, as the thread is told it
    what_fired: str | None = None


@dataclass(frozen=True)
class Arm:
    """Look at timeout hook `hook` again in `seconds`."""

    hook: str
    seconds: float


@dataclass(frozen=True)
class TimeoutDecision:
    fires: list[Fire] = field(default_factory=list)
    rearm: list[Arm] = field(default_factory=list)  # woken early: the rest of the wait


def _unfired(hook: Hook, counters: Mapping[str, Counter]) -> bool:
    return counters.get(hook.name, Counter()) == Counter()


def exit_fires(
    process_id: int,
    hooks: Sequence[Hook],
    record: ExitRecord,
    *,
    ended_by_user: ByPerson | None = None,
) -> list[Fire]:
    """The on_exit hooks an exit with `record`'s code fires, at the moment it ended.

    `ended_by_user`: a person ended it, with `supervise stop` or with `supervise restart` (a
    restart's exit is a person's doing too, not a failure to look into). The fire says which;
    a hook with `stopped_by_user: false` is refused (reason `stopped_by_user`): recorded,
    like `lost`, so `fires` shows why no thread came, and its key taken, so it never fires
    later.
    """
    detail = f"exit code {record.exit_code}" + (f" ({record.signal})" if record.signal else "")
    if ended_by_user is not None:
        detail += f"; {USER_DETAIL[ended_by_user]}"
    return [
        Fire(
            hook,
            FireKey(process_id, hook.name, "exit"),
            record.ended_at,
            detail,
            exit_code=record.exit_code,
            signal=record.signal,
            refuse="stopped_by_user"
            if ended_by_user is not None and not hook.trigger.stopped_by_user
            else None,
            ended_by_user=ended_by_user,
        )
        for hook in hooks
        if isinstance(hook.trigger, OnExit) and hook.trigger.accepts(record.exit_code)
    ]


def lost_fires(process_id: int, hooks: Sequence[Hook], now: float) -> list[Fire]:
    """Every on_exit hook fires for a lost process; one that names exit codes is refused
    (`lost`): the code is unknown, and the record says why no thread came. Same key as an
    exit: a process is either exited or lost, never both."""
    return [
        Fire(
            hook,
            FireKey(process_id, hook.name, "exit"),
            now,
            LOST_DETAIL,
            refuse=None if hook.trigger.exit_codes is None else "lost",
        )
        for hook in hooks
        if isinstance(hook.trigger, OnExit)
    ]


def end_fires(
    process_id: int,
    hooks: Sequence[Hook],
    end: End,
    now: float,
    *,
    ended_by_user: ByPerson | None = None,
) -> list[Fire]:
    """The on_exit fires of `end`: an exit's at the moment it ended, a loss's `now`. A loss
    is told as a loss even after a stop: its code, and so what ended it, is unknown."""
    if isinstance(end, Exited):
        return exit_fires(process_id, hooks, end.record, ended_by_user=ended_by_user)
    return lost_fires(process_id, hooks, now)


def crash_loop_keys(process_id: int, hooks: Sequence[Hook]) -> list[FireKey]:
    """The keys of the on_crash_loop fires of the run `process_id`: one per hook, ever."""
    return [
        FireKey(process_id, h.name, "crash-loop")
        for h in hooks
        if isinstance(h.trigger, OnCrashLoop)
    ]


def crash_loop_fires(
    process_id: int, hooks: Sequence[Hook], end: End, loop: CrashLoop, now: float
) -> list[Fire]:
    """The on_crash_loop hooks fire once, when the run `process_id` ended the loop: at its
    end (an exit's time, or `now` for a lost one), told how it ended."""
    record = end.record if isinstance(end, Exited) else None
    if record is not None:
        how = f"exit code {record.exit_code}" + (f" ({record.signal})" if record.signal else "")
    else:
        how = LOST_DETAIL
    return [
        Fire(
            hook,
            FireKey(process_id, hook.name, "crash-loop"),
            record.ended_at if record is not None else now,
            f"{loop.text()}; the last run: {how}",
            exit_code=record.exit_code if record is not None else None,
            signal=record.signal if record is not None else None,
            crash_loop=loop.text(),
        )
        for hook in hooks
        if isinstance(hook.trigger, OnCrashLoop)
    ]


def _timeouts(hooks: Sequence[Hook]) -> list[tuple[Hook, OnTimeout]]:
    return [(h, h.trigger) for h in hooks if isinstance(h.trigger, OnTimeout)]


def pending_timeouts(
    hooks: Sequence[Hook],
    counters: Mapping[str, Counter],
    start: clocks.Instant,
    now: clocks.Instant,
) -> list[Arm]:
    """Each unfired timeout and the seconds until it is due, measured from the start on the
    boot clock (clocks.py): not from the wall clock, which may have been stepped."""
    return [
        Arm(h.name, clocks.due_in(start, t.seconds, now))
        for h, t in _timeouts(hooks)
        if _unfired(h, counters)
    ]


def timeout_fires(
    process_id: int,
    hooks: Sequence[Hook],
    counters: Mapping[str, Counter],
    due: Sequence[str],
    start: clocks.Instant,
    now: clocks.Instant,
    wall: float,
) -> TimeoutDecision:
    """The timeouts woken (`due`, by hook name) that are due at `now` and fire; those woken
    early come back to arm again. `wall` is the wall-clock time a fire is told at."""
    decision = TimeoutDecision()
    for hook, t in _timeouts(hooks):
        if hook.name not in due or not _unfired(hook, counters):
            continue
        left = clocks.due_in(start, t.seconds, now)
        if left > TIMER_SLACK_S:
            # Woken early (a timer wakes at most every MAX_TIMER_S, or the monotonic clock
            # stood still in a suspend): arm again for the rest.
            decision.rearm.append(Arm(hook.name, left))
            continue
        # The deadline, not the moment we got to it (a restart can come hours later):
        # measured on the boot clock, told on the wall clock.
        decision.fires.append(
            Fire(
                hook,
                FireKey(process_id, hook.name, "timeout"),
                wall + min(left, 0.0),
                f"still running after {t.seconds:g}s",
                timeout_s=t.seconds,
            )
        )
    return decision


def match_hooks_of(hooks: Sequence[Hook]) -> list[Hook]:
    """The on_output_match hooks, in file order: the Matcher's pattern i is hook i's."""
    return [h for h in hooks if isinstance(h.trigger, OnOutputMatch)]


def match_budget(match_hooks: Sequence[Hook], counters: Mapping[str, Counter]) -> list[int]:
    """How many matches of each hook the next scan should look for (0: exhausted, skipped).
    A budget of all zeros means no line needs reading at all."""
    return [
        scan_budget(counters.get(h.name, Counter()), h.max_spawns)
        # A repeat that joins a thread does not use up max_spawns: keep looking for them.
        if h.dedup is None
        else DEDUP_SCAN_BUDGET
        for h in match_hooks
    ]


def archived_after(archived: int, read_to: int, restarted: bool) -> int:
    """Bytes of the child's output before byte 0 of the file now read. A file that started
    over (truncated, replaced) adds what was read of the old one, so a key's offset keeps
    growing and a line of the new file never reuses an old line's key."""
    return archived + (read_to if restarted else 0)


def save_due(*, fired: bool, restarted: bool, unsaved: int) -> bool:
    """Whether a scan's new position must be committed now. With fires it must (they commit
    together); alone it may wait, since a crash before it is saved only rescans output that
    fired nothing; a restarted file's new bookkeeping is saved at once."""
    return fired or restarted or unsaved >= SAVE_EVERY


def match_time(now: float, exited_at: float | None) -> float:
    """When output fires are told to have happened: output read after the exit (the same
    batch, or a restart) was written before it, and a fire never follows its exit."""
    return now if exited_at is None else min(now, exited_at)


def match_fires(
    process_id: int,
    match_hooks: Sequence[Hook],
    matches: Sequence[LineMatch],
    data: bytes,
    data_start: int,
    origin: LogOffset | NewLogOffset,
    at: float,
) -> list[Fire]:
    """The fires of `matches` (found in `data`, read from byte `data_start` of its file; the
    pattern index is into `match_hooks`), each keyed `origin` + the match's offset in `data`."""
    fires = []
    for m in matches:
        hook = match_hooks[m.pattern]
        assert isinstance(hook.trigger, OnOutputMatch)
        text = data[m.start : m.end].decode("utf-8", "replace").rstrip("\r")
        fires.append(
            Fire(
                hook,
                FireKey(process_id, hook.name, origin.plus(m.start)),
                at,
                text,
                matched_line=text,
                pattern=hook.trigger.pattern,
                tail_end=data_start + m.end + 1,
            )
        )
    return fires
