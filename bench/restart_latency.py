"""How long from a crash to the restart: a child that exits 1 at once, under `restart:
always`, restarted N times by a real daemon; per restart, the time from the crashed run's end
(the shim's record in exit.json) to the next run's child running (its first line: the time
`date` printed, a few ms after its exec).

    .venv/bin/python bench/restart_latency.py [--restarts 50] [--delay 0s] [--json]

With `--delay 0s` (the default here) this is supervise's own cost: the daemon notices the end
(a pidfd), commits it with the next run in one transaction, claims that run, seals its
environment, writes its run dir (fsync) and starts the shim. The peers' figures are their
default delays: systemd's RestartSec=100ms, Docker's first restart 100 ms, pm2 immediate
(restart_delay 0); supervise's default `delay` is 1s (a crash loop grows it), so a restart
with the defaults comes after 1 s plus the figure measured here.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sqlite3
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import Home  # noqa: E402  # bench/ is not a package

CHILD = "date +%s.%N; exit 1"


def measure(restarts: int, delay: str) -> list[float]:
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
        gaps = []
        for (a, _, _), (b, _, _) in itertools.pairwise(rows):
            ended = json.loads((home.dir / "runs" / str(a) / "exit.json").read_text())["ended_at"]
            started = float((home.dir / "runs" / str(b) / "output.log").read_text().split()[0])
            gaps.append(started - float(ended))
        return gaps
    finally:
        home.stop()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--restarts", type=int, default=50)
    p.add_argument("--delay", default="0s", help="the policy's delay (default 0s: our own cost)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    gaps = sorted(measure(args.restarts, args.delay))
    ms = [g * 1000 for g in gaps]
    figures = {
        "restarts": len(ms),
        "delay": args.delay,
        "p50_ms": round(statistics.median(ms), 1),
        "p90_ms": round(ms[int(len(ms) * 0.9) - 1], 1),
        "max_ms": round(ms[-1], 1),
        "min_ms": round(ms[0], 1),
    }
    if args.json:
        print(json.dumps(figures))
    else:
        print(
            f"crash -> restart (policy always, delay {args.delay}), {len(ms)} restarts: "
            f"p50 {figures['p50_ms']} ms, p90 {figures['p90_ms']} ms, max {figures['max_ms']} "
            f"ms (min {figures['min_ms']} ms); peers' defaults: systemd 100 ms (RestartSec), "
            "Docker 100 ms, pm2 immediate"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
