"""A thread's transcript as Claude Code writes one: the file hooks get as `transcript_path`.

Hooks written for Claude Code read it as JSONL, one object per line: `type` "user" or
"assistant", `message` in the Anthropic Messages shape (`content` a string, or blocks of
`text`, `tool_use`, `tool_result`), plus `uuid`, `sessionId`, `timestamp` and `cwd`. Public
hooks look for the last assistant `text` block, count `tool_use` blocks, or copy the whole
file. Only what the model saw is written; the entries are already redacted when saved.

The file is brought up to date right before any shell hook runs (`TranscriptFile.sync`): a
hook always reads the thread as it is. It is rewritten whole the first time in a process (a
restarted daemon), then appended to.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_threads.transcript import (
    AssistantReply,
    Entry,
    HookContext,
    Injected,
    Reminder,
    ToolOutput,
    UserText,
    hook_output,
)

_NS = uuid.UUID("6f1f4d5c-7c2e-4c39-9a57-3d2b8f0e9a10")  # stable uuids: same entry, same id


def _uuid(session_id: str, seq: int) -> str:
    return str(uuid.uuid5(_NS, f"{session_id}/{seq}"))


def line_of(entry: Entry, session_id: str, cwd: Path) -> dict[str, Any] | None:
    """One transcript line for `entry` in Claude Code's shape; None for entries the model
    never saw (hook runs, approvals, notes). Pure."""
    b = entry.body
    message: dict[str, Any]
    extra: dict[str, Any] = {}
    if isinstance(b, UserText | Reminder):
        kind, message = "user", {"role": "user", "content": b.text}
    elif isinstance(b, HookContext):
        kind, message = "user", {"role": "user", "content": hook_output(b.event, b.text)}
    elif isinstance(b, Injected):
        kind, message = "user", {"role": "user", "content": b.text}
    elif isinstance(b, AssistantReply):
        blocks: list[dict[str, Any]] = []
        if b.content:
            blocks.append({"type": "text", "text": b.content})
        blocks += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
            for c in b.tool_calls
        ]
        kind = "assistant"
        message = {"role": "assistant", "model": b.model, "content": blocks}
        if b.stop_reason:
            message["stop_reason"] = b.stop_reason
        if b.usage is not None:
            message["usage"] = {
                "input_tokens": b.usage.input_tokens,
                "output_tokens": b.usage.output_tokens,
            }
    elif isinstance(b, ToolOutput):
        block = {
            "type": "tool_result",
            "tool_use_id": b.call_id,
            "content": b.output,
            "is_error": b.is_error,
        }
        kind, message = "user", {"role": "user", "content": [block]}
        if b.data is not None:
            extra["toolUseResult"] = b.data
    else:
        return None
    return {
        "type": kind,
        "message": message,
        "uuid": _uuid(session_id, entry.seq),
        "sessionId": session_id,
        "timestamp": datetime.fromtimestamp(entry.at, UTC).isoformat().replace("+00:00", "Z"),
        "cwd": str(cwd),
        "isSidechain": False,
        "userType": "external",
        **extra,
    }


class TranscriptFile:
    """The JSONL file of one thread, kept current by `sync`."""

    def __init__(self, path: Path, session_id: str, cwd: Path) -> None:
        self.path = path
        self.session_id = session_id
        self.cwd = cwd
        self.written: int | None = None  # the last seq written in this process

    def _text(self, entries: Sequence[Entry]) -> str:
        lines = (line_of(e, self.session_id, self.cwd) for e in entries)
        return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines if x is not None)

    def sync(self, entries: Sequence[Entry]) -> None:
        """Bring the file up to `entries`. Raises OSError."""
        last = entries[-1].seq if entries else 0
        if self.written is None:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(self._text(entries))
            os.replace(tmp, self.path)
        elif last > self.written:
            new = [e for e in entries if e.seq > self.written]
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(self._text(new))
        self.written = last
