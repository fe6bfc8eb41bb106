"""Bash: run a shell command in the thread's directory, its whole process group bounded."""

from __future__ import annotations

import shutil

from pydantic import Field

from agent_threads.command import Completed
from agent_threads.sandbox import SandboxError
from agent_threads.tools.base import Tool, ToolArgs, ToolContext, ToolFailure, ToolResult

DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 600.0


class BashArgs(ToolArgs):
    command: str = Field(description="The shell command (bash) to run.")
    timeout: float | None = Field(
        default=None,
        gt=0,
        le=MAX_TIMEOUT_S,
        description=f"Seconds before the command's process group is killed "
        f"(default {DEFAULT_TIMEOUT_S:g}, at most {MAX_TIMEOUT_S:g}).",
    )


class BashTool(Tool):
    name = "Bash"
    description = (
        "Run a bash command in the working directory; stdout and stderr come back together. "
        "$SUPERVISE_OUTPUT is the output log of the process that started this thread. "
        "In the sandbox (the default where bubblewrap works) only the working directory and "
        "the directories the hook file lists can be written, and /tmp is fresh for each "
        "command: keep files you need later in the working directory."
    )
    Args = BashArgs

    async def run(self, args: BashArgs, ctx: ToolContext) -> ToolResult:
        if "\0" in args.command:
            raise ToolFailure("the command contains a NUL byte, which no shell can take")
        shell = shutil.which("bash") or "/bin/sh"
        timeout = args.timeout or DEFAULT_TIMEOUT_S
        try:
            done = await ctx.runner(
                [shell, "-c", args.command],
                cwd=ctx.cwd,
                env=ctx.env,
                deadline_s=timeout,
                merge_stderr=True,
                sandbox=ctx.sandbox,
                on_spawn=ctx.on_spawn,
            )
        except SandboxError as exc:
            raise ToolFailure(str(exc)) from None
        notice = ctx.sandbox.notice.take() if ctx.sandbox is not None else None
        return _result(done, timeout, notice)


def _result(done: Completed, timeout: float, notice: str | None) -> ToolResult:
    """The model's observation of a finished command. Pure."""
    text = done.stdout.decode("utf-8", errors="replace")
    if done.stdout_dropped:
        text += f"\n[... {done.stdout_dropped} more bytes of output were dropped ...]"
    text = text.rstrip("\n")
    code = done.returncode
    if done.timed_out:
        text += f"\n[timed out after {timeout:g}s; process group killed]"
    elif code:
        text += f"\n[exit code {code}]"
    text = text.strip("\n") or "(no output)"
    if notice:
        text = f"[warning: {notice}]\n{text}"
    return ToolResult(
        text,
        is_error=done.timed_out or bool(code),
        data={"exit_code": code, "timed_out": done.timed_out},
    )
