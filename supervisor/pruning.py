"""`supervise prune`: remove ended runs' records and run dirs, by age and/or count.

Which runs go is decided by `choose` (pure); each is then deleted by
`state.prune.prune_run`, one transaction per run that checks again on the locked row, and
only after its commit is its run dir removed: a prune killed at any instant leaves a run
with its records and dir, or a dir with no records (nothing reads it; the next prune removes
it), never records without their dir's removal being known. Safe while a daemon runs.

Never pruned: a run not ended (starting, running, a pending restart in backoff), a run with
a queued, running or waiting thread, and a run of a chain that still runs or restarts that
ended in the last `LIVE_GUARD_S`: the restart decision counts a live chain's recent runs
(crash loop, backoff), and pruning them would reset it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from state.paths import StatePaths
from state.settings import Settings
from supervise.errors import UserError
from supervisor.restarts import parse_duration

if TYPE_CHECKING:
    from state.processes import ProcessRecord

LIVE_GUARD_S = 86400.0


@dataclass(frozen=True, slots=True)
class Rule:
    older_than: float | None  # seconds since the end
    keep: int | None  # newest ended runs kept per name


def parse_rule(older_than: str | None, keep: int | None) -> Rule:
    """Raises UserError (exit 2) for a bad or missing rule."""
    if older_than is None and keep is None:
        raise UserError(
            "prune: say what to remove: --older-than DURATION (e.g. 7d, 12h, 30m) "
            "and/or --keep N (the newest N ended runs of each name are kept)"
        )
    age: float | None = None
    if older_than is not None:
        try:
            age = parse_duration(older_than)
        except ValueError as exc:
            raise UserError(f"prune: --older-than {older_than!r}: expected {exc}") from None
    if keep is not None and keep < 0:
        raise UserError(f"prune: --keep {keep}: expected 0 or more")
    return Rule(age, keep)


def choose(
    runs: Sequence[ProcessRecord], busy: frozenset[int], rule: Rule, now: float
) -> list[ProcessRecord]:
    """The runs to prune, oldest end first. With both rules a run must be older than the
    age and beyond the newest `keep` ended runs of its name."""
    from state.processes import ENDED

    live_chains = {r.chain for r in runs if r.state not in ENDED}
    ended = [r for r in runs if r.state in ENDED and r.ended_at is not None]
    ended.sort(key=lambda r: (r.ended_at or 0.0, r.id), reverse=True)  # newest first
    rank: dict[int, int] = {}
    seen: dict[str, int] = {}
    for r in ended:
        seen[r.name] = seen.get(r.name, 0) + 1
        rank[r.id] = seen[r.name]
    out: list[ProcessRecord] = []
    for r in reversed(ended):
        end = r.ended_at or 0.0
        if r.id in busy or (r.chain in live_chains and end > now - LIVE_GUARD_S):
            continue
        if rule.older_than is not None and end > now - rule.older_than:
            continue
        if rule.keep is not None and rank[r.id] <= rule.keep:
            continue
        out.append(r)
    return out


def disk_bytes(path: Path) -> int:
    """Bytes a run dir takes on disk (blocks: output.log may be sparse, its head punched)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):  # gone meanwhile
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
    return total


def run_dirs(paths: StatePaths) -> list[Path]:
    """The numbered dirs in runs/ (never through a symlink)."""
    if not paths.runs.is_dir():
        return []
    found = [d for d in paths.runs.iterdir() if d.name.isdigit() and not d.is_symlink()]
    return sorted((d for d in found if d.is_dir()), key=lambda d: int(d.name))


def _mib(n: int) -> str:
    if n < 1048576:
        return f"{n // 1024} KiB"
    return f"{n / 1048576:.1f} MiB" if n < 10 * 1048576 else f"{n // 1048576} MiB"


def cmd_prune(args: argparse.Namespace, paths: StatePaths, settings: Settings) -> int:
    from state.db import open_state_store
    from state.prune import prune_run, prune_view

    rule = parse_rule(args.older_than, args.keep)
    store = open_state_store(paths.db, settings.store, readonly=args.dry_run)
    # Dirs listed BEFORE the rows are read: a row is committed before its dir is made, so
    # a dir listed here whose row the read below lacks has none (a prune killed after its
    # commit, a launch that failed): an orphan, removed now.
    listed = run_dirs(paths)
    view = prune_view(store)
    ids = {r.id for r in view.runs}
    orphans = [d for d in listed if int(d.name) not in ids]
    now = time.time()
    chosen = choose(view.runs, view.busy, rule, now)
    done: list[dict[str, Any]] = []
    freed = 0
    for run in chosen:
        size = disk_bytes(paths.run_dir(run.id))
        if not args.dry_run:
            pruned = prune_run(store, run.id, keep_live_after=now - LIVE_GUARD_S)
            if pruned is None:
                continue  # changed since it was chosen (restarted, a thread queued)
            shutil.rmtree(paths.run_dir(run.id), ignore_errors=True)
            for tid in pruned.thread_ids:
                shutil.rmtree(paths.thread_dir(tid), ignore_errors=True)
        freed += size
        done.append(
            {
                "id": run.id,
                "process": run.chain,
                "name": run.name,
                "run": run.run_no,
                "state": run.state,
                "ended_at": run.ended_at,
                "bytes": size,
            }
        )
    orphan_bytes = 0
    for d in orphans:
        orphan_bytes += disk_bytes(d)
        if not args.dry_run:
            shutil.rmtree(d, ignore_errors=True)
    freed += orphan_bytes
    processes = len({d["process"] for d in done})
    if args.json:
        print(
            json.dumps(
                {
                    "dry_run": args.dry_run,
                    "runs": done,
                    "processes": processes,
                    "orphan_dirs": [d.name for d in orphans],
                    "bytes": freed,
                },
                indent=1,
            )
        )
        return 0
    for item in done:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(item["ended_at"]))
        print(
            f"{'would prune' if args.dry_run else 'pruned'} {item['id']} {item['name']} "
            f"run {item['run']} ({item['state']}, ended {when}, {_mib(item['bytes'])})"
        )
    orphan = f" and {len(orphans)} orphaned run dirs" if orphans else ""
    if args.dry_run:
        print(f"would prune {len(done)} runs of {processes} processes{orphan}, {_mib(freed)}")
    else:
        print(f"pruned {len(done)} runs of {processes} processes{orphan}, {_mib(freed)} freed")
    return 0
