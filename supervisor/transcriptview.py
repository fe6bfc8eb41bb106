"""How a thread's transcript reads for a person (`thread show`, `ask`, `-f`). Pure.

Typed entries in (`agent_threads.transcript`), lines out; `--messages` prints the one
projection every model call and lifecycle hook gets, so a person sees what the model saw.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agent_threads.messages import AssistantMessage, Message, SystemMessage, ToolResult
from agent_threads.transcript import (
    Approval,
    AssistantReply,
    CommandAnswered,
    CommandSent,
    Custom,
    Entry,
    FinalRewritten,
    HookContext,
    HookRan,
    Injected,
    Note,
    Reminder,
    RetryAsked,
    ToolOutput,
    ToolStart,
    UserText,
    decode,
    final_answer,
    totals,
)
from state.entries import EntryRecord
from supervisor.views import iso, local, thread_head, thread_json

FOLLOW_LIMIT = 12  # lines of one entry's text shown while following


def _indent(text: str, limit: int | None) -> list[str]:
    lines = text.rstrip("\n").split("\n") if text else []
    if limit is not None and len(lines) > limit:
        lines = [*lines[:limit], f"… ({len(lines) - limit} more lines; thread show has all)"]
    return [f"    {ln}" for ln in lines]


def _args(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False)


def _approval(b: Approval) -> list[str]:
    by = {"user": "a person", "hook": "a PreToolUse hook"}.get(b.by, "the permission rules")
    words = {"ask": "needs approval", "approved": "approved", "denied": "denied"}
    why = f": {b.reason}" if b.reason else ""
    return [f"  ?? {b.name} {words[b.decision]} by {by}{why}"]


def hook_lines(b: HookRan) -> list[str]:
    """One shell hook run: which hook, on what, how long, how it ended, what it decided."""
    how = "timed out" if b.timed_out else f"exit {b.exit_code}"
    if b.decision == "skipped":
        how = "skipped (condition not met)"
    on = f" on {b.matcher}" if b.matcher else ""
    said = f" -> {b.decision}" if b.decision not in (None, "skipped") else ""
    why = f": {b.reason}" if b.reason else ""
    out = [f"  ## {b.event} hook `{b.hook}`{on}: {how} in {b.duration_ms} ms{said}{why}"]
    if b.updated_input is not None:
        out.append(f"     input rewritten to {_args(b.updated_input)}")
    return out


def entry_lines(e: Entry, *, full: bool = True) -> list[str]:
    """How one transcript entry reads for a person (`full`: as `thread show` prints it)."""
    said = _said_lines(e, None if full else FOLLOW_LIMIT)
    return said if said is not None else _event_lines(e, full)


def _said_lines(e: Entry, n: int | None) -> list[str] | None:
    """The entries that are part of the conversation; None for the others."""
    match e.body:
        case UserText(text=text):
            return [f"[{local(e.at)}] user:", *_indent(text, n)]
        case AssistantReply() as b:
            out = [f"[{local(e.at)}] assistant ({b.model or '?'}):", *_indent(b.content, n)]
            return out + [f"  -> {c.name} {_args(c.arguments)}" for c in b.tool_calls]
        case ToolOutput() as b:
            return [f"  <- {b.name} [{b.status}]", *_indent(b.output, n)]
        case Injected() as b:
            return [f"  ++ {b.event} hook added a {b.role} message:", *_indent(b.text, n)]
        case FinalRewritten() as b:
            return [f"  -- final answer rewritten by {b.by}:", *_indent(b.content, n)]
        case Reminder(text=text):
            return ["  << system hooks:", *_indent(text, n)]
        case HookContext() as b:
            return [f"  ++ {b.event} hook added to the context:", *_indent(b.text, n)]
        case CommandAnswered() as b:
            mark = "" if b.ok else " (failed)"
            out = [f"  <- /{b.name}{mark}", *_indent(b.output, n)]
            return out + [f"    note: {note}" for note in b.notes]
    return None


def _event_lines(e: Entry, full: bool) -> list[str]:
    """What happened around the conversation: decisions, hook runs, bookkeeping."""
    match e.body:
        case Approval() as b:
            return _approval(b)
        case Note(text=text):
            return [f"  -- {text}"]
        case HookRan() as b:
            return hook_lines(b)
        case RetryAsked() as b:
            return [f"  -- {b.event} hook asked for another answer ({b.by})"]
        case CommandSent() as b:
            return [f"[{local(e.at)}] command: /{b.name} {b.args}".rstrip()]
        case ToolStart(name=name):  # shown by `thread show`, not while following
            return [f"  .. {name} started"] if full else []
        case Custom() as b:
            return [f"  .. custom entry {b.type}: {_args(b.data)}"] if full else []
    return []  # tool_pid: bookkeeping, what to kill if the daemon dies mid-call


def usage_json(entries: Sequence[Entry]) -> dict[str, int]:
    """Tokens over all model replies, as the providers reported them."""
    t = totals(entries)
    return {
        "input_tokens": t.usage.input_tokens,
        "output_tokens": t.usage.output_tokens,
        "model_calls": t.model_calls,
    }


def show_json(t: Any, records: Sequence[EntryRecord]) -> dict[str, Any]:
    """`thread show --json`: the thread, its prompt, its raw entries and what they cost."""
    data = thread_json(t)
    data["prompt"] = t.prompt
    # The raw entries, as saved (keys an older or newer version wrote included).
    data["entries"] = [{"seq": r.seq, "kind": r.kind, "at": iso(r.at), **r.data} for r in records]
    data["usage"] = usage_json([decode(r) for r in records])
    return data


def prompt_lines(t: Any) -> list[str]:
    """The system prompt, then the heading the transcript's entries follow."""
    return ["--- prompt ---", t.prompt.rstrip("\n"), "--- transcript ---"]


def final_lines(t: Any, entries: Sequence[Entry]) -> list[str]:
    """The final answer of a completed thread, under its heading; nothing otherwise."""
    final = final_answer(entries) if t.status == "completed" else None
    return [] if final is None else ["--- final answer ---", final]


def show_text(t: Any, entries: Sequence[Entry]) -> str:
    u = usage_json(entries)
    lines = [
        thread_head(t),
        f"usage: {u['model_calls']} model calls, {u['input_tokens']} input tokens, "
        f"{u['output_tokens']} output tokens",
        "",
        *prompt_lines(t),
    ]
    for e in entries:
        lines += entry_lines(e)
    if not entries:
        lines.append("(no entries yet)")
    return "\n".join(lines + final_lines(t, entries))


def message_lines(messages: Sequence[Message]) -> list[str]:
    """The conversation as the model gets it, one message after another."""
    out: list[str] = []
    for m in messages:
        ref = f" #{m.seq}" if m.seq is not None else ""
        if isinstance(m, AssistantMessage):
            out += [f"assistant{ref}:", *_indent(m.content or "", None)]
            out += [f"  -> {c.name} {_args(c.arguments)} (id {c.id})" for c in m.tool_calls]
        elif isinstance(m, ToolResult):
            err = " error" if m.is_error else ""
            out += [f"tool {m.tool_name}{err} (id {m.tool_call_id}){ref}:", *_indent(m.text, None)]
        else:
            who = "system" if isinstance(m, SystemMessage) else "user"
            out += [f"{who}{ref}:", *_indent(m.content, None)]
    return out
