"""Stand-ins passed in as plain attributes, for tests that drive the loop and tools in process."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent_threads.command import MAX_OUTPUT, Completed, Confinement, OnSpawn


def completed(
    stdout: bytes = b"",
    returncode: int | None = 0,
    *,
    stderr: bytes = b"",
    stdout_dropped: int = 0,
    stderr_dropped: int = 0,
    timed_out: bool = False,
) -> Completed:
    """A scripted end of a command (a timed-out one has no return code)."""
    return Completed(
        returncode=None if timed_out else returncode,
        stdout=stdout,
        stderr=stderr,
        stdout_dropped=stdout_dropped,
        stderr_dropped=stderr_dropped,
        timed_out=timed_out,
        duration_s=0.0,
    )


@dataclass(frozen=True)
class RunnerCall:
    """One command a RecordingRunner was asked to run."""

    argv: tuple[str, ...]
    cwd: Path
    env: dict[str, str]
    deadline_s: float
    stdin: bytes | None
    merge_stderr: bool
    max_output: int
    sandbox: Confinement | None


@dataclass
class RecordingRunner:
    """A `Runner` (agent_threads.command) that starts nothing: it records each call and
    answers with the next scripted `Completed`."""

    results: list[Completed]
    calls: list[RunnerCall] = field(default_factory=list)

    async def __call__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        deadline_s: float,
        stdin: bytes | None = None,
        merge_stderr: bool = False,
        max_output: int = MAX_OUTPUT,
        sandbox: Confinement | None = None,
        on_spawn: OnSpawn | None = None,
    ) -> Completed:
        call = RunnerCall(
            tuple(argv), cwd, dict(env), deadline_s, stdin, merge_stderr, max_output, sandbox
        )
        self.calls.append(call)
        if not self.results:
            raise AssertionError(f"RecordingRunner: no scripted result left for {call.argv}")
        return self.results.pop(0)
