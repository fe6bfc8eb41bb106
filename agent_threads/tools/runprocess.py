"""RunProcess: start a supervised process whose hooks spawn threads one level deeper."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agent_threads.tools.base import Tool, ToolArgs, ToolContext, ToolResult
from supervise.errors import SuperviseError


class RunProcessArgs(ToolArgs):
    command: str | list[str] = Field(
        description="A shell command (run with /bin/sh -c), or the argv as a list."
    )
    hooks: str | dict[str, Any] | None = Field(
        default=None, description="A hook file path, or an inline hook file mapping."
    )
    name: str | None = Field(default=None, description="A name for `supervise ps`.")


class RunProcessTool(Tool):
    name = "RunProcess"
    description = (
        "Start a long-running process under supervise (detached; it outlives this thread). "
        "Its hooks start new threads when it exits, prints a matching line, or runs too long."
    )
    Args = RunProcessArgs

    async def run(self, args: RunProcessArgs, ctx: ToolContext) -> ToolResult:
        if ctx.launch is None:
            return ToolResult("RunProcess is not available here", is_error=True)
        argv = ["/bin/sh", "-c", args.command] if isinstance(args.command, str) else args.command
        if not argv:
            return ToolResult("command is empty", is_error=True)
        try:
            p = await ctx.launch(list(argv), args.hooks, args.name, ctx.cwd)
        except SuperviseError as exc:
            return ToolResult(f"could not start it: {exc}", is_error=True)
        data = {"process_id": p.id, "pid": p.pid, "name": p.name}
        text = f"started process {p.id} (pid {p.pid}, name {p.name})"
        # It runs in this thread's sandbox (see ThreadHost); say so when there is none.
        notice = ctx.sandbox.notice.take() if ctx.sandbox is not None else None
        return ToolResult(f"[warning: {notice}]\n{text}" if notice else text, data=data)
