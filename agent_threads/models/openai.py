"""`openai:MODEL`: the OpenAI chat completions wire protocol with tool calling.

Also what Ollama, vLLM, llama.cpp's server and LM Studio speak: point `OPENAI_BASE_URL` at
them. Streaming (server-sent events) by default; `SUPERVISE_STREAM=0` asks for one reply.
"""

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

PUBLIC_BASE = "https://api.openai.com/v1"
KEY_VAR = "OPENAI_API_KEY"


def wire_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Our conversation as chat completions messages (a hook's system word as a user turn)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for m in messages:
        if isinstance(m, ToolResult):
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.text})
        elif isinstance(m, AssistantMessage):
            msg: dict[str, Any] = {"role": "assistant", "content": m.content or None}
            if m.tool_calls:
                msg["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {
                            "name": c.name,
                            "arguments": c.invalid or json.dumps(c.arguments),
                        },
                    }
                    for c in m.tool_calls
                ]
            out.append(msg)
        else:
            out.append({"role": "user", "content": m.content})
    return out


def wire_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def _call(id_: str, name: str, raw: str) -> ToolCall:
    args, invalid = parse_arguments(raw)
    return ToolCall(id_, name, args, invalid)


def _usage(data: Any) -> Usage | None:
    if not isinstance(data, dict):
        return None
    return Usage(int(data.get("prompt_tokens") or 0), int(data.get("completion_tokens") or 0))


@dataclass
class _Partial:
    """A streamed reply as its pieces arrive."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    usage: Usage | None = None
    finish: str | None = None

    def add(self, chunk: dict[str, Any]) -> None:
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        for choice in chunk.get("choices") or []:
            self.finish = choice.get("finish_reason") or self.finish
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.text.append(delta["content"])
            for tc in delta.get("tool_calls") or []:
                slot = self.calls.setdefault(
                    int(tc.get("index", 0)), {"id": "", "name": "", "a": ""}
                )
                slot["id"] = tc.get("id") or slot["id"]
                fn = tc.get("function") or {}
                slot["name"] += fn.get("name") or ""
                slot["a"] += fn.get("arguments") or ""

    def reply(self) -> Reply:
        calls = tuple(
            _call(c["id"] or f"call_{i}", c["name"], c["a"]) for i, c in sorted(self.calls.items())
        )
        return Reply("".join(self.text), calls, self.usage, self.finish)


class OpenAIModel:
    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        stream: bool = True,
        timeout: float = 120.0,
    ) -> None:
        self.model = model
        self.stream = stream
        headers = {"content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        base = (base_url or PUBLIC_BASE).rstrip("/")
        self.endpoint = Endpoint(
            f"{base}/chat/completions", headers, key_var=KEY_VAR, secret=api_key, timeout=timeout
        )

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model!r}, {self.endpoint!r})"

    @classmethod
    def from_env(cls, model: str, env: Mapping[str, str], stream: bool = True) -> OpenAIModel:
        """Configured as users already do: OPENAI_BASE_URL and OPENAI_API_KEY.

        Raises:
            ModelAuthError: no key for the public OpenAI API (local servers need none).
        """
        base, key = credentials(
            env,
            base_var="OPENAI_BASE_URL",
            key_var=KEY_VAR,
            public=PUBLIC_BASE,
            hint=" (or set OPENAI_BASE_URL to a local server such as Ollama)",
        )
        return cls(model, base_url=base, api_key=key, stream=stream)

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    async def complete(
        self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Reply:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": wire_messages(system, messages),
        }
        if tools:
            payload["tools"] = wire_tools(tools)
        if not self.stream:
            return self._reply(await self.endpoint.post(payload))
        payload["stream"] = True
        payload["stream_options"] = {"include_usage": True}
        part = _Partial()
        done = False
        async with self.endpoint.events(payload) as events:
            async for _event, data in events:
                if data.strip() == "[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                if isinstance(chunk, dict) and chunk.get("error"):
                    raise ModelError(f"stream error: {str(chunk['error'])[:500]}")
                part.add(chunk)
        if not done and part.finish is None:
            raise TransientModelError("the reply stream ended before it was complete")
        return part.reply()

    def _reply(self, data: dict[str, Any]) -> Reply:
        choices = data.get("choices") or []
        if not choices:
            raise ModelError(f"the reply has no choices: {json.dumps(data)[:300]}")
        msg = choices[0].get("message") or {}
        calls = tuple(
            _call(
                str(tc.get("id") or f"call_{i}"),
                str((tc.get("function") or {}).get("name") or ""),
                str((tc.get("function") or {}).get("arguments") or ""),
            )
            for i, tc in enumerate(msg.get("tool_calls") or [])
        )
        return Reply(
            str(msg.get("content") or ""),
            calls,
            _usage(data.get("usage")),
            choices[0].get("finish_reason"),
        )
