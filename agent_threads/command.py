"""Running one command for a thread, with a deadline, its whole group killed, output bounded.

The Bash tool and shell hooks start their commands here (extensions' `exec` is meant to as
well), so each gets the same guarantees: a deadline always; the command in its own session
and process group, the whole group SIGKILLed when the call ends for any reason (deadline,
cancel, or a leader that exited leaving `sleep &` behind); output bounded in memory; and the
sandbox, when given, applied here and nowhere else.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

MAX_OUTPUT = 1 << 20  # bytes kept per stream by default; the rest is counted
# After the leader exits (or is killed), how long a background child may keep a pipe busy
# before reading stops: a daemon the command left behind must not hold the call open.
DRAIN_S = 0.2
REAP_S = 5.0  # how long to wait for a SIGKILLed leader to be reaped

OnSpawn = Callable[[int], Awaitable[None]]


class Confinement(Protocol):
    """What confines a command: `agent_threads.sandbox.Sandbox`, or a test's stand-in."""

    def prefix(self, cwd: Path) -> list[str]:
        """The argv to put before the command (empty: run it as is).

        Raises:
            SandboxError: the confinement cannot be built for `cwd`.
        """
        ...


@dataclass(frozen=True)
class Completed:
    """How a command ended, and what it printed (bounded)."""

    returncode: int | None  # None: still running at the deadline, so killed
    stdout: bytes  # stdout and stderr interleaved when merged
    stderr: bytes  # b"" when merged
    stdout_dropped: int  # bytes past the bound, counted, not kept
    stderr_dropped: int
    timed_out: bool
    duration_s: float


class Runner(Protocol):
    """The signature of `run_command`; a test passes a recording fake instead."""

    async def __call__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        deadline_s: float,
        stdin: bytes | None = None,
        merge_stderr: bool = False,
        max_output: int = MAX_OUTPUT,
        sandbox: Confinement | None = None,
        on_spawn: OnSpawn | None = None,
    ) -> Completed: ...


async def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    deadline_s: float,
    stdin: bytes | None = None,
    merge_stderr: bool = False,
    max_output: int = MAX_OUTPUT,
    sandbox: Confinement | None = None,
    on_spawn: OnSpawn | None = None,
) -> Completed:
    """Run `argv` in `cwd` with exactly `env`, for at most `deadline_s` seconds.

    `stdin` is written and closed (a command that does not read it is fine); None gives it
    /dev/null. `on_spawn(pid)` is awaited once it started (the pid is also its process group),
    before the deadline starts counting. When this returns or raises, nothing of the group
    runs any more.

    Raises:
        SandboxError: `sandbox` cannot be built for `cwd` (nothing was started).
        OSError: the command could not be started (no such program or directory).
        ValueError: `deadline_s` is negative, infinite or NaN: a command always has one.
    """
    if not (deadline_s >= 0 and math.isfinite(deadline_s)):
        raise ValueError(f"a command's deadline is a number of seconds, not {deadline_s!r}")
    if sandbox is not None:
        argv = [*sandbox.prefix(cwd), *argv]
    started = time.monotonic()
    # Shielded: a cancel landing while the process is being created would leave it running
    # (and unreaped) with nobody holding it; once started, the finally below ends it.
    with anyio.CancelScope(shield=True):
        proc = await _start(argv, cwd, env, piped_stdin=stdin is not None, merge=merge_stderr)
    out, err = _Bounded(max_output), _Bounded(max_output)
    try:
        if on_spawn is not None:
            await on_spawn(proc.pid)
        timed_out = await _watch(proc, stdin, out, err, deadline_s)
    finally:
        with anyio.CancelScope(shield=True):
            _kill_group(proc.pid)
            with anyio.move_on_after(REAP_S):
                await proc.wait()
            await proc.aclose()
    return Completed(
        returncode=None if timed_out else proc.returncode,
        stdout=bytes(out.kept),
        stderr=bytes(err.kept),
        stdout_dropped=out.dropped,
        stderr_dropped=err.dropped,
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
    )


async def _start(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], *, piped_stdin: bool, merge: bool
) -> Process:
    return await anyio.open_process(
        list(argv),
        stdin=subprocess.PIPE if piped_stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge else subprocess.PIPE,
        cwd=cwd,
        env=dict(env),
        # Its own session and group: one killpg ends everything it started. Under bwrap the
        # command sits in a new session inside, but bwrap stays in this group and its PID
        # namespace dies with it (--die-with-parent), so the kill still reaches everything.
        start_new_session=True,
    )


class _Bounded:
    """A stream's output: the first `limit` bytes kept, the rest counted."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = max(0, self.limit - len(self.kept))
        self.kept += data[:room]
        self.dropped += max(0, len(data) - room)


async def _watch(
    proc: Process, stdin: bytes | None, out: _Bounded, err: _Bounded, deadline_s: float
) -> bool:
    """Feed and read `proc` until its leader exits, or kill its group at the deadline.

    True if the deadline came first. Returns once the pipes reach their end, or `DRAIN_S`
    after the leader ended if something still holds them open.
    """
    assert proc.stdout is not None
    ends = [anyio.Event()]
    async with anyio.create_task_group() as tg:
        tg.start_soon(_read, proc.stdout, out, ends[0])
        if proc.stderr is not None:
            ends.append(anyio.Event())
            tg.start_soon(_read, proc.stderr, err, ends[1])
        if proc.stdin is not None and stdin is not None:
            tg.start_soon(_feed, proc.stdin, stdin)
        with anyio.move_on_after(deadline_s) as deadline:
            await proc.wait()
        if deadline.cancelled_caught:
            _kill_group(proc.pid)
        with anyio.move_on_after(DRAIN_S):
            for end in ends:
                await end.wait()
        tg.cancel_scope.cancel()  # stop reading (and feeding) whatever is still open
    return deadline.cancelled_caught


async def _read(stream: ByteReceiveStream, into: _Bounded, end: anyio.Event) -> None:
    try:
        with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            while True:
                into.add(await stream.receive())
    finally:
        end.set()


async def _feed(stream: ByteSendStream, data: bytes) -> None:
    # A command that exits or closes its stdin before reading it all is not an error. anyio
    # turns most broken-pipe cases into BrokenResourceError, but can let the OSError through.
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        if data:
            await stream.send(data)
        await stream.aclose()


def _kill_group(pgid: int) -> None:
    # Gone already (ProcessLookupError), or the group's last member is a setuid program we
    # may not signal (PermissionError): nothing more this process can do.
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
