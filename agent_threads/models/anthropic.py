"""`anthropic:MODEL`: the Anthropic Messages API with tool use, streamed or not."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_threads.messages import (
    AssistantMessage,
    Message,
    Reply,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from agent_threads.models.http import Endpoint, credentials, parse_arguments
from supervise.errors import ModelError, TransientModelError

PUBLIC_BASE = "https://api.anthropic.com"
KEY_VAR = "ANTHROPIC_API_KEY"
VERSION = "2023-06-01"


def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Our messages as Anthropic's turns: tool results and what follows them share a user turn."""
    out: list[dict[str, Any]] = []

    def user_blocks() -> list[dict[str, Any]]:
        if out and out[-1]["role"] == "user":
            blocks: list[dict[str, Any]] = out[-1]["content"]
            return blocks
        out.append({"role": "user", "content": []})
        return out[-1]["content"]  # type: ignore[no-any-return]

    for m in messages:
        if isinstance(m, AssistantMessage):
            blocks: list[dict[str, Any]] = []
            if m.content:
                blocks.append({"type": "text", "text": m.content})
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in m.tool_calls
            ]
            out.append({"role": "assistant", "content": blocks or [{"type": "text", "text": ""}]})
        elif isinstance(m, ToolResult):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": m.tool_call_id,
                "content": m.text,
            }
            if m.is_error:
                block["is_error"] = True
            user_blocks().append(block)
        else:  # a user's word, and a hook's system word (Anthropic has no mid-thread system)
            user_blocks().append({"type": "text", "text": m.content})
    return out


def _usage(data: Any, base: Usage | None = None) -> Usage | None:
    if not isinstance(data, dict):
        return base
    b = base or Usage()
    return Usage(
        int(data.get("input_tokens") or b.input_tokens),
        int(data.get("output_tokens") or b.output_tokens),
    )


def _reply(content: list[dict[str, Any]], usage: Usage | None, stop: str | None) -> Reply:
    text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
    calls = []
    for b in content:
        if b.get("type") != "tool_use":
            continue
        raw = b.get("input")
        if isinstance(raw, str):  # streamed: the JSON text as it arrived
            args, invalid = parse_arguments(raw)
        else:
            args, invalid = (raw, None) if isinstance(raw, dict) else ({}, json.dumps(raw))
        calls.append(ToolCall(str(b.get("id")), str(b.get("name")), args, invalid))
    return Reply(text, tuple(calls), usage, stop)


@dataclass
class _Stream:
    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    usage: Usage | None = None
    stop: str | None = None
    done: bool = False

    def add(self, event: str, data: dict[str, Any]) -> None:
        kind = data.get("type", event)
        if kind == "error":
            err = data.get("error") or {}
            message = str(err.get("message") or err)[:500]
            if err.get("type") in ("overloaded_error", "api_error", "rate_limit_error"):
                raise TransientModelError(f"stream error: {message}")
            raise ModelError(f"stream error: {message}")
        if kind == "message_start":
            self.usage = _usage((data.get("message") or {}).get("usage"))
        elif kind == "content_block_start":
            block = dict(data.get("content_block") or {})
            if block.get("type") == "tool_use":
                block["input"] = ""
            self.blocks[int(data.get("index", 0))] = block
        elif kind == "content_block_delta":
            block = self.blocks.setdefault(int(data.get("index", 0)), {"type": "text", "text": ""})
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif delta.get("type") == "input_json_delta":
                block["input"] = block.get("input", "") + delta.get("partial_json", "")
        elif kind == "message_delta":
            self.stop = (data.get("delta") or {}).get("stop_reason") or self.stop
            self.usage = _usage(data.get("usage"), self.usage)
        elif kind == "message_stop":
            self.done = True

    def reply(self) -> Reply:
        if not self.done:
            raise TransientModelError("the reply stream ended before message_stop")
        return _reply([self.blocks[i] for i in sorted(self.blocks)], self.usage, self.stop)


class AnthropicModel:
    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        stream: bool = True,
        max_tokens: int = 4096,
        timeout: float = 120.0,
    ) -> None:
        self.model = model
        self.stream = stream
        self.max_tokens = max_tokens
        headers = {"content-type": "application/json", "anthropic-version": VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        base = (base_url or PUBLIC_BASE).rstrip("/")
        self.endpoint = Endpoint(
            f"{base}/v1/messages", headers, key_var=KEY_VAR, secret=api_key, timeout=timeout
        )

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r}, {self.endpoint!r})"

    @classmethod
    def from_env(cls, model: str, env: Mapping[str, str], stream: bool = True) -> AnthropicModel:
        """ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY, as Anthropic's own tools read them.

        Raises:
            ModelAuthError: no key for the public API.
        """
        base, key = credentials(
            env, base_var="ANTHROPIC_BASE_URL", key_var=KEY_VAR, public=PUBLIC_BASE, hint=""
        )
        return cls(model, base_url=base, api_key=key, stream=stream)

    @property
    def name(self) -> str:
        return f"anthropic:{self.model}"

    async def complete(
        self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Reply:
        payload: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "messages": wire_messages(messages),
        }
        if tools:
            payload["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in tools
            ]
        if not self.stream:
            data = await self.endpoint.post(payload)
            if data.get("type") == "error":
                raise ModelError(f"error reply: {str(data.get('error'))[:500]}")
            return _reply(
                list(data.get("content") or []), _usage(data.get("usage")), data.get("stop_reason")
            )
        payload["stream"] = True
        state = _Stream()
        async with self.endpoint.events(payload) as events:
            async for event, raw in events:
                data = json.loads(raw)
                if isinstance(data, dict):
                    state.add(event, data)
                if state.done:
                    break
        return state.reply()
