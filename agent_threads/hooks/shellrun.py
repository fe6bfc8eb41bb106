"""Running shell hooks: values reach them as environment variables and JSON on stdin only.

A command string is never formatted with a value: `$INPUT` holding `$(rm -rf /)` is data
that the hook's own shell expands as a variable, never as code. Each hook runs in its own
process group, killed whole at its timeout.
"""

from __future__ import annotations

import getpass
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from agent_threads.command import Completed, run_command
from agent_threads.hooks.shellspec import ShellHook
from agent_threads.transcript import HookRan

CONDITION_TIMEOUT_S = 1.0
MAX_RECORD = 4000  # characters of a hook's output kept in the transcript
_RANK = {"allow": 0, "ask": 1, "deny": 2}


@dataclass(frozen=True)
class HookEvent:
    """What happened, as the hooks of one event see it."""

    event: str
    session_id: str
    cwd: Path
    env: Mapping[str, str]
    tool_name: str | None = None
    tool_input: Mapping[str, Any] | None = None
    tool_output: str | None = None
    prompt: str | None = None
    agent_name: str = ""

    def variables(self) -> dict[str, str]:
        values = {
            "HOOK_EVENT": self.event,
            "TIMESTAMP": datetime.now(UTC).isoformat(timespec="seconds"),
            "SESSION_ID": self.session_id,
            "PROJECT_ROOT": str(self.cwd),
            "PLATFORM": "supervise",
            "AGENT_NAME": self.agent_name,
            "USER_NAME": _user(),
        }
        if self.tool_name is not None:
            values["TOOL_NAME"] = self.tool_name
            values["INPUT"] = json.dumps(self.tool_input or {}, ensure_ascii=False)
        if self.tool_output is not None:
            values["OUTPUT"] = self.tool_output
        if self.prompt is not None:
            values["PROMPT"] = self.prompt
        # The environment cannot hold NUL bytes: show them, never cut the value there.
        return {k: v.replace("\0", "\\0") for k, v in values.items()}

    def stdin(self) -> bytes:
        """Claude Code's event JSON."""
        data: dict[str, Any] = {
            "session_id": self.session_id,
            "hook_event_name": self.event,
            "cwd": str(self.cwd),
        }
        if self.tool_name is not None:
            data["tool_name"] = self.tool_name
            data["tool_input"] = dict(self.tool_input or {})
        if self.tool_output is not None:
            data["tool_response"] = self.tool_output
        if self.prompt is not None:
            data["prompt"] = self.prompt
        return json.dumps(data, ensure_ascii=False).encode()


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


@dataclass
class HookOutcome:
    """What the hooks of one event decided together: deny beats ask beats allow."""

    decision: str | None = None
    reason: str = ""
    updated_input: dict[str, Any] | None = None
    context: list[str] = field(default_factory=list)
    stop: str | None = None
    runs: list[HookRan] = field(default_factory=list)

    def add(self, run: HookRan) -> None:
        self.runs.append(run)
        if run.decision in _RANK and (
            self.decision is None or _RANK[run.decision] > _RANK[self.decision]
        ):
            self.decision, self.reason = run.decision, run.reason
        if run.decision == "stop":
            self.stop = run.reason or "a hook stopped the thread"
        if run.updated_input is not None:
            self.updated_input = run.updated_input
        if run.context:
            self.context.append(run.context)


async def _exec(command: str, ev: HookEvent, timeout: float) -> Completed:
    # A hook is the person's own code: it runs outside the thread's sandbox, as in Claude Code.
    return await run_command(
        ["/bin/sh", "-c", command],
        cwd=ev.cwd,
        env={**ev.env, **ev.variables()},
        deadline_s=timeout,
        stdin=ev.stdin(),
    )


def _clip(text: str) -> str:
    return text if len(text) <= MAX_RECORD else text[:MAX_RECORD] + "… [truncated]"


def _json_answer(stdout: str) -> dict[str, Any] | str | None:
    """Parsed JSON stdout; None when stdout is not JSON at all; an error text if broken."""
    text = stdout.strip()
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        return f"hook printed broken JSON ({exc})"
    return data if isinstance(data, dict) else None


HookSays = Literal["allow", "ask", "deny", "stop"]
_SAYS: dict[str, HookSays] = {"allow": "allow", "ask": "ask", "deny": "deny"}


@dataclass(frozen=True)
class Say:
    """One hook's answer, in Claude Code's words (the shell family turns it into a Decision)."""

    decision: HookSays | None = None  # None: no say (the call goes on)
    reason: str = ""
    context: str = ""  # added to the conversation
    updated_input: dict[str, Any] | None = None


def _from_json(data: dict[str, Any]) -> Say:
    """Claude Code's answer fields, flattened."""
    spec = data.get("hookSpecificOutput") or {}
    legacy = {"block": "deny", "approve": "allow"}.get(str(data.get("decision")))
    said = spec.get("permissionDecision") or legacy
    decision = _SAYS.get(str(said))
    reason = (
        str(spec.get("permissionDecisionReason") or data.get("reason") or "") if decision else ""
    )
    updated = spec.get("updatedInput") or data.get("updatedInput")
    context = spec.get("additionalContext") or data.get("additionalContext")
    if data.get("continue") is False:
        decision, reason = "stop", str(data.get("stopReason") or "a hook stopped the thread")
    return Say(
        decision,
        reason,
        str(context) if context else "",
        updated if isinstance(updated, dict) else None,
    )


def judge(hook: ShellHook, code: int | None, stdout: str, stderr: str, timed_out: bool) -> Say:
    """A hook's say, from how it ended and what it printed. Pure."""
    closed = hook.fail_mode == "closed"
    if timed_out:
        why = f"hook timed out after {hook.timeout_ms} ms"
        return Say("deny", why) if closed else Say(reason=why)
    assert code is not None
    if code == 2:
        return Say("deny", stderr.strip() or stdout.strip() or "blocked by hook")
    crashed = code < 0 or code in (126, 127)
    if code != 0:
        if closed or not hook.continue_on_failure or (crashed and closed):
            why = stderr.strip() or stdout.strip() or f"hook exited with {code}"
            return Say("deny", f"hook failed (exit {code}): {why}")
        return Say(reason=f"hook failed (exit {code}); continuing")
    answer = _json_answer(stdout)
    if isinstance(answer, str):
        return Say("deny", answer) if closed else Say(reason=answer)
    if answer is not None:
        return _from_json(answer)
    if hook.event in ("SessionStart", "UserPromptSubmit") and stdout.strip():
        return Say(context=stdout.strip())  # the design doc's inject-context.sh
    return Say()


async def run_one(hook: ShellHook, ev: HookEvent) -> HookRan:
    started = time.monotonic()

    def record(**kw: Any) -> HookRan:
        ms = int((time.monotonic() - started) * 1000)
        return HookRan(
            event=ev.event,
            hook=hook.label,
            matcher=hook.matcher,
            source=hook.source,
            duration_ms=ms,
            **kw,
        )

    if hook.condition is not None:
        met = await _exec(hook.condition, ev, CONDITION_TIMEOUT_S)
        if met.returncode != 0:
            return record(
                exit_code=None, timed_out=False, decision="skipped", reason="condition not met"
            )
    done = await _exec(hook.command, ev, hook.timeout_ms / 1000)
    stdout = done.stdout.decode("utf-8", errors="replace")
    stderr = done.stderr.decode("utf-8", errors="replace")
    say = judge(hook, done.returncode, stdout, stderr, done.timed_out)
    shown = stdout + (("\n[stderr]\n" + stderr) if stderr.strip() else "")
    return record(
        exit_code=done.returncode,
        timed_out=done.timed_out,
        decision=say.decision,
        reason=_clip(say.reason),
        output=_clip(shown.strip()),
        context=_clip(say.context),
        updated_input=say.updated_input,
    )


async def run_hooks(hooks: Sequence[ShellHook], ev: HookEvent) -> HookOutcome:
    """Run the hooks of `ev.event` that match, in order; later ones see an updated input."""
    outcome = HookOutcome()
    for hook in hooks:
        if hook.event != ev.event or not hook.matches(ev.tool_name or "", ev.tool_input or {}):
            continue
        run = await run_one(hook, ev)
        outcome.add(run)
        if run.updated_input is not None:
            ev = replace(ev, tool_input=run.updated_input)
    return outcome
