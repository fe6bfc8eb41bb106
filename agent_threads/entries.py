"""A thread's transcript as saved entries, and the pure decisions made from it.

Every model reply and tool result is an entry saved before the next step, so the loop can
always be rebuilt from the entries alone: `next_step` says what to do next, `to_messages`
says what the model sees. Both are pure.

Entry kinds and their data:
- user: {text}: what a person (or the hook) said.
- assistant: {content, tool_calls: [{id, name, arguments, invalid?}], usage?, model}.
- tool_start: {call_id, name}: the call is about to run (in flight until its result).
- tool_pid: {call_id, name, pid, started}: a subprocess the call started (its group).
- tool_result: {call_id, name, output, is_error, status: ok|error|denied|interrupted}.
- approval: {call_id, name, decision: ask|approved|denied, by: rule|user, reason, rule?}.
- note: {text}: what happened to the thread itself (resumed, budget reached).
- hook: {event, hook, decision, exit_code, duration_ms, ...}: one shell hook's run.
- context: {event, text}: what a hook added to the conversation (a user message).
- system_hook: {text, messages}: the `<system-hook>` reminders after a batch of results.
- injected: {role, text, event}: a message a lifecycle hook's effect added.
- retry: {event, by}: BEFORE_FINAL_RESPONSE asked for another model call.
- final: {content, by}: the final answer as a lifecycle hook rewrote it.
- command / command_result: a `/command` a person sent, and its answer.
- custom: {type, data}: an extension's own entry (never shown to the model).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_threads.chat import Message, ToolCall, Usage
from state.entries import EntryKind, EntryRecord

# The loop works on the saved records as they are.
Entry = EntryRecord
__all__ = ["Entry", "EntryKind"]


# -- what to do next ---------------------------------------------------------------------


@dataclass(frozen=True)
class CallModel:
    """Ask the model for its next reply."""


@dataclass(frozen=True)
class Finish:
    """The model answered without tool calls and nobody has said anything since."""

    answer: str


@dataclass(frozen=True)
class CheckCall:
    """A tool call not yet decided: check its permission, then run it."""

    call: ToolCall


@dataclass(frozen=True)
class RunApproved:
    """A person approved this call: run it."""

    call: ToolCall


@dataclass(frozen=True)
class RefuseCall:
    """A person denied this call: tell the model."""

    call: ToolCall
    reason: str


@dataclass(frozen=True)
class AwaitApproval:
    """The call waits for `supervise approve` or `deny`."""

    call: ToolCall


@dataclass(frozen=True)
class Interrupted:
    """The call was running when the daemon died: report it, never re-run it."""

    call: ToolCall


Step = CallModel | Finish | CheckCall | RunApproved | RefuseCall | AwaitApproval | Interrupted


def tool_call(data: dict[str, Any]) -> ToolCall:
    return ToolCall(
        str(data["id"]), str(data["name"]), dict(data.get("arguments") or {}), data.get("invalid")
    )


def call_json(call: ToolCall) -> dict[str, Any]:
    out: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": call.arguments}
    if call.invalid is not None:
        out["invalid"] = call.invalid
    return out


def _last_assistant(entries: Sequence[Entry]) -> int | None:
    for i in range(len(entries) - 1, -1, -1):
        if entries[i].kind == "assistant":
            return i
    return None


def _call_step(call: ToolCall, after: Sequence[Entry]) -> Step | None:
    """What `call` still needs, judged from the entries after its reply (None: done)."""
    started = False
    approval: str | None = None
    reason = ""
    for e in after:
        if e.data.get("call_id") != call.id:
            continue
        if e.kind == "tool_result":
            return None
        if e.kind == "tool_start":
            started = True
        elif e.kind == "approval":
            approval, reason = e.data["decision"], str(e.data.get("reason") or "")
    if started:
        return Interrupted(call)
    if approval == "approved":
        return RunApproved(call)
    if approval == "denied":
        return RefuseCall(call, reason)
    if approval == "ask":
        return AwaitApproval(call)
    return CheckCall(call)


def next_step(entries: Sequence[Entry]) -> Step:
    """What the loop does next, from the saved entries alone."""
    last = _last_assistant(entries)
    if last is None:
        return CallModel()
    reply, after = entries[last], entries[last + 1 :]
    for raw in reply.data.get("tool_calls") or []:
        step = _call_step(tool_call(raw), after)
        if step is not None:
            return step
    if reply.data.get("tool_calls") or any(e.kind in ("user", "retry") for e in after):
        return CallModel()
    return Finish(str(reply.data.get("content") or ""))


def pending_approval(entries: Sequence[Entry]) -> ToolCall | None:
    """The call a thread waits on, if its next step is a person's decision."""
    step = next_step(entries)
    return step.call if isinstance(step, AwaitApproval) else None


# -- what the model sees -----------------------------------------------------------------


def to_messages(entries: Sequence[Entry]) -> list[Message]:
    """The conversation for the model: each reply followed at once by its calls' results.

    Providers require a tool result right after the reply that asked for it, so results are
    placed by call id, wherever they were saved; a call without a result yet is left out
    of the reply (it cannot be answered in this request).
    """
    results = {e.data["call_id"]: e for e in entries if e.kind == "tool_result"}
    out: list[Message] = []
    for e in entries:
        if e.kind in ("user", "system_hook", "injected"):
            out.append(Message("user", str(e.data["text"])))
        elif e.kind == "context":
            # What a hook added (SessionStart output, additionalContext, exit-2 feedback).
            text = f'<hook-output event="{e.data["event"]}">\n{e.data["text"]}\n</hook-output>'
            out.append(Message("user", text))
        elif e.kind == "assistant":
            calls = tuple(tool_call(c) for c in e.data.get("tool_calls") or [])
            answered = tuple(c for c in calls if c.id in results)
            out.append(Message("assistant", str(e.data.get("content") or ""), answered))
            for c in answered:
                r = results[c.id].data
                out.append(
                    Message(
                        "tool",
                        str(r["output"]),
                        tool_call_id=c.id,
                        name=c.name,
                        is_error=bool(r.get("is_error")),
                    )
                )
    return out


def usage(entries: Sequence[Entry]) -> Usage:
    total = Usage()
    for e in entries:
        u = e.data.get("usage") if e.kind == "assistant" else None
        if u:
            total = total + Usage(int(u.get("input_tokens", 0)), int(u.get("output_tokens", 0)))
    return total
