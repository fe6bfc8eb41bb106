"""Retrying transient model failures with exponential backoff and full jitter."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence

import anyio

from agent_threads.messages import Message, Model, Reply, ToolSpec
from supervise.errors import TransientModelError

OnRetry = Callable[[int, TransientModelError, float], None]


async def complete_with_retry(
    model: Model,
    system: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    *,
    attempts: int = 5,
    base_delay: float = 1.0,
    max_delay: float = 30.0,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    rand: Callable[[], float] = random.random,
    on_retry: OnRetry | None = None,
) -> Reply:
    """`model.complete`, retried on TransientModelError; the last one is raised.

    The wait before attempt n+1 is a random share of base*2^(n-1) (capped at max_delay),
    or what the server asked for in Retry-After, whichever is longer.
    """
    for attempt in range(1, attempts + 1):
        try:
            return await model.complete(system, messages, tools)
        except TransientModelError as exc:
            if attempt == attempts:
                raise
            delay = rand() * min(max_delay, base_delay * 2 ** (attempt - 1))
            if exc.retry_after is not None:
                delay = max(delay, min(exc.retry_after, max_delay))
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            await sleep(delay)
    raise AssertionError("unreachable: attempts must be at least 1")
