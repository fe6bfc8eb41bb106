"""Measuring process trees for `on_resource`, through psutil: one sampler for all processes.

The tree of a supervised child (the child and every process below it: `python manage.py`
and its workers) is what a person means by "the process". Its members are found from the
child down through the kernel's `/proc/PID/task/TID/children` lists, which costs reads in
proportion to the tree, not to every process on the machine; a kernel without them
(CONFIG_PROC_CHILDREN) gets one pass over all processes' parents per sample instead. Each
member's RSS and CPU times come from psutil (statm and stat), its `Process` kept between
samples. The cost is measured by bench/resource_sampler.py.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping

import psutil

from supervisor.resources import Usage


def _children(pid: int) -> list[int] | None:
    """The kernel's list of `pid`'s children (None: the kernel keeps no such list)."""
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []  # gone
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found += [int(c) for c in f.read().split()]
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended meanwhile
            return None
        except OSError:
            continue
    return found


class Sampler:
    """Keeps each member's `Process` and last CPU time, so a sample's CPU figure is the
    share since the previous sample."""

    def __init__(self, *, children_lists: bool = True) -> None:
        """`children_lists` False: find trees by the parents pass from the start."""
        self._procs: dict[int, psutil.Process] = {}
        self._cpu: dict[tuple[int, float], float] = {}  # (pid, create time) -> CPU seconds
        self._at: float | None = None  # monotonic time of the last sample
        self._ppid_pass = not children_lists  # (the kernel has none: found at the first)

    def _tree(self, root: int, parents: dict[int, list[int]] | None) -> list[int]:
        members, todo = [], [root]
        while todo:
            pid = todo.pop()
            members.append(pid)
            kids = parents.get(pid, []) if parents is not None else _children(pid)
            if kids is None:
                raise LookupError  # no children lists here
            todo += kids
        return members

    def _parents(self) -> dict[int, list[int]]:
        children: dict[int, list[int]] = {}
        for p in psutil.process_iter(["ppid"]):
            children.setdefault(p.info["ppid"] or 0, []).append(p.pid)
        return children

    def sample(self, roots: Mapping[int, int]) -> dict[int, Usage]:
        """Usage of each root's tree, by the caller's key (roots: key -> OS pid). A root that
        is gone has no entry."""
        parents = self._parents() if self._ppid_pass else None
        now = time.monotonic()
        span = None if self._at is None else now - self._at
        self._at = now
        seen: dict[tuple[int, float], float] = {}
        procs: dict[int, psutil.Process] = {}
        out: dict[int, Usage] = {}
        for key, root in roots.items():
            try:
                tree = self._tree(root, parents)
            except LookupError:
                self._ppid_pass = True
                parents = self._parents()
                tree = self._tree(root, parents)
            rss, cpu_s, members = 0, 0.0, 0
            for pid in tree:
                with contextlib.suppress(psutil.Error):
                    p = self._procs.get(pid) or psutil.Process(pid)
                    with p.oneshot():
                        mem, times = p.memory_info(), p.cpu_times()
                    procs[pid] = p
                    rss += mem.rss
                    members += 1
                    total = times.user + times.system
                    ident = (pid, p.create_time())  # cached by psutil: no read
                    seen[ident] = total
                    # A member new since the last sample adds from now on: its past CPU
                    # time is not this span's.
                    cpu_s += max(0.0, total - self._cpu.get(ident, total))
            if members == 0:
                continue
            percent = None if span is None or span <= 0 else 100.0 * cpu_s / span
            out[key] = Usage(rss, percent, members)
        self._cpu, self._procs = seen, procs
        return out
