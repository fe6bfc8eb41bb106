"""Pattern scanning over buffers: lines, budgets, RE2 safety."""

from __future__ import annotations

import time

import pytest

from supervisor.matching import Matcher, compile_pattern
from supervisor.tailing import MAX_LINE


def test_matches_are_whole_lines_in_order() -> None:
    data = b"ok\nERROR one\nfine\nwarn: deadlock detected\nERROR two\n"
    m = Matcher(["ERROR", "deadlock"])
    got = [(data[x.start : x.end], x.pattern) for x in m.scan(data, [5, 5])]
    assert got == [(b"ERROR one", 0), (b"warn: deadlock detected", 1), (b"ERROR two", 0)]


def test_budget_limits_and_zero_skips() -> None:
    data = b"x\n" * 100
    m = Matcher(["x", "x"])
    got = m.scan(data, [3, 0])
    assert len(got) == 3 and {g.pattern for g in got} == {0}


def test_anchors_work_per_line_and_empty_matches_advance() -> None:
    data = b"a start\nstart b\nend\n"
    assert [g.start for g in Matcher(["^start"]).scan(data, [9])] == [8]
    assert len(Matcher(["z*"]).scan(data, [9])) == 3


def test_match_past_the_line_cap_is_ignored() -> None:
    data = b"a" * (MAX_LINE + 5) + b"NEEDLE\nNEEDLE\n"
    got = Matcher(["NEEDLE"]).scan(data, [5])
    assert len(got) == 1 and data[got[0].start : got[0].end] == b"NEEDLE"


def test_many_patterns_use_one_set_pass() -> None:
    pats = [f"needle{i} " for i in range(50)]
    data = b"hay\n" * 1000 + b"needle42 here\n"
    got = Matcher(pats).scan(data, [1] * 50)
    assert [(g.pattern, data[g.start : g.end]) for g in got] == [(42, b"needle42 here")]


def test_catastrophic_pattern_is_linear() -> None:
    data = b"a" * 200_000 + b"!\n"
    start = time.monotonic()
    Matcher(["(a+)+$"]).scan(data, [1])
    assert time.monotonic() - start < 2.0  # Python's re would take longer than the universe


def test_non_utf8_bytes_do_not_crash() -> None:
    data = b"\xff\xfe ERROR \x80\n"
    assert len(Matcher(["ERROR"]).scan(data, [1])) == 1


def test_unsupported_syntax_is_explained() -> None:
    with pytest.raises(ValueError, match="lookaround or backreferences"):
        compile_pattern("(?<=x)y")
