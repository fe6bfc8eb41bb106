"""What every tool shares: its arguments as a pydantic model, a context, a result.

A tool's arguments are a pydantic model: its JSON Schema is what the model is told, and
validating the model's arguments against it turns a bad call into an observation the model
can read, never a crash.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from agent_threads.command import Runner, run_command
from agent_threads.messages import ToolSpec
from agent_threads.sandbox import Sandbox
from supervise.errors import Signal

if TYPE_CHECKING:
    from agent_threads.permissions import Profile


class ToolArgs(BaseModel):
    """Base of every tool's arguments: unknown keys are an error the model gets told about."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class LaunchedProcess:
    """What RunProcess reports back: the supervised process it started."""

    id: int
    pid: int | None
    name: str


# RunProcess's way into the supervisor: (argv, hooks, name, cwd) -> the new process. The
# daemon supplies it; `hooks` is a hook file path (relative to cwd), an inline mapping, or
# None. It raises SuperviseError (e.g. HookFileError) with a message for the model.
LaunchFn = Callable[
    [list[str], "str | Mapping[str, Any] | None", "str | None", Path], Awaitable[LaunchedProcess]
]


@dataclass(frozen=True)
class ToolContext:
    """What a tool may use: where it runs, its environment, and the supervisor's hand."""

    thread_id: int
    cwd: Path
    env: Mapping[str, str]  # the full environment a subprocess gets (SUPERVISE_* included)
    process_id: int | None = None
    output_path: Path | None = None  # the triggering process's output.log
    launch: LaunchFn | None = None
    # Called with the pid (and process group) of a subprocess a tool starts, so that a
    # daemon that dies meanwhile can find and kill what it left behind.
    on_spawn: Callable[[int], Awaitable[None]] | None = None
    # Where every command a tool runs is confined (agent_threads.sandbox); None runs it as is.
    sandbox: Sandbox | None = None
    # What starts a tool's subprocesses; a test passes a recording fake.
    runner: Runner = run_command
    # The thread's permission rules: Glob and Grep leave out, below the directory they
    # search, what these deny or ask for (Read rules), as Claude Code hides a denied path.
    profile: Profile | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolResult:
    """A tool's observation for the model. `is_error` marks a failed call."""

    output: str
    is_error: bool = False
    data: dict[str, Any] | None = None  # structured extras kept in the transcript


class Tool:
    """Subclass with `name`, `description`, `Args`, and `run`."""

    name: ClassVar[str]
    description: ClassVar[str]
    Args: ClassVar[type[ToolArgs]]

    def prepare(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        """The arguments as permission rules, hooks and the tool itself see them.

        As in Claude Code, where file tools' `file_path` is made absolute before hooks run,
        so a guard cannot be bypassed by a relative spelling. Pure; the default: as sent.
        """
        return arguments

    def spec(self) -> ToolSpec:
        schema = self.Args.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(self.name, self.description, schema)

    async def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        """Carry out one call with validated `args` (an instance of `Args`).

        Failures the model can act on (missing file, non-zero exit, timeout) come back as a
        result with `is_error=True`; only our own bugs raise.
        """
        raise NotImplementedError


class ToolFailure(Signal):
    """Raised inside a tool to return its message as an error observation."""
