"""Following a process's output from the CLI: `supervise run` attached and `logs -f`.

Woken by inotify, never by a sleep loop, and without taxing the child's writes: output.log
gets a one-shot IN_MODIFY watch armed again before each read (a watch on the run dir, as
watchfiles sets, made every write() of a line-at-a-time child pay a notification: 1.5x its
runtime). Its end comes by a pidfd on the shim, which exits right after writing exit.json.
An attached `run` also watches `attached`, which the daemon touches when a hook of this
process fired, so that the thread it spawned is named as it happens.

What is followed is the file the child writes to, held open: logrotate's default renames
output.log and creates an empty one, and the child's lines keep going to the renamed file.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

from supervisor.identity import is_same
from supervisor.inotify import IN_ATTRIB, IN_CREATE, IN_MODIFY, IN_MOVED_TO, IN_ONESHOT, Inotify
from supervisor.rundir import ExitRecord, RunDir

# After a write, let more pile up before copying: a human sees no difference, and a child
# writing a line at a time pays one notification per gap instead of one per line.
FOLLOW_GAP_S = 0.02
# Without a pidfd (the shim's pid is unknown or already gone): how often to look for the end.
_TICK_S = 2.0
_OUTPUT_EVENTS = IN_MODIFY | IN_ONESHOT


def child_output(run: RunDir, shim: tuple[int | None, float | None], inode: int | None) -> Path:
    """The file the child writes to: the shim's stdout while it runs, else the file of the
    run dir with the inode the daemon saved (output.log, or where logrotate renamed it)."""
    if shim[0] is not None and is_same(*shim):
        proc = Path(f"/proc/{shim[0]}/fd/1")
        if os.path.exists(proc):
            return proc
    if inode is not None:
        for place in [run.output, *sorted(run.path.glob("output.log?*"))]:
            with contextlib.suppress(OSError):
                if place.stat().st_ino == inode:
                    return place
    return run.output


class _Held:
    """The followed file, opened once (it may be renamed or deleted later) when it exists."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file: BinaryIO | None = None

    def get(self) -> BinaryIO | None:
        if self.file is None:
            with contextlib.suppress(OSError):
                self.file = open(self.path, "rb")  # noqa: SIM115  # closed by close()
        return self.file

    def watch_path(self) -> str:
        return str(self.path) if self.file is None else f"/proc/self/fd/{self.file.fileno()}"

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


class Sink(Protocol):
    """Where followed output goes: stdout's buffer, or `logs`' line stamper."""

    def write(self, data: bytes, /) -> object: ...

    def flush(self) -> object: ...


def _drain(held: _Held, offset: int, out: Sink) -> int:
    f = held.get()
    if f is not None:
        f.seek(offset)
        while chunk := f.read(1 << 16):
            out.write(chunk)
            offset += len(chunk)
    out.flush()
    return offset


@contextlib.contextmanager
def _signal_wake() -> Iterator[int | None]:
    """A pipe that a signal writes a byte to, for a blocking select to include.

    Without it, Ctrl-C landing between Python's last signal check and the select() call is
    only noticed when select returns, which with a pidfd and no timeout is when the process
    ends (seen under load in CI: an attached `run` ignored Ctrl-C for the child's lifetime).
    """
    if threading.current_thread() is not threading.main_thread():
        yield None  # signals are handled in the main thread only; nothing to wake here
        return
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    try:
        yield r
    finally:
        signal.set_wakeup_fd(old)
        os.close(r)
        os.close(w)


def _pidfd(pid: int | None, started: float | None) -> int | None:
    if pid is None or not is_same(pid, started):
        return None
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def follow_output(
    run: RunDir,
    out: Sink,
    *,
    offset: int = 0,
    shim: tuple[int | None, float | None] = (None, None),
    on_news: Callable[[], None] | None = None,
    source: Path | None = None,
) -> ExitRecord | None:
    """Copy output to `out` as it grows until the process ends; its exit record, if any.

    `on_news` is called when the daemon touches the run dir's `attached` file (a hook
    fired). `source` is the file to follow (output.log unless given: see `child_output`).
    Returns None when the shim vanished without an exit record (the process is lost).
    """
    held = _Held(source or run.output)
    ino = Inotify()
    pidfd = _pidfd(*shim)
    stack = contextlib.ExitStack()
    try:
        wake = stack.enter_context(_signal_wake())
        if on_news is not None:
            with contextlib.suppress(OSError):
                ino.add(str(run.attached), IN_ATTRIB)
        while True:
            with contextlib.suppress(OSError):  # not there yet: the tick looks again
                ino.add(held.watch_path(), _OUTPUT_EVENTS)  # before the read: no write slips by
            offset = _drain(held, offset, out)
            if (rec := run.read_exit()) is not None:
                _drain(held, offset, out)
                return rec
            if pidfd is None and shim[0] is not None and not is_same(*shim):
                return None  # gone without an exit record (checked once more above)
            waits = [fd for fd in (ino.fd, pidfd, wake) if fd is not None]
            ready, _, _ = select.select(waits, [], [], _TICK_S if pidfd is None else None)
            if wake is not None and wake in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake, 512)  # the signal's handler has run, or runs now
                continue
            if pidfd is not None and pidfd in ready:
                os.close(pidfd)
                pidfd = None  # ended: the loop reads the rest and the exit record
                shim = (shim[0], -1.0)  # and never takes a reused pid for it
                continue
            time.sleep(FOLLOW_GAP_S)
            events = ino.read()
            if on_news is not None and any(e.mask & IN_ATTRIB for e in events):
                # The line that fired is in the file already: show it before the news.
                with contextlib.suppress(OSError):
                    ino.add(held.watch_path(), _OUTPUT_EVENTS)
                offset = _drain(held, offset, out)
                on_news()
    finally:
        stack.close()
        ino.close()
        held.close()
        if pidfd is not None:
            os.close(pidfd)


def wait_for_file(path: os.PathLike[str], seconds: float) -> bool:
    """Wait until `path` exists (inotify on its folder), at most `seconds`."""
    p = os.fspath(path)
    deadline = time.monotonic() + seconds
    ino = Inotify()
    try:
        ino.add(os.path.dirname(p), IN_ATTRIB | IN_CREATE | IN_MOVED_TO)
        while not os.path.exists(p):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            select.select([ino.fd], [], [], left)
            ino.read()
        return True
    finally:
        ino.close()
