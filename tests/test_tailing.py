"""Reading whole lines from a growing file: partial lines, long lines, rotation, bad bytes."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.tailing import MAX_LINE, TailPos, read_lines, tail_lines


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def test_partial_line_waits_for_its_newline(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    _append(log, b"one\ntw")
    got = read_lines(log, TailPos(), final=False)
    assert got.data == b"one\n" and got.pos.offset == 4
    _append(log, b"o\nthr")
    got = read_lines(log, got.pos, final=False)
    assert got.data == b"two\n" and got.start == 4
    final = read_lines(log, got.pos, final=True)
    assert final.data == b"thr" and final.pos.offset == log.stat().st_size


def test_long_line_is_cut_to_its_prefix_and_skipped(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    _append(log, b"a" * (MAX_LINE + 10))
    got = read_lines(log, TailPos(), final=False, chunk=MAX_LINE * 2)
    assert got.data == b"a" * MAX_LINE + b"\n" and got.pos.skipping
    _append(log, b"b" * (3 * MAX_LINE))
    got = read_lines(log, got.pos, final=False, chunk=MAX_LINE)
    assert got.data == b"" and got.pos.skipping  # still inside the long line, nothing kept
    _append(log, b"tail\nnext\n")
    pos = got.pos
    data = b""
    for _ in range(10):
        got = read_lines(log, pos, final=False, chunk=MAX_LINE)
        data += got.data
        pos = got.pos
    assert data == b"next\n" and not pos.skipping


def test_truncation_and_replacement_restart_from_the_start(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    _append(log, b"first line\nsecond\n")
    got = read_lines(log, TailPos(), final=False)
    log.write_bytes(b"new\n")  # truncated under the tailer
    again = read_lines(log, got.pos, final=False)
    assert again.restarted == "truncated" and again.data == b"new\n"
    log.unlink()
    _append(log, b"other first line\n" * 3)  # a new inode
    third = read_lines(log, again.pos, final=False)
    # ext4 may hand the new file the old inode number: the head check catches that.
    assert third.restarted in ("replaced", "rewritten") and third.start == 0


def test_rewritten_head_is_detected(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    _append(log, b"alpha\nbeta\n")
    got = read_lines(log, TailPos(), final=False)
    with open(log, "r+b") as f:  # same inode, same size or more, other first line
        f.write(b"gamma\ndelta\nmore\n")
    again = read_lines(log, got.pos, final=False)
    assert again.restarted == "rewritten" and again.data.startswith(b"gamma\n")


def test_tail_lines_decodes_with_replacement(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    _append(log, b"".join(b"l%d\n" % i for i in range(100)) + b"bad \xff\xfe\n")
    tail = tail_lines(log, None, 3)
    assert tail == ["l98", "l99", "bad \ufffd\ufffd"]
    assert tail_lines(log, 6, 50) == ["l0", "l1"]
    assert tail_lines(tmp_path / "missing", None) == []


def test_skim_moves_to_the_end_unread(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    _append(log, b"one\ntwo\npartial")
    got = read_lines(log, TailPos(), final=False, skim=True)
    assert got.data == b"" and got.pos.offset == log.stat().st_size


def test_a_punched_head_is_not_a_new_file(tmp_path: Path) -> None:
    from supervisor.logcap import Punch, punch

    log = tmp_path / "out.log"
    _append(log, b"".join(b"line %d\n" % i for i in range(2000)))
    got = read_lines(log, TailPos(), final=False)
    _append(log, b"after\n")
    # The daemon punched the head, then died before saving the new fingerprint.
    punch(log, tmp_path / "out.log.1", Punch(0, 8192), limit=1 << 20)
    again = read_lines(log, got.pos, final=False)
    assert again.restarted is None and again.data == b"after\n"


def test_a_burst_larger_than_the_archive_keeps_only_its_newest_part(tmp_path: Path) -> None:
    from supervisor.logcap import Punch, punch

    log, archive = tmp_path / "out.log", tmp_path / "out.log.1"
    body = b"".join(b"%07d\n" % i for i in range(4096))  # 32 KiB, 8 bytes a line
    _append(log, body)
    punch(log, archive, Punch(0, 24576), limit=8192)
    # Only the newest 8 KiB before the punch point are worth copying: the rest would be
    # dropped with the archive's generation anyway.
    assert archive.read_bytes() == body[24576 - 8192 : 24576]
    with open(log, "rb") as f:
        assert f.read(24576) == b"\0" * 24576
        assert f.read() == body[24576:]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\0", b"")), max_size=12))
def test_whole_lines_come_out_once_however_the_writes_fall(writes: list[bytes]) -> None:
    # A read after each write, a final read at the end: every byte comes out exactly once,
    # in order, and before the end only as whole lines.
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "out.log"
        log.touch()
        pos, out = TailPos(), b""
        for data in writes:
            _append(log, data)
            got = read_lines(log, pos, final=False)
            assert got.data == b"" or got.data.endswith(b"\n")
            assert got.start == pos.offset and got.restarted is None and not got.more
            out, pos = out + got.data, got.pos
        last = read_lines(log, pos, final=True)
        assert out + last.data == b"".join(writes)
        assert last.pos.offset == log.stat().st_size
