"""Where the shell hooks run inside the loop, and what their answers do to it.

SessionStart once per thread (its output goes into the context), UserPromptSubmit on every
prompt that enters the thread, PreToolUse after the permission check (it can deny, ask,
rewrite the input or stop the thread), PostToolUse after each result, SessionEnd when the
thread ends. Every hook run is saved as a `hook` entry; what a hook adds to the context is
saved as a `context` entry, which the model reads as a user message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_threads.chat import ToolCall
from agent_threads.entries import Entry, EntryKind
from agent_threads.hooks.shellrun import HookEvent, HookOutcome, run_hooks
from agent_threads.hooks.shellspec import ShellHook
from agent_threads.tools.base import ToolContext

Save = Callable[[EntryKind, dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class PreToolAnswer:
    decision: str | None  # deny | ask | stop | None (go ahead)
    reason: str = ""
    call: ToolCall | None = None  # the call to run (its input possibly rewritten)


class HookPoints:
    def __init__(self, hooks: Sequence[ShellHook], ctx: ToolContext, agent_name: str) -> None:
        self.hooks = tuple(hooks)
        self.ctx = ctx
        self.agent_name = agent_name
        self.events = {h.event for h in self.hooks}

    def _event(self, event: str, **kw: Any) -> HookEvent:
        return HookEvent(
            event=event,
            session_id=f"t{self.ctx.thread_id}",
            cwd=self.ctx.cwd,
            env=self.ctx.env,
            agent_name=self.agent_name,
            **kw,
        )

    async def _run(self, save: Save, ev: HookEvent, extra: dict[str, Any]) -> HookOutcome:
        outcome = await run_hooks(self.hooks, ev)
        for run in outcome.runs:
            await save("hook", {**run.to_json(), **extra})
        for text in outcome.context:
            await save("context", {"event": ev.event, "text": text})
        return outcome

    async def session_start(self, entries: Sequence[Entry], save: Save) -> str | None:
        """Run SessionStart once per thread; a reason if a hook stopped the thread."""
        if "SessionStart" not in self.events or _ran(entries, "SessionStart"):
            return None
        outcome = await self._run(save, self._event("SessionStart"), {})
        return outcome.stop

    async def prompts(self, entries: Sequence[Entry], save: Save, system: str) -> str | None:
        """UserPromptSubmit for each prompt not yet seen; a reason if a hook blocked one."""
        if "UserPromptSubmit" not in self.events:
            return None
        seen = {e.data.get("prompt_seq") for e in entries if e.kind == "hook"}
        first = next((e.seq for e in entries if e.kind == "user"), None)
        for e in [e for e in entries if e.kind == "user" and e.seq not in seen]:
            text = str(e.data["text"])
            if e.seq == first and self.ctx.process_id is not None:
                text = f"{system}\n{text}"  # the hook's instructions are part of its prompt
            ev = self._event("UserPromptSubmit", prompt=text)
            outcome = await self._run(save, ev, {"prompt_seq": e.seq})
            if outcome.stop or outcome.decision == "deny":
                return (
                    outcome.stop or f"a UserPromptSubmit hook blocked the prompt: {outcome.reason}"
                )
        return None

    async def pre_tool(self, call: ToolCall, save: Save, *, approved: bool) -> PreToolAnswer:
        if "PreToolUse" not in self.events:
            return PreToolAnswer(None, call=call)
        ev = self._event("PreToolUse", tool_name=call.name, tool_input=call.arguments)
        outcome = await self._run(save, ev, {"call_id": call.id})
        if outcome.stop:
            return PreToolAnswer("stop", outcome.stop)
        if outcome.decision == "deny":
            return PreToolAnswer("deny", outcome.reason)
        if outcome.decision == "ask" and not approved:
            return PreToolAnswer("ask", outcome.reason or "a PreToolUse hook asks for approval")
        if outcome.updated_input is not None:
            call = ToolCall(call.id, call.name, outcome.updated_input)
        return PreToolAnswer(None, call=call)

    async def post_tool(self, call: ToolCall, output: str, save: Save) -> str | None:
        if "PostToolUse" not in self.events:
            return None
        ev = self._event(
            "PostToolUse", tool_name=call.name, tool_input=call.arguments, tool_output=output
        )
        outcome = await self._run(save, ev, {"call_id": call.id})
        if outcome.decision == "deny" and outcome.reason:
            # Claude Code's exit 2 after a tool: the model reads why.
            await save("context", {"event": "PostToolUse", "text": outcome.reason})
        return outcome.stop

    async def session_end(self, save: Save) -> None:
        if "SessionEnd" in self.events:
            await self._run(save, self._event("SessionEnd"), {})


def _ran(entries: Sequence[Entry], event: str) -> bool:
    return any(e.kind == "hook" and e.data.get("event") == event for e in entries)
