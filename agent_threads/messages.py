"""The conversation: the one form every part of a thread uses for what the model sees.

The transcript projects to these (`transcript.conversation`), lifecycle hooks and context
transforms receive and return them (re-exported by `agent_threads.api`, so they are the
extension API's types), and each model adapter translates them to and from its wire format.
Nothing else converts.

The message classes are plain mutable dataclasses because extension authors change them in
place (`msg.content = ...`); every projection builds fresh ones, so a change never reaches the
saved transcript except through a hook's decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class ToolCall:
    """One tool call the model asked for.

    `arguments` is the parsed JSON object; when the model sent text that is not a JSON
    object, `arguments` is empty and `invalid` keeps that text so the loop can tell the
    model what was wrong.
    """

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    invalid: str | None = None


@dataclass(frozen=True)
class Thinking:
    """A block of the model's reasoning that must go back to it verbatim (Anthropic's
    extended thinking): `text` with the `signature` that authenticates it, or, for a block the
    provider encrypted (`redacted_thinking`), only its opaque `redacted` data.

    Frozen: the provider rejects a block changed in any way.
    """

    text: str = ""
    signature: str = ""
    redacted: str | None = None


@dataclass
class SystemMessage:
    """A message a hook added as the system's word (sent to the model as a user turn)."""

    content: str
    seq: int | None = None  # the transcript entry it came from (None: added by a hook)


@dataclass
class UserMessage:
    """What a person, the hook that fired, a reminder or a shell hook's output said."""

    content: str
    seq: int | None = None


@dataclass
class AssistantMessage:
    """The model's text and the tool calls it asked for, after the reasoning it showed."""

    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    seq: int | None = None
    thinking: list[Thinking] = field(default_factory=list)


@dataclass
class ToolResult:
    """A tool's result for the call `tool_call_id`; `is_error` marks a failed call."""

    tool_call_id: str
    tool_name: str
    result: Any = None  # the output text (extensions may replace it)
    is_error: bool = False
    error: str | None = None
    seq: int | None = None

    @property
    def text(self) -> str:
        return "" if self.result is None else str(self.result)


Message = SystemMessage | UserMessage | AssistantMessage | ToolResult


@dataclass(frozen=True)
class Usage:
    """Tokens, as the provider reports them (zero when it does not)."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )


@dataclass(frozen=True)
class Reply:
    """What one model call answered: text, tool calls, or both, and what it cost.

    `stop_reason` is the provider's own word (`end_turn`, `tool_calls`, `length`...);
    `thinking` is the reasoning to send back with this reply (see `Thinking`).
    """

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    stop_reason: str | None = None
    thinking: tuple[Thinking, ...] = ()

    def message(self) -> AssistantMessage:
        """A fresh message of this reply (hooks may change it without touching the reply)."""
        calls = [ToolCall(c.id, c.name, dict(c.arguments), c.invalid) for c in self.tool_calls]
        return AssistantMessage(self.content, calls, thinking=list(self.thinking))


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model is told about it: name, description, JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


class Model(Protocol):
    """A chat model with tool calling.

    Implementations raise `TransientModelError` (retry may help), `ModelAuthError` (set a
    key) or `ModelError` (anything else); retrying is the caller's business, see
    `agent_threads.models.retry`.
    """

    @property
    def name(self) -> str:
        """`provider:model`, as configured."""
        ...

    async def complete(
        self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Reply:
        """One model call: the whole conversation in, one reply out."""
        ...


def answered_only(messages: Sequence[Message]) -> list[Message]:
    """The conversation as providers accept it: every call in a reply has its result.

    Providers require each tool call's result right after the reply that asked for it; a call
    without a result (a context transform dropped it) is left out of its reply.
    """
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolResult)}
    out: list[Message] = []
    for m in messages:
        if isinstance(m, AssistantMessage) and any(c.id not in answered for c in m.tool_calls):
            kept = [c for c in m.tool_calls if c.id in answered]
            m = AssistantMessage(m.content, kept, m.seq, list(m.thinking))
        out.append(m)
    return out
