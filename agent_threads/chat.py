"""The conversation as the agent loop sees it, independent of any provider's wire format.

Providers (`agent_threads/models/`) translate these to and from their protocol; the loop
builds them from saved transcript entries. Plain frozen dataclasses: values in, values out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["user", "assistant", "tool"]


@dataclass(frozen=True)
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
class Usage:
    """Tokens, as the provider reports them (zero when it does not)."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )


@dataclass(frozen=True)
class Message:
    """One message of the conversation (the system prompt travels separately).

    - user: `content` is what the person (or the hook) said.
    - assistant: `content` is the model's text, `tool_calls` what it asked to run.
    - tool: `content` is a tool's result for the call `tool_call_id` of tool `name`;
      `is_error` marks a failed call (Anthropic's `is_error`).
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False


@dataclass(frozen=True)
class Reply:
    """What the model answered: text, tool calls, or both."""

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    stop_reason: str | None = None


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
