"""The packages import one way: supervisor -> agent_threads -> state -> supervise.

Checked by `bench/code_metrics.py` (which also prints the sizes and the complexity the review
asks for), run as a program on this checkout and on a tree that breaks the rule.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
METRICS = ROOT / "bench" / "code_metrics.py"


def metrics(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(METRICS), str(root)], capture_output=True, text=True, timeout=60
    )


def test_this_checkout_imports_one_way() -> None:
    r = metrics(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no upward import" in r.stdout
    assert "supervisor -> agent_threads:" in r.stdout


def test_an_upward_import_inside_a_function_is_caught(tmp_path: Path) -> None:
    for pkg in ("supervise", "state", "agent_threads", "supervisor"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "supervisor" / "cli.py").write_text("from state import db\n")
    (tmp_path / "state" / "db.py").write_text(
        "import supervise.errors\n\n\ndef late():\n    from agent_threads.loop import run\n"
        "    return run\n"
    )
    r = metrics(tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "UPWARD imports (1)" in r.stdout
    assert "state/db.py:5: state imports agent_threads.loop" in r.stdout
    assert "supervisor -> state: 1" in r.stdout and "state -> supervise: 1" in r.stdout
