"""Bounding output.log on disk without moving anything under the child or the tailer.

The child holds output.log open with O_APPEND, so the file cannot be renamed away (the child
would keep writing to the old one) or truncated (bytes written meanwhile would be lost). We
punch a hole instead: the scanned head of the file is copied to output.log.1 (one older
generation, replaced when full) and its blocks are freed with FALLOC_FL_PUNCH_HOLE. The
apparent size keeps growing, so every saved offset stays valid; disk use stays near
`max_log_bytes`; punching is idempotent, so a crash at any point is harmless.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass
from pathlib import Path

# The max_log_bytes setting's default (state/settings.py), for a Tracker not given one.
from state.settings import DEFAULT_MAX_LOG_BYTES as DEFAULT_MAX_LOG_BYTES

BLOCK = 4096
_PUNCH_HOLE, _KEEP_SIZE = 0x02, 0x01
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


@dataclass(frozen=True)
class Punch:
    start: int
    end: int


def cap_due(limit: int, scanned: int, punched: int) -> bool:
    """Whether freeing may be worth a look: only once the scanned bytes pass half the bound
    beyond what is freed already (most reads stop here, before any stat of the file)."""
    return limit > 0 and scanned - limit // 2 > punched + BLOCK


def plan_punch(on_disk: int, scanned: int, punched: int, limit: int) -> Punch | None:
    """Which scanned bytes to free, keeping about half the limit readable in output.log."""
    if limit <= 0 or on_disk <= limit:
        return None
    end = (scanned - limit // 2) // BLOCK * BLOCK
    if end <= punched:
        return None
    return Punch(punched, end)


def punch(output: Path, archive: Path, p: Punch, limit: int) -> None:
    """Copy output[p.start:p.end] to the archive, then free those blocks of output."""
    size = archive.stat().st_size if archive.exists() else 0
    start = p.start
    if size + (p.end - start) > limit:
        size = 0  # keep one older generation only
        # A burst larger than the archive: copy only the part the archive keeps.
        start = max(start, p.end - limit)
    dst = os.open(archive, os.O_WRONLY | os.O_CREAT, 0o600)  # not O_APPEND: copy_file_range
    try:
        os.ftruncate(dst, size)
        with open(output, "rb") as src:
            # In-kernel copy: the bytes never pass through this process.
            at, left = start, p.end - start
            while left > 0:
                done = os.copy_file_range(src.fileno(), dst, left, at, size)
                if done == 0:
                    break
                at, size, left = at + done, size + done, left - done
    finally:
        os.close(dst)
    fd = os.open(output, os.O_WRONLY)
    try:
        if _libc.fallocate(fd, _PUNCH_HOLE | _KEEP_SIZE, p.start, p.end - p.start) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"cannot free space in {output}: {os.strerror(err)}")
    finally:
        os.close(fd)
