"""The tools a thread gets, and calling one safely: validated arguments, bounded output."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from agent_threads.tools.base import Tool, ToolContext, ToolFailure, ToolResult
from agent_threads.tools.bash import BashTool
from agent_threads.tools.files import EditTool, ReadTool, WriteTool
from agent_threads.tools.plan import UpdatePlanTool
from agent_threads.tools.runprocess import RunProcessTool
from agent_threads.tools.search import GlobTool, GrepTool

log = logging.getLogger("supervise.threads")

MAX_OUTPUT_CHARS = 30_000


def default_tools() -> dict[str, Tool]:
    tools: list[Tool] = [
        BashTool(),
        ReadTool(),
        WriteTool(),
        EditTool(),
        GlobTool(),
        GrepTool(),
        UpdatePlanTool(),
        RunProcessTool(),
    ]
    return {t.name: t for t in tools}


def truncate(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """Keep the head and the tail of a long output, saying what was cut."""
    if len(text) <= limit:
        return text
    keep = limit // 2
    cut = len(text) - 2 * keep
    note = (
        f"\n[... {cut} characters truncated: the output was longer than {limit} characters; "
        "narrow the command (grep, head, tail) to see the middle ...]\n"
    )
    return text[:keep] + note + text[-keep:]


def _explain(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        lines.append(f"- {where}: {err['msg']}")
    return "Invalid arguments:\n" + "\n".join(lines)


async def call_tool(tool: Tool, raw_args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Validate, run, bound: a model's mistake becomes an observation, never a crash."""
    try:
        args = tool.Args.model_validate(raw_args)
    except ValidationError as exc:
        return ToolResult(_explain(exc), is_error=True)
    try:
        res = await tool.run(args, ctx)
    except ToolFailure as exc:
        return ToolResult(str(exc), is_error=True)
    except Exception as exc:
        # A tool's bug or an input nobody foresaw: the model hears of it and the thread
        # goes on; the log keeps the traceback for us.
        log.exception("tool %s failed", tool.name)
        return ToolResult(f"{tool.name} failed: {exc!r}", is_error=True)
    return ToolResult(truncate(res.output), res.is_error, res.data)
