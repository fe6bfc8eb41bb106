"""Benchmarks inside threads: the agent loop's cost per step, and a PreToolUse hook's.

Run: `python bench/bench_threads.py [--steps 40] [--runs 3]`. Prints a table; writes
bench/results_threads.json. It measures, it never fails.

  loop   a scripted thread making --steps UpdatePlan calls (a tool that does no I/O), run by a
         real daemon: wall time from the first entry to the last, per step (one model turn,
         one tool call, their entries committed to SQLite).
  hook   the same thread with a PreToolUse shell hook `true` on every call, minus the loop
         figure and minus what `/bin/sh -c true` costs on its own: the hook machinery's cost
         per tool call (target <= 10 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    loop = statistics.median(one_run(a.steps, False) for _ in range(a.runs))
    hooked = statistics.median(one_run(a.steps, True) for _ in range(a.runs))
    true_s = sh_true()
    figures = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "steps": a.steps,
        "runs": a.runs,
        "loop_ms_per_step": round(loop * 1000, 2),
        "hooked_ms_per_step": round(hooked * 1000, 2),
        "sh_true_ms": round(true_s * 1000, 2),
        "hook_overhead_ms": round((hooked - loop - true_s) * 1000, 2),
    }
    rows = [
        ("loop: one model turn + one tool call, per step", "loop_ms_per_step"),
        ("the same with a PreToolUse hook `true`", "hooked_ms_per_step"),
        ("/bin/sh -c true on its own", "sh_true_ms"),
        ("hook machinery per tool call (target <= 10 ms)", "hook_overhead_ms"),
    ]
    print(f"{'figure':<52} measured")
    for label, key in rows:
        print(f"{label:<52} {figures[key]} ms")
    (ROOT / "bench" / "results_threads.json").write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
