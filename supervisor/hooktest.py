"""`supervise hooks test`: replay an event through the configured shell hooks, no agent."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import anyio

from agent_threads.hooks.ccevents import EVENTS as CC_EVENTS
from agent_threads.hooks.shellrun import HookEvent, run_hooks
from agent_threads.hooks.shellspec import EVENTS, TOOL_EVENTS, ShellHook
from supervise.errors import UserError
from supervisor import transcriptview


def _hooks(path: str) -> tuple[ShellHook, ...]:
    """The shell hooks a thread would run from `path`, read as `hooks check` reads it."""
    from supervisor.hookcheck import load_checked

    return load_checked(path).shell


def _payload(args: argparse.Namespace) -> dict[str, Any]:
    try:
        data = json.loads(args.input) if args.input else {}
    except ValueError as exc:
        raise UserError(f"--input must be JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UserError("--input must be a JSON object")
    if args.tool:
        return {"tool_name": args.tool, "tool_input": data}
    return data


def cmd_hooks_test(args: argparse.Namespace) -> int:
    info = CC_EVENTS.get(args.event)
    if info is not None and not info.fires:
        raise UserError(f"--event {args.event} never fires in a thread ({info.note})")
    if args.event not in EVENTS:
        raise UserError(f"--event must be one of {', '.join(EVENTS)}, got {args.event!r}")
    hooks = _hooks(args.file)
    p = _payload(args)
    tool = p.get("tool_name")
    if args.event in TOOL_EVENTS and not tool:
        raise UserError(
            f'{args.event} needs a tool: --tool Bash --input \'{{"command": "ls"}}\', or '
            '--input \'{"tool_name": "Bash", "tool_input": {...}}\''
        )
    response = p.get("tool_response")
    ev = HookEvent(
        event=args.event,
        session_id="test",
        cwd=Path.cwd(),
        env=dict(os.environ),
        tool_name=tool,
        tool_input=p.get("tool_input") if tool else None,
        tool_output=None if response is None else str(response),
        prompt=p.get("prompt"),
        agent_name="hooks-test",
    )
    outcome = anyio.run(run_hooks, hooks, ev)
    if not outcome.runs:
        print(f"no {args.event} hook in {args.file} matches")
    for run in outcome.runs:
        for line in transcriptview.hook_lines(run):
            print(line.strip())
        if run.output:
            print("   output: " + run.output.replace("\n", "\n           "))
    verdict = outcome.decision or "no objection (the tool would run)"
    if outcome.stop:
        verdict = f"stop the thread: {outcome.stop}"
    print(f"decision: {verdict}" + (f" ({outcome.reason})" if outcome.reason else ""))
    if outcome.updated_input is not None:
        print(f"updated input: {json.dumps(outcome.updated_input)}")
    for text in outcome.context:
        print(f"added to the context: {text}")
    return 0
