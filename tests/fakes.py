"""Stand-ins passed in as plain attributes, for tests that drive the loop and tools in process."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_threads.command import MAX_OUTPUT, Completed, Confinement, OnSpawn
from agent_threads.messages import AssistantMessage, Message, Reply, ToolSpec
from agent_threads.transcript import Body, Entry


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


class Ticks:
    """A clock that moves only when read (every read moves it one second)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 1
        return self.now


@dataclass
class MemoryJournal:
    """The loop's sink as a list (state/ has its own tests; these are about the loop)."""

    thread_id: int = 1
    saved: list[Entry] = field(default_factory=list)
    clock: Callable[[], float] = field(default_factory=Ticks)

    def append(self, body: Body) -> Entry:
        entry = Entry(len(self.saved) + 1, self.clock(), body)
        self.saved.append(entry)
        return entry

    def of(self, kind: type[Any]) -> list[Any]:
        return [e.body for e in self.saved if isinstance(e.body, kind)]


@dataclass
class TableModel:
    """Replies from a table: reply n answers the conversation with n earlier replies, so a
    resumed thread gets the same reply again (as the scripted model does)."""

    replies: Sequence[Reply]
    sent: list[list[Message]] = field(default_factory=list)
    name: str = "table:test"
    fail: Exception | None = None  # raised by every call instead of a reply

    async def complete(
        self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Reply:
        if self.fail is not None:
            raise self.fail
        self.sent.append(list(messages))
        n = sum(1 for m in messages if isinstance(m, AssistantMessage))
        return self.replies[n] if n < len(self.replies) else Reply("(end of table)")
