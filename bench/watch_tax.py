"""Why the daemon keeps no watch on a busy child's output: what an inotify watch costs the
writer when nobody even reads its events.

`python bench/watch_tax.py [LINES] [RUNS]` (bench/run.py runs it too): the line-per-write
child (PYTHONUNBUFFERED=1) writes LINES lines to a new file in a fresh folder, with

  none          no watch (the baseline);
  folder        an IN_MODIFY watch on the folder (what the daemon and watchfiles used to keep);
  folder-quiet  a folder watch without IN_MODIFY (IN_CREATE | IN_CLOSE_WRITE);
  file          an IN_MODIFY watch on the file itself;
  one-shot      an IN_MODIFY | IN_ONESHOT watch on the file (gone after the first write).

Each watch is held by this process and never read. Variants alternate within each round;
the child's own runtime is what it reports.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_core as core  # noqa: E402

from supervisor.inotify import (  # noqa: E402
    IN_CLOSE_WRITE,
    IN_CREATE,
    IN_MODIFY,
    IN_ONESHOT,
    Inotify,
)

VARIANTS = ("none", "folder", "folder-quiet", "file", "one-shot")


def one(lines: int, variant: str) -> float:
    folder = Path(tempfile.mkdtemp(prefix="watch-tax-"))
    out, script, t = folder / "out.log", folder / "child.py", folder / "t"
    script.write_text(core.CHILD)
    out.touch()
    ino = Inotify()
    try:
        if variant == "folder":
            ino.add(str(folder), IN_MODIFY | IN_CREATE | IN_CLOSE_WRITE)
        elif variant == "folder-quiet":
            ino.add(str(folder), IN_CREATE | IN_CLOSE_WRITE)
        elif variant == "file":
            ino.add(str(out), IN_MODIFY)
        elif variant == "one-shot":
            ino.add(str(out), IN_MODIFY | IN_ONESHOT)
        os.sync()
        with open(out, "ab") as f:
            subprocess.run(
                [sys.executable, str(script), str(lines), str(t), "line"],
                stdout=f,
                env=core.style_env(dict(os.environ), "line"),
                check=True,
            )
        return float(t.read_text())
    finally:
        ino.close()
        shutil.rmtree(folder, ignore_errors=True)


def watch_tax(lines: int, runs: int) -> dict[str, float]:
    """Median runtime of each variant over `runs` rounds, as a ratio to `none`."""
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for r in range(runs):
        order = VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS))
        for v in order:
            times[v].append(one(lines, v))
    base = statistics.median(times["none"])
    return {v: statistics.median(ts) / base for v, ts in times.items()}


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    for variant, ratio in watch_tax(n, k).items():
        print(f"{variant:13} {ratio:.2f}x")
