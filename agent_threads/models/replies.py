"""What every adapter does with a finished reply, whatever its wire.

- A reply cut off at the output limit is not an answer. With tool calls, the call that was
  cut (its arguments unfinished) goes to the model as an invalid call quoting what it sent;
  with text only, `ModelTruncated` fails the thread saying why.
- A refusal, the model's or the provider's filter's, is `ModelRefused`.
- An error event in the middle of a stream is transient, like a 5xx, unless it says the
  request itself was wrong; its message is the server's text, never a dict's repr.
- A call whose arguments were not a JSON object goes back in the conversation as an object
  holding the text the model sent: every local server rejects anything but an object there
  (Ollama answers 400 "invalid tool call arguments"), and `{}` would rewrite what it said.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from agent_threads.messages import Reply, ToolCall
from supervise.errors import ModelError, ModelRefused, ModelTruncated, TransientModelError

INVALID_KEY = "invalid_arguments"

# Error types and codes that say the request was wrong: retrying it unchanged cannot help.
_REQUEST_FAULTS = {
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "request_too_large",
    "billing_error",
    "invalid_request",
    "badrequesterror",
    "notfounderror",
    "context_length_exceeded",
}


def sent_arguments(call: ToolCall) -> dict[str, Any]:
    """The arguments a call is sent back with: as parsed, or the text it was, in an object."""
    return dict(call.arguments) if call.invalid is None else {INVALID_KEY: call.invalid}


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def finished(reply: Reply, *, cut: bool, limit: str) -> Reply:
    """`reply` as the loop may take it, when `cut` says it stopped at the output limit.

    Raises:
        ModelTruncated: it was cut and has no tool call, so what it has is half an answer.
    """
    if not cut:
        return reply
    if not reply.tool_calls:
        used = f" after {reply.usage.output_tokens} output tokens" if reply.usage else ""
        partial = f"; it had begun: {_clip(reply.content)!r}" if reply.content.strip() else ""
        raise ModelTruncated(f"the reply was cut off at the output limit ({limit}){used}{partial}")
    *whole, last = reply.tool_calls
    if last.invalid is None and last.arguments:
        return reply  # the cut came after the last call was complete
    text = last.invalid if last.invalid is not None else ""
    return replace(reply, tool_calls=(*whole, ToolCall(last.id, last.name, {}, text)))


def refused(why: str, text: str = "") -> ModelRefused:
    said = f": {_clip(text)!r}" if text.strip() else ""
    return ModelRefused(f"the model refused to answer ({why}){said}")


def _is_request_fault(error: Mapping[str, Any]) -> bool:
    code = error.get("code")
    if isinstance(code, str) and code.isdigit():
        code = int(code)
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code < 500:
        return code != 429
    kinds = {str(error.get("type") or "").lower(), str(code or "").lower()}
    return bool(kinds & _REQUEST_FAULTS)


def stream_error(error: Any, where: str = "mid-stream") -> ModelError:
    """The error a mid-stream error event stands for (OpenAI's `{"error": {...}}` chunk,
    Anthropic's `event: error`, llama.cpp's and vLLM's forms, a bare string); `where` says
    where else it came (an error object in a 200 reply)."""
    if not isinstance(error, Mapping):
        message = str(error).strip() or "an error event without a message"
        return TransientModelError(f"the server reported an error {where}: {_clip(message)}")
    message = str(error.get("message") or "").strip() or "an error event without a message"
    kind = str(error.get("type") or error.get("code") or "").strip()
    text = f"the server reported an error {where}: {_clip(message, 500)}"
    if kind:
        text += f" ({kind})"
    return ModelError(text) if _is_request_fault(error) else TransientModelError(text)
