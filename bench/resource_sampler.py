"""What `on_resource` sampling costs the daemon: the CPU of one sample of N process trees.

`python bench/resource_sampler.py [TREES] [ROUNDS]` (default 100 trees, 30 rounds) starts
TREES small trees (`sh` with two `sleep` children: three processes each, as a server with
workers), then times `supervisor.sampler.Sampler.sample` over all their roots, as the daemon
calls it once per interval (1 s for for_seconds >= 2; at most every 0.5 s). It prints the CPU
seconds one sample takes (median and max, this process's CPU only), the share of one core at
a 1 s interval, and how many processes the machine had: the one pass over /proc that finds
every tree's members reads each process's stat once, so the cost grows with all of them.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

from supervisor.sampler import Sampler


def main() -> None:
    trees = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    procs = [
        subprocess.Popen(["sh", "-c", "sleep 600 & sleep 600 & wait"], start_new_session=True)
        for _ in range(trees)
    ]
    try:
        time.sleep(0.5)  # the sleeps are started
        roots = {i: p.pid for i, p in enumerate(procs)}
        sampler = Sampler()
        sampler.sample(roots)  # the first sample has no CPU figure to compare with
        cpu: list[float] = []
        for _ in range(rounds):
            t0 = time.process_time()
            usages = sampler.sample(roots)
            cpu.append(time.process_time() - t0)
            time.sleep(0.05)
        members = sum(u.processes for u in usages.values())
        med, worst = statistics.median(cpu), max(cpu)
        print(
            f"{trees} trees ({members} processes sampled; {len(psutil.pids())} on the machine): "
            f"one sample {med * 1000:.1f} ms CPU (median of {rounds}; max {worst * 1000:.1f} ms); "
            f"at a 1 s interval {med * 100:.1f}% of one core"
        )
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


if __name__ == "__main__":
    main()
