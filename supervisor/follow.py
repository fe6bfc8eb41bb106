"""Following a process's output from the CLI: `supervise run` attached and `logs -f`.

Woken by inotify, never by a sleep loop, and without taxing the child's writes: output.log
gets a one-shot IN_MODIFY watch armed again before each read (a watch on the run dir, as
watchfiles sets, made every write() of a line-at-a-time child pay a notification: 1.5x its
runtime). Its end comes by a pidfd on the shim, which exits right after writing exit.json.
An attached `run` also watches `attached`, which the daemon touches when a hook of this
process fired, so that the thread it spawned is named as it happens.
"""

from __future__ import annotations

import contextlib
import os
import select
import time
from collections.abc import Callable
from typing import BinaryIO

from supervisor.identity import is_same
from supervisor.inotify import IN_ATTRIB, IN_CREATE, IN_MODIFY, IN_MOVED_TO, IN_ONESHOT, Inotify
from supervisor.rundir import ExitRecord, RunDir

# After a write, let more pile up before copying: a human sees no difference, and a child
# writing a line at a time pays one notification per gap instead of one per line.
FOLLOW_GAP_S = 0.02
# Without a pidfd (the shim's pid is unknown or already gone): how often to look for the end.
_TICK_S = 2.0
_OUTPUT_EVENTS = IN_MODIFY | IN_ONESHOT


def _drain(run: RunDir, offset: int, out: BinaryIO) -> int:
    try:
        with open(run.output, "rb") as f:
            f.seek(offset)
            while chunk := f.read(1 << 16):
                out.write(chunk)
                offset += len(chunk)
    except FileNotFoundError:
        pass
    out.flush()
    return offset


def _pidfd(pid: int | None, started: float | None) -> int | None:
    if pid is None or not is_same(pid, started):
        return None
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def follow_output(
    run: RunDir,
    out: BinaryIO,
    *,
    offset: int = 0,
    shim: tuple[int | None, float | None] = (None, None),
    on_news: Callable[[], None] | None = None,
) -> ExitRecord | None:
    """Copy output to `out` as it grows until the process ends; its exit record, if any.

    `on_news` is called when the daemon touches the run dir's `attached` file (a hook
    fired). Returns None when the shim vanished without an exit record (the process is lost).
    """
    ino = Inotify()
    pidfd = _pidfd(*shim)
    try:
        if on_news is not None:
            with contextlib.suppress(OSError):
                ino.add(str(run.attached), IN_ATTRIB)
        while True:
            with contextlib.suppress(OSError):  # not there yet: the tick looks again
                ino.add(str(run.output), _OUTPUT_EVENTS)  # before the read: no write slips by
            offset = _drain(run, offset, out)
            if (rec := run.read_exit()) is not None:
                _drain(run, offset, out)
                return rec
            if pidfd is None and shim[0] is not None and not is_same(*shim):
                return None  # gone without an exit record (checked once more above)
            waits = [ino.fd] if pidfd is None else [ino.fd, pidfd]
            ready, _, _ = select.select(waits, [], [], _TICK_S if pidfd is None else None)
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
                    ino.add(str(run.output), _OUTPUT_EVENTS)
                offset = _drain(run, offset, out)
                on_news()
    finally:
        ino.close()
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
