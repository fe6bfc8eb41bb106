"""The trailing `--hook FILE` rule of `supervise run` (pure)."""

from __future__ import annotations

import pytest

from supervisor.running import split_trailing_hooks


@pytest.mark.parametrize(
    ("cmd", "rest", "hooks"),
    [
        (
            ["python", "manage.py", "migrate", "--hook", "h.yaml"],
            ["python", "manage.py", "migrate"],
            ["h.yaml"],
        ),
        (["job", "--hook", "a.yml", "--hook=b.json"], ["job"], ["a.yml", "b.json"]),
        (["grep", "--hook", "notes.txt"], ["grep", "--hook", "notes.txt"], []),  # not a hook file
        (["tool", "--hook", "h.yaml", "--verbose"], ["tool", "--hook", "h.yaml", "--verbose"], []),
        (["--hook", "h.yaml"], ["--hook", "h.yaml"], []),  # no command would be left
    ],
)
def test_split_trailing_hooks(cmd: list[str], rest: list[str], hooks: list[str]) -> None:
    assert split_trailing_hooks(cmd) == (rest, hooks)
