"""The one interface every hook family implements, and the set the loop calls.

Shell hooks (`hooks/shell.py`), system hooks (`hooks/system.py`) and extensions' lifecycle
callbacks (`hooks/lifecycle.py`) subclass `Hooks` and override the points they act at; every
method is a no-op by default and takes keyword-only arguments, so a family ignores the points
and arguments it has no use for. Each answers with one `Decision`.

The loop calls one `HookSet` at each point. The families are layers around the model and the
tools: at a point BEFORE something happens they run in order (system hooks, shell hooks,
extensions), at a point AFTER it in reverse (extensions, shell hooks, system hooks). Each
sees the value (the call, the reply, the result) as the ones before it left it, and the first
decision other than CONTINUE ends the round. A decision a point cannot act on is our bug and
raises `HookContractError`, never a silent "go on".
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from anyio.abc import TaskGroup

from agent_threads.messages import AssistantMessage, Message, ToolCall, ToolResult
from agent_threads.transcript import Body, Entry
from state.threads import ThreadStatus

T = TypeVar("T")

Save = Callable[[Body], Awaitable[Entry]]


class Action(enum.Enum):
    CONTINUE = "continue"  # go on, with `value` in place of the current one if given
    RETRY = "retry"  # discard the reply (after_model) or ask the model again (before_final)
    FAIL = "fail"  # end the thread as failed, saying `reason`
    STOP = "stop"  # skip what was about to happen; `value` stands in for its outcome
    ASK = "ask"  # before_tool: wait for a person's approval
    # before_tool: go on, and a call that only the default would send to a person runs
    # without asking (an explicit ask or deny rule still applies); permission_request: the
    # call is approved (`value`: the call, its input maybe rewritten).
    ALLOW = "allow"
    DENY = "deny"  # before_tool: refuse the call; `value` is the error result the model reads


@dataclass(frozen=True)
class Decision(Generic[T]):
    """A hook's answer at one point: what to do, and what to use in place of the current value.

    - session_start, new_input, after_result: FAIL.
    - before_model: STOP with an AssistantMessage (the reply, without a model call); FAIL.
    - after_model / before_final: a replacement AssistantMessage; RETRY; FAIL.
    - before_tool: a replacement ToolCall (its new input); ALLOW (with or without one); STOP
      with a ToolResult (the call is not run; that is its result); DENY with the ToolResult the
      model reads; ASK; FAIL.
    - permission_request: ALLOW (value: the call to run); DENY with a ToolResult; FAIL.
    - after_tool: a replacement ToolResult; FAIL (the result is still saved).
    """

    action: Action = Action.CONTINUE
    value: T | None = None
    reason: str = ""
    source: str = ""  # which hook decided, for the transcript and the error

    @property
    def goes_on(self) -> bool:
        return self.action is Action.CONTINUE


def go_on(value: T | None = None) -> Decision[T]:
    return Decision(Action.CONTINUE, value)


# RETRYs in a row at before_final, by the source that asks them, before the thread fails
# (others: the loop's RETRY_CAP). Claude Code lets a Stop hook block 8 times in a row and then
# ends the turn; the shell family does that itself, so its cap is never reached.
RETRY_CAPS: dict[str, int] = {"Stop": 9, "SubagentStop": 9}


class HookContractError(Exception):
    """A hook family answered a point with a decision the point cannot carry out (a bug)."""


# What each point can act on: the actions, and the value STOP or DENY must carry.
_ACTIONS: dict[str, frozenset[Action]] = {
    "session_start": frozenset({Action.FAIL}),
    "new_input": frozenset({Action.FAIL}),
    "before_model": frozenset({Action.FAIL, Action.STOP}),
    "after_model": frozenset({Action.FAIL, Action.RETRY}),
    "before_tool": frozenset({Action.FAIL, Action.STOP, Action.DENY, Action.ASK, Action.ALLOW}),
    "permission_request": frozenset({Action.FAIL, Action.DENY, Action.ALLOW}),
    "after_tool": frozenset({Action.FAIL}),
    "after_result": frozenset({Action.FAIL}),
    "before_final": frozenset({Action.FAIL, Action.RETRY}),
}
_STANDS_IN: dict[str, type] = {
    "before_model": AssistantMessage,
    "before_tool": ToolResult,
    "permission_request": ToolResult,
}


def checked(point: str, d: Decision[T], family: object) -> Decision[T]:
    """`d`, if `point` can carry it out.

    Raises:
        HookContractError: an action the point ignores, or STOP/DENY without its value.
    """
    if d.action is Action.CONTINUE:
        return d
    if d.action not in _ACTIONS[point]:
        raise HookContractError(f"{type(family).__name__}.{point} answered {d.action.name}")
    want = _STANDS_IN.get(point)
    if d.action in (Action.STOP, Action.DENY) and (want is None or not isinstance(d.value, want)):
        raise HookContractError(
            f"{type(family).__name__}.{point}: {d.action.name} needs a "
            f"{want.__name__ if want else 'point that takes it'}, got {d.value!r}"
        )
    return d


@dataclass
class Turn:
    """The thread as a hook sees it at a point: its entries so far and a way to add one.

    `entries` grows as entries are saved; `iteration` is the number of model calls made in
    this run of the loop.
    """

    thread_id: int
    entries: list[Entry]
    save: Save
    iteration: int = 0
    # Work a family starts and collects at a later point (Claude Code's async hooks); all of
    # it is cancelled when this run of the loop ends. None: run it in place.
    background: TaskGroup | None = None


class Hooks:
    """The base of every hook family: override the points you act at."""

    async def before_step(self, *, turn: Turn) -> None:
        """Before each step of the loop (extensions answer pending `/commands` here)."""

    async def session_start(self, *, turn: Turn) -> Decision[None]:
        """Once, before the thread's first step (again after a restart: hooks that must run
        once per thread check the transcript)."""
        return go_on()

    async def new_input(self, *, turn: Turn) -> Decision[None]:
        """Before the model is called about new input (a prompt, a batch of tool results):
        what it must also read is saved here (reminders), prompts are checked here."""
        return go_on()

    async def before_model(self, *, turn: Turn) -> Decision[AssistantMessage]:
        """Right before each model call (after the max_turns check)."""
        return go_on()

    async def context(self, *, turn: Turn, messages: list[Message]) -> list[Message]:
        """What the model will see; return it changed or as it is."""
        return messages

    async def after_model(
        self, *, turn: Turn, reply: AssistantMessage
    ) -> Decision[AssistantMessage]:
        """After each model reply, before it is saved."""
        return go_on()

    async def before_tool(
        self, *, turn: Turn, call: ToolCall, approved: bool
    ) -> Decision[ToolCall | ToolResult]:
        """Before the permission rules judge a new call (as in Claude Code, where PreToolUse
        runs before the permission prompt); a rewritten call is what the rules judge."""
        return go_on()

    async def permission_request(
        self, *, turn: Turn, call: ToolCall, reason: str
    ) -> Decision[ToolCall | ToolResult]:
        """A call needs a person's approval (`reason`: why); CONTINUE leaves it to them."""
        return go_on()

    async def waiting(self, *, turn: Turn, call: ToolCall, reason: str) -> None:
        """The thread is about to wait for a person's approval of `call`."""

    async def model_failed(self, *, turn: Turn, error: str, message: str) -> None:
        """The thread is about to fail because the model API failed (`error`: its type, as
        Claude Code's StopFailure names them: rate_limit, authentication_failed, ...)."""

    async def after_tool(
        self, *, turn: Turn, call: ToolCall, result: ToolResult
    ) -> Decision[ToolResult]:
        """After a call ran, before its result is saved: the result may be replaced."""
        return go_on()

    async def after_result(
        self, *, turn: Turn, call: ToolCall, result: ToolResult
    ) -> Decision[None]:
        """After a call's result is saved (a crash from here on never loses it)."""
        return go_on()

    async def before_final(
        self, *, turn: Turn, answer: AssistantMessage
    ) -> Decision[AssistantMessage]:
        """When the model answered without tool calls: the thread is about to complete."""
        return go_on()

    async def session_end(self, *, turn: Turn, status: ThreadStatus) -> None:
        """When the thread completed or failed (not when it waits for approval)."""


class HookSet(Hooks):
    """The hook families of one thread, called at each point: in order before, in reverse
    after."""

    def __init__(self, families: Sequence[Hooks] = ()) -> None:
        self.inward = tuple(families)
        self.outward = tuple(reversed(self.inward))

    async def before_step(self, *, turn: Turn) -> None:
        for h in self.inward:
            await h.before_step(turn=turn)

    async def session_start(self, *, turn: Turn) -> Decision[None]:
        return await _first("session_start", self.inward, lambda h: h.session_start(turn=turn))

    async def new_input(self, *, turn: Turn) -> Decision[None]:
        return await _first("new_input", self.inward, lambda h: h.new_input(turn=turn))

    async def before_model(self, *, turn: Turn) -> Decision[AssistantMessage]:
        return await _first("before_model", self.inward, lambda h: h.before_model(turn=turn))

    async def context(self, *, turn: Turn, messages: list[Message]) -> list[Message]:
        for h in self.inward:
            messages = await h.context(turn=turn, messages=messages)
        return messages

    async def after_model(
        self, *, turn: Turn, reply: AssistantMessage
    ) -> Decision[AssistantMessage]:
        for h in self.outward:
            d = checked("after_model", await h.after_model(turn=turn, reply=reply), h)
            reply = _kept(d.value, reply, AssistantMessage)
            if not d.goes_on:
                return Decision(d.action, reply, d.reason, d.source)
        return go_on(reply)

    async def before_tool(
        self, *, turn: Turn, call: ToolCall, approved: bool
    ) -> Decision[ToolCall | ToolResult]:
        allowed: Decision[ToolCall | ToolResult] | None = None
        for h in self.inward:
            d = checked(
                "before_tool", await h.before_tool(turn=turn, call=call, approved=approved), h
            )
            call = _kept(d.value, call, ToolCall)
            if d.action is Action.ALLOW:
                allowed = d  # the families after it may still deny or ask
            elif not d.goes_on:
                return d
        if allowed is not None:
            return Decision(Action.ALLOW, call, allowed.reason, allowed.source)
        return go_on(call)

    async def permission_request(
        self, *, turn: Turn, call: ToolCall, reason: str
    ) -> Decision[ToolCall | ToolResult]:
        return await _first(
            "permission_request",
            self.inward,
            lambda h: h.permission_request(turn=turn, call=call, reason=reason),
        )

    async def waiting(self, *, turn: Turn, call: ToolCall, reason: str) -> None:
        for h in self.inward:
            await h.waiting(turn=turn, call=call, reason=reason)

    async def model_failed(self, *, turn: Turn, error: str, message: str) -> None:
        for h in self.outward:
            await h.model_failed(turn=turn, error=error, message=message)

    async def after_tool(
        self, *, turn: Turn, call: ToolCall, result: ToolResult
    ) -> Decision[ToolResult]:
        for h in self.outward:
            d = checked("after_tool", await h.after_tool(turn=turn, call=call, result=result), h)
            result = _kept(d.value, result, ToolResult)
            if not d.goes_on:
                return Decision(d.action, result, d.reason, d.source)
        return go_on(result)

    async def after_result(
        self, *, turn: Turn, call: ToolCall, result: ToolResult
    ) -> Decision[None]:
        return await _first(
            "after_result",
            self.outward,
            lambda h: h.after_result(turn=turn, call=call, result=result),
        )

    async def before_final(
        self, *, turn: Turn, answer: AssistantMessage
    ) -> Decision[AssistantMessage]:
        for h in self.inward:
            d = checked("before_final", await h.before_final(turn=turn, answer=answer), h)
            answer = _kept(d.value, answer, AssistantMessage)
            if not d.goes_on:
                return Decision(d.action, answer, d.reason, d.source)
        return go_on(answer)

    async def session_end(self, *, turn: Turn, status: ThreadStatus) -> None:
        for h in self.outward:
            await h.session_end(turn=turn, status=status)


async def _first(
    point: str, families: Sequence[Hooks], call: Callable[[Hooks], Awaitable[Decision[T]]]
) -> Decision[T]:
    """The first decision other than CONTINUE at a point whose value nothing passes on."""
    for h in families:
        d = checked(point, await call(h), h)
        if not d.goes_on:
            return d
    return go_on()


def _kept(value: Any, current: T, kind: type[T]) -> T:
    """A family's replacement if it is one of the point's kind, else the current value."""
    return value if isinstance(value, kind) else current
