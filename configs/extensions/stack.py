"""`/push` and `/pop`: stack a sub-task away into a summary.

Built only on `agent_threads.api`'s extension surface (commands, custom entries, a context
transform, rebuild_context, ui.select): the benchmark of that API.

    supervise send t3 "/push check the cache"   # start a sub-task
    supervise send t3 "why is the cache cold?"  # ... work on it ...
    supervise send t3 "/pop"                    # fold it into its last answer (or: /pop TEXT)

After `/pop` the model no longer sees the sub-task's messages, only one line with its
summary. With several sub-tasks open, `/pop` asks which (`--choice N` in a thread).
"""

from __future__ import annotations

from typing import Any

from agent_threads.api import AssistantMessage, UserMessage


def _stack_entries(ctx: Any) -> list[tuple[int, dict[str, Any]]]:
    return [
        (e["seq"], e["data"]["data"])
        for e in ctx.entries
        if e["kind"] == "custom" and e["data"]["type"] == "stack"
    ]


def _open(ctx: Any) -> list[tuple[int, str]]:
    """Pushes not popped yet, oldest first: (seq of the push, label)."""
    opened: list[tuple[int, str]] = []
    for seq, d in _stack_entries(ctx):
        if d["op"] == "push":
            opened.append((seq, d["label"]))
        else:
            opened = [p for p in opened if p[0] != d["push"]]
    return opened


async def push(args: str, ctx: Any) -> str:
    label = args.strip() or f"sub-task {len(_open(ctx)) + 1}"
    await ctx.save_entry("stack", {"op": "push", "label": label})
    return f"pushed '{label}': what follows until /pop is folded into a summary"


def _last_answer(ctx: Any, after: int) -> str | None:
    for m in reversed(ctx.messages):
        if isinstance(m, AssistantMessage) and m.seq is not None and m.seq > after and m.content:
            return str(m.content)
    return None


async def pop(args: str, ctx: Any) -> str:
    opened = _open(ctx)
    if not opened:
        return "nothing to pop: /push starts a sub-task"
    seq, label = opened[-1]
    if len(opened) > 1:
        labels = [f"{lbl} (#{s})" for s, lbl in reversed(opened)]
        picked = ctx.ui.select("Pop which sub-task?", labels)
        seq, label = list(reversed(opened))[labels.index(picked)]
    summary = args.strip() or _last_answer(ctx, seq) or "(the sub-task gave no answer)"
    await ctx.save_entry("stack", {"op": "pop", "push": seq, "label": label, "summary": summary})
    messages = await ctx.rebuild_context()
    return f"popped '{label}' into its summary; the model now sees {len(messages)} messages"


def fold(messages: list[Any], ctx: Any) -> list[Any]:
    """Replace each popped sub-task's messages with one line holding its summary."""
    entries = _stack_entries(ctx)
    for pop_seq, d in entries:
        if d["op"] != "pop":
            continue
        kept: list[Any] = []
        placed = False
        for m in messages:
            if m.seq is not None and d["push"] < m.seq < pop_seq:
                if not placed:
                    note = f"[Sub-task '{d['label']}' was stacked away with /pop. Summary: "
                    kept.append(UserMessage(note + d["summary"] + "]"))
                    placed = True
                continue
            kept.append(m)
        messages = kept
    return messages


def register(api: Any) -> None:
    api.command("push", description="start a sub-task", handler=push)
    api.command("pop", description="fold the sub-task since /push into its summary", handler=pop)
    api.on("context", fold)
