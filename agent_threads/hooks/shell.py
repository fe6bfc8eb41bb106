"""Shell hooks (Claude Code's command hooks) as one family of the hook interface.

SessionStart once per thread (its output goes into the context), UserPromptSubmit on every
prompt that enters the thread, PreToolUse after the permission check (it can deny, ask,
rewrite the input or stop the thread), PostToolUse after each result, SessionEnd when the
thread ends. Every hook run is saved as a `hook` entry; what a hook adds to the context is
saved as a `context` entry, which the model reads as a user message. Claude Code's words
(allow, ask, deny, `continue: false`) stop here: the loop gets a `Decision`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent_threads.hooks.base import Action, Decision, Hooks, Turn, go_on
from agent_threads.hooks.shellrun import HookEvent, HookOutcome, run_hooks
from agent_threads.hooks.shellspec import ShellHook
from agent_threads.messages import ToolCall, ToolResult
from agent_threads.transcript import HookContext, HookRan, UserText
from state.threads import ThreadStatus


@dataclass(frozen=True)
class ShellSite:
    """Where the thread's shell hooks run and what they are told about it."""

    cwd: Path
    env: Mapping[str, str]
    agent_name: str
    # The hook's instructions, part of the first prompt of a process's thread (None: asked).
    instructions: str | None = None


class ShellHooks(Hooks):
    def __init__(self, hooks: Sequence[ShellHook], site: ShellSite) -> None:
        self.hooks = tuple(hooks)
        self.site = site
        self.events = {h.event for h in self.hooks}

    def _event(self, turn: Turn, event: str, **kw: Any) -> HookEvent:
        return HookEvent(
            event=event,
            session_id=f"t{turn.thread_id}",
            cwd=self.site.cwd,
            env=self.site.env,
            agent_name=self.site.agent_name,
            **kw,
        )

    async def _run(self, turn: Turn, ev: HookEvent, **extra: Any) -> HookOutcome:
        outcome = await run_hooks(self.hooks, ev)
        for run in outcome.runs:
            await turn.save(replace(run, **extra))
        for text in outcome.context:
            await turn.save(HookContext(ev.event, text))
        return outcome

    async def session_start(self, *, turn: Turn) -> Decision[None]:
        """Once per thread: a restarted thread does not run it again."""
        if "SessionStart" not in self.events or _ran(turn, "SessionStart"):
            return go_on()
        outcome = await self._run(turn, self._event(turn, "SessionStart"))
        return _stopped(outcome, "SessionStart")

    async def new_input(self, *, turn: Turn) -> Decision[None]:
        """UserPromptSubmit for each prompt not yet seen; a block fails the thread."""
        if "UserPromptSubmit" not in self.events:
            return go_on()
        seen = {e.body.prompt_seq for e in turn.entries if isinstance(e.body, HookRan)}
        prompts = [e for e in turn.entries if isinstance(e.body, UserText)]
        first = prompts[0].seq if prompts else None
        for e in [e for e in prompts if e.seq not in seen]:
            assert isinstance(e.body, UserText)
            text = e.body.text
            if e.seq == first and self.site.instructions is not None:
                text = f"{self.site.instructions}\n{text}"  # the hook's words are its prompt
            ev = self._event(turn, "UserPromptSubmit", prompt=text)
            outcome = await self._run(turn, ev, prompt_seq=e.seq)
            if outcome.stop or outcome.decision == "deny":
                why = (
                    outcome.stop or f"a UserPromptSubmit hook blocked the prompt: {outcome.reason}"
                )
                return Decision(Action.FAIL, reason=why, source="UserPromptSubmit")
        return go_on()

    async def before_tool(
        self, *, turn: Turn, call: ToolCall, approved: bool
    ) -> Decision[ToolCall | ToolResult]:
        if "PreToolUse" not in self.events:
            return go_on()
        ev = self._event(turn, "PreToolUse", tool_name=call.name, tool_input=call.arguments)
        outcome = await self._run(turn, ev, call_id=call.id)
        if outcome.stop:
            return Decision(
                Action.FAIL,
                reason=f"stopped by a PreToolUse hook: {outcome.stop}",
                source="PreToolUse",
            )
        if outcome.decision == "deny":
            text = f"Blocked by a PreToolUse hook: {outcome.reason}"
            denied = ToolResult(call.id, call.name, text, is_error=True)
            return Decision(Action.DENY, denied, outcome.reason, "PreToolUse")
        if outcome.decision == "ask" and not approved:
            why = outcome.reason or "a PreToolUse hook asks for approval"
            return Decision(Action.ASK, reason=why, source="hook")
        if outcome.updated_input is not None:
            return go_on(ToolCall(call.id, call.name, outcome.updated_input))
        return go_on()

    async def after_result(
        self, *, turn: Turn, call: ToolCall, result: ToolResult
    ) -> Decision[None]:
        """PostToolUse, once the result is saved: it sees what the model will read."""
        if "PostToolUse" not in self.events:
            return go_on()
        ev = self._event(
            turn,
            "PostToolUse",
            tool_name=call.name,
            tool_input=call.arguments,
            tool_output=result.text,
        )
        outcome = await self._run(turn, ev, call_id=call.id)
        if outcome.decision == "deny" and outcome.reason:
            # Claude Code's exit 2 after a tool: the model reads why.
            await turn.save(HookContext("PostToolUse", outcome.reason))
        if outcome.stop:
            return Decision(
                Action.FAIL,
                reason=f"stopped by a PostToolUse hook: {outcome.stop}",
                source="PostToolUse",
            )
        return go_on()

    async def session_end(self, *, turn: Turn, status: ThreadStatus) -> None:
        if "SessionEnd" in self.events:
            await self._run(turn, self._event(turn, "SessionEnd"))


def _stopped(outcome: HookOutcome, event: str) -> Decision[None]:
    if outcome.stop:
        return Decision(
            Action.FAIL, reason=f"stopped by a {event} hook: {outcome.stop}", source=event
        )
    return go_on()


def _ran(turn: Turn, event: str) -> bool:
    return any(isinstance(e.body, HookRan) and e.body.event == event for e in turn.entries)
