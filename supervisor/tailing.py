"""Reading a growing output.log line by line from a saved position.

Lines, not chunks: a partial last line waits for its newline until the process has ended.
A line longer than MAX_LINE is matched on its first MAX_LINE bytes and the rest is skipped
without buffering it. A file replaced, truncated or rewritten under us (new inode, size below
the offset, a different first line, as fail2ban checks) restarts reading from its start.

The daemon's reader `follow`s the file it holds open: logrotate's default renames
output.log and creates a new one, but the child keeps writing to the renamed file through
its stdout, so that file is read to the process's end (as `tail -F` and fluent-bit keep
their fd); the new output.log is read too, from its start, by a second reader.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

MAX_LINE = 64 * 1024
READ_CHUNK = 8 * 1024 * 1024
_HEAD_BYTES = 256


@dataclass(frozen=True)
class TailPos:
    """Where reading stopped; saved with the fires it produced, in one transaction."""

    offset: int = 0
    inode: int | None = None
    head: str | None = None  # hash of the file's first line (at most 256 bytes of it)
    skipping: bool = False  # inside an over-long line whose prefix was already matched

    def at(self, offset: int, *, skipping: bool = False) -> TailPos:
        """This position moved to `offset` (dataclasses.replace costs ~2 us a call, and a
        busy daemon moves thousands of positions a second)."""
        return TailPos(offset, self.inode, self.head, skipping)


@dataclass(frozen=True)
class Lines:
    """Whole lines read from `start`; `data` ends with a newline unless `final`."""

    start: int
    data: bytes
    pos: TailPos
    restarted: str | None = None  # why reading went back to the file's start
    more: bool = False  # `chunk` cut the read short: more was written before it began

    @property
    def empty(self) -> bool:
        return not self.data


def head_hash(first: bytes) -> str | None:
    """The fingerprint of a file's beginning, once there is enough of it to be stable."""
    nl = first.find(b"\n")
    if nl >= 0:
        first = first[: nl + 1]
    elif len(first) < _HEAD_BYTES:
        return None  # the first line is still being written
    return hashlib.blake2b(first[:_HEAD_BYTES], digest_size=8).hexdigest()


_HOLE_HEAD = head_hash(b"\0" * _HEAD_BYTES)


def _check_same_file(
    fd: int, pos: TailPos, *, verify: bool
) -> tuple[TailPos, str | None, os.stat_result]:
    st = os.fstat(fd)
    reason = None
    if pos.inode is not None and st.st_ino != pos.inode:
        reason = "replaced"
    elif st.st_size < pos.offset:
        reason = "truncated"
    elif (
        verify
        and pos.head is not None
        and pos.offset > 0
        and head_hash(os.pread(fd, _HEAD_BYTES, 0)) not in (pos.head, _HOLE_HEAD)
    ):
        # A head that reads as zeros is our own punched hole (logcap.py), perhaps punched
        # just before a crash that kept the new fingerprint from being saved: not a new file.
        reason = "rewritten"
    if reason is not None:
        return TailPos(inode=st.st_ino), reason, st
    if pos.inode is None:
        pos = replace(pos, inode=st.st_ino)
    return pos, None, st


class LogReader:
    """output.log held open between reads: a read of nothing new costs one fstat.

    `verify` (the default) also checks that the path still names the file held open and
    that its first line is unchanged; the daemon asks for that on every step but the
    coalesced output reads, where a truncation is still noticed (the size shrinks).
    """

    def __init__(self, path: Path, *, follow: bool = False) -> None:
        self.path = path
        self.follow = follow  # keep the file held open when the path names another one
        self.moved = False  # (follow) a verifying read found the path naming another file
        self._fd: int | None = None
        self.blocks = 0  # st_blocks at the last read: what the file occupies on disk
        self.size = 0  # st_size and st_mtime at the last read (on_silence: the last write;
        self.mtime = 0.0  # read times: when what it read was last written)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> Path:
        """A path to the file held open, renamed or deleted as it may be (else `path`)."""
        return self.path if self._fd is None else Path(f"/proc/self/fd/{self._fd}")

    def at_path(self) -> bool:
        """Whether `path` still names the file held open (or nothing is held)."""
        if self._fd is None:
            return True
        try:
            return os.stat(self.path).st_ino == os.fstat(self._fd).st_ino
        except FileNotFoundError:
            return False

    def adopt(self, inode: int | None, places: Iterable[Path]) -> Path | None:
        """Hold open the first of `places` that is the file `inode` (any file if None): where
        a renamed output.log went, or /proc/PID/fd/1 of the shim, which writes to it."""
        for place in places:
            try:
                fd = os.open(place, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            if inode is None or os.fstat(fd).st_ino == inode:
                self.close()
                self._fd = fd
                return place
            os.close(fd)
        return None

    def _open(self, verify: bool) -> int | None:
        if self._fd is not None and verify and not self.at_path():
            if self.follow:
                self.moved = True  # renamed away (rotated): whoever writes it still does
            else:
                self.close()  # replaced: read the file the path names now
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return None
        return self._fd

    def read(
        self,
        pos: TailPos,
        *,
        final: bool,
        chunk: int = READ_CHUNK,
        skim: bool = False,
        verify: bool = True,
    ) -> Lines:
        """Read the next whole lines after `pos` (at most about `chunk` bytes).

        Args:
            pos: where the previous read stopped.
            final: the writer has ended, so a last line without a newline counts.
            chunk: how much to read at once; bounds memory.
            skim: nobody looks at the lines (no pattern is active): move to the end unread.
            verify: also check the path and the file's head (see the class).

        Returns:
            The lines (possibly none) and the position after them.
        """
        fd = self._open(verify)
        if fd is None:
            return Lines(pos.offset, b"", pos)
        pos, restarted, st = _check_same_file(fd, pos, verify=verify)
        self.blocks, self.size, self.mtime = st.st_blocks, st.st_size, st.st_mtime
        if pos.head is None:
            pos = replace(pos, head=head_hash(os.pread(fd, _HEAD_BYTES, 0)))
        size = st.st_size
        if skim:
            return Lines(size, b"", pos.at(size), restarted)
        # Exactly what is there: a fixed large request would allocate it on every read.
        data = os.pread(fd, min(chunk, size - pos.offset), pos.offset) if size > pos.offset else b""
        lines = _cut_lines(data, pos, final=final, restarted=restarted)
        return replace(lines, more=True) if size - pos.offset > chunk else lines


def read_lines(
    path: Path, pos: TailPos, *, final: bool, chunk: int = READ_CHUNK, skim: bool = False
) -> Lines:
    """`LogReader.read` on a file opened for this one read, with every check."""
    reader = LogReader(path)
    try:
        return reader.read(pos, final=final, chunk=chunk, skim=skim)
    finally:
        reader.close()


def _cut_lines(data: bytes, pos: TailPos, *, final: bool, restarted: str | None) -> Lines:
    start = pos.offset
    if pos.skipping:
        nl = data.find(b"\n")
        if nl < 0:
            # Still inside the over-long line: consume it without keeping it.
            end = start + len(data)
            return Lines(end, b"", pos.at(end, skipping=True), restarted)
        start += nl + 1
        data = data[nl + 1 :]
        pos = pos.at(start)
    last = data.rfind(b"\n")
    whole, partial = data[: last + 1], data[last + 1 :]
    end = start + len(whole)
    if partial and (final or len(partial) >= MAX_LINE):
        if len(partial) >= MAX_LINE and not final:
            # Match the prefix as a line now; skip the rest of it until its newline.
            return Lines(
                start,
                whole + partial[:MAX_LINE] + b"\n",
                pos.at(end + len(partial), skipping=True),
                restarted,
            )
        whole += partial
        end += len(partial)
    return Lines(start, whole, pos.at(end), restarted)


def tail_lines(
    path: Path, end: int | None = None, count: int = 50, max_bytes: int = 1 << 20, floor: int = 0
) -> list[str]:
    """The last `count` lines of the file before byte `end`, decoded with replacement.

    Reads at most `max_bytes` from the end, so a huge line never loads whole.
    """
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            stop = size if end is None else min(end, size)
            begin = max(floor, stop - max_bytes)
            f.seek(begin)
            blob = f.read(stop - begin)
    except FileNotFoundError:
        return []
    lines = blob.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if begin > 0 and lines:
        lines.pop(0)  # cut mid-line by the byte bound
    return [ln.decode("utf-8", "replace").rstrip("\r") for ln in lines[-count:]]
