"""Shell hooks (Claude Code's command hooks) as one family of the hook interface.

The events of Claude Code's hooks reference that mean something in a headless thread
(agent_threads/hooks/ccevents.py has the table):

- SessionStart when a thread starts (source startup) or runs again (source resume; hooks in
  our own shape run once per thread), its output going into the context;
- UserPromptSubmit on every prompt that enters the thread (a block fails the thread);
- PreToolUse before the permission rules judge a call (deny, ask, allow, rewrite, stop);
- PermissionRequest when a call needs a person, which it may answer;
- Notification (permission_prompt) when the thread waits for approval, (agent_completed)
  when it ends;
- PostToolUse or PostToolUseFailure after each result is saved;
- Stop, or SubagentStop for a thread started by another thread's process, on the final
  answer: a block sends the model back to work, at most 8 times in a row;
- StopFailure when the model API failed the thread; SessionEnd when it ends.

Every hook run is saved as a `hook` entry; what a hook adds to the context is saved as a
`context` entry, which the model reads as a user message. Claude Code's words stop here:
the loop gets a `Decision`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio

from agent_threads.hooks.base import Action, Decision, Hooks, Turn, go_on
from agent_threads.hooks.cctranscript import TranscriptFile
from agent_threads.hooks.shellrun import HookEvent, HookOutcome, run_hooks, run_one
from agent_threads.hooks.shellspec import ShellHook
from agent_threads.messages import AssistantMessage, ToolCall, ToolResult
from agent_threads.transcript import (
    Entry,
    HookContext,
    HookRan,
    Note,
    RetryAsked,
    ToolOutput,
    ToolStart,
    UserText,
)
from state.threads import ThreadStatus

log = logging.getLogger("supervise.threads")

# Claude Code overrides a Stop hook after 8 blocks in a row and lets the turn end.
STOP_BLOCK_CAP = 8


@dataclass(frozen=True)
class ShellSite:
    """Where the thread's shell hooks run and what they are told about it."""

    cwd: Path
    env: Mapping[str, str]
    agent_name: str
    transcript_path: Path | None = None  # the thread as JSONL, kept current for hooks
    env_file: Path | None = None  # CLAUDE_ENV_FILE: what SessionStart hooks export
    model: str | None = None
    # Set for a thread started by another thread's process: SubagentStop, not Stop.
    agent_type: str | None = None


@dataclass
class _Pending:
    """An async hook running in the background; its run is saved at a later point."""

    hook: ShellHook
    extra: dict[str, Any]
    done: anyio.Event = field(default_factory=anyio.Event)
    run: HookRan | None = None


class ShellHooks(Hooks):
    def __init__(self, hooks: Sequence[ShellHook], site: ShellSite) -> None:
        self.hooks = tuple(h for h in hooks if not h.run_async)
        self.background = tuple(h for h in hooks if h.run_async)
        self.site = site
        self.events = {h.event for h in hooks}
        self.transcript: TranscriptFile | None = None
        self.pending: list[_Pending] = []

    def _event(self, turn: Turn, event: str, **kw: Any) -> HookEvent:
        return HookEvent(
            event=event,
            session_id=f"t{turn.thread_id}",
            cwd=self.site.cwd,
            env=self.site.env,
            transcript_path=self.site.transcript_path,
            agent_name=self.site.agent_name,
            **kw,
        )

    def _sync(self, turn: Turn) -> None:
        """Bring the JSONL transcript up to date: a hook reads the thread as it is."""
        path = self.site.transcript_path
        if path is None:
            return
        if self.transcript is None:
            self.transcript = TranscriptFile(path, f"t{turn.thread_id}", self.site.cwd)
        try:
            self.transcript.sync(turn.entries)
        except OSError as exc:
            log.warning("thread t%d: cannot write %s: %s", turn.thread_id, path, exc)

    async def _run(self, turn: Turn, ev: HookEvent, **extra: Any) -> HookOutcome:
        if ev.event not in self.events:
            return HookOutcome()
        self._sync(turn)
        await self._start_background(turn, ev, extra)
        outcome = await run_hooks(self.hooks, ev)
        for run in outcome.runs:
            await turn.save(replace(run, **extra))
        for text in outcome.context:
            await turn.save(HookContext(ev.event, text))
        return outcome

    async def _start_background(self, turn: Turn, ev: HookEvent, extra: dict[str, Any]) -> None:
        """Start the async hooks of `ev` (Claude Code's `async: true`): they never block;
        what they say reaches the model at the next model call."""
        payload = ev.payload()
        for hook in self.background:
            if hook.event != ev.event or not hook.applies(payload):
                continue
            pending = _Pending(hook, extra)
            self.pending.append(pending)

            async def run(p: _Pending = pending) -> None:
                try:
                    p.run = await run_one(p.hook, ev)
                except Exception:  # never take the thread down with it
                    log.exception("async hook %s failed", p.hook.label)
                finally:
                    p.done.set()

            if turn.background is None:
                await run()
            else:
                turn.background.start_soon(run)

    async def _collect(self, turn: Turn, *, wait_rewake: bool = False) -> bool:
        """Save what finished async hooks said; True if an `asyncRewake` hook exited 2 (its
        stderr is then in the context: the model must see it)."""
        if wait_rewake:
            for p in list(self.pending):
                if p.hook.async_rewake:
                    await p.done.wait()
        woke = False
        for p in [p for p in self.pending if p.done.is_set()]:
            self.pending.remove(p)
            if p.run is None:
                continue
            await turn.save(replace(p.run, **p.extra))
            if p.run.context:
                await turn.save(HookContext(p.run.event, p.run.context))
            if p.hook.async_rewake and p.run.exit_code == 2:
                woke = True
                why = p.run.reason or p.run.output or "an async hook exited 2"
                await turn.save(HookContext(p.run.event, why))
        return woke

    async def session_start(self, *, turn: Turn) -> Decision[None]:
        """startup the first time; resume on later runs, for hooks in Claude Code's shape
        (ours run once per thread, as documented before)."""
        if "SessionStart" not in self.events:
            return go_on()
        again = _ran(turn, "SessionStart")
        hooks = [h for h in self.hooks if h.claude] if again else list(self.hooks)
        if not any(h.event == "SessionStart" for h in (*hooks, *self.background)):
            return go_on()
        if self.site.env_file is not None:
            self.site.env_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        ev = self._event(
            turn,
            "SessionStart",
            source="resume" if again else "startup",
            model=self.site.model,
            env_file=self.site.env_file,
        )
        self._sync(turn)
        await self._start_background(turn, ev, {})
        outcome = await run_hooks(hooks, ev)
        for run in outcome.runs:
            await turn.save(run)
        for text in outcome.context:
            await turn.save(HookContext("SessionStart", text))
        return _stopped(outcome, "SessionStart")

    async def new_input(self, *, turn: Turn) -> Decision[None]:
        """UserPromptSubmit for each prompt not yet seen; a block fails the thread. Before
        every model call: what async hooks said since is saved for the model to read."""
        await self._collect(turn)
        if "UserPromptSubmit" not in self.events:
            return go_on()
        seen = {e.body.prompt_seq for e in turn.entries if isinstance(e.body, HookRan)}
        for e in [e for e in turn.entries if isinstance(e.body, UserText)]:
            if e.seq in seen:
                continue
            assert isinstance(e.body, UserText)
            ev = self._event(turn, "UserPromptSubmit", prompt=e.body.text)
            outcome = await self._run(turn, ev, prompt_seq=e.seq)
            if outcome.stop or outcome.decision == "deny":
                why = (
                    outcome.stop or f"a UserPromptSubmit hook blocked the prompt: {outcome.reason}"
                )
                return Decision(Action.FAIL, reason=why, source="UserPromptSubmit")
        return go_on()

    async def before_tool(
        self, *, turn: Turn, call: ToolCall, approved: bool
    ) -> Decision[ToolCall | ToolResult]:
        """PreToolUse: deny > ask > allow; a rewrite goes back to the permission rules."""
        ev = self._event(
            turn, "PreToolUse", tool_name=call.name, tool_input=call.arguments, tool_use_id=call.id
        )
        outcome = await self._run(turn, ev, call_id=call.id)
        if outcome.stop:
            return Decision(
                Action.FAIL,
                reason=f"stopped by a PreToolUse hook: {outcome.stop}",
                source="PreToolUse",
            )
        if outcome.decision == "deny":
            text = f"Blocked by a PreToolUse hook: {outcome.reason}"
            denied = ToolResult(call.id, call.name, text, is_error=True)
            return Decision(Action.DENY, denied, outcome.reason, "PreToolUse")
        updated = (
            None
            if outcome.updated_input is None
            else ToolCall(call.id, call.name, outcome.updated_input)
        )
        if outcome.decision == "ask" and not approved:
            why = outcome.reason or "a PreToolUse hook asks for approval"
            return Decision(Action.ASK, updated, why, "PreToolUse")
        if outcome.decision == "allow":
            return Decision(Action.ALLOW, updated, outcome.reason, "PreToolUse")
        return go_on(updated)

    async def permission_request(
        self, *, turn: Turn, call: ToolCall, reason: str
    ) -> Decision[ToolCall | ToolResult]:
        ev = self._event(turn, "PermissionRequest", tool_name=call.name, tool_input=call.arguments)
        outcome = await self._run(turn, ev, call_id=call.id)
        if outcome.stop:
            return Decision(
                Action.FAIL,
                reason=f"stopped by a PermissionRequest hook: {outcome.stop}",
                source="PermissionRequest",
            )
        if outcome.decision == "deny":
            text = f"Permission denied by a PermissionRequest hook: {outcome.reason or 'no reason'}"
            return Decision(
                Action.DENY,
                ToolResult(call.id, call.name, text, is_error=True),
                outcome.reason,
                "PermissionRequest",
            )
        if outcome.decision == "allow":
            updated = outcome.updated_input
            value = call if updated is None else ToolCall(call.id, call.name, updated)
            return Decision(Action.ALLOW, value, outcome.reason, "PermissionRequest")
        return go_on()

    async def waiting(self, *, turn: Turn, call: ToolCall, reason: str) -> None:
        await self._notify(
            turn,
            "permission_prompt",
            "Permission needed",
            f"thread t{turn.thread_id} needs your approval to use {call.name}: {reason}; "
            f"supervise approve t{turn.thread_id} (or deny)",
        )

    async def _notify(self, turn: Turn, kind: str, title: str, message: str) -> None:
        ev = self._event(turn, "Notification", notification_type=kind, title=title, message=message)
        await self._run(turn, ev)

    async def after_result(
        self, *, turn: Turn, call: ToolCall, result: ToolResult
    ) -> Decision[None]:
        """PostToolUse (or PostToolUseFailure), once the result is saved."""
        saved, ms = _saved_result(turn.entries, call.id)
        common: dict[str, Any] = {
            "tool_name": call.name,
            "tool_input": call.arguments,
            "tool_use_id": call.id,
            "duration_ms": ms,
        }
        if result.is_error:
            ev = self._event(
                turn,
                "PostToolUseFailure",
                error=result.text,
                is_interrupt=False,
                tool_output=result.text,
                **common,
            )
        else:
            data = saved.data if saved is not None else None
            ev = self._event(
                turn, "PostToolUse", tool_output=result.text, tool_response=data, **common
            )
        outcome = await self._run(turn, ev, call_id=call.id)
        if outcome.decision == "deny" and outcome.reason:
            # A block or exit 2 after a tool: the model reads why, next to the result.
            await turn.save(HookContext(ev.event, outcome.reason))
        if outcome.stop:
            return Decision(
                Action.FAIL,
                reason=f"stopped by a {ev.event} hook: {outcome.stop}",
                source=ev.event,
            )
        return go_on()

    async def before_final(
        self, *, turn: Turn, answer: AssistantMessage
    ) -> Decision[AssistantMessage]:
        """Stop (SubagentStop): a block, or context, sends the model back to work."""
        if await self._collect(turn, wait_rewake=True):
            return Decision(
                Action.RETRY, reason="an asyncRewake hook exited 2", source="asyncRewake"
            )
        event = "SubagentStop" if self.site.agent_type is not None else "Stop"
        if event not in self.events:
            return go_on()
        blocks = _blocks_in_a_row(turn.entries, event)
        if blocks >= STOP_BLOCK_CAP:
            await turn.save(
                Note(f"{event} hooks blocked {blocks} times in a row; the thread ends anyway")
            )
            return go_on()
        extra: dict[str, Any] = {}
        if self.site.agent_type is not None:
            extra = {"agent_type": self.site.agent_type, "agent_id": f"t{turn.thread_id}"}
        ev = self._event(
            turn,
            event,
            stop_hook_active=blocks > 0,
            last_assistant_message=answer.content or "",
            **extra,
        )
        before = len(turn.entries)
        outcome = await self._run(turn, ev)
        if outcome.decision == "deny":
            why = outcome.reason or f"a {event} hook asks you to continue"
            await turn.save(HookContext(event, why))
        elif not any(isinstance(e.body, HookContext) for e in turn.entries[before:]):
            return go_on()
        return Decision(Action.RETRY, reason=f"{event} hook: continue", source=event)

    async def model_failed(self, *, turn: Turn, error: str, message: str) -> None:
        ev = self._event(
            turn,
            "StopFailure",
            error=error,
            error_details=message,
            last_assistant_message=f"API Error: {message}",
        )
        await self._run(turn, ev)

    async def session_end(self, *, turn: Turn, status: ThreadStatus) -> None:
        await self._collect(turn)
        for p in self.pending:  # killed with the run, as `claude -p` kills them at teardown
            await turn.save(Note(f"async hook {p.hook.label!r} was still running; killed"))
        self.pending.clear()
        await self._notify(
            turn, "agent_completed", f"Thread {status}", f"thread t{turn.thread_id} {status}"
        )
        await self._run(turn, self._event(turn, "SessionEnd", reason="other"))


def _saved_result(entries: Sequence[Entry], call_id: str) -> tuple[ToolOutput | None, int | None]:
    """The saved result of a call and how long it ran (ms), from its entries."""
    start: float | None = None
    for e in entries:
        b = e.body
        if isinstance(b, ToolStart) and b.call_id == call_id:
            start = e.at
        elif isinstance(b, ToolOutput) and b.call_id == call_id:
            ms = None if start is None else max(0, int((e.at - start) * 1000))
            return b, ms
    return None, None


def _blocks_in_a_row(entries: Sequence[Entry], event: str) -> int:
    """How many times `event` hooks sent the model back since the last prompt."""
    count = 0
    for e in reversed(entries):
        if isinstance(e.body, UserText):
            break
        if isinstance(e.body, RetryAsked) and e.body.by == event:
            count += 1
    return count


def _stopped(outcome: HookOutcome, event: str) -> Decision[None]:
    if outcome.stop:
        return Decision(
            Action.FAIL, reason=f"stopped by a {event} hook: {outcome.stop}", source=event
        )
    return go_on()


def _ran(turn: Turn, event: str) -> bool:
    return any(isinstance(e.body, HookRan) and e.body.event == event for e in turn.entries)
