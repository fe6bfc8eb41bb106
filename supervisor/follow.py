"""Following a process's output from the CLI: `supervise run` attached and `logs -f`.

Woken by inotify (watchfiles) on the run dir, never by a sleep loop; a slow safety tick
checks that the shim still lives, in case it was killed without writing exit.json.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import BinaryIO

from watchfiles import watch

from supervisor.identity import is_same
from supervisor.rundir import ExitRecord, RunDir

_TICK_MS = 2000


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


def follow_output(
    run: RunDir,
    out: BinaryIO,
    *,
    offset: int = 0,
    shim: tuple[int | None, float | None] = (None, None),
    on_wait: Callable[[], None] | None = None,
) -> ExitRecord | None:
    """Copy output to `out` as it grows until the process ends; its exit record, if any.

    Returns None when the shim vanished without an exit record (the process is lost).
    """
    offset = _drain(run, offset, out)
    if (rec := run.read_exit()) is not None:
        _drain(run, offset, out)
        return rec
    for _changes in watch(
        run.path,
        watch_filter=None,
        debounce=50,
        step=5,
        rust_timeout=_TICK_MS,
        yield_on_timeout=True,
    ):
        offset = _drain(run, offset, out)
        if (rec := run.read_exit()) is not None:
            _drain(run, offset, out)
            return rec
        if shim[0] is not None and not is_same(*shim) and run.read_exit() is None:
            return None
        if on_wait is not None:
            on_wait()
    return None


def wait_for_file(path: os.PathLike[str], seconds: float) -> bool:
    """Wait until `path` exists (inotify on its folder), at most `seconds`."""
    p = os.fspath(path)
    deadline = time.monotonic() + seconds
    if os.path.exists(p):
        return True
    for _ in watch(
        os.path.dirname(p),
        watch_filter=None,
        debounce=50,
        step=5,
        rust_timeout=250,
        yield_on_timeout=True,
        recursive=False,
    ):
        if os.path.exists(p):
            return True
        if time.monotonic() >= deadline:
            return False
    return os.path.exists(p)
