"""How long from a crash to the restart: a child that exits 1 at once, under `restart:
always`, restarted N times by a real daemon; per restart, the time from the crashed run's end
(the shim's record in exit.json) to the next run's child running (its first line: the time
`date` printed, a few ms after its exec).

    .venv/bin/python bench/restart_latency.py [--restarts 50] [--delay 0s] [--peers] [--json]

bench/run.py runs it with the peers, side by side. The peers are measured from the crashed
child's line to the next child's line (neither records its children's ends as the shim
does), so supervise is measured that way too (`line`): the crashed child's `exit 1` after its
`date` (about 1 ms) is in that figure, for all three alike. The peers run with their fastest
settings: supervisord `autorestart=true, startsecs=0` (it has no restart delay), pm2
`--restart-delay 0` (its default).

With `--delay 0s` (the default here) this is supervise's own cost: the daemon notices the end
(a pidfd), commits it with the next run in one transaction, claims that run, seals its
environment, writes its run dir (fsync) and starts the shim. The peers' figures are their
default delays: systemd's RestartSec=100ms, Docker's first restart 100 ms, pm2 immediate
(restart_delay 0); supervise's default `delay` is 1s (a crash loop grows it), so a restart
with the defaults comes after 1 s plus the figure measured here.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_core as core  # noqa: E402  # bench/ is not a package
from bench_core import Home  # noqa: E402

CHILD = "date +%s.%N; exit 1"


def measure(restarts: int, delay: str) -> dict[str, list[float]]:
    """Seconds from each crash to the next run's child running: `exit` from the shim's exit
    record, `line` from the crashed child's line (as the peers are measured)."""
    home = Home()
    try:
        home.start()
        hooks = home.dir / "restart.json"
        policy = {"policy": "always", "delay": delay, "factor": 1, "max_delay": delay or "0s",
                  "max_restarts": restarts, "within": "1h"}  # fmt: skip
        hooks.write_text(json.dumps({"restart": policy}))
        warm = home.dir / "warm.json"
        warm.write_text(json.dumps({"hooks": []}))
        home.warm_up(warm)  # a new daemon's first commit pays SQLAlchemy's set-up
        out = home.cli("run", "-d", "--json", "--hook", str(hooks), "--", "sh", "-c", CHILD)
        first = json.loads(out)["id"]
        db = home.dir / "state.db"
        deadline = time.monotonic() + 60 + restarts * 5
        rows: list[tuple[int, int, str]] = []
        while time.monotonic() < deadline:
            with sqlite3.connect(db) as c:
                rows = c.execute(
                    "select id, run_no, state from process where first_id = ? order by run_no",
                    (first,),
                ).fetchall()
            if rows and rows[-1][2] == "crash-loop":
                break
            time.sleep(0.2)
        else:
            raise SystemExit(f"the crash loop did not end: {rows[-3:]}")
        gaps: dict[str, list[float]] = {"exit": [], "line": []}
        for (a, _, _), (b, _, _) in itertools.pairwise(rows):
            ended = json.loads((home.dir / "runs" / str(a) / "exit.json").read_text())["ended_at"]
            crashed = float((home.dir / "runs" / str(a) / "output.log").read_text().split()[0])
            started = float((home.dir / "runs" / str(b) / "output.log").read_text().split()[0])
            gaps["exit"].append(started - float(ended))
            gaps["line"].append(started - crashed)
        return gaps
    finally:
        home.stop()


def _line_gaps(log: Path, restarts: int, alive: Callable[[], bool]) -> list[float] | str:
    """Gaps between the first `restarts` + 1 lines of `log`, each a child's `date`."""
    deadline = time.monotonic() + 30 + restarts * 2
    stamps: list[float] = []
    while time.monotonic() < deadline and alive():
        with contextlib.suppress(OSError, ValueError):
            stamps = [float(x) for x in log.read_text().split()]
        if len(stamps) > restarts:
            return [b - a for a, b in itertools.pairwise(stamps[: restarts + 1])]
        time.sleep(0.2)
    return f"only {len(stamps)} runs of {restarts + 1} in time"


def supervisord_gaps(restarts: int) -> list[float] | str:
    """The crashing child under supervisord (autorestart, no start grace); or why not."""
    bin_dir = core._supervisord_bin()
    if isinstance(bin_dir, str):
        return bin_dir
    work = Path(tempfile.mkdtemp(prefix="supervisord-restart-"))
    try:
        conf = core._supervisord_conf(
            work,
            # `%` is supervisord's interpolation: spelled %% in its config.
            f"[program:crash]\ncommand=sh -c '{CHILD.replace('%', '%%')}'\nautostart=true\n"
            "autorestart=true\n"
            f"startsecs=0\nstartretries=1000\nstdout_logfile={work}/out.log\n"
            "stdout_logfile_maxbytes=0\nredirect_stderr=true\n",
        )
        sd = core._Supervisord(bin_dir, conf)
        try:
            return _line_gaps(work / "out.log", restarts, lambda: sd.proc.poll() is None)
        finally:
            sd.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def pm2_gaps(restarts: int) -> list[float] | str:
    """The crashing child under pm2 (npm-installed into a cache folder); or why not."""
    pm2 = core._pm2_bin()
    if isinstance(pm2, str):
        return pm2
    work = Path(tempfile.mkdtemp(prefix="pm2-restart-"))
    env = {**os.environ, "PM2_HOME": str(work / "pm2home")}
    script = work / "crash.sh"
    script.write_text(f"#!/bin/sh\n{CHILD}\n")
    try:
        subprocess.run(
            [
                *(str(pm2), "start", str(script), "--name", "crash", "--interpreter", "sh"),
                *("--restart-delay", "0", "--max-restarts", str(restarts * 2 + 10)),
                *("-o", str(work / "out.log"), "-e", str(work / "err.log")),
            ],
            env=env,
            capture_output=True,
            check=True,
        )
        return _line_gaps(work / "out.log", restarts, lambda: True)
    finally:
        subprocess.run([str(pm2), "kill"], env=env, capture_output=True, check=False)
        shutil.rmtree(work, ignore_errors=True)


def figures(gaps: list[float]) -> dict[str, float]:
    """p50, p95, min and max of `gaps`, in ms."""
    ms = sorted(g * 1000 for g in gaps)
    return {
        "restarts": len(ms),
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": round(ms[max(0, math.ceil(len(ms) * 0.95) - 1)], 1),
        "min_ms": round(ms[0], 1),
        "max_ms": round(ms[-1], 1),
    }


def compare(restarts: int, delay: str, *, peers: bool) -> dict[str, Any]:
    """supervise (both measures) and, with `peers`, supervisord and pm2 in the same run; a
    peer that cannot run says why instead of its figures."""
    ours = measure(restarts, delay)
    got: dict[str, Any] = {
        "delay": delay,
        "supervise_exit": figures(ours["exit"]),
        "supervise_line": figures(ours["line"]),
    }
    for name, run in (("supervisord", supervisord_gaps), ("pm2", pm2_gaps)):
        if not peers:
            got[name] = "--no-peers"
            continue
        gaps = run(restarts)
        got[name] = gaps if isinstance(gaps, str) else figures(gaps)
    return got


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--restarts", type=int, default=50)
    p.add_argument("--delay", default="0s", help="the policy's delay (default 0s: our own cost)")
    p.add_argument("--peers", action="store_true", help="supervisord and pm2 too")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    got = compare(args.restarts, args.delay, peers=args.peers)
    if args.json:
        print(json.dumps(got))
        return 0
    print(
        f"crash -> restart, {args.restarts} restarts (supervise: policy always, delay {args.delay})"
    )
    for key, label in (
        ("supervise_exit", "supervise, from the exit record"),
        ("supervise_line", "supervise, line to line"),
        ("supervisord", "supervisord, line to line"),
        ("pm2", "pm2, line to line"),
    ):
        f = got.get(key)
        if isinstance(f, dict):
            print(f"  {label}: p50 {f['p50_ms']} ms, p95 {f['p95_ms']} ms, max {f['max_ms']} ms")
        elif f is not None:
            print(f"  {label}: not run: {f}")
    print("  peers' defaults: systemd 100 ms (RestartSec), Docker 100 ms, pm2 immediate")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
