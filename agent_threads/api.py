"""The public API of hooks inside threads: what extensions import.

```python
from agent_threads.api import AgentEvent, HookDecision, AgentStatus, SystemMessage, \\
    UserMessage, AssistantMessage, ToolCall, ToolResult
```

An extension module (listed under `agent.extensions`) defines `register(api)` and uses
`api.on(AgentEvent.X).when(cond).handle(decision=..., value=..., effects=[...])` (the "Hooks
System Guide" lifecycle), `api.on("context", transform)` and `api.command(name, ...)`.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agent_threads.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
)


class AgentEvent(enum.Enum):
    BEFORE_LLM_CALL = "BEFORE_LLM_CALL"
    AFTER_LLM_CALL = "AFTER_LLM_CALL"
    BEFORE_TOOL_EXECUTION = "BEFORE_TOOL_EXECUTION"
    AFTER_TOOL_EXECUTION = "AFTER_TOOL_EXECUTION"
    ON_TOOL_ERROR = "ON_TOOL_ERROR"
    BEFORE_FINAL_RESPONSE = "BEFORE_FINAL_RESPONSE"
    QUERY_END = "QUERY_END"


class HookDecision(enum.Enum):
    CONTINUE = "CONTINUE"
    RETRY = "RETRY"
    FAIL = "FAIL"
    STOP = "STOP"


RETRYABLE = frozenset({AgentEvent.AFTER_LLM_CALL, AgentEvent.BEFORE_FINAL_RESPONSE})


@dataclass
class AgentView:
    """`status.agent`: the thread as a hook sees it.

    Appending a SystemMessage or UserMessage to `conversation_history` in an effect adds it
    to the thread (saved, so it survives a restart); other changes to the list are ignored.
    """

    thread_id: str
    conversation_history: list[Message]
    cwd: str
    model: str


@dataclass
class AgentStatus:
    event: AgentEvent
    agent: AgentView
    iteration: int
    tool_call: ToolCall | None = None
    tool_result: ToolResult | None = None
    assistant_message: AssistantMessage | None = None
    error: str | None = None


Condition = Callable[[AgentStatus], "bool | Awaitable[bool]"]
Effect = Callable[[AgentStatus], "Awaitable[None] | None"]

# What STOP must return, per event (the guide's contracts).
STOP_TYPES: dict[AgentEvent, tuple[type, ...]] = {
    AgentEvent.BEFORE_LLM_CALL: (AssistantMessage,),
    AgentEvent.AFTER_LLM_CALL: (AssistantMessage,),
    AgentEvent.BEFORE_TOOL_EXECUTION: (ToolResult,),
    AgentEvent.AFTER_TOOL_EXECUTION: (ToolResult,),
    AgentEvent.ON_TOOL_ERROR: (ToolResult,),
    AgentEvent.BEFORE_FINAL_RESPONSE: (AssistantMessage,),
    AgentEvent.QUERY_END: (object,),
}


class HookRegistrationError(ValueError):
    """A hook registered with a decision its event does not allow."""


@dataclass
class LifecycleHook:
    event: AgentEvent
    condition: Condition | None
    decision: HookDecision
    value: Any = None  # a callable (status, current) -> new value, or the value itself
    effects: tuple[Effect, ...] = ()
    source: str = ""


class HookBuilder:
    """`api.on(event)`: optionally `.when(cond)`, then `.handle(...)`."""

    def __init__(self, event: AgentEvent, sink: list[LifecycleHook], source: str) -> None:
        self.event = event
        self.sink = sink
        self.source = source
        self.condition: Condition | None = None

    def when(self, condition: Condition) -> HookBuilder:
        self.condition = condition
        return self

    def handle(
        self,
        decision: HookDecision = HookDecision.CONTINUE,
        value: Any = None,
        effects: list[Effect] | tuple[Effect, ...] | None = None,
    ) -> LifecycleHook:
        if not isinstance(decision, HookDecision):
            raise HookRegistrationError(f"decision must be a HookDecision, got {decision!r}")
        if decision is HookDecision.RETRY and self.event not in RETRYABLE:
            raise HookRegistrationError(
                f"RETRY is only allowed on AFTER_LLM_CALL and BEFORE_FINAL_RESPONSE, not on "
                f"{self.event.name}; use FAIL or STOP there"
            )
        if (
            decision is HookDecision.STOP
            and value is None
            and self.event is not AgentEvent.QUERY_END
        ):
            want = STOP_TYPES[self.event][0].__name__
            raise HookRegistrationError(f"STOP on {self.event.name} needs a value: a {want}")
        hook = LifecycleHook(
            self.event, self.condition, decision, value, tuple(effects or ()), self.source
        )
        self.sink.append(hook)
        return hook


__all__ = [
    "AgentEvent",
    "AgentStatus",
    "AgentView",
    "AssistantMessage",
    "HookBuilder",
    "HookDecision",
    "HookRegistrationError",
    "Message",
    "SystemMessage",
    "ToolCall",
    "ToolResult",
    "UserMessage",
]
