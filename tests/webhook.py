"""A real HTTP server on 127.0.0.1 that records what Apprise's json:// and form:// post."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs


@dataclass
class Post:
    path: str
    at: float
    fields: dict[str, Any]  # the JSON object, or the form's fields


@dataclass
class Webhook:
    """`fail_first`: answer 500 to that many posts first; `hang`: never answer."""

    fail_first: int = 0
    hang: bool = False
    posts: list[Post] = field(default_factory=list)  # the posts answered 200
    refused: int = 0  # the posts answered 500
    cond: threading.Condition = field(default_factory=threading.Condition)
    port: int = 0

    def url(self, scheme: str = "json", path: str = "/hook", auth: str = "") -> str:
        return f"{scheme}://{auth}127.0.0.1:{self.port}{path}"

    def wait(self, count: int, timeout: float = 15.0) -> list[Post]:
        with self.cond:
            ok = self.cond.wait_for(lambda: len(self.posts) >= count, timeout)
        assert ok, f"{len(self.posts)} of {count} posts arrived: {self.posts}"
        return list(self.posts)

    def messages(self) -> list[str]:
        return [str(p.fields.get("message", "")) for p in self.posts]


@contextlib.contextmanager
def serve(hook: Webhook) -> Iterator[Webhook]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(size).decode()
            if hook.hang:
                time.sleep(60)
                return
            with hook.cond:
                if hook.refused < hook.fail_first:
                    hook.refused += 1
                    code = 500
                else:
                    ctype = self.headers.get("content-type", "")
                    if "json" in ctype:
                        fields = json.loads(raw)
                    else:
                        fields = {k: v[0] for k, v in parse_qs(raw).items()}
                    hook.posts.append(Post(self.path, time.monotonic(), fields))
                    code = 200
                hook.cond.notify_all()
            self.send_response(code)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", hook.port), Handler)
    server.daemon_threads = True
    hook.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
