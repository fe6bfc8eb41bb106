"""Firing lifecycle hooks: conditions, effects, values, then one decision.

Hooks of an event run in registration order. Each whose condition holds runs its effects,
then its value (a callable `(status, current) -> new` or the value itself) replaces the
current one; the first decision other than CONTINUE ends the round. An extension that raises
is reported (`errors`) and skipped: the thread goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_threads.api import STOP_TYPES, AgentStatus, HookDecision, LifecycleHook
from agent_threads.extensions import ExtensionError, call


@dataclass
class Fired:
    decision: HookDecision = HookDecision.CONTINUE
    value: Any = None
    source: str = ""
    errors: list[str] = field(default_factory=list)


async def fire(hooks: Sequence[LifecycleHook], status: AgentStatus, current: Any) -> Fired:
    out = Fired(value=current)
    for hook in hooks:
        if hook.event is not status.event:
            continue
        try:
            if hook.condition is not None and not await call(hook.condition, status):
                continue
            for effect in hook.effects:
                await call(effect, status)
            if hook.value is not None:
                out.value = (
                    await call(hook.value, status, out.value)
                    if callable(hook.value)
                    else hook.value
                )
        except Exception as exc:
            out.errors.append(f"{hook.source}: {status.event.name} hook raised {exc!r}")
            continue
        if hook.decision is HookDecision.STOP:
            want = STOP_TYPES[status.event]
            if not isinstance(out.value, want):
                raise ExtensionError(
                    f"{hook.source}: STOP on {status.event.name} must give a "
                    f"{want[0].__name__}, got {type(out.value).__name__}"
                )
        if hook.decision is not HookDecision.CONTINUE:
            out.decision, out.source = hook.decision, hook.source
            return out
    return out
