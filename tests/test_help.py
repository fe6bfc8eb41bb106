"""`--help` is checked against files, so a CLI change shows up as a visible diff.

After an intended change: `COLUMNS=100 supervise --help > tests/help/supervise.txt`
(and `run --help > tests/help/supervise-run.txt`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HELP = Path(__file__).parent / "help"


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ([], "supervise.txt"),
        (["run"], "supervise-run.txt"),
        (["ask"], "supervise-ask.txt"),
        (["thread", "show"], "supervise-thread-show.txt"),
        (["ps"], "supervise-ps.txt"),
        (["logs"], "supervise-logs.txt"),
        (["stop"], "supervise-stop.txt"),
        (["restart"], "supervise-restart.txt"),
        (["fires"], "supervise-fires.txt"),
        (["prune"], "supervise-prune.txt"),
        (["completion"], "supervise-completion.txt"),
        (["up"], "supervise-up.txt"),
        (["down"], "supervise-down.txt"),
        (["notify"], "supervise-notify.txt"),
        (["notify", "list"], "supervise-notify-list.txt"),
        (["notify", "test"], "supervise-notify-test.txt"),
    ],
)
def test_help_matches_the_recorded_text(args: list[str], name: str) -> None:
    env = {**os.environ, "COLUMNS": "100"}
    out = subprocess.run(
        [sys.executable, "-m", "supervisor", *args, "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert out == (HELP / name).read_text()
