"""Where extensions act inside the loop: lifecycle events, context transforms, commands.

The thread's entries are shown to extensions as the API's messages (`api_history`); what an
effect appends to `conversation_history` is saved as an `injected` entry, what a command
saves with `ctx.save_entry` as a `custom` entry (which the core context ignores), and a
command's answer as a `command_result` entry. So everything an extension does survives a
restart.
"""

from __future__ import annotations

import subprocess
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from agent_threads import api
from agent_threads.chat import Message as ChatMessage
from agent_threads.chat import Reply
from agent_threads.chat import ToolCall as ChatCall
from agent_threads.entries import Entry, EntryKind, tool_call
from agent_threads.extensions import ExtensionContext, Extensions, HeadlessUI, call
from agent_threads.lifecycle import Fired, fire

Save = Callable[[EntryKind, dict[str, Any]], Awaitable[None]]
RETRY_CAP = 3  # RETRY decisions in a row before the thread fails


def _user_text(e: Entry) -> str:
    if e.kind == "context":
        return f'<hook-output event="{e.data["event"]}">\n{e.data["text"]}\n</hook-output>'
    return str(e.data["text"])


def api_history(entries: Sequence[Entry]) -> list[api.Message]:
    """The entries as the API's messages, each reply followed by its results."""
    results = {e.data["call_id"]: e for e in entries if e.kind == "tool_result"}
    out: list[api.Message] = []
    for e in entries:
        if e.kind in ("user", "system_hook", "context"):
            out.append(api.UserMessage(_user_text(e), e.seq))
        elif e.kind == "injected":
            cls = api.SystemMessage if e.data.get("role") == "system" else api.UserMessage
            out.append(cls(str(e.data["text"]), e.seq))
        elif e.kind == "assistant":
            calls = [tool_call(c) for c in e.data.get("tool_calls") or []]
            out.append(
                api.AssistantMessage(
                    str(e.data.get("content") or ""),
                    [api.ToolCall(c.id, c.name, dict(c.arguments)) for c in calls],
                    e.seq,
                )
            )
            for c in calls:
                r = results.get(c.id)
                if r is not None:
                    out.append(
                        api.ToolResult(
                            c.id,
                            c.name,
                            r.data["output"],
                            bool(r.data.get("is_error")),
                            None,
                            r.seq,
                        )
                    )
    return out


def to_chat(messages: Sequence[api.Message]) -> list[ChatMessage]:
    """The API's messages as the model's conversation (calls without a result left out)."""
    answered = {m.tool_call_id for m in messages if isinstance(m, api.ToolResult)}
    out: list[ChatMessage] = []
    for m in messages:
        if isinstance(m, api.AssistantMessage):
            calls = tuple(
                ChatCall(c.id, c.name, dict(c.arguments)) for c in m.tool_calls if c.id in answered
            )
            out.append(ChatMessage("assistant", m.content or "", calls))
        elif isinstance(m, api.ToolResult):
            out.append(
                ChatMessage(
                    "tool",
                    str(m.result),
                    tool_call_id=m.tool_call_id,
                    name=m.tool_name,
                    is_error=m.is_error,
                )
            )
        else:
            out.append(ChatMessage("user", m.content))
    return out


def reply_of(msg: api.AssistantMessage) -> Reply:
    calls = tuple(ChatCall(c.id, c.name, dict(c.arguments)) for c in msg.tool_calls)
    return Reply(msg.content or "", calls)


class LifePoints:
    def __init__(self, ext: Extensions, *, thread_id: int, cwd: Path, model: str) -> None:
        self.ext = ext
        self.thread_id = thread_id
        self.cwd = cwd
        self.model = model

    async def fire(
        self,
        event: api.AgentEvent,
        entries: Sequence[Entry],
        save: Save,
        iteration: int,
        current: Any = None,
        **fields: Any,
    ) -> Fired:
        if not any(h.event is event for h in self.ext.lifecycle):
            return Fired(value=current)
        history = api_history(entries)
        known = len(history)
        view = api.AgentView(f"t{self.thread_id}", history, str(self.cwd), self.model)
        status = api.AgentStatus(event, view, iteration, **fields)
        fired = await fire(self.ext.lifecycle, status, current)
        for m in history[known:]:
            if isinstance(m, api.SystemMessage | api.UserMessage) and m.seq is None:
                role = "system" if isinstance(m, api.SystemMessage) else "user"
                await save("injected", {"role": role, "text": m.content, "event": event.name})
        for err in fired.errors:
            await save("note", {"text": f"extension error: {err}"})
        return fired

    def context(
        self, entries: Sequence[Entry], save: Save, notes: list[str], choice: int | None = None
    ) -> ExtensionContext:
        async def save_entry(kind: str, data: dict[str, Any]) -> None:
            await save("custom", {"type": kind, "data": data})

        async def rebuild() -> list[api.Message]:
            return await self.transformed(entries, save)

        async def run(command: str) -> tuple[int, str]:
            done = await anyio.run_process(
                ["/bin/sh", "-c", command],
                cwd=self.cwd,
                check=False,
                stderr=subprocess.STDOUT,
            )
            return done.returncode, done.stdout.decode("utf-8", errors="replace")

        return ExtensionContext(
            cwd=self.cwd,
            model=self.model,
            entries=[{"seq": e.seq, "kind": e.kind, "at": e.at, "data": e.data} for e in entries],
            messages=api_history(entries),
            ui=HeadlessUI(choice, notes),
            save_entry=save_entry,
            rebuild_context=rebuild,
            exec=run,
        )

    async def transformed(self, entries: Sequence[Entry], save: Save) -> list[api.Message]:
        """The history through every context transform, chained in load order."""
        messages = api_history(entries)
        notes: list[str] = []
        for transform, source in self.ext.transforms:
            ctx = self.context(entries, save, notes)
            try:
                result = await call(transform, list(messages), ctx)
            except Exception as exc:
                await save(
                    "note", {"text": f"extension error: {source}: context transform raised {exc!r}"}
                )
                continue
            if isinstance(result, list):
                messages = result
        return messages

    async def model_messages(
        self, entries: Sequence[Entry], save: Save
    ) -> list[ChatMessage] | None:
        if not self.ext.transforms:
            return None
        return to_chat(await self.transformed(entries, save))

    async def commands(self, entries: list[Entry], save: Save) -> None:
        """Run every `/command` a person sent that has no result yet."""
        done = {e.data.get("command_seq") for e in entries if e.kind == "command_result"}
        for e in [e for e in entries if e.kind == "command" and e.seq not in done]:
            name, args = str(e.data["name"]), str(e.data.get("args") or "")
            cmd = self.ext.commands.get(name)
            notes: list[str] = []
            if cmd is None:
                known = ", ".join(f"/{n}" for n in sorted(self.ext.commands)) or "none"
                ok, text = False, f"unknown command /{name}; this thread's commands: {known}"
            else:
                ctx = self.context(entries, save, notes, e.data.get("choice"))
                try:
                    answer = await call(cmd.handler, args, ctx)
                    ok, text = True, "" if answer is None else str(answer)
                except Exception as exc:
                    ok, text = False, f"/{name} failed: {exc}"
            data = {"command_seq": e.seq, "name": name, "ok": ok, "output": text, "notes": notes}
            await save("command_result", data)
