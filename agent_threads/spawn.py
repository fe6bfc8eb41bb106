"""What a hook-spawned thread is told: the prompt section of a fired process hook.

Pure: values in, text out. The supervisor gathers the facts (command, trigger, output tail)
and this module decides how a thread reads them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

PROMPT_TAIL_LINES = 50
_MAX_LINE_CHARS = 2000


@dataclass(frozen=True)
class FireFacts:
    """Everything a fired hook tells its thread."""

    command: str
    pid: int | None
    trigger: str  # on_exit | on_output_match | on_timeout
    hook_name: str
    instructions: str
    runtime_s: float
    purpose: str | None = None
    context: dict[str, Any] = field(default_factory=dict)
    output_tail: list[str] = field(default_factory=list)
    exit_code: int | None = None
    signal: str | None = None
    matched_line: str | None = None
    pattern: str | None = None
    timeout_s: float | None = None


def exit_meaning(exit_code: int | None, signal: str | None) -> str:
    """`1 — failure`, `killed by SIGTERM`, `unknown — ...`: how an exit reads to a person."""
    if signal:
        status = f", shell status {exit_code}" if exit_code is not None else ""
        return f"killed by signal {signal}{status}"
    if exit_code is None:
        return (
            "exit code unknown — the process was lost "
            "(the machine restarted or its shim was killed)"
        )
    meaning = {
        0: "success",
        126: "failure: command found but not executable",
        127: "failure: command not found",
    }.get(exit_code, "failure")
    return f"exit code: {exit_code} — {meaning}"


def format_runtime(seconds: float) -> str:
    s = max(0, int(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h}h {m}m"
    if m:
        return f"{m}m {sec}s"
    return f"{sec}s" if s else f"{max(seconds, 0.0):.2f}s"


def _trigger_line(f: FireFacts) -> str:
    if f.trigger == "on_exit":
        return f"on_exit ({exit_meaning(f.exit_code, f.signal)})"
    if f.trigger == "on_output_match":
        return f"on_output_match (pattern `{f.pattern}` matched: `{_clip(f.matched_line or '')}`)"
    if f.trigger == "on_timeout":
        return f"on_timeout (still running after {f.timeout_s:g}s)"
    return f.trigger


def _clip(text: str) -> str:
    if len(text) <= _MAX_LINE_CHARS:
        return text
    return text[:_MAX_LINE_CHARS] + f"… [{len(text) - _MAX_LINE_CHARS} more characters]"


def _label(key: str) -> str:
    words = key.replace("_", " ").replace("-", " ").strip()
    return words[:1].upper() + words[1:]


def _value(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(_value(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = str(value).strip()
    return text.replace("\n", "\n    ")


def render_prompt(f: FireFacts) -> str:
    """The prompt section of DESIGN.md section 4 for one fired hook."""
    pid = f" (PID {f.pid})" if f.pid is not None else ""
    lines = [
        "A process hook has fired. Here is the context:",
        "",
        f"Process: `{f.command}`{pid}",
        f"Trigger: {_trigger_line(f)}",
        f"Hook: {f.hook_name}",
        f"Runtime: {format_runtime(f.runtime_s)}",
        "",
        "Hook context:",
    ]
    if f.purpose:
        lines.append(f"  Purpose: {_value(f.purpose)}")
    lines.append(f"  Instructions: {_value(f.instructions)}")
    for key, value in f.context.items():
        lines.append(f"  {_label(key)}: {_value(value)}")
    tail = f.output_tail[-PROMPT_TAIL_LINES:]
    lines += ["", f"Process output (last {PROMPT_TAIL_LINES} lines):"]
    lines += [f"  {_clip(ln)}" for ln in tail] or ["  (no output)"]
    return "\n".join(lines) + "\n"
