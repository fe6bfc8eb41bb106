"""Driving a `Tracker` in process: a fake clock, a recorded process, a scripted history.

No daemon, no CLI. What is real: the SQLite state file (the one transaction that commits
fires), the run dir and its output.log (appended to as a child would), exit.json (written
as the shim writes it), and, for a process that runs, a real `sleep` child whose stdout is
output.log (its pid is what liveness asks /proc about). What is fake: the clocks, passed to
the tracker as plain attributes, so a timeout is due when the test says so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from state.db import Store
from state.fires import FireRecord, list_fires
from state.paths import StatePaths
from state.processes import NewProcess, ProcessRecord, create_process, get_process, mark_running
from supervisor.clocks import Instant
from supervisor.hookspec import HookFile
from supervisor.identity import boot_id, start_time
from supervisor.rundir import RunDir, write_text_atomic
from supervisor.runspec import RunSpec
from supervisor.tracker import StepResult, Tracker


@dataclass
class FakeClock:
    """Both clocks the tracker reads, moved only by `advance`. The boot id is this boot's:
    the tracker compares it with the kernel's to know that saved pids can still be alive."""

    wall: float = 1_700_000_000.0
    boot: float = 5_000.0
    boot_id: str = field(default_factory=boot_id)

    def __call__(self) -> float:
        return self.wall

    def instant(self) -> Instant:
        return Instant(self.wall, self.boot, self.boot_id)

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.boot += seconds


def fire_rows(store: Store, process_id: int) -> list[tuple[str, str, str]]:
    """(hook, key, what it became) of each recorded fire, in the order they happened."""
    return [(f.hook, f.key, _became(f)) for f in list_fires(store, process_id)]


def _became(f: FireRecord) -> str:
    return "spawned" if f.spawned else f"refused: {f.reason}"


class Supervised:
    """One recorded process and its run dir; `tracker()` builds the daemon's view of it from
    its row, as a daemon starting (or restarting after a crash) does."""

    def __init__(
        self,
        store: Store,
        paths: StatePaths,
        hooks: HookFile,
        clock: FakeClock,
        *,
        depth: int = 0,
        launched: bool = True,
    ) -> None:
        self.store, self.paths, self.clock = store, paths, clock
        new = NewProcess(
            name="p",
            command="p --flag",
            argv='["p", "--flag"]',
            cwd=str(paths.home),
            boot_id=clock.boot_id,
            started_at=clock.wall,
            started_boot=clock.boot,
            depth=depth,
            state="running",
        )
        row = create_process(store, new, lambda r: _spec(r, hooks, depth).text())
        self.id = row.id
        self.run = RunDir(paths.run_dir(row.id))
        self.run.path.mkdir(parents=True)
        self.run.write_spec(_spec(row, hooks, depth).text())
        self.child: subprocess.Popen[bytes] | None = None
        fd = os.open(self.run.output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            if launched:
                # A real child writing to output.log, as under the shim; here it only sleeps.
                self.child = subprocess.Popen(
                    ["sleep", "600"], stdout=fd, stderr=fd, start_new_session=True
                )
        finally:
            os.close(fd)
        if self.child is not None:
            started = start_time(self.child.pid)
            mark_running(
                store,
                row.id,
                pid=self.child.pid,
                pid_started=started,
                shim_pid=self.child.pid,
                shim_started=started,
            )
        self.trackers: list[Tracker] = []

    @property
    def row(self) -> ProcessRecord:
        row = get_process(self.store, self.id)
        assert row is not None
        return row

    def tracker(self, *, max_log_bytes: int = 0) -> Tracker:
        """A new tracker from the saved row: what a (re)started daemon builds."""
        t = Tracker(
            self.store,
            self.paths,
            self.row,
            clock=self.clock,
            instant=self.clock.instant,
            max_log_bytes=max_log_bytes,
        )
        self.trackers.append(t)
        return t

    def write(self, data: bytes) -> None:
        with open(self.run.output, "ab") as f:
            f.write(data)

    def exit(self, status: int) -> None:
        """The child ends with `status`; the shim records it (exit.json), then ends too."""
        self._end()
        record = json.dumps({"status": status, "ended_at": self.clock.wall})
        write_text_atomic(self.run.exit, record + "\n")

    def vanish(self) -> None:
        """The child and its shim end without an exit record (SIGKILLed together)."""
        self._end()

    def _end(self) -> None:
        if self.child is not None and self.child.poll() is None:
            os.killpg(self.child.pid, signal.SIGKILL)
            self.child.wait()

    def fires(self) -> list[tuple[str, str, str]]:
        return fire_rows(self.store, self.id)

    def close(self) -> None:
        self._end()
        for t in self.trackers:
            t.close()


def _spec(row: ProcessRecord, hooks: HookFile, depth: int) -> RunSpec:
    return RunSpec(
        id=row.id,
        name=row.name,
        argv=("p", "--flag"),
        cwd=Path(row.cwd),
        env_keys=(),
        depth=depth,
        parent_thread_id=None,
        started_at=row.started_at,
        hooks=hooks,
        unbuffered=True,
    )


def step_all(tracker: Tracker, *, liveness: bool = False, due: Sequence[str] = ()) -> StepResult:
    """One daemon step of the tracker, as a wake with these reasons makes it."""
    return tracker.step(check_liveness=liveness, timeouts_due=list(due))
