"""What a merge can leave behind in any tracked file: conflict markers."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^(<<<<<<< |>>>>>>> )", re.MULTILINE)


def test_no_tracked_file_holds_a_conflict_marker() -> None:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    files = [ROOT / f for f in listed.stdout.decode().split("\0") if f]
    if listed.returncode != 0 or not files:  # a copy without .git (an sdist): read the tree
        files = [p for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts]
    bad = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        bad += [
            f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
            for m in MARKER.finditer(text)
        ]
    assert not bad, f"merge conflict markers left in: {bad}"
