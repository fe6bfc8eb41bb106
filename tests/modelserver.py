"""A real HTTP server on 127.0.0.1 that speaks the OpenAI and Anthropic wire protocols.

Tests queue turns (`push`), errors (`push_error`) or a dropped connection (`push_reset`);
each request takes the next one, streamed as server-sent events when the request asks for
`stream`, exactly as the real APIs frame them. Every request is recorded.
Standalone: `python tests/modelserver.py --script turns.json` prints its URL and serves.
"""

from __future__ import annotations

import argparse
import json
import threading
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Turn:
    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: tuple[int, int] = (11, 5)
    status: int = 200
    body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    reset: bool = False


class ModelServer:
    def __init__(self, final: str = "done") -> None:
        self.turns: deque[Turn] = deque()
        self.requests: list[dict[str, Any]] = []
        self.final = final
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
    ) -> None:
        self.turns.append(Turn(content, list(tool_calls or []), usage))

    def push_error(
        self, status: int, body: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        default = json.dumps({"error": {"message": f"scripted error {status}", "type": "error"}})
        self.turns.append(Turn(status=status, body=body or default, headers=dict(headers or {})))

    def push_reset(self) -> None:
        self.turns.append(Turn(reset=True))

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


# -- OpenAI ------------------------------------------------------------------------------------


def openai_body(turn: Turn, model: str) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": turn.content or None}
    calls = _calls(turn)
    if calls:
        msg["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": _json(a)}}
            for i, n, a in calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {"index": 0, "message": msg, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": turn.usage[0], "completion_tokens": turn.usage[1]},
    }


def openai_events(turn: Turn, model: str) -> list[tuple[str | None, Any]]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[str | None, Any]:
        return None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    for piece in _pieces(turn.content):
        out.append(chunk({"content": piece}))
    calls = _calls(turn)
    for idx, (i, n, a) in enumerate(calls):
        start = {"index": idx, "id": i, "type": "function", "function": {"name": n}}
        out.append(chunk({"tool_calls": [{**start, "function": {"name": n, "arguments": ""}}]}))
        for piece in _pieces(_json(a)):
            out.append(chunk({"tool_calls": [{"index": idx, "function": {"arguments": piece}}]}))
    out.append(chunk({}, "tool_calls" if calls else "stop"))
    usage = {"prompt_tokens": turn.usage[0], "completion_tokens": turn.usage[1]}
    out.append((None, {**base, "choices": [], "usage": usage}))
    out.append((None, "[DONE]"))
    return out


# -- Anthropic ---------------------------------------------------------------------------------


def anthropic_body(turn: Turn, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if turn.content:
        content.append({"type": "text", "text": turn.content})
    calls = _calls(turn)
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "usage": {"input_tokens": turn.usage[0], "output_tokens": turn.usage[1]},
    }


def anthropic_events(turn: Turn, model: str) -> list[tuple[str | None, Any]]:
    start = anthropic_body(Turn(usage=(turn.usage[0], 1)), model)
    start["content"], start["stop_reason"] = [], None
    out: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    index = 0
    if turn.content:
        out.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        for piece in _pieces(turn.content):
            delta = {"type": "text_delta", "text": piece}
            out.append(
                ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
            )
        out.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    calls = _calls(turn)
    for i, n, a in calls:
        block = {"type": "tool_use", "id": i, "name": n, "input": {}}
        out.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block},
            )
        )
        for piece in _pieces(_json(a)):
            delta = {"type": "input_json_delta", "partial_json": piece}
            out.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        out.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    out.append(("ping", {"type": "ping"}))
    stop = {"stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None}
    usage = {"output_tokens": turn.usage[1]}
    out.append(("message_delta", {"type": "message_delta", "delta": stop, "usage": usage}))
    out.append(("message_stop", {"type": "message_stop"}))
    return out


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet in tests
            pass

        def do_POST(self) -> None:
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
                return
            if turn.status != 200:
                self._send(turn.status, turn.body or "", turn.headers)
                return
            model = str(payload.get("model", "test"))
            if payload.get("stream"):
                make = anthropic_events if anthropic else openai_events
                self._stream(make(turn, model))
            else:
                make_body = anthropic_body if anthropic else openai_body
                self._send(200, json.dumps(make_body(turn, model)))

        def _send(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, events: list[tuple[str | None, Any]]) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True
            for name, data in events:
                text = data if isinstance(data, str) else json.dumps(data)
                frame = (f"event: {name}\n" if name else "") + f"data: {text}\n\n"
                self.wfile.write(frame.encode())
                self.wfile.flush()

    return Handler


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--script", help="JSON list of turns: {content, tool_calls}")
    args = p.parse_args()
    server = ModelServer()
    if args.script:
        with open(args.script) as f:
            for t in json.load(f):
                server.push(t.get("content", ""), t.get("tool_calls"))
    with server:
        print(server.url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
