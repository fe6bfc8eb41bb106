"""The one interface every hook family implements, and the set the loop calls.

Shell hooks (`hooks/shell.py`), system hooks (`hooks/system.py`) and extensions' lifecycle
callbacks (`hooks/lifecycle.py`) subclass `Hooks` and override the points they act at; every
method is a no-op by default and takes keyword-only arguments, so a family ignores the points
and arguments it has no use for. Each answers with one `Decision`.

The loop calls one `HookSet` at each point; it runs the families in the documented order
(system hooks, then shell hooks, then extensions): each sees the value (the call, the reply,
the result) as the ones before it left it, and the first decision other than CONTINUE ends
the round.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

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
    DENY = "deny"  # before_tool: refuse the call; `value` is the error result the model reads


@dataclass(frozen=True)
class Decision(Generic[T]):
    """A hook's answer at one point: what to do, and what to use in place of the current value.

    - before_model: STOP with an AssistantMessage (the reply, without a model call).
    - after_model / before_final: a replacement AssistantMessage; RETRY; FAIL.
    - before_tool: a replacement ToolCall (its new input); STOP with a ToolResult (the call
      is not run); DENY with the ToolResult the model reads; ASK; FAIL.
    - after_tool: a replacement ToolResult; FAIL (the result is kept).
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


class Hooks:
    """The base of every hook family: override the points you act at."""

    async def before_step(self, *, turn: Turn) -> None:
        """Before each step of the loop (extensions answer pending `/commands` here)."""

    async def session_start(self, *, turn: Turn) -> Decision[None]:
        """Once, before the thread's first step (again after a restart: hooks that must run
        once per thread check the transcript)."""
        return go_on()

    async def before_model(self, *, turn: Turn) -> Decision[AssistantMessage]:
        """Before each model call."""
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
        """After the permission check passed (`approved`: a person approved it), before the
        call runs."""
        return go_on()

    async def after_tool(
        self, *, turn: Turn, call: ToolCall, result: ToolResult
    ) -> Decision[ToolResult]:
        """After a call ran, before its result is saved."""
        return go_on()

    async def before_final(
        self, *, turn: Turn, answer: AssistantMessage
    ) -> Decision[AssistantMessage]:
        """When the model answered without tool calls: the thread is about to complete."""
        return go_on()

    async def session_end(self, *, turn: Turn, status: ThreadStatus) -> None:
        """When the thread completed or failed (not when it waits for approval)."""


class HookSet(Hooks):
    """The hook families of one thread, called in order at each point."""

    def __init__(self, families: Sequence[Hooks] = ()) -> None:
        self.families = tuple(families)

    async def before_step(self, *, turn: Turn) -> None:
        for h in self.families:
            await h.before_step(turn=turn)

    async def session_start(self, *, turn: Turn) -> Decision[None]:
        for h in self.families:
            d = await h.session_start(turn=turn)
            if not d.goes_on:
                return d
        return go_on()

    async def before_model(self, *, turn: Turn) -> Decision[AssistantMessage]:
        for h in self.families:
            d = await h.before_model(turn=turn)
            if not d.goes_on:
                return d
        return go_on()

    async def context(self, *, turn: Turn, messages: list[Message]) -> list[Message]:
        for h in self.families:
            messages = await h.context(turn=turn, messages=messages)
        return messages

    async def after_model(
        self, *, turn: Turn, reply: AssistantMessage
    ) -> Decision[AssistantMessage]:
        for h in self.families:
            d = await h.after_model(turn=turn, reply=reply)
            reply = d.value or reply
            if not d.goes_on:
                return Decision(d.action, reply, d.reason, d.source)
        return go_on(reply)

    async def before_tool(
        self, *, turn: Turn, call: ToolCall, approved: bool
    ) -> Decision[ToolCall | ToolResult]:
        for h in self.families:
            d = await h.before_tool(turn=turn, call=call, approved=approved)
            if not d.goes_on:
                return d
            if isinstance(d.value, ToolCall):
                call = d.value
        return go_on(call)

    async def after_tool(
        self, *, turn: Turn, call: ToolCall, result: ToolResult
    ) -> Decision[ToolResult]:
        for h in self.families:
            d = await h.after_tool(turn=turn, call=call, result=result)
            result = d.value or result
            if not d.goes_on:
                return Decision(d.action, result, d.reason, d.source)
        return go_on(result)

    async def before_final(
        self, *, turn: Turn, answer: AssistantMessage
    ) -> Decision[AssistantMessage]:
        for h in self.families:
            d = await h.before_final(turn=turn, answer=answer)
            answer = d.value or answer
            if not d.goes_on:
                return Decision(d.action, answer, d.reason, d.source)
        return go_on(answer)

    async def session_end(self, *, turn: Turn, status: ThreadStatus) -> None:
        for h in self.families:
            await h.session_end(turn=turn, status=status)
