"""Running shell hooks: values reach them as environment variables and JSON on stdin only.

A command string is never formatted with a value: `$INPUT` holding `$(rm -rf /)` is data
that the hook's own shell expands as a variable, never as code. Each hook runs in its own
process group, killed whole at its timeout.

Claude Code's protocol (its hooks reference) for hooks written in its shape: the stdin JSON
carries the common fields (session_id, transcript_path, cwd, permission_mode,
hook_event_name) and the event's own; CLAUDE_PROJECT_DIR, CLAUDE_PLUGIN_ROOT,
CLAUDE_PLUGIN_DATA and (SessionStart) CLAUDE_ENV_FILE are set; `args` runs the command
without a shell, with those placeholders substituted as plain strings. Stdout is read as
JSON on every exit code; exit 2 blocks; any other failure without JSON is a non-blocking
error, and a timeout renders no decision.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from agent_threads.command import Completed, run_command
from agent_threads.hooks.ccevents import STDOUT_IS_CONTEXT
from agent_threads.hooks.shellspec import ShellHook
from agent_threads.transcript import HookRan

CONDITION_TIMEOUT_S = 1.0
MAX_RECORD = 4000  # characters of a hook's output kept in the transcript
MAX_CONTEXT = 10_000  # characters of a hook's context for the model, as in Claude Code
_RANK = {"allow": 0, "ask": 1, "deny": 2}
# Where Claude Code ignores exit 2 (PermissionRequest: only the `decision` object answers).
EXIT_2_IGNORED = frozenset({"PermissionRequest", "Notification", "StopFailure", "SessionEnd"})
_PLACEHOLDERS = ("CLAUDE_PROJECT_DIR", "CLAUDE_PLUGIN_ROOT", "CLAUDE_PLUGIN_DATA")


@dataclass(frozen=True)
class HookEvent:
    """What happened, as the hooks of one event see it.

    The fields after `agent_name` are the event's own; those left None are not sent.
    """

    event: str
    session_id: str
    cwd: Path
    env: Mapping[str, str]
    transcript_path: Path | None = None
    agent_name: str = ""
    env_file: Path | None = None  # CLAUDE_ENV_FILE (SessionStart)
    tool_name: str | None = None
    tool_input: Mapping[str, Any] | None = None
    tool_use_id: str | None = None
    tool_output: str | None = None  # the text the model reads ($OUTPUT)
    tool_response: Any = None  # Claude Code's per-tool object, else the text
    error: str | None = None  # PostToolUseFailure, StopFailure
    error_details: str | None = None
    is_interrupt: bool | None = None
    duration_ms: int | None = None
    prompt: str | None = None
    source: str | None = None  # SessionStart: startup | resume
    model: str | None = None
    reason: str | None = None  # SessionEnd
    notification_type: str | None = None
    message: str | None = None
    title: str | None = None
    stop_hook_active: bool | None = None
    last_assistant_message: str | None = None
    agent_id: str | None = None
    agent_type: str | None = None

    def payload(self) -> dict[str, Any]:
        """Claude Code's event JSON, as a mapping (what matchers and `if` look at)."""
        data: dict[str, Any] = {
            "session_id": self.session_id,
            "transcript_path": "" if self.transcript_path is None else str(self.transcript_path),
            "cwd": str(self.cwd),
            "permission_mode": "default",
            "hook_event_name": self.event,
        }
        own = {
            "tool_name": self.tool_name,
            "tool_input": None if self.tool_input is None else dict(self.tool_input),
            "tool_use_id": self.tool_use_id,
            "tool_response": self.tool_response
            if self.tool_response is not None
            else self.tool_output,
            "error": self.error,
            "error_details": self.error_details,
            "is_interrupt": self.is_interrupt,
            "duration_ms": self.duration_ms,
            "prompt": self.prompt,
            "source": self.source,
            "model": self.model,
            "reason": self.reason,
            "notification_type": self.notification_type,
            "message": self.message,
            "title": self.title,
            "stop_hook_active": self.stop_hook_active,
            "last_assistant_message": self.last_assistant_message,
            "agent_id": self.agent_id,
            "agent_type": self.agent_type,
        }
        data.update({k: v for k, v in own.items() if v is not None})
        return data

    def stdin(self) -> bytes:
        return json.dumps(self.payload(), ensure_ascii=False).encode()

    def variables(self, hook: ShellHook) -> dict[str, str]:
        """The environment `hook` gets on top of the thread's: ours, then Claude Code's."""
        values = {
            "HOOK_EVENT": self.event,
            "TIMESTAMP": datetime.now(UTC).isoformat(timespec="seconds"),
            "SESSION_ID": self.session_id,
            "PROJECT_ROOT": str(self.cwd),
            "PLATFORM": "supervise",
            "AGENT_NAME": self.agent_name,
            "USER_NAME": _user(),
            "CLAUDE_PROJECT_DIR": str(self.cwd),
        }
        if self.tool_name is not None:
            values["TOOL_NAME"] = self.tool_name
            values["INPUT"] = json.dumps(self.tool_input or {}, ensure_ascii=False)
        if self.tool_output is not None:
            values["OUTPUT"] = self.tool_output
        if self.prompt is not None:
            values["PROMPT"] = self.prompt
        if hook.plugin_root is not None:
            values["CLAUDE_PLUGIN_ROOT"] = hook.plugin_root
            values["CLAUDE_PLUGIN_DATA"] = str(plugin_data(self.env, hook))
        if self.env_file is not None:
            values["CLAUDE_ENV_FILE"] = str(self.env_file)
        # The environment cannot hold NUL bytes: show them, never cut the value there.
        return {k: v.replace("\0", "\\0") for k, v in values.items()}


def plugin_data(env: Mapping[str, str], hook: ShellHook) -> Path:
    """A plugin's persistent data directory (CLAUDE_PLUGIN_DATA), created on first use."""
    base = env.get("SUPERVISE_HOME") or os.path.join(os.path.expanduser("~"), ".supervise")
    name = hook.plugin_name or Path(hook.plugin_root or "plugin").name
    path = (
        Path(base) / "plugin-data" / "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    )
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


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


def _argv(hook: ShellHook, command: str, env: Mapping[str, str], exec_form: bool) -> list[str]:
    """The process to start: `sh -c COMMAND`, or (exec form) the executable and its args
    with the path placeholders substituted as plain strings."""
    if not exec_form or hook.args is None:
        return ["/bin/sh", "-c", command]

    def sub(text: str) -> str:
        for name in _PLACEHOLDERS:
            if name in env:
                text = text.replace("${" + name + "}", env[name]).replace("$" + name, env[name])
        return text

    exe = sub(hook.command)
    found = exe if "/" in exe else shutil.which(exe, path=env.get("PATH"))
    return [found or exe, *(sub(a) for a in hook.args)]


async def _exec(
    hook: ShellHook, command: str, ev: HookEvent, timeout: float, *, exec_form: bool = False
) -> Completed:
    # A hook is the person's own code: it runs outside the thread's sandbox, as in Claude Code.
    env = {**ev.env, **ev.variables(hook)}
    try:
        return await run_command(
            _argv(hook, command, env, exec_form),
            cwd=ev.cwd,
            env=env,
            deadline_s=timeout,
            stdin=ev.stdin(),
        )
    except OSError as exc:  # exec form: no such executable
        why = f"{hook.command}: {exc.strerror or exc}".encode()
        return Completed(127, b"", why, 0, 0, False, 0.0)


def _clip(text: str, limit: int = MAX_RECORD) -> str:
    return text if len(text) <= limit else text[:limit] + "… [truncated]"


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
_SAYS: dict[str, HookSays] = {"allow": "allow", "ask": "ask", "deny": "deny", "defer": "ask"}


@dataclass(frozen=True)
class Say:
    """One hook's answer, in Claude Code's words (the shell family turns it into a Decision).

    `deny` is also "block" at events that block with a top-level `decision` (a prompt, a
    final answer) and exit 2 anywhere; what a block means is the event's business.
    """

    decision: HookSays | None = None  # None: no say (what was to happen goes on)
    reason: str = ""
    context: str = ""  # added to the conversation
    updated_input: dict[str, Any] | None = None
    system_message: str = ""  # for the person reading the thread, never the model


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _from_json(data: dict[str, Any], event: str) -> Say:
    """Claude Code's answer fields for `event`, flattened."""
    spec = data.get("hookSpecificOutput")
    spec = spec if isinstance(spec, dict) else {}
    decision: HookSays | None = None
    reason = ""
    updated = None
    if event == "PermissionRequest":
        inner = spec.get("decision")
        inner = inner if isinstance(inner, dict) else {}
        behavior = inner.get("behavior")
        if behavior == "allow":
            decision, updated = "allow", inner.get("updatedInput")
        elif behavior == "deny":
            decision, reason = "deny", _text(inner.get("message"))
            if inner.get("interrupt") is True:
                decision = "stop"
                reason = reason or "a PermissionRequest hook stopped the thread"
    elif event == "PreToolUse":
        # `decision: approve|block` is the deprecated spelling of allow|deny.
        legacy = {"block": "deny", "approve": "allow"}.get(str(data.get("decision")))
        decision = _SAYS.get(str(spec.get("permissionDecision") or legacy))
        reason = _text(spec.get("permissionDecisionReason")) or _text(data.get("reason"))
        updated = spec.get("updatedInput") or data.get("updatedInput")
    elif data.get("decision") == "block":
        decision, reason = "deny", _text(data.get("reason"))
    context = _text(spec.get("additionalContext")) or _text(data.get("additionalContext"))
    if data.get("continue") is False:
        decision, reason = "stop", _text(data.get("stopReason")) or "a hook stopped the thread"
    return Say(
        decision,
        reason,
        _clip(context, MAX_CONTEXT),
        updated if isinstance(updated, dict) else None,
        _text(data.get("systemMessage")),
    )


def judge(hook: ShellHook, code: int | None, stdout: str, stderr: str, timed_out: bool) -> Say:
    """A hook's say, from how it ended and what it printed. Pure."""
    if hook.claude:
        return _judge_claude(hook, code, stdout, stderr, timed_out)
    closed = hook.fail_mode == "closed"
    if timed_out:
        why = f"hook timed out after {hook.timeout_ms} ms"
        return Say("deny", why) if closed else Say(reason=why)
    assert code is not None
    if code == 2:
        return Say("deny", stderr.strip() or stdout.strip() or "blocked by hook")
    if code != 0:
        if closed or not hook.continue_on_failure:
            why = stderr.strip() or stdout.strip() or f"hook exited with {code}"
            return Say("deny", f"hook failed (exit {code}): {why}")
        return Say(reason=f"hook failed (exit {code}); continuing")
    answer = _json_answer(stdout)
    if isinstance(answer, str):
        return Say("deny", answer) if closed else Say(reason=answer)
    if answer is not None:
        return _from_json(answer, hook.event)
    if hook.event in STDOUT_IS_CONTEXT and stdout.strip():
        return Say(context=_clip(stdout.strip(), MAX_CONTEXT))  # the design doc's inject-context.sh
    return Say()


def _judge_claude(
    hook: ShellHook, code: int | None, stdout: str, stderr: str, timed_out: bool
) -> Say:
    """Claude Code's rules: JSON on any exit code, exit 2 blocks, a timeout says nothing."""
    closed = hook.fail_mode == "closed"
    if timed_out:
        why = f"hook timed out after {hook.timeout_ms / 1000:g}s; its output was discarded"
        return Say("deny", why) if closed else Say(reason=why)
    assert code is not None
    answer = _json_answer(stdout)
    said = _from_json(answer, hook.event) if isinstance(answer, dict) else None
    if code == 2 and hook.event in EXIT_2_IGNORED:
        return said or Say(reason=f"exit 2 is not a decision at {hook.event}: {stderr.strip()}")
    if code == 2:
        # Blocks whatever the JSON says; the reason is the JSON's block reason, else stderr.
        why = said.reason if said is not None and said.decision == "deny" else ""
        why = why or stderr.strip() or "blocked by hook"
        base = said or Say()
        return replace(base, decision="stop" if base.decision == "stop" else "deny", reason=why)
    if said is not None:
        return said  # honoured on any exit code: the JSON alone decides
    if code != 0:
        first = (stderr.strip() or stdout.strip()).splitlines()
        why = f"Failed with non-blocking status code {code}: {first[0] if first else ''}"
        if closed:
            return Say("deny", why)
        return Say(reason=why.rstrip(": "))
    if hook.event in STDOUT_IS_CONTEXT and stdout.strip():
        return Say(context=_clip(stdout.strip(), MAX_CONTEXT))
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
        met = await _exec(hook, hook.condition, ev, CONDITION_TIMEOUT_S)
        if met.returncode != 0:
            return record(
                exit_code=None, timed_out=False, decision="skipped", reason="condition not met"
            )
    done = await _exec(hook, hook.command, ev, hook.timeout_ms / 1000, exec_form=True)
    stdout = done.stdout.decode("utf-8", errors="replace")
    stderr = done.stderr.decode("utf-8", errors="replace")
    say = judge(hook, done.returncode, stdout, stderr, done.timed_out)
    if hook.run_async:
        # Claude Code's async hooks cannot block or decide: what they say is context only.
        say = Say(context=say.context, system_message=say.system_message, reason=say.reason)
    shown = stdout + (("\n[stderr]\n" + stderr) if stderr.strip() else "")
    return record(
        exit_code=done.returncode,
        timed_out=done.timed_out,
        decision=say.decision,
        reason=_clip(say.reason),
        output=_clip(shown.strip()),
        context=say.context,
        updated_input=say.updated_input,
        system_message=_clip(say.system_message),
    )


def _same(hook: ShellHook) -> tuple[str, tuple[str, ...] | None, str | None] | None:
    """What makes two Claude Code handlers the same one (ours always run as written)."""
    return (hook.command, hook.args, hook.plugin_root) if hook.claude else None


async def run_hooks(hooks: Sequence[ShellHook], ev: HookEvent) -> HookOutcome:
    """Run the hooks of `ev.event` that apply, in order; later ones see an updated input.

    The same handler written in two files runs once, as in Claude Code.
    """
    outcome = HookOutcome()
    seen: set[tuple[str, tuple[str, ...] | None, str | None]] = set()
    for hook in hooks:
        key = _same(hook)
        if hook.event != ev.event or key in seen or not hook.applies(ev.payload()):
            continue
        if key is not None:
            seen.add(key)
        run = await run_one(hook, ev)
        outcome.add(run)
        if run.updated_input is not None:
            ev = replace(ev, tool_input=run.updated_input)
    return outcome
