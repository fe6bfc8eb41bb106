"""The OpenAI and Anthropic clients against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from modelserver import ModelServer

from agent_threads.messages import (
    Message,
    Model,
    SystemMessage,
    ToolCall,
    ToolResult,
    ToolSpec,
    UserMessage,
)
from agent_threads.models.anthropic import AnthropicModel
from agent_threads.models.openai import OpenAIModel
from agent_threads.models.retry import complete_with_retry
from supervise.errors import ModelAuthError, ModelError, TransientModelError

KEY = "sk-test-0123456789abcdef"
TOOLS = [ToolSpec("Bash", "run", {"type": "object", "properties": {"command": {"type": "string"}}})]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as s:
        yield s


def make(kind: str, server: ModelServer, stream: bool, key: str | None = KEY) -> Model:
    if kind == "openai":
        env = {"OPENAI_BASE_URL": f"{server.url}/v1", **({"OPENAI_API_KEY": key} if key else {})}
        return OpenAIModel.from_env("gpt-test", env, stream)
    env = {"ANTHROPIC_BASE_URL": server.url, **({"ANTHROPIC_API_KEY": key} if key else {})}
    return AnthropicModel.from_env("claude-test", env, stream)


KINDS = [
    pytest.param("openai", True, id="openai-stream"),
    pytest.param("openai", False, id="openai-plain"),
    pytest.param("anthropic", True, id="anthropic-stream"),
    pytest.param("anthropic", False, id="anthropic-plain"),
]
USER: list[Message] = [UserMessage("what failed?")]


@pytest.mark.anyio
@pytest.mark.parametrize(("kind", "stream"), KINDS)
async def test_text_reply_and_usage(server: ModelServer, kind: str, stream: bool) -> None:
    server.push("The migration failed on a missing column.", usage=(120, 9))
    reply = await make(kind, server, stream).complete("be brief", USER, TOOLS)
    assert reply.content == "The migration failed on a missing column."
    assert reply.tool_calls == ()
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (120, 9)
    sent = server.requests[0]
    assert sent["json"]["model"] in ("gpt-test", "claude-test")
    assert bool(sent["json"].get("stream")) == stream
    if kind == "openai":
        assert sent["headers"]["authorization"] == f"Bearer {KEY}"
        assert sent["json"]["messages"][0] == {"role": "system", "content": "be brief"}
        assert sent["json"]["tools"][0]["function"]["name"] == "Bash"
    else:
        assert sent["headers"]["x-api-key"] == KEY
        assert sent["json"]["system"] == "be brief"
        assert sent["json"]["tools"][0]["input_schema"]["type"] == "object"


@pytest.mark.anyio
@pytest.mark.parametrize(("kind", "stream"), KINDS)
async def test_tool_calls_and_results_round_trip(
    server: ModelServer, kind: str, stream: bool
) -> None:
    server.push(
        "Looking.",
        [
            {"id": "c1", "name": "Bash", "arguments": {"command": "tail -n 5 log"}},
            {"id": "c2", "name": "Read", "arguments": {"path": "a.py"}},
        ],
    )
    model = make(kind, server, stream)
    reply = await model.complete("s", USER, TOOLS)
    assert reply.content == "Looking."
    assert reply.tool_calls == (
        ToolCall("c1", "Bash", {"command": "tail -n 5 log"}),
        ToolCall("c2", "Read", {"path": "a.py"}),
    )
    history = [
        *USER,
        reply.message(),
        ToolResult("c1", "Bash", "line1\nline2"),
        ToolResult("c2", "Read", "no such file", is_error=True),
        SystemMessage("hurry up"),  # a hook's system word travels as a user turn
    ]
    server.push("ok")
    assert (await model.complete("s", history, TOOLS)).content == "ok"
    msgs: list[dict[str, Any]] = server.requests[1]["json"]["messages"]
    if kind == "openai":
        assert msgs[2]["tool_calls"][0]["function"]["name"] == "Bash"
        assert msgs[3] == {"role": "tool", "tool_call_id": "c1", "content": "line1\nline2"}
        assert msgs[4] == {"role": "tool", "tool_call_id": "c2", "content": "no such file"}
        assert msgs[5] == {"role": "user", "content": "hurry up"}
    else:
        assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
        assert msgs[1]["content"][1] == {
            "type": "tool_use",
            "id": "c1",
            "name": "Bash",
            "input": {"command": "tail -n 5 log"},
        }
        assert msgs[2]["content"] == [
            {"type": "tool_result", "tool_use_id": "c1", "content": "line1\nline2"},
            {
                "type": "tool_result",
                "tool_use_id": "c2",
                "content": "no such file",
                "is_error": True,
            },
            {"type": "text", "text": "hurry up"},
        ]


@pytest.mark.anyio
@pytest.mark.parametrize(("kind", "stream"), KINDS)
async def test_arguments_that_are_not_an_object_are_kept_for_the_model(
    server: ModelServer, kind: str, stream: bool
) -> None:
    if kind == "anthropic" and not stream:
        pytest.skip("a plain Anthropic reply carries `input` as JSON, never as text")
    server.push("", [{"id": "c1", "name": "Bash", "arguments": "{not json"}])
    reply = await make(kind, server, stream).complete("s", USER, TOOLS)
    assert reply.tool_calls == (ToolCall("c1", "Bash", {}, invalid="{not json"),)


@pytest.mark.anyio
@pytest.mark.parametrize(("kind", "stream"), KINDS)
async def test_429_500_and_reset_are_retried(server: ModelServer, kind: str, stream: bool) -> None:
    server.push_error(429, headers={"retry-after": "3"})
    server.push_error(500)
    server.push_reset()
    server.push("finally")
    delays: list[float] = []

    async def sleep(d: float) -> None:
        delays.append(d)

    reply = await complete_with_retry(
        make(kind, server, stream), "s", USER, TOOLS, sleep=sleep, rand=lambda: 0.5
    )
    assert reply.content == "finally"
    assert len(server.requests) == 4
    assert delays[0] == 3.0  # the server's Retry-After wins over the backoff
    assert delays[1:] == [1.0, 2.0]  # half of 2 s, half of 4 s


@pytest.mark.anyio
async def test_retries_end_with_the_last_error(server: ModelServer) -> None:
    for _ in range(3):
        server.push_error(503)

    async def sleep(_d: float) -> None:
        pass

    with pytest.raises(TransientModelError, match="503"):
        await complete_with_retry(
            make("openai", server, True), "s", USER, TOOLS, attempts=3, sleep=sleep
        )


@pytest.mark.anyio
@pytest.mark.parametrize(("kind", "stream"), KINDS)
async def test_auth_error_names_the_variable_never_the_key(
    server: ModelServer, kind: str, stream: bool
) -> None:
    server.push_error(401, body='{"error": {"message": "bad key ' + KEY + '"}}')
    with pytest.raises(ModelAuthError) as info:
        await make(kind, server, stream).complete("s", USER, TOOLS)
    text = str(info.value)
    assert ("OPENAI_API_KEY" if kind == "openai" else "ANTHROPIC_API_KEY") in text
    assert KEY not in text and "[redacted]" in text


@pytest.mark.anyio
@pytest.mark.parametrize(("kind", "stream"), KINDS)
async def test_bad_request_carries_the_server_message(
    server: ModelServer, kind: str, stream: bool
) -> None:
    server.push_error(400, body='{"error": {"message": "tools[0]: invalid schema"}}')
    with pytest.raises(ModelError, match="HTTP 400: tools\\[0\\]: invalid schema") as info:
        await make(kind, server, stream).complete("s", USER, TOOLS)
    assert not isinstance(info.value, TransientModelError)


def test_public_api_without_key_names_the_variable() -> None:
    with pytest.raises(ModelAuthError, match="OPENAI_API_KEY is not set"):
        OpenAIModel.from_env("gpt", {}, True)
    with pytest.raises(ModelAuthError, match="ANTHROPIC_API_KEY is not set"):
        AnthropicModel.from_env("claude", {}, True)
    # A local server (Ollama, vLLM) needs no key.
    assert OpenAIModel.from_env("llama3", {"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"})
    assert KEY not in repr(OpenAIModel("gpt", api_key=KEY))
