"""Measuring process trees for `on_resource`, through psutil: one pass for all processes.

The tree of a supervised child (the child and every process below it: `python manage.py`
and its workers) is what a person means by "the process". Finding it needs every process's
parent: one pass over /proc per sample (`process_iter`, reading each process's stat once),
shared by all the processes sampled; then each tree member's RSS (statm) and CPU times.
Its cost is measured by bench/resource_sampler.py.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping

import psutil

from supervisor.resources import Usage


class Sampler:
    """Keeps each member's last CPU time, so a sample's CPU is the share since the last."""

    def __init__(self) -> None:
        self._cpu: dict[tuple[int, float], float] = {}  # (pid, create time) -> CPU seconds
        self._at: float | None = None  # monotonic time of the last sample

    def sample(self, roots: Mapping[int, int]) -> dict[int, Usage]:
        """Usage of each root's tree, by the caller's key (roots: key -> OS pid). A root that
        is gone has no entry."""
        children: dict[int, list[int]] = {}
        procs: dict[int, psutil.Process] = {}
        for p in psutil.process_iter(["ppid"]):
            procs[p.pid] = p
            ppid = p.info["ppid"]
            if ppid is not None:
                children.setdefault(ppid, []).append(p.pid)
        now = time.monotonic()
        span = None if self._at is None else now - self._at
        self._at = now
        seen: dict[tuple[int, float], float] = {}
        out: dict[int, Usage] = {}
        for key, root in roots.items():
            if root not in procs:
                continue
            rss, cpu_s, members = 0, 0.0, 0
            todo = [root]
            while todo:
                pid = todo.pop()
                todo += children.get(pid, ())
                member = procs.get(pid)
                if member is None:
                    continue
                p = member
                with contextlib.suppress(psutil.Error):
                    with p.oneshot():
                        mem, times = p.memory_info(), p.cpu_times()
                        ident = (pid, p.create_time())
                    rss += mem.rss
                    members += 1
                    total = times.user + times.system
                    seen[ident] = total
                    # A member new since the last sample adds from now on: its past CPU
                    # time is not this span's.
                    cpu_s += max(0.0, total - self._cpu.get(ident, total))
            if members == 0:
                continue
            percent = None if span is None or span <= 0 else 100.0 * cpu_s / span
            out[key] = Usage(rss, percent, members)
        self._cpu = seen
        return out
