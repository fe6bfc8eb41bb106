"""The OpenAI and Anthropic clients against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from fakes import RecordingRunner, completed
from modelserver import ModelServer

from agent_threads.hooks.base import Hooks, HookSet, Turn
from agent_threads.loop import LoopConfig, LoopEnd, run_loop
from agent_threads.messages import (
    AssistantMessage,
    Message,
    Model,
    SystemMessage,
    Thinking,
    ToolCall,
    ToolResult,
    ToolSpec,
    UserMessage,
)
from agent_threads.models.anthropic import AnthropicModel
from agent_threads.models.openai import OpenAIModel
from agent_threads.models.replies import INVALID_KEY
from agent_threads.models.retry import complete_with_retry
from agent_threads.models.scripted import ScriptedModel
from agent_threads.permissions import Profile
from agent_threads.tools.base import ToolContext
from agent_threads.tools.bash import BashTool
from agent_threads.transcript import (
    Approval,
    AssistantReply,
    Body,
    Entry,
    ToolOutput,
    UserText,
    conversation,
    decode,
)
from state.entries import EntryRecord
from supervise.errors import (
    ModelAuthError,
    ModelError,
    ModelRefused,
    ModelTruncated,
    TransientModelError,
)

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


# -- model servers as they really are (tests/wire/SOURCES.md: where each shape comes from) -----

WIRE = Path(__file__).resolve().parent / "wire"
BASH = [{"name": "Bash", "arguments": {"command": "ls"}, "id": "call_a"}]
TWO = [
    {"id": "call_a", "name": "Bash", "arguments": {"command": "tail -n 5 out.log"}},
    {"id": "call_b", "name": "Bash", "arguments": {"command": "df -h"}},
]


def wire(name: str) -> str:
    return (WIRE / name).read_text(encoding="utf-8")


def openai(server: ModelServer, stream: bool = True) -> OpenAIModel:
    return OpenAIModel.from_env("m", {"OPENAI_BASE_URL": f"{server.url}/v1"}, stream)


def claude(server: ModelServer, stream: bool = True, **env: str) -> AnthropicModel:
    return AnthropicModel.from_env("claude-test", {"ANTHROPIC_BASE_URL": server.url, **env}, stream)


async def no_sleep(_d: float) -> None:
    pass


@pytest.mark.anyio
@pytest.mark.parametrize("dialect", ["ollama", "ollama-noindex", "vllm", "lmstudio", "openai"])
async def test_parallel_calls_stay_apart_whatever_index_the_server_sends(dialect: str) -> None:
    with ModelServer(dialect=dialect) as server:
        server.push("", TWO)
        reply = await openai(server).complete("s", USER, TOOLS)
    assert reply.tool_calls == (
        ToolCall("call_a", "Bash", {"command": "tail -n 5 out.log"}),
        ToolCall("call_b", "Bash", {"command": "df -h"}),
    )


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_an_invalid_call_goes_back_as_an_object_holding_what_the_model_sent(
    stream: bool,
) -> None:
    bad = ToolCall("call_a", "Bash", {}, invalid='{"command": "cat <<EOF')
    history = [*USER, AssistantMessage(None, [bad]), ToolResult("call_a", "Bash", "not run", True)]
    with ModelServer(dialect="ollama") as server:  # 400 "invalid tool call arguments" else
        server.push("ok")
        assert (await openai(server, stream).complete("s", history, TOOLS)).content == "ok"
        sent = server.requests[0]["json"]["messages"][2]["tool_calls"][0]["function"]
    assert json.loads(sent["arguments"]) == {INVALID_KEY: '{"command": "cat <<EOF'}
    with ModelServer() as server:
        server.push("ok")
        await claude(server, stream).complete("s", history, TOOLS)
        block = server.requests[0]["json"]["messages"][1]["content"][0]
    assert block["input"] == {INVALID_KEY: '{"command": "cat <<EOF'}


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_llamacpp_gets_tool_choice_and_never_a_null_content(stream: bool) -> None:
    with ModelServer(dialect="llamacpp") as server:
        server.push("", BASH)  # without tool_choice the model would be offered no tools
        reply = await openai(server, stream).complete("s", USER, TOOLS)
        assert reply.tool_calls == (ToolCall("call_a", "Bash", {"command": "ls"}),)
        assert server.requests[0]["json"]["tool_choice"] == "auto"
        history = [*USER, reply.message(), ToolResult("call_a", "Bash", "a.txt")]
        server.push("done")
        assert (await openai(server, stream).complete("s", history, TOOLS)).content == "done"
    assert server.requests[1]["json"]["messages"][2]["content"] == ""


@pytest.mark.anyio
async def test_vllm_without_auto_tool_choice_says_which_flags_it_needs() -> None:
    with ModelServer(dialect="vllm", vllm_auto_tools=False) as server:
        server.push("", BASH)
        with pytest.raises(ModelError) as info:
            await openai(server).complete("s", USER, TOOLS)
    assert not isinstance(info.value, TransientModelError)
    assert "--enable-auto-tool-choice" in str(info.value) and "{'" not in str(info.value)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("dialect", "error"),
    [
        (
            "openai",
            {
                "message": "The server had an error while processing your request.",
                "type": "server_error",
                "param": None,
                "code": None,
            },
        ),
        (
            "vllm",
            {"message": "engine dead", "type": "InternalServerError", "param": None, "code": 500},
        ),
        ("llamacpp", {"code": 500, "message": "slot crashed", "type": "server_error"}),
    ],
)
async def test_a_mid_stream_error_is_retried_like_a_5xx(
    dialect: str, error: dict[str, Any]
) -> None:
    with ModelServer(dialect=dialect) as server:
        server.push("Looking at the", error=error)
        server.push("The disk is full.")
        reply = await complete_with_retry(openai(server), "s", USER, TOOLS, sleep=no_sleep)
        assert reply.content == "The disk is full." and len(server.requests) == 2
        server.push("partial", error=error)
        with pytest.raises(TransientModelError) as info:
            await openai(server).complete("s", USER, TOOLS)
    assert str(info.value).startswith("the server reported an error mid-stream: ")
    assert error["message"] in str(info.value) and "{'" not in str(info.value)


@pytest.mark.anyio
async def test_a_mid_stream_error_about_the_request_is_not_retried() -> None:
    cut = {
        "code": 400,
        "message": "the request exceeds the available context size",
        "type": "invalid_request_error",
    }
    with ModelServer(dialect="llamacpp") as server:  # before llama.cpp#16109: `error: {...}`
        server.push("", error=cut)
        with pytest.raises(ModelError, match="exceeds the available context size") as info:
            await complete_with_retry(openai(server), "s", USER, TOOLS, sleep=no_sleep)
    assert not isinstance(info.value, TransientModelError) and len(server.requests) == 1


@pytest.mark.anyio
async def test_anthropic_overloaded_mid_stream_is_retried_with_a_readable_message() -> None:
    with ModelServer() as server:
        server.push("Checking", error={"type": "overloaded_error", "message": "Overloaded"})
        server.push("fine")
        delays: list[float] = []

        async def sleep(d: float) -> None:
            delays.append(d)

        reply = await complete_with_retry(claude(server), "s", USER, TOOLS, sleep=sleep)
    assert reply.content == "fine" and len(delays) == 1


@pytest.mark.anyio
async def test_a_stream_that_ends_with_nothing_said_is_transient() -> None:
    with ModelServer() as server:
        server.push_raw("data: [DONE]\n\n")
        with pytest.raises(TransientModelError, match="before the model said anything"):
            await openai(server).complete("s", USER, TOOLS)


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_openai_refusal_and_content_filter_are_refusals(stream: bool) -> None:
    with ModelServer() as server:
        if stream:
            server.push_raw(wire("openai-refusal.sse"))
        else:
            server.push(refusal="I'm sorry, but I can't assist with that request.")
        with pytest.raises(ModelRefused, match="I'm sorry, but I can't assist"):
            await openai(server, stream).complete("s", USER, TOOLS)
        server.push("Here is how to", stop="content_filter")
        with pytest.raises(ModelRefused, match="content_filter"):
            await openai(server, stream).complete("s", USER, TOOLS)


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_length_with_text_only_is_not_an_answer(stream: bool) -> None:
    with ModelServer() as server:
        if stream:
            server.push_raw(wire("openai-length.sse"))
        else:
            server.push('{"', stop="length")
        with pytest.raises(ModelTruncated, match="finish_reason: length"):
            await openai(server, stream).complete("s", USER, TOOLS)


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_length_in_a_call_makes_it_an_invalid_call_quoting_what_was_sent(
    stream: bool,
) -> None:
    cut = '{"command": "cat > notes.md <<EOF\\n# Notes'
    with ModelServer() as server:
        server.push("", [TWO[0], {"id": "call_b", "name": "Bash", "arguments": cut}], stop="length")
        reply = await openai(server, stream).complete("s", USER, TOOLS)
    assert reply.tool_calls == (
        ToolCall("call_a", "Bash", {"command": "tail -n 5 out.log"}),
        ToolCall("call_b", "Bash", {}, invalid=cut),
    )


# -- Anthropic: thinking, empty replies, refusals, unknown blocks, max_tokens ------------------

THINK = [{"thinking": "The log first, then the disk.", "signature": "EqQBCkYIBxgCKkB0sig=="}]


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_thinking_blocks_are_kept_and_sent_back_first_with_their_signature(
    stream: bool,
) -> None:
    redacted = {"redacted": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8c"}
    with ModelServer() as server:
        model = claude(server, stream, MAX_THINKING_TOKENS="2048")
        server.push("Looking.", BASH, thinking=[*THINK, redacted])
        reply = await model.complete("s", USER, TOOLS)
        assert reply.thinking == (
            Thinking("The log first, then the disk.", "EqQBCkYIBxgCKkB0sig=="),
            Thinking(redacted=redacted["redacted"]),
        )
        history = [*USER, reply.message(), ToolResult("call_a", "Bash", "a.txt")]
        server.push("done")
        assert (await model.complete("s", history, TOOLS)).content == "done"
    first = server.requests[0]["json"]
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first["max_tokens"] == 4096 + 2048
    sent = server.requests[1]["json"]["messages"][1]["content"]
    assert [b["type"] for b in sent] == ["thinking", "redacted_thinking", "text", "tool_use"]
    assert sent[0] == {
        "type": "thinking",
        "thinking": "The log first, then the disk.",
        "signature": "EqQBCkYIBxgCKkB0sig==",
    }


def test_max_thinking_tokens_below_the_minimum_is_an_error() -> None:
    with pytest.raises(ModelError, match="MAX_THINKING_TOKENS must be a whole number"):
        AnthropicModel.from_env("c", {"ANTHROPIC_BASE_URL": "http://x", "MAX_THINKING_TOKENS": "9"})


@pytest.mark.anyio
async def test_an_empty_reply_never_sends_an_empty_text_block() -> None:
    history: list[Message] = [
        *USER,
        AssistantMessage(""),
        UserMessage("go on"),
        AssistantMessage("   ", [ToolCall("call_a", "Bash", {"command": "ls"})]),
        ToolResult("call_a", "Bash", "a.txt"),
        AssistantMessage("Done.  \n"),  # a last assistant turn is a prefix: no trailing space
    ]
    with ModelServer() as server:
        server.push("ok")
        assert (await claude(server).complete("s", history, TOOLS)).content == "ok"
    msgs = server.requests[0]["json"]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert msgs[0]["content"] == [
        {"type": "text", "text": "what failed?"},
        {"type": "text", "text": "go on"},
    ]
    assert [b["type"] for b in msgs[1]["content"]] == ["tool_use"]
    assert msgs[3]["content"] == [{"type": "text", "text": "Done."}]


@pytest.mark.anyio
async def test_anthropic_refusal_fails_with_its_explanation() -> None:
    with ModelServer() as server:
        server.push_raw(wire("anthropic-refusal.sse"))
        with pytest.raises(ModelRefused, match="refused due to policy"):
            await claude(server).complete("s", USER, TOOLS)


@pytest.mark.anyio
async def test_unknown_and_server_tool_blocks_are_skipped_never_a_crash() -> None:
    with ModelServer() as server:
        server.push_raw(wire("anthropic-server-tool-result.sse"))
        reply = await claude(server).complete("s", USER, TOOLS)
    assert reply.tool_calls == (ToolCall("tu_client_001", "ask_internal_tool", {"query": "test"}),)
    assert reply.content == "" and reply.thinking == ()


@pytest.mark.anyio
async def test_max_tokens_is_asked_again_once_with_more_room_which_stays() -> None:
    with ModelServer() as server:
        model = claude(server)
        server.push_raw(wire("anthropic-max-tokens-tool-use.sse"))
        server.push("Saved taxes.txt.", usage=(450, 5000))
        reply = await model.complete("s", USER, TOOLS)
        assert reply.content == "Saved taxes.txt." and reply.stop_reason == "end_turn"
        server.push("again")
        await model.complete("s", USER, TOOLS)
    assert [r["json"]["max_tokens"] for r in server.requests] == [4096, 16384, 16384]


@pytest.mark.anyio
async def test_max_tokens_twice_sends_the_cut_call_back_as_invalid() -> None:
    with ModelServer() as server:
        server.push_raw(wire("anthropic-max-tokens-tool-use.sse"))
        server.push_raw(wire("anthropic-max-tokens-tool-use.sse"))
        reply = await claude(server).complete("s", USER, TOOLS)
    (call,) = reply.tool_calls
    assert (call.name, call.arguments) == ("make_file", {})
    assert call.invalid is not None and call.invalid.startswith('{"filename": "taxes.txt"')
    assert call.invalid.endswith('"Filing taxes')


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_max_tokens_with_text_only_fails_the_turn(stream: bool) -> None:
    with ModelServer() as server:
        server.push("The cause is", stop="max_tokens")
        server.push("The cause is the", stop="max_tokens")
        with pytest.raises(ModelTruncated, match=r"max_tokens 16384.*'The cause is the'"):
            await claude(server, stream).complete("s", USER, TOOLS)
        server.push("The cause", stop="max_tokens")
        server.push_error(
            400,
            '{"type":"error","error":{"type":"invalid_request_error",'
            '"message":"max_tokens: 16384 > 8192, which is the maximum"}}',
        )
        with pytest.raises(ModelTruncated, match=r"asking for 16384 was refused.*8192"):
            await claude(server, stream).complete("s", USER, TOOLS)


# -- through the loop, with a real thread ------------------------------------------------------


@dataclass
class JsonJournal:
    """The loop's sink, every entry read back from its saved JSON as the state layer does."""

    thread_id: int = 1
    saved: list[Entry] = field(default_factory=list)

    def append(self, body: Body) -> Entry:
        n = len(self.saved) + 1
        entry = decode(EntryRecord(n, body.kind, float(n), json.loads(json.dumps(body.to_json()))))
        self.saved.append(entry)
        return entry


class Failures(Hooks):
    """Records what the loop tells StopFailure hooks."""

    def __init__(self) -> None:
        self.kinds: list[str] = []

    async def model_failed(self, *, turn: Turn, error: str, message: str) -> None:
        self.kinds.append(error)


@dataclass
class Run:
    journal: JsonJournal
    runner: RecordingRunner
    cfg: LoopConfig
    failures: Failures

    def bodies(self, kind: type[Any]) -> list[Any]:
        return [e.body for e in self.journal.saved if isinstance(e.body, kind)]

    async def go(self) -> LoopEnd:
        return await run_loop(self.journal, self.cfg, list(self.journal.saved), 0)


def a_thread(model: Model, outputs: int = 3, profile: str = "allow") -> Run:
    rules = [{"allow": ["Bash"]}] if profile == "allow" else [{"ask": ["Bash"]}]
    runner = RecordingRunner([completed(f"out{i}\n".encode()) for i in range(outputs)])
    journal, failures = JsonJournal(), Failures()
    journal.append(UserText("the migration failed: find out why"))
    cfg = LoopConfig(
        model=model,
        tools={"Bash": BashTool()},
        profile=Profile.from_json(rules),
        ctx=ToolContext(thread_id=1, cwd=Path("/nonexistent-cwd"), env={}, runner=runner),
        system="sys",
        retry_sleep=no_sleep,
        hooks=HookSet([failures]),
    )
    return Run(journal, runner, cfg, failures)


@pytest.mark.anyio
async def test_a_thread_on_ollama_runs_both_parallel_calls() -> None:
    with ModelServer(dialect="ollama") as server:
        server.push("", TWO)
        server.push("The log says the disk is full.")
        run = a_thread(openai(server))
        end = await run.go()
    assert end.status == "completed"
    assert [c.argv[-1] for c in run.runner.calls] == ["tail -n 5 out.log", "df -h"]
    tool_turns = [m for m in server.requests[1]["json"]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_turns] == ["call_a", "call_b"]


@pytest.mark.anyio
async def test_a_cut_call_reaches_the_model_quoting_what_it_sent_and_the_thread_goes_on() -> None:
    cut = '{"command": "cat > notes.md <<EOF\\n# Notes'
    with ModelServer(dialect="ollama") as server:
        server.push("", [{"id": "call_a", "name": "Bash", "arguments": cut}], stop="length")
        server.push("", [{"id": "call_b", "name": "Bash", "arguments": {"command": "ls"}}])
        server.push("Wrote it in two steps.")
        run = a_thread(openai(server))
        end = await run.go()
    assert end.status == "completed" and [c.argv[-1] for c in run.runner.calls] == ["ls"]
    first = run.bodies(ToolOutput)[0]
    assert first.status == "error" and first.is_error and repr(cut) in first.output
    assert "cut off at the output limit" in first.output
    (saved,) = run.bodies(AssistantReply)[0].tool_calls
    assert saved.invalid == cut  # the transcript keeps what the model sent
    sent = server.requests[1]["json"]["messages"][2]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent) == {INVALID_KEY: cut}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("push", "kind", "why"),
    [
        (
            {"content": "The migration failed because", "stop": "length"},
            "max_output_tokens",
            "cut off at the output limit",
        ),
        ({"refusal": "I can't help with that."}, "unknown", "refused to answer"),
        ({"content": "Step one", "stop": "content_filter"}, "unknown", "content_filter"),
    ],
)
async def test_truncation_and_refusal_fail_the_thread_saying_why(
    push: dict[str, Any], kind: str, why: str
) -> None:
    with ModelServer() as server:
        server.push(**push)
        run = a_thread(openai(server))
        end = await run.go()
    assert end.status == "failed" and end.error is not None and why in end.error
    assert run.failures.kinds == [kind]
    assert run.bodies(AssistantReply) == []  # half an answer is never saved as the answer


@pytest.mark.anyio
async def test_a_thread_resumed_from_its_transcript_sends_its_thinking_back() -> None:
    with ModelServer() as server:
        model = claude(server, MAX_THINKING_TOKENS="1024")
        server.push("", BASH, thinking=THINK)
        run = a_thread(model, profile="ask")
        assert (await run.go()).status == "waiting_approval"
        run.journal.append(Approval("call_a", "Bash", "approved", "user"))
        server.push("The disk is full.")
        resumed = replace(run.cfg, model=claude(server, MAX_THINKING_TOKENS="1024"))
        end = await run_loop(run.journal, resumed, list(run.journal.saved), 1)
    assert end.status == "completed", end.error
    (reply, _) = run.bodies(AssistantReply)
    assert reply.thinking == (Thinking(THINK[0]["thinking"], THINK[0]["signature"]),)
    blocks = server.requests[1]["json"]["messages"][1]["content"]
    assert [b["type"] for b in blocks] == ["thinking", "tool_use"]


def test_old_transcripts_read_without_thinking_and_new_ones_keep_it() -> None:
    old = {"content": "", "tool_calls": [{"id": "c1", "name": "Bash", "arguments": {}}]}
    (before,) = conversation([decode(EntryRecord(1, "assistant", 1.0, old))])
    assert isinstance(before, AssistantMessage) and before.thinking == []
    kept = (Thinking("why", "sig"), Thinking(redacted="opaque"))
    body = AssistantReply("", (ToolCall("c1", "Bash", {}),), "anthropic:c", None, "tool_use", kept)
    again = decode(EntryRecord(2, "assistant", 2.0, json.loads(json.dumps(body.to_json()))))
    assert again.body == body
    assert body.to_json()["thinking"] == [
        {"text": "why", "signature": "sig"},
        {"redacted": "opaque"},
    ]


@pytest.mark.parametrize(
    "text", ["turns:\n  - content: hi\n", "- content: hi\n"], ids=["under turns", "a bare list"]
)
def test_a_scripted_file_is_a_list_of_turns_under_turns_or_bare(tmp_path: Path, text: str) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    assert [t.content for t in ScriptedModel.load(path).turns] == ["hi"]


def test_a_scripted_file_without_a_list_says_what_it_must_hold(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("content: hi\n")
    with pytest.raises(ModelError, match="must hold `turns:`, a list of"):
        ScriptedModel.load(path)
