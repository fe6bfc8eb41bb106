"""A real HTTP server on 127.0.0.1 that speaks the OpenAI and Anthropic wire protocols, as the
real servers do, quirks included.

Tests queue turns (`push`), errors (`push_error`), a dropped connection (`push_reset`) or
exact bytes (`push_raw`: a recorded response, replayed as it was); each request takes the
next one, streamed as server-sent events when the request asks for `stream`. Every request
is recorded.

`dialect` picks which server the chat completions route plays, each with the shapes and the
request checks of the real one (tests/wire/SOURCES.md says where each comes from):

- `openai`: api.openai.com.
- `ollama`: each tool call whole in one chunk, all under `index` 0 (ollama/ollama#15457);
  `ollama-noindex`: with no `index` at all (ollama/ollama#7881). Both answer 400 "invalid
  tool call arguments" when an earlier call's arguments are not a JSON object.
- `llamacpp`: offers the model no tools unless the request says `tool_choice`; answers 400
  when an assistant turn has `"content": null` (ggml-org/llama.cpp#13471); an `error` of a
  turn is sent as the `error: {...}` line of builds before ggml-org/llama.cpp#16109.
- `vllm`: the call's `id` on every delta; 400 for `tool_choice: "auto"` unless started with
  `--enable-auto-tool-choice` (`vllm_auto_tools`).
- `lmstudio`: every later delta of a call says `"name": ""` (lmstudio-bug-tracker#649).

The Messages route checks requests as the API does: no empty text block, thinking blocks
back unchanged (signature) and first in the last assistant turn when thinking is on.
Standalone: `python tests/modelserver.py --script turns.json [--dialect ollama]`.
"""

from __future__ import annotations

import argparse
import json
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Event = tuple[str | None, Any]  # (SSE event name, data: a JSON value or a literal string)


@dataclass
class Turn:
    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: tuple[int, int] = (11, 5)
    status: int = 200
    body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    reset: bool = False
    # Anthropic thinking blocks before the reply: {"thinking": ..., "signature": ...} or
    # {"redacted": data}.
    thinking: list[dict[str, str]] = field(default_factory=list)
    stop: str | None = None  # overrides the stop/finish reason (length, max_tokens, refusal...)
    refusal: str = ""  # OpenAI's message.refusal
    error: dict[str, Any] | None = None  # sent mid-stream after the text, instead of the end
    raw: str | None = None  # exact bytes to send (a recorded response)
    content_type: str = "text/event-stream"


class ModelServer:
    def __init__(
        self, final: str = "done", dialect: str = "openai", vllm_auto_tools: bool = True
    ) -> None:
        self.turns: deque[Turn] = deque()
        self.requests: list[dict[str, Any]] = []
        self.final = final
        self.dialect = dialect
        self.vllm_auto_tools = vllm_auto_tools
        self.signatures: dict[str, str] = {}  # thinking signatures issued, and their text
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> ModelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)

    def push(
        self,
        content: str = "",
        tool_calls: list[dict[str, Any]] | None = None,
        usage: tuple[int, int] = (11, 5),
        **more: Any,
    ) -> None:
        self.turns.append(Turn(content, list(tool_calls or []), usage, **more))

    def push_error(
        self, status: int, body: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        default = json.dumps({"error": {"message": f"scripted error {status}", "type": "error"}})
        self.turns.append(Turn(status=status, body=body or default, headers=dict(headers or {})))

    def push_reset(self) -> None:
        self.turns.append(Turn(reset=True))

    def push_raw(self, raw: str, content_type: str = "text/event-stream") -> None:
        self.turns.append(Turn(raw=raw, content_type=content_type))

    def next_turn(self, request: dict[str, Any]) -> Turn:
        with self.lock:
            self.requests.append(request)
            return self.turns.popleft() if self.turns else Turn(self.final)


def _json(args: Any) -> str:
    # A string is sent as given: how a test plays a model that writes broken JSON.
    return args if isinstance(args, str) else json.dumps(args)


def _calls(turn: Turn) -> list[tuple[str, str, Any]]:
    return [
        (c.get("id") or f"call_{uuid.uuid4().hex[:8]}", c["name"], c.get("arguments") or {})
        for c in turn.tool_calls
    ]


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


# -- requests as the real servers check them ---------------------------------------------------


def _reject(message: str, kind: str = "invalid_request_error") -> tuple[int, str]:
    return 400, json.dumps({"error": {"message": message, "type": kind}})


def check_openai(server: ModelServer, payload: dict[str, Any]) -> tuple[int, str] | None:
    """The 400 the dialect's server answers this request with, if it does."""
    d = server.dialect
    for m in payload.get("messages") or []:
        if m.get("role") != "assistant" or not m.get("tool_calls"):
            continue
        if d == "llamacpp" and m.get("content") is None:
            err = {"code": 400, "message": "Expected 'content' to be a string or an array"}
            return 400, json.dumps({"error": {**err, "type": "invalid_request_error"}})
        for tc in m["tool_calls"]:
            try:
                args = json.loads(tc["function"]["arguments"])
            except (ValueError, KeyError, TypeError):
                args = None
            if d.startswith("ollama") and not isinstance(args, dict):
                return 400, json.dumps(
                    {
                        "error": {
                            "message": "invalid tool call arguments",
                            "type": "invalid_request_error",
                            "param": None,
                            "code": None,
                        }
                    }
                )
    if d == "vllm" and payload.get("tool_choice") == "auto" and not server.vllm_auto_tools:
        message = (
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
        )
        body = {"object": "error", "message": message, "type": "BadRequestError"}
        return 400, json.dumps({**body, "param": None, "code": 400})
    return None


def check_anthropic(server: ModelServer, payload: dict[str, Any]) -> tuple[int, str] | None:
    thinking_on = (payload.get("thinking") or {}).get("type") == "enabled"
    messages = payload.get("messages") or []
    last_with_tools = max(
        (
            i
            for i, m in enumerate(messages)
            if m["role"] == "assistant" and any(b["type"] == "tool_use" for b in m["content"])
        ),
        default=None,
    )
    for i, m in enumerate(messages):
        if not m["content"]:
            return _reject(
                f"messages.{i}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        for j, b in enumerate(m["content"]):
            if b["type"] == "text" and not b["text"].strip():
                return _reject("messages: text content blocks must contain non-whitespace text")
            if b["type"] == "tool_use" and not isinstance(b.get("input"), dict):
                return _reject(f"messages.{i}.content.{j}.tool_use.input: Input should be a dict")
            if b["type"] == "thinking" and server.signatures.get(b["signature"]) != b["thinking"]:
                return _reject(f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block")
        first = m["content"][0]["type"]
        if thinking_on and i == last_with_tools and first not in ("thinking", "redacted_thinking"):
            return _reject(
                f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
                f"found `{first}`. When `thinking` is enabled, a final `assistant` message must "
                "start with a thinking block."
            )
    return None


# -- OpenAI and the servers that speak its chat completions ------------------------------------


def openai_body(turn: Turn, model: str, payload: dict[str, Any], dialect: str) -> dict[str, Any]:
    calls = _calls(turn) if _offers_tools(payload, dialect) else []
    msg: dict[str, Any] = {"role": "assistant", "content": turn.content or None}
    if turn.refusal:
        msg["refusal"] = turn.refusal
    if calls:
        msg["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": _json(a)}}
            for i, n, a in calls
        ]
    finish = turn.stop or ("tool_calls" if calls else "stop")
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": finish}],
        "usage": {"prompt_tokens": turn.usage[0], "completion_tokens": turn.usage[1]},
    }


def _offers_tools(payload: dict[str, Any], dialect: str) -> bool:
    """llama.cpp's server offers the model no tools unless `tool_choice` is sent (issue #16)."""
    return bool(payload.get("tools")) and (dialect != "llamacpp" or "tool_choice" in payload)


def openai_events(turn: Turn, model: str, payload: dict[str, Any], dialect: str) -> list[Event]:
    ollama = dialect.startswith("ollama")
    base: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1723024757,
        "model": model,
        "system_fingerprint": "fp_ollama" if ollama else "fp_2a322c9ffc",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
        if ollama:  # Go's ChunkChoice: no logprobs; every delta says role and content
            delta = {"role": "assistant", "content": "", **delta}
            return None, {
                **base,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        if dialect == "llamacpp":  # choices first, each as finish_reason, index, delta
            choice = {"finish_reason": finish, "index": 0, "delta": delta}
            return None, {
                "choices": [choice],
                "created": base["created"],
                "id": base["id"],
                "model": model,
                "system_fingerprint": "b1-a414a44",
                "object": base["object"],
            }
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return None, {**base, "choices": [choice]}

    out: list[Event] = [chunk({"role": "assistant", "content": None if turn.refusal else ""})]
    for piece in _pieces(turn.content):
        out.append(chunk({"content": piece}))
    for piece in _pieces(turn.refusal):
        out.append(chunk({"refusal": piece}))
    if turn.error is not None:
        return [*out, *_openai_error(turn.error, dialect)]
    calls = _calls(turn) if _offers_tools(payload, dialect) else []
    for idx, (i, n, a) in enumerate(calls):
        out += _openai_call(chunk, dialect, idx, i, n, _json(a))
    out.append(chunk({}, turn.stop or ("tool_calls" if calls else "stop")))
    usage = {"prompt_tokens": turn.usage[0], "completion_tokens": turn.usage[1]}
    out.append((None, {**base, "choices": [], "usage": usage}))
    out.append((None, "[DONE]"))
    return out


def _openai_call(
    chunk: Callable[[dict[str, Any]], Event], dialect: str, idx: int, id_: str, name: str, args: str
) -> list[Event]:
    """One tool call's deltas, as the dialect's server sends them."""
    fn_start = {"name": name, "arguments": ""}
    if dialect == "ollama":  # whole, in one delta, under index 0 whatever the call
        fn = {"name": name, "arguments": args}
        return [
            chunk({"tool_calls": [{"id": id_, "index": 0, "type": "function", "function": fn}]})
        ]
    if dialect == "ollama-noindex":
        whole = {"id": id_, "type": "function", "function": {"name": name, "arguments": args}}
        return [chunk({"tool_calls": [whole]})]
    out = [
        chunk({"tool_calls": [{"index": idx, "id": id_, "type": "function", "function": fn_start}]})
    ]
    for piece in _pieces(args):
        more: dict[str, Any] = {"index": idx, "function": {"arguments": piece}}
        if dialect == "vllm":  # the id on every delta
            more = {"index": idx, "id": id_, "type": "function", **more}
        elif dialect == "lmstudio":  # the name, empty, on every later delta
            more = {"index": idx, "type": "function", "function": {"name": "", "arguments": piece}}
        out.append(chunk({"tool_calls": [more]}))
    return out


def _openai_error(error: dict[str, Any], dialect: str) -> list[Event]:
    if dialect == "llamacpp":  # builds before ggml-org/llama.cpp#16109
        return [("error-line", error), (None, "[DONE]")]
    return [(None, {"error": error})]


# -- Anthropic ---------------------------------------------------------------------------------


def _thinking_blocks(server: ModelServer, turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for t in turn.thinking:
        if "redacted" in t:
            blocks.append({"type": "redacted_thinking", "data": t["redacted"]})
            continue
        with server.lock:
            server.signatures[t["signature"]] = t["thinking"]
        blocks.append({"type": "thinking", "thinking": t["thinking"], "signature": t["signature"]})
    return blocks


def anthropic_body(server: ModelServer, turn: Turn, model: str) -> dict[str, Any]:
    content = _thinking_blocks(server, turn)
    if turn.content:
        content.append({"type": "text", "text": turn.content})
    calls = _calls(turn)
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    body: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": turn.stop or ("tool_use" if calls else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": turn.usage[0], "output_tokens": turn.usage[1]},
    }
    return body


def anthropic_events(server: ModelServer, turn: Turn, model: str) -> list[Event]:
    start = anthropic_body(server, Turn(usage=(turn.usage[0], 1)), model)
    start["content"], start["stop_reason"] = [], None
    out: list[Event] = [("message_start", {"type": "message_start", "message": start})]

    def block(index: int, content_block: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        out.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": content_block},
            )
        )
        for d in deltas:
            out.append(
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            )
        out.append(("content_block_stop", {"type": "content_block_stop", "index": index}))

    index = 0
    for b in _thinking_blocks(server, turn):
        if b["type"] == "redacted_thinking":
            block(index, b, [])
        else:
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(b["thinking"])]
            deltas.append({"type": "signature_delta", "signature": b["signature"]})
            block(index, {"type": "thinking", "thinking": "", "signature": ""}, deltas)
        index += 1
    if turn.content:
        deltas = [{"type": "text_delta", "text": p} for p in _pieces(turn.content)]
        block(index, {"type": "text", "text": ""}, deltas)
        index += 1
    if turn.error is not None:
        out.append(("error", {"type": "error", "error": turn.error}))
        return out
    calls = _calls(turn)
    for i, n, a in calls:
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(_json(a))]
        block(index, {"type": "tool_use", "id": i, "name": n, "input": {}}, deltas)
        index += 1
    out.append(("ping", {"type": "ping"}))
    stop = {
        "stop_reason": turn.stop or ("tool_use" if calls else "end_turn"),
        "stop_sequence": None,
    }
    usage = {"output_tokens": turn.usage[1]}
    out.append(("message_delta", {"type": "message_delta", "delta": stop, "usage": usage}))
    out.append(("message_stop", {"type": "message_stop"}))
    return out


def frame(name: str | None, data: Any) -> str:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    if name == "error-line":  # llama.cpp before ggml-org/llama.cpp#16109
        return f"error: {text}\n\n"
    return (f"event: {name}\n" if name else "") + f"data: {text}\n\n"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    model_server: ModelServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet in tests
        pass

    def do_POST(self) -> None:
        server = self.model_server
        length = int(self.headers.get("content-length") or 0)
        payload = json.loads(self.rfile.read(length) or b"{}")
        anthropic = self.path.rstrip("/").endswith("/messages")
        if not anthropic and not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))
            return
        turn = server.next_turn(
            {
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "json": payload,
            }
        )
        if turn.reset:
            self.close_connection = True
            self.connection.close()
        elif turn.status != 200:
            self._send(turn.status, turn.body or "", turn.headers)
        else:
            self._answer(server, turn, payload, anthropic)

    def _answer(
        self, server: ModelServer, turn: Turn, payload: dict[str, Any], anthropic: bool
    ) -> None:
        rejected = (check_anthropic if anthropic else check_openai)(server, payload)
        if rejected is not None:
            self._send(*rejected)
            return
        if turn.raw is not None:
            self._raw(turn.raw, turn.content_type)
            return
        model = str(payload.get("model", "test"))
        if anthropic and payload.get("stream"):
            self._stream(anthropic_events(server, turn, model))
        elif anthropic:
            self._send(200, json.dumps(anthropic_body(server, turn, model)))
        elif payload.get("stream"):
            self._stream(openai_events(turn, model, payload, server.dialect))
        else:
            self._send(200, json.dumps(openai_body(turn, model, payload, server.dialect)))

    def _send(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _raw(self, raw: str, content_type: str) -> None:
        data = raw.encode()
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, events: list[Event]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        for name, data in events:
            self.wfile.write(frame(name, data).encode())
            self.wfile.flush()


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"model_server": server})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--script", help="JSON list of turns: {content, tool_calls}")
    p.add_argument("--dialect", default="openai", help="openai, ollama, llamacpp, vllm, lmstudio")
    args = p.parse_args()
    server = ModelServer(dialect=args.dialect)
    if args.script:
        with open(args.script) as f:
            for t in json.load(f):
                server.push(t.get("content", ""), t.get("tool_calls"))
    with server:
        print(server.url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
