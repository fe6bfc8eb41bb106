"""UpdatePlan: the thread's task list, kept in its transcript."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_threads.tools.base import Tool, ToolArgs, ToolContext, ToolFailure, ToolResult


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str
    status: Literal["pending", "in_progress", "completed"]


class PlanArgs(ToolArgs):
    tasks: list[Task] = Field(description="The whole plan, in order.")


class UpdatePlanTool(Tool):
    name = "UpdatePlan"
    description = "Record your plan: every task with its status (at most one in_progress)."
    Args = PlanArgs

    async def run(self, args: PlanArgs, ctx: ToolContext) -> ToolResult:
        busy = [t.title for t in args.tasks if t.status == "in_progress"]
        if len(busy) > 1:
            raise ToolFailure(f"{len(busy)} tasks are in_progress ({', '.join(busy)}); keep one")
        data = {
            "tasks": [t.model_dump() for t in args.tasks],
            "summary": {
                "total": len(args.tasks),
                "completed": sum(t.status == "completed" for t in args.tasks),
            },
        }
        return ToolResult(json.dumps(data, ensure_ascii=False), data=data)
