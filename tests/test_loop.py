"""The agent loop in process, from event tables: a table model, recording tools and hooks.

No daemon and no subprocess: the loop gets its parts as plain attributes (as honcho's manager
tests do), so each case is a table row (what the model replies, what the rules and hooks
decide) and what it must produce (the transcript's kinds, how the thread ends, what ran).
The crash-resume property runs the loop from every prefix of every table's transcript.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from fakes import RecordingRunner, completed

from agent_threads.command import Completed
from agent_threads.hooks.base import (
    Action,
    Decision,
    HookContractError,
    Hooks,
    HookSet,
    Turn,
    go_on,
)
from agent_threads.loop import LoopConfig, LoopEnd, run_loop
from agent_threads.messages import (
    AssistantMessage,
    Message,
    Reply,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from agent_threads.permissions import Profile
from agent_threads.tools.base import ToolContext
from agent_threads.tools.bash import BashTool
from agent_threads.transcript import (
    Approval,
    Body,
    Entry,
    ToolOutput,
    UserText,
)
from state.threads import ThreadStatus

# -- the fakes, passed in as attributes ------------------------------------------------------


class Clock:
    """A clock that moves only when told (every read moves it one second)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


@dataclass
class MemoryJournal:
    """The loop's sink as a list (state/ has its own tests; these are about the loop)."""

    thread_id: int = 1
    saved: list[Entry] = field(default_factory=list)
    clock: Clock = field(default_factory=Clock)

    def append(self, body: Body) -> Entry:
        entry = Entry(len(self.saved) + 1, self.clock(), body)
        self.saved.append(entry)
        return entry


@dataclass
class TableModel:
    """Replies from a table: reply n answers the conversation with n earlier replies, so a
    resumed thread gets the same reply again (as the scripted model does)."""

    replies: Sequence[Reply]
    sent: list[list[Message]] = field(default_factory=list)
    name: str = "table:test"

    async def complete(
        self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Reply:
        self.sent.append(list(messages))
        n = sum(1 for m in messages if isinstance(m, AssistantMessage))
        return self.replies[n] if n < len(self.replies) else Reply("(end of table)")


class BashRunner(RecordingRunner):
    """The real Bash tool's runner, recording: `fail...` commands exit 1, the rest print
    `ran COMMAND`. Nothing is started."""

    def __init__(self) -> None:
        super().__init__([])

    @property
    def ran(self) -> list[str]:
        return [c.argv[-1] for c in self.calls]

    async def __call__(self, argv: Sequence[str], **kw: Any) -> Completed:
        command = argv[-1]
        self.results.append(
            completed(f"ran {command}".encode(), 1 if command.startswith("fail") else 0)
        )
        return await super().__call__(argv, **kw)


Point = str


class RecordingHooks(Hooks):
    """One hook family that records every point it is called at and answers from a table."""

    def __init__(
        self,
        answers: Mapping[Point, Decision[Any]] | None = None,
        name: str = "",
        log: list[str] | None = None,
    ) -> None:
        self.answers = dict(answers or {})
        self.name = name
        self.calls: list[str] = [] if log is None else log  # shared: the order across families

    def _at(self, point: Point) -> Decision[Any]:
        self.calls.append(f"{self.name}{point}")
        return self.answers.get(point, go_on())

    async def session_start(self, *, turn: Turn) -> Decision[None]:
        return self._at("session_start")

    async def new_input(self, *, turn: Turn) -> Decision[None]:
        return self._at("new_input")

    async def before_model(self, *, turn: Turn) -> Decision[AssistantMessage]:
        return self._at("before_model")

    async def after_model(
        self, *, turn: Turn, reply: AssistantMessage
    ) -> Decision[AssistantMessage]:
        return self._at("after_model")

    async def before_tool(
        self, *, turn: Turn, call: ToolCall, approved: bool
    ) -> Decision[ToolCall | ToolResult]:
        return self._at("before_tool")

    async def after_tool(
        self, *, turn: Turn, call: ToolCall, result: ToolResult
    ) -> Decision[ToolResult]:
        return self._at("after_tool")

    async def after_result(
        self, *, turn: Turn, call: ToolCall, result: ToolResult
    ) -> Decision[None]:
        return self._at("after_result")

    async def before_final(
        self, *, turn: Turn, answer: AssistantMessage
    ) -> Decision[AssistantMessage]:
        return self._at("before_final")

    async def session_end(self, *, turn: Turn, status: ThreadStatus) -> None:
        self._at("session_end")


def bash(*commands: str, content: str = "") -> Reply:
    calls = tuple(ToolCall(f"c-{c}", "Bash", {"command": c}) for c in commands)
    return Reply(content, calls, Usage(10, 2))


def answer(text: str) -> Reply:
    return Reply(text, (), Usage(10, 2))


ALLOW_ALL = Profile.from_json([{"allow": ["Bash"]}])
RULES = Profile.from_json([{"allow": ["Bash"], "ask": ["Bash(deploy:*)"], "deny": ["Bash(rm:*)"]}])


@dataclass
class Thread:
    model: TableModel
    tool: BashRunner
    journal: MemoryJournal
    cfg: LoopConfig

    def kinds(self) -> list[str]:
        return [e.kind for e in self.journal.saved]

    async def run(self, turns: int = 0) -> LoopEnd:
        return await run_loop(self.journal, self.cfg, list(self.journal.saved), turns)


def thread(
    replies: Sequence[Reply],
    *,
    profile: Profile = ALLOW_ALL,
    hooks: Sequence[Hooks] = (),
    max_turns: int = 50,
    saved: Sequence[Body] = (UserText("go"),),
) -> Thread:
    model, runner, journal = TableModel(replies), BashRunner(), MemoryJournal()
    for body in saved:
        journal.append(body)
    ctx = ToolContext(thread_id=1, cwd=Path("/nonexistent-cwd"), env={}, runner=runner)
    cfg = LoopConfig(
        model=model,
        tools={"Bash": BashTool()},
        profile=profile,
        ctx=ctx,
        system="sys",
        max_turns=max_turns,
        clock=journal.clock,
        hooks=HookSet(hooks),
    )
    return Thread(model, runner, journal, cfg)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- the table -------------------------------------------------------------------------------

FAIL = Decision[Any](Action.FAIL, reason="no", source="t")


@dataclass(frozen=True)
class Case:
    name: str
    replies: tuple[Reply, ...]
    kinds: tuple[str, ...]  # the transcript after the first entry (the prompt)
    status: ThreadStatus
    ran: tuple[str, ...] = ()
    profile: Profile = ALLOW_ALL
    answers: Mapping[Point, Decision[Any]] = field(default_factory=dict)
    error: str | None = None  # a part of LoopEnd.error


CASES = [
    Case("answer", (answer("done"),), ("assistant",), "completed"),
    Case(
        "one call",
        (bash("ls"), answer("done")),
        ("assistant", "tool_start", "tool_result", "assistant"),
        "completed",
        ("ls",),
    ),
    Case(
        "two calls in one reply run in order",
        (bash("a", "b"), answer("done")),
        ("assistant", "tool_start", "tool_result", "tool_start", "tool_result", "assistant"),
        "completed",
        ("a", "b"),
    ),
    Case(
        "a failing call is an observation",
        (bash("fail now"), answer("it failed")),
        ("assistant", "tool_start", "tool_result", "assistant"),
        "completed",
        ("fail now",),
    ),
    Case(
        "denied by a rule",
        (bash("rm -rf x"), answer("ok")),
        ("assistant", "approval", "tool_result", "assistant"),
        "completed",
        profile=RULES,
    ),
    Case(
        "a rule asks",
        (bash("deploy prod"),),
        ("assistant", "approval"),
        "waiting_approval",
        profile=RULES,
    ),
    Case(
        "a hook denies",
        (bash("ls"), answer("ok")),
        ("assistant", "tool_result", "assistant"),
        "completed",
        answers={"before_tool": Decision(Action.DENY, ToolResult("c-ls", "Bash", "no", True))},
    ),
    Case(
        "a hook answers for the tool",
        (bash("ls"), answer("ok")),
        ("assistant", "tool_result", "assistant"),
        "completed",
        answers={"before_tool": Decision(Action.STOP, ToolResult("c-ls", "Bash", "cached"))},
    ),
    Case(
        "a hook asks",
        (bash("ls"),),
        ("assistant", "approval"),
        "waiting_approval",
        answers={"before_tool": Decision(Action.ASK, reason="check")},
    ),
    Case(
        "a hook rewrites the input",
        (bash("ls"), answer("ok")),
        ("assistant", "tool_start", "tool_result", "assistant"),
        "completed",
        ("ls -la",),
        answers={"before_tool": go_on(ToolCall("c-ls", "Bash", {"command": "ls -la"}))},
    ),
    Case("session_start fails", (answer("x"),), (), "failed", answers={"session_start": FAIL}),
    Case("before_model fails", (answer("x"),), (), "failed", answers={"before_model": FAIL}),
    Case(
        "before_model answers for the model",
        (),
        ("assistant",),
        "completed",
        answers={"before_model": Decision(Action.STOP, AssistantMessage("cached"))},
    ),
    Case("after_model fails", (answer("x"),), (), "failed", answers={"after_model": FAIL}),
    Case(
        "after_model retries until the cap",
        (answer("x"),),
        ("note", "note", "note"),
        "failed",
        answers={"after_model": Decision(Action.RETRY)},
        error="stopped at the retry cap",
    ),
    Case(
        "before_tool fails",
        (bash("ls"),),
        ("assistant",),
        "failed",
        answers={"before_tool": FAIL},
    ),
    Case(
        "after_tool fails and the result is kept",
        (bash("ls"),),
        ("assistant", "tool_start", "tool_result"),
        "failed",
        ("ls",),
        answers={"after_tool": FAIL},
    ),
    Case(
        "before_final rewrites",
        (answer("x"),),
        ("assistant", "final"),
        "completed",
        answers={"before_final": go_on(AssistantMessage("X"))},
    ),
    Case(
        "before_final retries until the cap",
        (answer("x"),),
        ("assistant", "retry", "assistant", "retry", "assistant", "retry", "assistant"),
        "failed",
        answers={"before_final": Decision(Action.RETRY)},
        error="stopped at the retry cap",
    ),
    Case(
        "before_final fails",
        (answer("x"),),
        ("assistant",),
        "failed",
        answers={"before_final": FAIL},
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_table(case: Case) -> None:
    t = thread(case.replies, profile=case.profile, hooks=[RecordingHooks(case.answers)])
    end = await t.run()
    assert (end.status, t.kinds()[1:], tuple(t.tool.ran)) == (
        case.status,
        list(case.kinds),
        case.ran,
    )
    if case.error is not None:
        assert end.error is not None and case.error in end.error


@pytest.mark.anyio
async def test_the_points_come_in_the_documented_order_and_families_in_theirs() -> None:
    log: list[str] = []
    first, second = RecordingHooks(name="1:", log=log), RecordingHooks(name="2:", log=log)
    t = thread((bash("ls"), answer("done")), hooks=[first, second])
    assert (await t.run()).status == "completed"
    before = ("session_start", "new_input", "before_model", "before_tool", "before_final")
    points = [
        "session_start",
        "new_input",
        "before_model",
        "after_model",
        "before_tool",
        "after_tool",
        "after_result",
        "new_input",
        "before_model",
        "after_model",
        "before_final",
        "session_end",
    ]
    # Layers: in order on the way in (before a thing happens), in reverse on the way out.
    assert log == [f"{n}:{p}" for p in points for n in ("12" if p in before else "21")]


@pytest.mark.anyio
async def test_the_first_decision_ends_the_round_and_values_flow_to_the_next_family() -> None:
    rewrite = RecordingHooks({"before_tool": go_on(ToolCall("c-ls", "Bash", {"command": "pwd"}))})
    deny = RecordingHooks(
        {"before_tool": Decision(Action.DENY, ToolResult("c-ls", "Bash", "no", True))}
    )
    never = RecordingHooks(name="x:")
    t = thread((bash("ls"), answer("ok")), hooks=[rewrite, deny, never])
    await t.run()
    assert "x:before_tool" not in never.calls and t.tool.ran == []
    out = [e.body for e in t.journal.saved if isinstance(e.body, ToolOutput)]
    assert [(o.status, o.output) for o in out] == [("denied", "no")]


@pytest.mark.anyio
async def test_max_turns_fails_with_a_note_saying_how_to_go_on() -> None:
    t = thread([bash(str(i)) for i in range(5)], max_turns=2)
    end = await t.run()
    assert end.status == "failed" and end.error is not None and "supervise send" in end.error
    assert t.tool.ran == ["0", "1"]


@pytest.mark.anyio
async def test_an_approved_call_runs_once_a_denied_one_never() -> None:
    for decision, ran in (("approved", ["deploy prod"]), ("denied", [])):
        t = thread((bash("deploy prod"), answer("ok")), profile=RULES)
        assert (await t.run()).status == "waiting_approval"
        t.journal.append(Approval("c-deploy prod", "Bash", decision, "user"))  # type: ignore[arg-type]
        assert (await t.run(turns=1)).status == "completed"
        assert t.tool.ran == ran


@pytest.mark.anyio
async def test_the_model_sees_the_projection_with_results_after_their_reply() -> None:
    t = thread((bash("a"), answer("done")))
    await t.run()
    second = t.model.sent[1]
    assert [type(m).__name__ for m in second] == ["UserMessage", "AssistantMessage", "ToolResult"]
    assert isinstance(second[2], ToolResult) and second[2].result == "ran a"


@pytest.mark.anyio
async def test_a_failed_command_reaches_the_model_as_an_error_result() -> None:
    t = thread((bash("fail x"), answer("it failed")))
    await t.run()
    (out,) = [e.body for e in t.journal.saved if isinstance(e.body, ToolOutput)]
    assert (out.is_error, out.status) == (True, "error")
    assert "[exit code 1]" in out.output
    assert out.data == {
        "stdout": "ran fail x",
        "stderr": "",
        "interrupted": False,
        "exitCode": 1,
        "isImage": False,
    }


@pytest.mark.anyio
async def test_an_extension_exec_has_a_deadline_and_no_sandbox() -> None:
    from agent_threads.extensions import ExtensionAPI, Extensions
    from agent_threads.hooks.lifecycle import EXEC_DEADLINE_S, LifecycleHooks
    from agent_threads.transcript import CommandAnswered, CommandSent

    ext = Extensions()

    async def run(args: str, ctx: Any) -> str:
        code, text = await ctx.exec(args)
        return f"{code}:{text}"

    ExtensionAPI(ext, "x.py").command("sh", handler=run)
    runner = RecordingRunner([completed(b"hi"), completed(b"partial", timed_out=True)])
    hooks = LifecycleHooks(ext, cwd=Path("/w"), model="m", runner=runner)
    t = thread(
        (answer("done"),),
        hooks=[hooks],
        saved=(UserText("go"), CommandSent("sh", "echo hi"), CommandSent("sh", "sleep 999")),
    )
    await t.run()
    answers = [e.body.output for e in t.journal.saved if isinstance(e.body, CommandAnswered)]
    assert answers[0] == "0:hi" and answers[1].startswith("124:partial\n[killed after")
    assert [(c.argv, c.deadline_s, c.sandbox, c.merge_stderr) for c in runner.calls] == [
        (("/bin/sh", "-c", "echo hi"), EXEC_DEADLINE_S, None, True),
        (("/bin/sh", "-c", "sleep 999"), EXEC_DEADLINE_S, None, True),
    ]


# -- crash and resume, from every prefix -----------------------------------------------------

SCRIPTS = [
    (bash("a"), answer("done")),
    (bash("a", "b"), bash("c"), answer("done")),
    (bash("fail x"), bash("y", "z"), answer("done")),
    (bash("rm -rf /"), bash("ok"), answer("done")),
]


@pytest.mark.anyio
@pytest.mark.parametrize("script", range(len(SCRIPTS)))
async def test_a_run_cut_after_any_entry_resumes_without_running_a_call_twice(script: int) -> None:
    """Every prefix of a finished transcript is a state a SIGKILL can leave: resumed from it,
    the thread ends the same way, no call runs twice, and a call that was in flight is
    reported as interrupted instead of run again."""
    full = thread(SCRIPTS[script], profile=RULES)
    assert (await full.run()).status == "completed"
    bodies = [e.body for e in full.journal.saved]
    for cut in range(1, len(bodies) + 1):
        t = thread(SCRIPTS[script], profile=RULES, saved=bodies[:cut])
        ran_before = [e.body.call_id for e in t.journal.saved if isinstance(e.body, ToolOutput)]
        turns = sum(1 for b in bodies[:cut] if b.kind == "assistant")
        end = await t.run(turns)
        assert end.status == "completed", (cut, end)
        outputs = [e.body for e in t.journal.saved if isinstance(e.body, ToolOutput)]
        ids = [o.call_id for o in outputs]
        assert len(ids) == len(set(ids)), f"cut at {cut}: a call answered twice: {ids}"
        assert not set(f"c-{c}" for c in t.tool.ran) & set(ran_before), cut
        if bodies[cut - 1].kind == "tool_start":
            assert outputs[len(ran_before)].status == "interrupted", cut


def test_the_loop_imports_no_hook_family() -> None:
    # The loop calls "the hooks" (hooks.base); which families exist is threadhost's business.
    tree = ast.parse((Path(__file__).parent.parent / "agent_threads" / "loop.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "agent_threads.hooks.base" in imported
    families = {"shell", "shellrun", "system", "lifecycle"}
    assert not {m for m in imported if m.rsplit(".", 1)[-1] in families | {"extensions"}}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("point", "decision"),
    [
        ("before_tool", Decision[Any](Action.DENY)),  # no result for the model to read
        ("before_tool", Decision[Any](Action.RETRY)),
        ("before_model", Decision[Any](Action.STOP)),  # no reply to stand in
        ("after_tool", Decision[Any](Action.ASK)),
    ],
)
async def test_a_decision_a_point_cannot_carry_out_is_an_error_not_a_go_on(
    point: str, decision: Decision[Any]
) -> None:
    t = thread((bash("rm -rf x"), answer("ok")), hooks=[RecordingHooks({point: decision})])
    with pytest.raises(HookContractError, match=f"RecordingHooks.{point}"):
        await t.run()
    assert t.tool.ran == ([] if point != "after_tool" else ["rm -rf x"])


@pytest.mark.anyio
async def test_the_result_is_saved_before_the_after_result_point_and_kept_on_a_fail() -> None:
    seen: list[list[str]] = []

    class Watch(Hooks):
        async def after_result(
            self, *, turn: Turn, call: ToolCall, result: ToolResult
        ) -> Decision[None]:
            seen.append([e.kind for e in turn.entries])
            return Decision(Action.FAIL, reason="stop here")

    t = thread((bash("ls"), answer("ok")), hooks=[Watch()])
    end = await t.run()
    assert (end.status, end.error) == ("failed", "stop here")
    assert seen == [["user", "assistant", "tool_start", "tool_result"]]


@pytest.mark.anyio
async def test_an_extension_changing_status_tool_call_in_place_changes_nothing() -> None:
    from agent_threads.api import AgentEvent, HookDecision
    from agent_threads.extensions import ExtensionAPI, Extensions
    from agent_threads.hooks.lifecycle import LifecycleHooks

    ext = Extensions()
    api = ExtensionAPI(ext, "x.py")

    def scribble(status: Any) -> None:
        status.tool_call.arguments["command"] = "rm -rf /"

    api.on(AgentEvent.BEFORE_TOOL_EXECUTION).handle(HookDecision.CONTINUE, effects=[scribble])
    hooks = LifecycleHooks(ext, cwd=Path("/w"), model="m")
    t = thread((bash("ls"), answer("ok")), hooks=[hooks])
    await t.run()
    assert t.tool.ran == ["ls"]


@pytest.mark.anyio
async def test_reminders_come_from_this_batch_only_even_when_call_ids_repeat() -> None:
    from agent_threads.hooks.system import SystemHookConfig, SystemHooks
    from agent_threads.transcript import Reminder

    # Servers that send no call id get `call_0` for the first call of every reply.
    long = "x" * 40_000  # over the tool output bound: the output is cut, a reminder follows
    replies = (
        Reply("", (ToolCall("call_0", "Bash", {"command": f"printf {long}"}),)),
        Reply("", (ToolCall("call_0", "Bash", {"command": "ls"}),)),
        answer("done"),
    )
    t = thread(replies, hooks=[SystemHooks(SystemHookConfig())])

    async def big(argv: Sequence[str], **kw: Any) -> Completed:
        t.tool.calls.append(argv)  # type: ignore[arg-type]
        return completed(long.encode() if "printf" in argv[-1] else b"ok")

    t.cfg.ctx = replace(t.cfg.ctx, runner=big)
    await t.run()
    reminders = [e.body.text for e in t.journal.saved if isinstance(e.body, Reminder)]
    assert len(reminders) == 1 and "truncated" in reminders[0]
