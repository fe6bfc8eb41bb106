"""What recording read times costs: the line-per-write child (one write() per line,
PYTHONUNBUFFERED=1) writes LINES lines under a real daemon, with no hook at all (the daemon
only moves its offset) and with 10 output patterns; per run, the child's own runtime beside
the same child writing to a plain file, the daemon's CPU seconds, and the size of
output.log and of its read-time index (`output.times`, one entry per read, at most one per
`readtimes.MIN_GAP_S`).

    .venv/bin/python bench/read_times.py [--lines 200000] [--pairs 5] [--json]

Run it on a commit before read times were recorded for the figures without the index.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_core as core  # bench/ is not a package


def _index(home: core.Home) -> tuple[int, int]:
    """(bytes, entries) of the newest run's index, if this commit writes one."""
    runs = sorted((home.dir / "runs").iterdir(), key=lambda d: int(d.name))
    index = runs[-1] / "output.times"
    if not index.exists():
        return 0, 0
    data = index.read_bytes()
    return len(data), data.count(b"\n")


def measure(lines: int, pairs: int) -> dict[str, Any]:
    home = core.Home()
    try:
        work = home.dir / "work"
        work.mkdir()
        got: dict[str, Any] = {}
        home.start()
        for label, patterns in (("no hooks", []), ("10 patterns", core.PATTERNS[:10])):
            hooks = core.hooks_file(work, patterns)
            home.warm_up(hooks)
            ratios, cpus, sizes, entries, childs, plains = [], [], [], [], [], []
            for k in range(pairs):
                if k % 2 == 0:
                    plain = core.plain_run(work, lines, "line")
                    sup = core.supervised_run(home, work, lines, "line", hooks)
                else:
                    sup = core.supervised_run(home, work, lines, "line", hooks)
                    plain = core.plain_run(work, lines, "line")
                size, n = _index(home)
                ratios.append(sup["child_s"] / plain)
                childs.append(sup["child_s"])
                plains.append(plain)
                cpus.append(sup["daemon_cpu_s"])
                sizes.append(size)
                entries.append(n)
            got[label] = {
                "child_ratio": statistics.median(ratios),
                "child_s": statistics.median(childs),
                "plain_s": statistics.median(plains),
                "daemon_cpu_s": statistics.median(cpus),
                "output_mb": sup["mb"],
                "index_bytes": statistics.median(sizes),
                "index_entries": statistics.median(entries),
            }
        return got
    finally:
        home.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    got = measure(args.lines, args.pairs)
    if args.json:
        print(json.dumps(got, indent=1))
        return
    for label, r in got.items():
        print(
            f"{label:12} child {r['child_s']:.3f} s supervised, {r['plain_s']:.3f} s plain "
            f"({r['child_ratio']:.2f}x), daemon {r['daemon_cpu_s']:.3f} s "
            f"CPU, output {r['output_mb']:.1f} MB, index {r['index_bytes']:.0f} B "
            f"({r['index_entries']:.0f} entries)"
        )


if __name__ == "__main__":
    main()
