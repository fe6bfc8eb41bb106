"""What the providers share: one HTTP call (plain or server-sent events) and its errors.

429, 5xx (and Anthropic's 529), a reset connection, a timeout, or a stream that ends early
are transient; 401/403 name the variable to set; other 4xx carry the server's message. An
API key never appears in a message: it is scrubbed from anything the server echoes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx

from supervise.errors import ModelAuthError, ModelError, TransientModelError

_MAX_MESSAGE = 500


def _scrub(text: str, secret: str | None) -> str:
    if secret and len(secret) >= 4:
        text = text.replace(secret, "[redacted]")
    return text[:_MAX_MESSAGE]


def _retry_after(headers: Mapping[str, str]) -> float | None:
    raw = headers.get("retry-after")
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None


def _server_message(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])
    if isinstance(err, str):
        return err
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return str(data["message"])  # vLLM's `{"object": "error", "message": ...}`
    return text.strip()


def status_error(
    status: int, body: bytes, headers: Mapping[str, str], *, key_var: str, secret: str | None
) -> ModelError:
    """The error for a non-2xx answer."""
    message = _scrub(_server_message(body), secret)
    if status in (401, 403):
        return ModelAuthError(
            f"the model API refused the credentials (HTTP {status}: {message}); set {key_var} "
            "in the daemon's environment (then restart it) and `supervise thread retry`"
        )
    if status == 429 or status >= 500:
        return TransientModelError(f"HTTP {status}: {message}", _retry_after(headers))
    return ModelError(f"HTTP {status}: {message}")


def transport_error(exc: httpx.HTTPError, secret: str | None) -> TransientModelError:
    return TransientModelError(f"{type(exc).__name__}: {_scrub(str(exc), secret)}")


class Endpoint:
    """One provider endpoint: URL, headers, the key's variable, timeouts."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        *,
        key_var: str,
        secret: str | None,
        timeout: float,
    ) -> None:
        self.url = url
        self.headers = dict(headers)
        self.key_var = key_var
        self.secret = secret
        self.timeout = timeout

    def __repr__(self) -> str:  # never the headers: they hold the key
        return f"Endpoint({self.url!r})"

    def _check(self, resp: httpx.Response, body: bytes) -> None:
        if resp.status_code >= 300:
            raise status_error(
                resp.status_code, body, resp.headers, key_var=self.key_var, secret=self.secret
            )

    async def post(self, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                resp = await client.post(self.url, json=payload, headers=self.headers)
                body = resp.content
        except httpx.HTTPError as exc:
            raise transport_error(exc, self.secret) from None
        self._check(resp, body)
        try:
            data = json.loads(body)
        except ValueError:
            raise TransientModelError("the model API sent a reply that is not JSON") from None
        if not isinstance(data, dict):
            raise ModelError("the model API sent a reply that is not a JSON object")
        return data

    @asynccontextmanager
    async def events(
        self, payload: dict[str, Any]
    ) -> AsyncIterator[AsyncIterator[tuple[str, str]]]:
        """Server-sent events as (event, data) pairs; `timeout` bounds each read."""
        try:
            async with (
                httpx.AsyncClient(timeout=self.timeout) as client,
                client.stream("POST", self.url, json=payload, headers=self.headers) as resp,
            ):
                if resp.status_code >= 300:
                    self._check(resp, await resp.aread())
                yield _sse(resp, self.secret)
        except httpx.HTTPError as exc:
            raise transport_error(exc, self.secret) from None


async def _sse(resp: httpx.Response, secret: str | None) -> AsyncIterator[tuple[str, str]]:
    """Server-sent events as (event, data), as the SSE spec reads them, plus one field no spec
    has: llama.cpp's server before ggml-org/llama.cpp#16109 sent a mid-stream error as an
    `error: {...}` line, which a strict reader drops (the stream then looks complete)."""
    event, data = "message", list[str]()
    try:
        async for line in resp.aiter_lines():
            if not line:
                if data:
                    yield event, "\n".join(data)
                event, data = "message", list[str]()
                continue
            if line.startswith(":"):  # a comment: keep-alive pings
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value.strip()
            elif name == "data":
                data.append(value)
            elif name == "error":
                event = "error"
                data.append(value)
        if data:
            yield event, "\n".join(data)
    except httpx.HTTPError as exc:
        raise transport_error(exc, secret) from None


def credentials(
    env: Mapping[str, str], *, base_var: str, key_var: str, public: str, hint: str = ""
) -> tuple[str, str | None]:
    """The endpoint and key as users already configure them (`*_BASE_URL`, `*_API_KEY`).

    Raises:
        ModelAuthError: no key for the provider's public API (a local server needs none).
    """
    base = env.get(base_var) or public
    key = env.get(key_var) or None
    if key is None and base.rstrip("/") == public.rstrip("/"):
        raise ModelAuthError(
            f"{key_var} is not set; export it where the daemon starts{hint}, "
            "then `supervise thread retry`"
        )
    return base, key


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments text: (object, None), or ({}, the text) if not an object."""
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except ValueError:
        return {}, raw
    return (value, None) if isinstance(value, dict) else ({}, raw)
