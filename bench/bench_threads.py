"""Benchmarks inside threads: the agent loop's cost per step, and a PreToolUse hook's.

`bench/run.py` runs these with the core workloads and prints the table.

  loop   a scripted thread making --steps UpdatePlan calls (a tool that does no I/O), run by a
         real daemon: wall time from the first entry to the last, per step (one model turn,
         one tool call, their entries committed to SQLite).
  hook   the same thread with a PreToolUse shell hook `true` on every call, minus the loop
         figure and minus what `/bin/sh -c true` costs on its own: the hook machinery's cost
         per tool call (target <= 10 ms).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _cli(env: dict[str, str], *args: str, cwd: Path) -> str:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        env=env,
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def one_run(steps: int, hook: bool) -> float:
    """Seconds per step of one scripted thread (first entry to last)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = {
            **os.environ,
            "SUPERVISE_HOME": str(work / "home"),
            "PYTHONPATH": str(ROOT),
            "SUPERVISE_CONFIG": str(work / "none.toml"),
        }
        call = {"name": "UpdatePlan", "arguments": {"tasks": [{"title": "x", "status": "pending"}]}}
        turns = [{"tool_calls": [call]}] * steps + [{"content": "done"}]
        (work / "turns.yaml").write_text(yaml.safe_dump({"turns": turns}))
        agent: dict[str, Any] = {
            "model": "scripted:turns.yaml",
            "max_turns": steps + 5,
            "system_hooks": {"tests_not_run": False},
        }
        if hook:
            agent["hooks"] = {"PreToolUse": [{"matcher": "*", "command": "true"}]}
        body = {"hooks": [{"name": "h", "on_exit": {}, "instructions": "x"}], "agent": agent}
        (work / "hooks.yaml").write_text(yaml.safe_dump(body))
        daemon = subprocess.Popen(
            [sys.executable, "-m", "supervisor", "daemon"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(1.0)
            _cli(env, "run", "-d", "--hook", "hooks.yaml", "--", "true", cwd=work)
            db = work / "home" / "state.db"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                with sqlite3.connect(db) as c:
                    row = c.execute("select status from thread where id = 1").fetchone()
                if row and row[0] in ("completed", "failed"):
                    break
                time.sleep(0.05)
            with sqlite3.connect(db) as c:
                ats = [r[0] for r in c.execute("select at from entry where thread_id = 1")]
            return (max(ats) - min(ats)) / steps
        finally:
            daemon.terminate()
            daemon.wait(10)


def sh_true() -> float:
    n, start = 50, time.perf_counter()
    for _ in range(n):
        subprocess.run(["/bin/sh", "-c", "true"], check=True)
    return (time.perf_counter() - start) / n
