"""`openai:MODEL`: the OpenAI chat completions wire protocol with tool calling.

Also what Ollama, vLLM, llama.cpp's server and LM Studio speak: point `OPENAI_BASE_URL` at
them. Streaming (server-sent events) by default; `SUPERVISE_STREAM=0` asks for one reply.
Each server's own way of saying things is read as it is (tests/wire/SOURCES.md): streamed
calls told apart by `id` when the `index` is reused or missing, a name repeated as "" in
later deltas, error chunks in every server's form; and written so each accepts it:
`tool_choice` said out loud, assistant content never null, arguments always an object.
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
from agent_threads.models.replies import finished, refused, sent_arguments, stream_error
from supervise.errors import ModelError, TransientModelError

PUBLIC_BASE = "https://api.openai.com/v1"
KEY_VAR = "OPENAI_API_KEY"
# What `finish_reason: length` means on a server we did not ask for a limit: its own.
_LENGTH = (
    "finish_reason: length: the server's output or context limit; raise it there "
    "(Ollama num_ctx, llama.cpp --ctx-size, vLLM --max-model-len)"
)


def wire_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Our conversation as chat completions messages (a hook's system word as a user turn).

    An assistant turn's content is a string, never null: llama.cpp's server rejects
    `"content": null` beside tool calls (ggml-org/llama.cpp#13471), and every server takes "".
    """
    out: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for m in messages:
        if isinstance(m, ToolResult):
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.text})
        elif isinstance(m, AssistantMessage):
            msg: dict[str, Any] = {"role": "assistant", "content": m.content or ""}
            if m.tool_calls:
                msg["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(sent_arguments(c))},
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


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _arguments(value: Any) -> str:
    """A delta's arguments: text as OpenAI sends it; some servers send the object itself."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def _ending(
    content: str, refusal: str, calls: tuple[ToolCall, ...], usage: Usage | None, finish: str | None
) -> Reply:
    """The reply the loop gets, or the refusal or cut-off it was.

    Raises:
        ModelRefused: `message.refusal`, or `finish_reason: content_filter`.
        ModelTruncated: `finish_reason: length` with text only.
    """
    if refusal.strip():
        raise refused("message.refusal", refusal)
    if finish == "content_filter":
        raise refused("finish_reason: content_filter, the provider's filter stopped it", content)
    reply = Reply(content, calls, usage, finish)
    return finished(reply, cut=finish == "length", limit=_LENGTH)


@dataclass
class _Slot:
    """One streamed tool call as its pieces arrive."""

    id: str = ""
    name: str = ""
    arguments: str = ""

    def starts_another(self, id_: str, name: str, again: bool) -> bool:
        """Whether a delta aimed at this call is in fact the next call.

        OpenAI numbers calls by `index`; Ollama sends each call whole under a reused index 0
        (ollama/ollama#15457) or with none (ollama/ollama#7881), but each with its own `id`.
        """
        if id_ and self.id and id_ != self.id:
            return True
        if name and self.name and name != self.name:
            return True
        return again and bool(id_ or name)


@dataclass
class _Partial:
    """A streamed reply as its pieces arrive."""

    text: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    calls: list[_Slot] = field(default_factory=list)
    by_index: dict[int, _Slot] = field(default_factory=dict)
    usage: Usage | None = None
    finish: str | None = None

    def add(self, chunk: dict[str, Any]) -> None:
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index") not in (0, None):
                continue
            self.finish = choice.get("finish_reason") or self.finish
            delta = choice.get("delta") or {}
            self.text.append(_text(delta.get("content")))
            self.refusal.append(_text(delta.get("refusal")))
            seen: set[int | None] = set()
            for tc in delta.get("tool_calls") or []:
                if isinstance(tc, dict):
                    self._tool_delta(tc, seen)

    def _tool_delta(self, tc: dict[str, Any], seen: set[int | None]) -> None:
        index = tc.get("index")
        index = index if isinstance(index, int) and not isinstance(index, bool) else None
        id_ = _text(tc.get("id"))
        fn = tc.get("function") or {}
        name = _text(fn.get("name"))  # LM Studio repeats it as "" in every later delta
        # No index: the call the last delta was for (Ollama before v0.4.7).
        slot = self.by_index.get(index) if index is not None else self.last
        if slot is None or slot.starts_another(id_, name, index in seen):
            slot = _Slot()
            self.calls.append(slot)
        if index is not None:
            self.by_index[index] = slot
            seen.add(index)
        slot.id = slot.id or id_
        slot.name = slot.name or name
        slot.arguments += _arguments(fn.get("arguments"))

    @property
    def last(self) -> _Slot | None:
        return self.calls[-1] if self.calls else None

    @property
    def empty(self) -> bool:
        return not "".join(self.text) and not "".join(self.refusal) and not self.calls

    def reply(self) -> Reply:
        calls = tuple(
            _call(c.id or f"call_{i}", c.name, c.arguments) for i, c in enumerate(self.calls)
        )
        return _ending("".join(self.text), "".join(self.refusal), calls, self.usage, self.finish)


def _chunk(event: str, data: str) -> dict[str, Any] | None:
    """One stream event as a chunk; None for one that carries nothing.

    Raises:
        ModelError: the event is an error (TransientModelError unless the request was wrong).
    """
    if not data.strip():
        return None
    try:
        chunk = json.loads(data)
    except ValueError:
        raise TransientModelError(
            f"the server sent a stream event that is not JSON: {data[:200]!r}"
        ) from None
    if not isinstance(chunk, dict):
        return None
    if event == "error":
        raise stream_error(chunk.get("error", chunk))
    if chunk.get("error"):
        raise stream_error(chunk["error"])
    if chunk.get("object") == "error":  # vLLM before its errors were nested
        raise stream_error(chunk)
    return chunk


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
            # OpenAI's default, said out loud: llama.cpp's server offers no tools without it
            # (issue #16), and a vLLM started without --enable-auto-tool-choice then says
            # so (400) instead of silently ignoring the tools.
            payload["tool_choice"] = "auto"
        if not self.stream:
            return self._reply(await self.endpoint.post(payload))
        payload["stream"] = True
        payload["stream_options"] = {"include_usage": True}
        part = _Partial()
        async with self.endpoint.events(payload) as events:
            async for event, data in events:
                if data.strip() == "[DONE]":
                    break
                chunk = _chunk(event, data)
                if chunk is not None:
                    part.add(chunk)
        if part.finish is None and part.empty:
            raise TransientModelError("the reply stream ended before the model said anything")
        return part.reply()

    def _reply(self, data: dict[str, Any]) -> Reply:
        if data.get("error"):
            raise stream_error(data["error"], "in its reply")
        choices = data.get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            raise ModelError(f"the reply has no choices: {json.dumps(data)[:300]}")
        msg = choices[0].get("message") or {}
        calls = tuple(
            _call(
                str(tc.get("id") or f"call_{i}"),
                _text((tc.get("function") or {}).get("name")),
                _arguments((tc.get("function") or {}).get("arguments")),
            )
            for i, tc in enumerate(msg.get("tool_calls") or [])
            if isinstance(tc, dict)
        )
        return _ending(
            _text(msg.get("content")),
            _text(msg.get("refusal")),
            calls,
            _usage(data.get("usage")),
            choices[0].get("finish_reason"),
        )
