"""`anthropic:MODEL`: the Anthropic Messages API with tool use, streamed or not.

Extended thinking (`MAX_THINKING_TOKENS`, as Claude Code reads it) comes back as thinking and
redacted_thinking blocks, kept with their signatures and sent back in order before the reply's
text and tool calls, as the API requires in a tool loop. Block types this adapter does not
know (server tools' `server_tool_use`, `web_search_tool_result`, whatever comes next) are
skipped: this adapter offers no server tools, so no reply needs them back.
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
    Thinking,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from agent_threads.models.http import Endpoint, credentials, parse_arguments
from agent_threads.models.replies import finished, refused, sent_arguments, stream_error
from supervise.errors import (
    ModelAuthError,
    ModelError,
    ModelRefused,
    ModelTruncated,
    TransientModelError,
)

PUBLIC_BASE = "https://api.anthropic.com"
KEY_VAR = "ANTHROPIC_API_KEY"
THINKING_VAR = "MAX_THINKING_TOKENS"
VERSION = "2023-06-01"
MORE_ROOM = 4  # a reply cut at max_tokens is asked again once with this many times the room
ROOM_CAP = 32000  # ... but never more than every current model accepts
CUT = ("max_tokens", "model_context_window_exceeded")


def _thinking_block(t: Thinking) -> dict[str, Any]:
    if t.redacted is not None:
        return {"type": "redacted_thinking", "data": t.redacted}
    return {"type": "thinking", "thinking": t.text, "signature": t.signature}


def _assistant_blocks(m: AssistantMessage) -> list[dict[str, Any]]:
    """An assistant turn's blocks: its thinking first, as it came, then text and tool calls.

    Empty when the reply said nothing (an empty or refused reply): the API rejects an empty
    text block, and thinking alone is not a turn.
    """
    said: list[dict[str, Any]] = []
    if m.content and m.content.strip():
        said.append({"type": "text", "text": m.content})
    said += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": sent_arguments(c)}
        for c in m.tool_calls
    ]
    return [_thinking_block(t) for t in m.thinking] + said if said else []


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
            blocks = _assistant_blocks(m)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
        elif isinstance(m, ToolResult):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": m.tool_call_id,
                "content": m.text,
            }
            if m.is_error:
                block["is_error"] = True
            user_blocks().append(block)
        elif m.content.strip():  # a user's or a hook's word (Anthropic has no mid-thread system)
            user_blocks().append({"type": "text", "text": m.content})
    if out and out[-1]["role"] == "assistant":  # the API reads a last assistant turn as a
        last = out[-1]["content"][-1]  # prefix to continue, and refuses trailing whitespace
        if last["type"] == "text":
            last["text"] = last["text"].rstrip()
    return out


def _usage(data: Any, base: Usage | None = None) -> Usage | None:
    if not isinstance(data, dict):
        return base
    b = base or Usage()
    return Usage(
        int(data.get("input_tokens") or b.input_tokens),
        int(data.get("output_tokens") or b.output_tokens),
    )


@dataclass
class _Block:
    """One content block: as it came whole, or as its deltas arrive."""

    kind: str = ""
    text: str = ""  # a text block's text, a thinking block's thinking
    signature: str = ""
    data: str | None = None  # a redacted_thinking block's
    id: str = ""
    name: str = ""
    input: Any = None  # a tool_use block's object, or the JSON text its deltas bring

    @classmethod
    def of(cls, raw: Any, streamed: bool = False) -> _Block:
        if not isinstance(raw, dict):
            return cls()
        kind = str(raw.get("type") or "")
        block = cls(
            kind,
            str(raw.get("thinking" if kind == "thinking" else "text") or ""),
            str(raw.get("signature") or ""),
            str(raw.get("data") or "") if kind == "redacted_thinking" else None,
            str(raw.get("id") or ""),
            str(raw.get("name") or ""),
            raw.get("input"),
        )
        if streamed and kind in ("tool_use", "server_tool_use"):
            block.input = ""  # the deltas bring it, as JSON text
        return block

    def add(self, delta: Mapping[str, Any]) -> None:
        kind = delta.get("type")
        if kind == "text_delta":
            self.kind = self.kind or "text"  # a delta whose block never started: text
            self.text += str(delta.get("text") or "")
        elif kind == "thinking_delta":
            self.text += str(delta.get("thinking") or "")
        elif kind == "signature_delta":
            self.signature = str(delta.get("signature") or "")
        elif kind == "input_json_delta":
            sofar = self.input if isinstance(self.input, str) else ""
            self.input = sofar + str(delta.get("partial_json") or "")
        # citations_delta and delta types added later: nothing this adapter sends back

    def call(self) -> ToolCall:
        if isinstance(self.input, str):  # streamed: the JSON text as it arrived
            args, invalid = parse_arguments(self.input)
        elif isinstance(self.input, dict):
            args, invalid = self.input, None
        else:
            args, invalid = {}, json.dumps(self.input)
        return ToolCall(self.id, self.name, args, invalid)


def _reply(blocks: Sequence[_Block], usage: Usage | None, stop: str | None, why: str) -> Reply:
    """A reply of these content blocks; block types not known here are skipped.

    Raises:
        ModelRefused: `stop_reason: refusal`.
    """
    text = "".join(b.text for b in blocks if b.kind == "text")
    if stop == "refusal":
        raise refused(f"stop_reason: refusal{f', {why}' if why else ''}", text)
    calls = tuple(b.call() for b in blocks if b.kind == "tool_use")
    thinking = tuple(
        Thinking(b.text, b.signature) if b.kind == "thinking" else Thinking(redacted=b.data)
        for b in blocks
        if b.kind in ("thinking", "redacted_thinking")
    )
    return Reply(text, calls, usage, stop, thinking)


def _explanation(details: Any) -> str:
    if isinstance(details, dict):
        return str(details.get("explanation") or details.get("category") or "")
    return ""


def _index(data: Mapping[str, Any]) -> int:
    index = data.get("index")
    return index if isinstance(index, int) and not isinstance(index, bool) else 0


@dataclass
class _Stream:
    blocks: dict[int, _Block] = field(default_factory=dict)
    usage: Usage | None = None
    stop: str | None = None
    why: str = ""
    done: bool = False

    def add(self, event: str, data: dict[str, Any]) -> None:
        kind = data.get("type", event)
        if kind == "error" or event == "error":
            raise stream_error(data.get("error", data))
        if kind == "message_start":
            self.usage = _usage((data.get("message") or {}).get("usage"))
        elif kind == "content_block_start":
            self.blocks[_index(data)] = _Block.of(data.get("content_block"), streamed=True)
        elif kind == "content_block_delta":
            self.blocks.setdefault(_index(data), _Block()).add(data.get("delta") or {})
        elif kind == "message_delta":
            delta = data.get("delta") or {}
            self.stop = delta.get("stop_reason") or self.stop
            self.why = _explanation(delta.get("stop_details")) or self.why
            self.usage = _usage(data.get("usage"), self.usage)
        elif kind == "message_stop":
            self.done = True
        # ping, content_block_stop, and event types added later: nothing to keep

    def reply(self) -> Reply:
        if not self.done:
            raise TransientModelError("the reply stream ended before message_stop")
        blocks = [self.blocks[i] for i in sorted(self.blocks)]
        return _reply(blocks, self.usage, self.stop, self.why)


class AnthropicModel:
    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        stream: bool = True,
        max_tokens: int = 4096,
        thinking_budget: int | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.model = model
        self.stream = stream
        self.thinking_budget = thinking_budget
        # The budget is part of max_tokens: leave the answer room after it.
        self.max_tokens = max_tokens + (thinking_budget or 0)
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
        """ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY and MAX_THINKING_TOKENS, as Anthropic's own
        tools read them.

        Raises:
            ModelAuthError: no key for the public API.
            ModelError: MAX_THINKING_TOKENS is not a whole number of at least 1024.
        """
        base, key = credentials(
            env, base_var="ANTHROPIC_BASE_URL", key_var=KEY_VAR, public=PUBLIC_BASE, hint=""
        )
        raw = (env.get(THINKING_VAR) or "").strip()
        budget = int(raw) if raw.isdigit() else None
        if raw and (budget is None or budget < 1024):
            raise ModelError(
                f"{THINKING_VAR} must be a whole number of at least 1024 (Anthropic's minimum "
                f"thinking budget), got {raw!r}"
            )
        return cls(model, base_url=base, api_key=key, stream=stream, thinking_budget=budget)

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
        if self.thinking_budget:
            payload["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        if tools:
            payload["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in tools
            ]
        reply = await self._ask(payload)
        if reply.stop_reason == "max_tokens" and self.max_tokens < ROOM_CAP:
            reply = await self._more_room(payload, reply)
        limit = f"stop_reason: {reply.stop_reason}, max_tokens {payload['max_tokens']}"
        return finished(reply, cut=reply.stop_reason in CUT, limit=limit)

    async def _more_room(self, payload: dict[str, Any], cut: Reply) -> Reply:
        """The request again with more room for the answer, once; later calls keep the room.

        Raises:
            ModelTruncated: the server refused the larger max_tokens (an older model's limit).
        """
        asked = payload["max_tokens"]
        # Kept before asking: a transient failure retried from the start asks with it too.
        self.max_tokens = payload["max_tokens"] = min(ROOM_CAP, asked * MORE_ROOM)
        try:
            return await self._ask(payload)
        except (TransientModelError, ModelAuthError, ModelRefused, ModelTruncated):
            raise
        except ModelError as exc:
            self.max_tokens = asked
            raise ModelTruncated(
                f"the reply was cut off at max_tokens {asked} and asking for "
                f"{payload['max_tokens']} was refused: {exc}"
            ) from exc

    async def _ask(self, payload: dict[str, Any]) -> Reply:
        if not self.stream:
            data = await self.endpoint.post(payload)
            if data.get("type") == "error":
                raise stream_error(data.get("error", data), "in its reply")
            return _reply(
                [_Block.of(b) for b in data.get("content") or []],
                _usage(data.get("usage")),
                data.get("stop_reason"),
                _explanation(data.get("stop_details")),
            )
        body = dict(payload, stream=True)
        state = _Stream()
        async with self.endpoint.events(body) as events:
            async for event, raw in events:
                if not raw.strip():
                    continue
                try:
                    data = json.loads(raw)
                except ValueError:
                    raise TransientModelError(
                        f"the server sent a stream event that is not JSON: {raw[:200]!r}"
                    ) from None
                if isinstance(data, dict):
                    state.add(event, data)
                if state.done:
                    break
        return state.reply()
