"""When each chunk of a run's output was read: `output.times` in its run dir, read by
`logs --timestamps` and `logs --since`.

Nobody sees the child's writes as they happen: the child writes output.log itself (no pipe
runs through the shim or the daemon, so a slow or dead reader costs it nothing). The
daemon's reader, which reads every chunk anyway, appends one line per read: `END MTIME`, the
bytes up to END (after the previous entry's END) were in the file by MTIME, the file's
modification time at that read. That is the time of the chunk's last write: the read time
or a little before it, and for what a daemon reads on its return, when the last of it was
written while it was down. Every line of a chunk shares its time.

The cost is per read, never per write: a line-per-write child writes exactly what it wrote
before. Reads are coalesced already (coalesce.py: 20 to 100 ms apart while output keeps
coming), and entries are at most one per `MIN_GAP_S`: reads in between are folded into the
next entry (its later time covers them), written when the gap has passed or when a read
finds nothing new (the process went quiet), so no entry waits past the next read.

Crashes: an entry is one small O_APPEND write, so it is whole or absent; a torn last line
(power loss) is set apart by a newline before the next entry and skipped. A daemon killed
before its offset was saved reads some bytes again: entries only ever grow (`END` above the
last one's), so a re-read adds nothing for what has a time already. A file truncated or
replaced under the reader (copytruncate) starts over: an entry `0 TIME` says so, and a
reader drops what came before it.

The launch creates the (empty) file: a run dir without one is from before read times were
recorded, and its output shows without them.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

MIN_GAP_S = 0.1  # at most ten entries a second per process, ~25 bytes each
_TAIL_BYTES = 128  # enough to hold the last whole entry


@dataclass(frozen=True, slots=True)
class Mark:
    """Bytes before `end` (from the previous mark's end) were in the file by `at`."""

    end: int
    at: float

    def line(self) -> bytes:
        return b"%d %.3f\n" % (self.end, self.at)


def parse(data: bytes) -> list[Mark]:
    """The marks of an index's text, from its last start over (a mark at or below the one
    before it); a line that is not a whole entry is skipped."""
    marks: list[Mark] = []
    for line in data.split(b"\n")[:-1]:  # after the last newline: being written
        parts = line.split(b" ")
        if len(parts) != 2:
            continue
        try:
            mark = Mark(int(parts[0]), float(parts[1]))
        except ValueError:
            continue
        if mark.end < 0 or not math.isfinite(mark.at):
            continue
        if marks and mark.end <= marks[-1].end:
            marks.clear()  # the file started over: earlier offsets name other bytes
        marks.append(mark)
    return marks


@dataclass(frozen=True, slots=True)
class Times:
    """A run's marks, and what bytes past the last one are stamped with (`after`: the
    output file's modification time when `logs` read it)."""

    marks: list[Mark]
    after: float | None
    ends: list[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ends", [m.end for m in self.marks])  # searched per line

    def at(self, offset: int) -> float | None:
        """The time of the byte at `offset`: its chunk's, or `after` past the last mark."""
        i = bisect.bisect_right(self.ends, offset)
        return self.marks[i].at if i < len(self.marks) else self.after

    def start_since(self, since: float, floor: int) -> int:
        """Where lines read at `since` or later may begin (a byte offset, at least
        `floor`): the end of the last mark before `since` (times only grow, but a clock set
        back could break that: then the scan starts earlier and each line is checked)."""
        start = floor
        for m in self.marks:
            if m.at >= since:
                break
            start = max(start, m.end)
        return start


def load(path: Path, output: Path) -> Times | None:
    """The times of a run: None if it has no index (from before read times were kept)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    after = None
    with contextlib.suppress(OSError):
        after = output.stat().st_mtime
    return Times(parse(data), after)


def stamp(at: float) -> bytes:
    """`2026-11-26T10:18:36.123+00:00 `: ISO 8601, local time, milliseconds."""
    return datetime.fromtimestamp(at).astimezone().isoformat(timespec="milliseconds").encode()


def lines_from(path: Path, start: int, block: int = 1 << 16) -> Iterator[tuple[int, bytes]]:
    """(offset, line with its newline) from `start` to the end; the last may lack one."""
    with open(path, "rb") as f:
        f.seek(start)
        at, rest = start, b""
        while chunk := f.read(block):
            rest += chunk
            begin = 0
            while (nl := rest.find(b"\n", begin)) >= 0:
                yield at, rest[begin : nl + 1]
                at += nl + 1 - begin
                begin = nl + 1
            rest = rest[begin:]
        if rest:
            yield at, rest


def line_start(path: Path, offset: int, floor: int) -> int:
    """The start of the line holding byte `offset` (at least `floor`)."""
    if offset <= floor:
        return floor
    with open(path, "rb") as f:
        pos = offset
        while pos > floor:
            begin = max(floor, pos - 4096)
            f.seek(begin)
            nl = f.read(pos - begin).rfind(b"\n")
            if nl >= 0:
                return begin + nl + 1
            pos = begin
    return floor


class Writer:
    """The daemon's side: appends marks to one run's index (see the module's docstring).

    Inactive when the run has no index file (launched before read times were kept: a mark
    now would give its older bytes a wrong time)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._off = False
        self._end = 0  # the last written mark's end
        self._pending: Mark | None = None
        self._written_at = -math.inf  # monotonic

    def _open(self) -> int | None:
        if self._fd is None and not self._off:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
            except OSError:
                self._off = True
                return None
            size = os.fstat(fd).st_size
            tail = os.pread(fd, _TAIL_BYTES, max(0, size - _TAIL_BYTES))
            if tail and not tail.endswith(b"\n"):
                os.write(fd, b"\n")  # a torn entry stays on a line of its own
            marks = parse(tail[tail.find(b"\n") + 1 :] if size > _TAIL_BYTES else tail)
            self._end = marks[-1].end if marks else 0
            self._fd = fd
        return self._fd

    def note(self, end: int, at: float, *, restarted: bool, now: float) -> None:
        """A read found the file at `end` bytes, last written at `at`."""
        if self._open() is None:
            return
        if restarted:
            self.flush(now)
            self._write(Mark(0, at))  # a new file: offsets start over
        if end <= max(self._end, self._pending.end if self._pending else 0):
            return  # read before (a re-read after a daemon's crash): it has its time
        self._pending = Mark(end, at)  # folds in an unwritten one: the later time covers both
        if now - self._written_at >= MIN_GAP_S:
            self.flush(now)

    def flush(self, now: float) -> None:
        """Write the folded entry, if any (a read found nothing new; the run ended)."""
        if self._pending is not None:
            self._write(self._pending)
            self._pending = None
            self._written_at = now

    def _write(self, mark: Mark) -> None:
        if self._fd is None:
            return
        try:
            os.write(self._fd, mark.line())
        except OSError:
            return  # a full disk: times are a convenience, the output itself goes on
        self._end = mark.end

    def drop_before(self, offset: int, now: float) -> None:
        """Forget the marks of bytes before `offset` (freed from output.log by the size bound,
        logcap.py), so the index stays as bounded as the output: rewritten aside and renamed
        over, so a crash leaves the old index or the new one."""
        self.flush(now)
        if self._fd is None:
            return
        try:
            marks = parse(self.path.read_bytes())
            keep = [m for m in marks if m.end > offset]
            if len(keep) == len(marks):
                return
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_bytes(b"".join(m.line() for m in keep))
            os.replace(tmp, self.path)
        except OSError:
            return
        os.close(self._fd)
        self._fd = None  # reopened on the next note

    def close(self, now: float) -> None:
        self.flush(now)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
