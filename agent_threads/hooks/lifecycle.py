"""Extensions as one family of the hook interface: lifecycle callbacks, context transforms
and `/commands`.

Lifecycle hooks of an event run in registration order. Each whose condition holds runs its
effects, then its value (a callable `(status, current) -> new`, or the value itself) replaces
the current one; the first decision other than CONTINUE ends the round. An extension that
raises is reported in the transcript and skipped: the thread goes on.

Hooks see the thread as the conversation's messages (`transcript.conversation`); what an
effect appends to `conversation_history` is saved as an `injected` entry, what a command saves
with `ctx.save_entry` as a `custom` entry, and a command's answer as a `command_result`
entry, so everything an extension does survives a restart.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent_threads import api
from agent_threads.command import Runner, run_command
from agent_threads.extensions import ExtensionContext, ExtensionError, Extensions, HeadlessUI, call
from agent_threads.hooks.base import Action, Decision, Hooks, Turn
from agent_threads.messages import AssistantMessage, Message, ToolCall, ToolResult
from agent_threads.transcript import (
    CommandAnswered,
    CommandSent,
    Custom,
    Injected,
    Note,
    conversation,
)
from state.threads import ThreadStatus

EXEC_DEADLINE_S = 120.0  # `ctx.exec` of an extension: its whole process group is killed then
MAX_EXEC_OUTPUT = 1 << 20

_ACTION = {
    api.HookDecision.CONTINUE: Action.CONTINUE,
    api.HookDecision.RETRY: Action.RETRY,
    api.HookDecision.FAIL: Action.FAIL,
    api.HookDecision.STOP: Action.STOP,
}


@dataclass
class Fired:
    decision: api.HookDecision = api.HookDecision.CONTINUE
    value: Any = None
    source: str = ""
    errors: list[str] = field(default_factory=list)


async def fire(hooks: Sequence[api.LifecycleHook], status: api.AgentStatus, current: Any) -> Fired:
    """Run the hooks of `status.event`, in order, until one decides."""
    out = Fired(value=current)
    for hook in hooks:
        if hook.event is not status.event:
            continue
        try:
            if hook.condition is not None and not await call(hook.condition, status):
                continue
            for effect in hook.effects:
                await call(effect, status)
            if hook.value is not None:
                out.value = (
                    await call(hook.value, status, out.value)
                    if callable(hook.value)
                    else hook.value
                )
        except Exception as exc:
            out.errors.append(f"{hook.source}: {status.event.name} hook raised {exc!r}")
            continue
        if hook.decision is api.HookDecision.STOP:
            want = api.STOP_TYPES[status.event]
            if not isinstance(out.value, want):
                raise ExtensionError(
                    f"{hook.source}: STOP on {status.event.name} must give a "
                    f"{want[0].__name__}, got {type(out.value).__name__}"
                )
        if hook.decision is not api.HookDecision.CONTINUE:
            out.decision, out.source = hook.decision, hook.source
            return out
    return out


def _failed(event: api.AgentEvent, source: str) -> str:
    article = "an" if event.name[0] in "AEIOU" else "a"
    return f"FAIL from {article} {event.name} hook ({source})"


class LifecycleHooks(Hooks):
    def __init__(
        self,
        ext: Extensions,
        *,
        cwd: Path,
        model: str,
        runner: Runner = run_command,
    ) -> None:
        self.ext = ext
        self.cwd = cwd
        self.model = model
        self.runner = runner  # extensions' `ctx.exec`; a test passes a recording runner

    async def _fire(
        self, event: api.AgentEvent, turn: Turn, current: Any = None, **fields: Any
    ) -> Fired:
        if not any(h.event is event for h in self.ext.lifecycle):
            return Fired(value=current)
        history = conversation(turn.entries)
        known = len(history)
        view = api.AgentView(f"t{turn.thread_id}", history, str(self.cwd), self.model)
        status = api.AgentStatus(event, view, turn.iteration, **fields)
        fired = await fire(self.ext.lifecycle, status, current)
        for m in history[known:]:
            if isinstance(m, api.SystemMessage | api.UserMessage) and m.seq is None:
                role: Literal["user", "system"] = (
                    "system" if isinstance(m, api.SystemMessage) else "user"
                )
                await turn.save(Injected(role, m.content, event.name))
        for err in fired.errors:
            await turn.save(Note(f"extension error: {err}"))
        return fired

    def _decision(self, event: api.AgentEvent, fired: Fired, want: type) -> Decision[Any]:
        action = _ACTION[fired.decision]
        value = fired.value if isinstance(fired.value, want) else None
        reason = _failed(event, fired.source) if action is Action.FAIL else ""
        return Decision(action, value, reason, fired.source)

    async def before_step(self, *, turn: Turn) -> None:
        """Answer every `/command` a person sent that has no answer yet."""
        done = {e.body.command_seq for e in turn.entries if isinstance(e.body, CommandAnswered)}
        for e in [e for e in turn.entries if isinstance(e.body, CommandSent)]:
            if e.seq in done:
                continue
            sent = e.body
            assert isinstance(sent, CommandSent)
            cmd = self.ext.commands.get(sent.name)
            notes: list[str] = []
            if cmd is None:
                known = ", ".join(f"/{n}" for n in sorted(self.ext.commands)) or "none"
                ok, text = False, f"unknown command /{sent.name}; this thread's commands: {known}"
            else:
                ctx = self._context(turn, notes, sent.choice)
                try:
                    answer = await call(cmd.handler, sent.args, ctx)
                    ok, text = True, "" if answer is None else str(answer)
                except Exception as exc:
                    ok, text = False, f"/{sent.name} failed: {exc}"
            await turn.save(CommandAnswered(e.seq, sent.name, ok, text, tuple(notes)))

    async def before_model(self, *, turn: Turn) -> Decision[AssistantMessage]:
        event = api.AgentEvent.BEFORE_LLM_CALL
        return self._decision(event, await self._fire(event, turn), AssistantMessage)

    async def context(self, *, turn: Turn, messages: list[Message]) -> list[Message]:
        """The messages through every context transform, chained in load order."""
        notes: list[str] = []
        for transform, source in self.ext.transforms:
            ctx = self._context(turn, notes)
            try:
                result = await call(transform, list(messages), ctx)
            except Exception as exc:
                await turn.save(
                    Note(f"extension error: {source}: context transform raised {exc!r}")
                )
                continue
            if isinstance(result, list):
                messages = result
        return messages

    async def after_model(
        self, *, turn: Turn, reply: AssistantMessage
    ) -> Decision[AssistantMessage]:
        event = api.AgentEvent.AFTER_LLM_CALL
        fired = await self._fire(event, turn, reply, assistant_message=reply)
        return self._decision(event, fired, AssistantMessage)

    async def before_tool(
        self, *, turn: Turn, call: ToolCall, approved: bool
    ) -> Decision[ToolCall | ToolResult]:
        event = api.AgentEvent.BEFORE_TOOL_EXECUTION
        # Two copies, as before: changing `status.tool_call` in an effect changes nothing;
        # only the value (the hook's decision) may rewrite the input.
        current = ToolCall(call.id, call.name, dict(call.arguments))
        shown = ToolCall(call.id, call.name, dict(call.arguments))
        fired = await self._fire(event, turn, current, tool_call=shown)
        if fired.decision is api.HookDecision.STOP:
            return self._decision(event, fired, ToolResult)
        d = self._decision(event, fired, ToolCall)
        if isinstance(d.value, ToolCall):  # only the input may change, never which call
            d = Decision(
                d.action, ToolCall(call.id, call.name, dict(d.value.arguments)), d.reason, d.source
            )
        return d

    async def after_tool(
        self, *, turn: Turn, call: ToolCall, result: ToolResult
    ) -> Decision[ToolResult]:
        event = (
            api.AgentEvent.ON_TOOL_ERROR if result.is_error else api.AgentEvent.AFTER_TOOL_EXECUTION
        )
        view = ToolResult(
            call.id,
            call.name,
            result.result,
            result.is_error,
            result.text if result.is_error else None,
        )
        fired = await self._fire(event, turn, view, tool_result=view, error=view.error)
        return self._decision(event, fired, ToolResult)

    async def before_final(
        self, *, turn: Turn, answer: AssistantMessage
    ) -> Decision[AssistantMessage]:
        event = api.AgentEvent.BEFORE_FINAL_RESPONSE
        fired = await self._fire(event, turn, answer, assistant_message=answer)
        return self._decision(event, fired, AssistantMessage)

    async def session_end(self, *, turn: Turn, status: ThreadStatus) -> None:
        await self._fire(api.AgentEvent.QUERY_END, turn)

    def _context(self, turn: Turn, notes: list[str], choice: int | None = None) -> ExtensionContext:
        async def save_entry(kind: str, data: dict[str, Any]) -> None:
            await turn.save(Custom(kind, data))

        async def rebuild() -> list[Message]:
            return await self.context(turn=turn, messages=conversation(turn.entries))

        async def run(command: str) -> tuple[int, str]:
            # The extension's own code, like a shell hook: outside the tools' sandbox, with
            # the daemon's environment, bounded like every command a thread starts.
            done = await self.runner(
                ["/bin/sh", "-c", command],
                cwd=self.cwd,
                env=dict(os.environ),
                deadline_s=EXEC_DEADLINE_S,
                merge_stderr=True,
                max_output=MAX_EXEC_OUTPUT,
            )
            text = done.stdout.decode("utf-8", errors="replace")
            if done.returncode is None:  # `timeout`'s code: killed at the deadline
                return 124, f"{text}\n[killed after {EXEC_DEADLINE_S:g}s with its process group]"
            return done.returncode, text

        return ExtensionContext(
            cwd=self.cwd,
            model=self.model,
            # Copies: a command that changes them must not change the loop's own entries.
            entries=[copy.deepcopy(e.to_json()) for e in turn.entries],
            messages=conversation(turn.entries),
            ui=HeadlessUI(choice, notes),
            save_entry=save_entry,
            rebuild_context=rebuild,
            exec=run,
        )
