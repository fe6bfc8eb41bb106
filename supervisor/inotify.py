"""Linux inotify through libc: the daemon's wake-up source for output and exit records.

Why not watchfiles here: its Rust loop sleeps `step` ms between checks of its change set, so
it is a poll at step granularity (step=5 ms cost ~1% CPU idle; step=50 ms adds 50-100 ms to
every fire). A raw inotify fd awaited by the event loop costs nothing while idle and wakes
within a millisecond. The CLI's followers (follow.py) use it too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
from dataclasses import dataclass

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_ONESHOT = 0x80000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


@dataclass(frozen=True)
class Event:
    wd: int
    mask: int
    name: str


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


class Inotify:
    """One inotify instance; `fd` is readable when events wait."""

    def __init__(self) -> None:
        self.fd = _check(_libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC), "inotify_init1")

    def add(self, path: str, mask: int) -> int:
        """Watch `path`; the watch is live when this returns."""
        # As unsigned: IN_ONESHOT is the sign bit of a C int.
        return _check(
            _libc.inotify_add_watch(self.fd, os.fsencode(path), ctypes.c_uint32(mask)),
            f"watch {path}",
        )

    def remove(self, wd: int) -> None:
        _libc.inotify_rm_watch(self.fd, wd)  # fails harmlessly if the kernel dropped it

    def read(self) -> list[Event]:
        """Every event queued now (none if none)."""
        events: list[Event] = []
        while True:
            try:
                buf = os.read(self.fd, 64 * 1024)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    return events
                raise
            pos = 0
            while pos < len(buf):
                wd, mask, _cookie, size = _HEADER.unpack_from(buf, pos)
                raw = buf[pos + _HEADER.size : pos + _HEADER.size + size]
                events.append(Event(wd, mask, raw.rstrip(b"\0").decode(errors="replace")))
                pos += _HEADER.size + size

    def close(self) -> None:
        os.close(self.fd)
