"""Bash: run a shell command in the thread's directory, its whole process group bounded.

Claude Code's input: `command`, `timeout` in milliseconds (default 120000; above 600000 it is
brought down to 600000, not refused), `description`; `run_in_background` is understood and
refused (RunProcess starts what must outlive the call). Its `tool_response`: `stdout` (stdout
and stderr interleaved), `stderr` (the tool's own notices), `interrupted`, `isImage`.
"""

from __future__ import annotations

import shutil

from pydantic import Field

from agent_threads.command import Completed
from agent_threads.sandbox import SandboxError
from agent_threads.tools.base import Tool, ToolArgs, ToolContext, ToolFailure, ToolResult
from agent_threads.tools.responses import BashResponse, as_data

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000


class BashArgs(ToolArgs):
    command: str = Field(description="The shell command (bash) to run.")
    timeout: float | None = Field(
        default=None,
        gt=0,
        description=f"Milliseconds before the command's process group is killed (default "
        f"{DEFAULT_TIMEOUT_MS}, at most {MAX_TIMEOUT_MS}).",
    )
    description: str | None = Field(
        default=None, description="What the command does, in 5 to 10 words."
    )
    run_in_background: bool = Field(
        default=False,
        description="Not available here: start long-running processes with RunProcess.",
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
        if args.run_in_background:
            raise ToolFailure(
                "run_in_background is not available here; start a long-running process with "
                "RunProcess, or run the command in the foreground"
            )
        shell = shutil.which("bash") or "/bin/sh"
        timeout_s = min(args.timeout or DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS) / 1000
        try:
            done = await ctx.runner(
                [shell, "-c", args.command],
                cwd=ctx.cwd,
                env=ctx.env,
                deadline_s=timeout_s,
                merge_stderr=True,
                sandbox=ctx.sandbox,
                on_spawn=ctx.on_spawn,
            )
        except SandboxError as exc:
            raise ToolFailure(str(exc)) from None
        notice = ctx.sandbox.notice.take() if ctx.sandbox is not None else None
        return _result(done, timeout_s, notice)


def _result(done: Completed, timeout_s: float, notice: str | None) -> ToolResult:
    """The model's observation of a finished command, and Claude Code's record of it. Pure."""
    output = done.stdout.decode("utf-8", errors="replace").rstrip("\n")
    notes = [f"warning: {notice}"] if notice else []
    if done.stdout_dropped:
        notes.append(f"... {done.stdout_dropped} more bytes of output were dropped ...")
    code = done.returncode
    if done.timed_out:
        notes.append(f"timed out after {timeout_s:g}s; process group killed")
    text = output
    if done.stdout_dropped:
        text += f"\n[... {done.stdout_dropped} more bytes of output were dropped ...]"
    if done.timed_out:
        text += f"\n[timed out after {timeout_s:g}s; process group killed]"
    elif code:
        text += f"\n[exit code {code}]"
    text = text.strip("\n") or "(no output)"
    if notice:
        text = f"[warning: {notice}]\n{text}"
    response = BashResponse(
        stdout=output,
        stderr="\n".join(notes),
        interrupted=done.timed_out,
        exitCode=code,
    )
    return ToolResult(text, is_error=done.timed_out or bool(code), data=as_data(response))
