"""A thread's transcript: typed entries, and the pure decisions made from them.

Every model reply and tool result is an entry saved before the next step, so a thread can
always be rebuilt from its entries alone: `next_step` says what to do next, `conversation`
says what the model (and every lifecycle hook) sees. Both are pure.

Each kind of entry is a frozen dataclass (a tagged union, `Body`) with its JSON form; the
state layer stores the kind and that JSON, and `decode` reads it back, old transcripts
included (a missing key takes its default). What each kind means:

- UserText (user): what a person (or the hook that fired) said.
- AssistantReply (assistant): the model's text and tool calls, with the model and usage.
- ToolStart (tool_start): the call is about to run (in flight until its result).
- ToolPid (tool_pid): a subprocess the call started (its group), to kill after a crash.
- ToolOutput (tool_result): a call's result; status ok|error|denied|interrupted.
- Approval (approval): a permission decision: ask|approved|denied, by rule|user|hook.
- Note (note): what happened to the thread itself (resumed, budget reached).
- HookRan (hook): one shell hook's run.
- HookContext (context): what a shell hook added to the conversation.
- Reminder (system_hook): the `<system-hook>` reminders after a batch of results.
- Injected (injected): a message a lifecycle hook's effect added.
- RetryAsked (retry): BEFORE_FINAL_RESPONSE asked for another model call.
- FinalRewritten (final): the final answer as a lifecycle hook rewrote it.
- CommandSent / CommandAnswered (command / command_result): a `/command` and its answer.
- Custom (custom): an extension's own entry (never shown to the model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, get_args

from agent_threads.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    Thinking,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from state.entries import EntryKind, EntryRecord

ResultStatus = Literal["ok", "error", "denied", "interrupted"]
ApprovalDecision = Literal["ask", "approved", "denied"]
DecidedBy = Literal["rule", "user", "hook"]


def _text(d: Mapping[str, Any], key: str) -> str:
    value = d.get(key)
    return "" if value is None else str(value)


def _opt_text(d: Mapping[str, Any], key: str) -> str | None:
    value = d.get(key)
    return None if value is None else str(value)


def _opt_int(d: Mapping[str, Any], key: str) -> int | None:
    value = d.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _compact(data: dict[str, Any]) -> dict[str, Any]:
    """Optional fields are left out of the saved JSON when they hold nothing."""
    return {k: v for k, v in data.items() if v is not None}


def call_json(call: ToolCall) -> dict[str, Any]:
    return _compact(
        {"id": call.id, "name": call.name, "arguments": call.arguments, "invalid": call.invalid}
    )


def call_of(d: Mapping[str, Any]) -> ToolCall:
    args = d.get("arguments")
    return ToolCall(
        _text(d, "id"),
        _text(d, "name"),
        dict(args) if isinstance(args, dict) else {},
        _opt_text(d, "invalid"),
    )


def thinking_json(t: Thinking) -> dict[str, Any]:
    if t.redacted is not None:
        return {"redacted": t.redacted}
    return {"text": t.text, "signature": t.signature}


def thinking_of(d: Mapping[str, Any]) -> Thinking:
    if d.get("redacted") is not None:
        return Thinking(redacted=_text(d, "redacted"))
    return Thinking(_text(d, "text"), _text(d, "signature"))


def hook_output(event: str, text: str) -> str:
    """What a shell hook added, as the model reads it: marked as a hook's, not a person's."""
    return f'<hook-output event="{event}">\n{text}\n</hook-output>'


# -- the entry kinds ---------------------------------------------------------------------


@dataclass(frozen=True)
class UserText:
    kind: ClassVar[EntryKind] = "user"
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> UserText:
        return cls(_text(d, "text"))


@dataclass(frozen=True)
class AssistantReply:
    kind: ClassVar[EntryKind] = "assistant"
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    model: str = ""
    usage: Usage | None = None
    stop_reason: str | None = None
    # The reasoning the provider requires back with this reply (kept so a resumed thread
    # sends it too); absent from transcripts saved before it was kept.
    thinking: tuple[Thinking, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "content": self.content,
            "tool_calls": [call_json(c) for c in self.tool_calls],
            "model": self.model,
        }
        if self.usage is not None:
            data["usage"] = {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
            }
        if self.stop_reason:
            data["stop_reason"] = self.stop_reason
        if self.thinking:
            data["thinking"] = [thinking_json(t) for t in self.thinking]
        return data

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> AssistantReply:
        u = d.get("usage")
        usage = (
            Usage(int(u.get("input_tokens") or 0), int(u.get("output_tokens") or 0))
            if isinstance(u, dict)
            else None
        )
        calls = tuple(call_of(c) for c in d.get("tool_calls") or [] if isinstance(c, dict))
        thinking = tuple(thinking_of(t) for t in d.get("thinking") or [] if isinstance(t, dict))
        return cls(
            _text(d, "content"),
            calls,
            _text(d, "model"),
            usage,
            _opt_text(d, "stop_reason"),
            thinking,
        )


@dataclass(frozen=True)
class ToolStart:
    kind: ClassVar[EntryKind] = "tool_start"
    call_id: str
    name: str

    def to_json(self) -> dict[str, Any]:
        return {"call_id": self.call_id, "name": self.name}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ToolStart:
        return cls(_text(d, "call_id"), _text(d, "name"))


@dataclass(frozen=True)
class ToolPid:
    kind: ClassVar[EntryKind] = "tool_pid"
    call_id: str
    name: str
    pid: int
    started: float | None  # with the pid, what identifies the process (pids are reused)

    def to_json(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "name": self.name,
            "pid": self.pid,
            "started": self.started,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ToolPid:
        started = d.get("started")
        return cls(
            _text(d, "call_id"),
            _text(d, "name"),
            int(d.get("pid") or 0),
            float(started) if isinstance(started, int | float) else None,
        )


@dataclass(frozen=True)
class ToolOutput:
    kind: ClassVar[EntryKind] = "tool_result"
    call_id: str
    name: str
    output: str
    is_error: bool = False
    status: ResultStatus = "ok"
    data: dict[str, Any] | None = None  # the tool's structured extras (exit code, path...)

    def to_json(self) -> dict[str, Any]:
        return _compact(
            {
                "call_id": self.call_id,
                "name": self.name,
                "output": self.output,
                "is_error": self.is_error,
                "status": self.status,
                "data": self.data,
            }
        )

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ToolOutput:
        status = d.get("status")
        data = d.get("data")
        return cls(
            _text(d, "call_id"),
            _text(d, "name"),
            _text(d, "output"),
            bool(d.get("is_error")),
            status if status in ("ok", "error", "denied", "interrupted") else "ok",
            dict(data) if isinstance(data, dict) else None,
        )


@dataclass(frozen=True)
class Approval:
    kind: ClassVar[EntryKind] = "approval"
    call_id: str
    name: str
    decision: ApprovalDecision
    by: DecidedBy = "rule"
    reason: str = ""
    rule: str | None = None
    # The input a hook rewrote the call to, when it differs from what the model sent: what
    # the person approves and what then runs.
    arguments: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return _compact(
            {
                "call_id": self.call_id,
                "name": self.name,
                "decision": self.decision,
                "by": self.by,
                "reason": self.reason or None,
                "rule": self.rule,
                "arguments": self.arguments,
            }
        )

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Approval:
        decision = d.get("decision")
        by = d.get("by")
        return cls(
            _text(d, "call_id"),
            _text(d, "name"),
            decision if decision in ("ask", "approved", "denied") else "ask",
            by if by in ("rule", "user", "hook") else "rule",
            _text(d, "reason"),
            _opt_text(d, "rule"),
            dict(d["arguments"]) if isinstance(d.get("arguments"), dict) else None,
        )


@dataclass(frozen=True)
class Note:
    kind: ClassVar[EntryKind] = "note"
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Note:
        return cls(_text(d, "text"))


@dataclass(frozen=True)
class HookRan:
    """One shell hook's run: which hook, on what, how it ended, what it decided."""

    kind: ClassVar[EntryKind] = "hook"
    event: str
    hook: str
    decision: str | None = None  # allow | ask | deny | stop | skipped | None (no say)
    exit_code: int | None = None
    timed_out: bool = False
    duration_ms: int = 0
    matcher: str | None = None
    source: str = ""
    reason: str = ""
    output: str = ""
    context: str = ""
    updated_input: dict[str, Any] | None = None
    call_id: str | None = None  # the tool call it ran for
    prompt_seq: int | None = None  # the user entry it ran for (UserPromptSubmit)
    system_message: str = ""  # Claude Code's systemMessage: for the person, not the model

    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in _fields(self).items() if v not in (None, "")}
        data["decision"] = self.decision
        data["timed_out"] = self.timed_out
        return data

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> HookRan:
        updated = d.get("updated_input")
        return cls(
            event=_text(d, "event"),
            hook=_text(d, "hook"),
            decision=_opt_text(d, "decision"),
            exit_code=_opt_int(d, "exit_code"),
            timed_out=bool(d.get("timed_out")),
            duration_ms=int(d.get("duration_ms") or 0),
            matcher=_opt_text(d, "matcher"),
            source=_text(d, "source"),
            reason=_text(d, "reason"),
            output=_text(d, "output"),
            context=_text(d, "context"),
            updated_input=dict(updated) if isinstance(updated, dict) else None,
            call_id=_opt_text(d, "call_id"),
            prompt_seq=_opt_int(d, "prompt_seq"),
            system_message=_text(d, "system_message"),
        )


@dataclass(frozen=True)
class HookContext:
    kind: ClassVar[EntryKind] = "context"
    event: str
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"event": self.event, "text": self.text}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> HookContext:
        return cls(_text(d, "event"), _text(d, "text"))


@dataclass(frozen=True)
class Reminder:
    kind: ClassVar[EntryKind] = "system_hook"
    text: str
    messages: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "messages": list(self.messages)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Reminder:
        return cls(_text(d, "text"), tuple(str(m) for m in d.get("messages") or []))


@dataclass(frozen=True)
class Injected:
    kind: ClassVar[EntryKind] = "injected"
    role: Literal["user", "system"]
    text: str
    event: str

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "text": self.text, "event": self.event}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Injected:
        role: Literal["user", "system"] = "system" if d.get("role") == "system" else "user"
        return cls(role, _text(d, "text"), _text(d, "event"))


@dataclass(frozen=True)
class RetryAsked:
    kind: ClassVar[EntryKind] = "retry"
    event: str
    by: str

    def to_json(self) -> dict[str, Any]:
        return {"event": self.event, "by": self.by}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RetryAsked:
        return cls(_text(d, "event"), _text(d, "by"))


@dataclass(frozen=True)
class FinalRewritten:
    kind: ClassVar[EntryKind] = "final"
    content: str
    by: str

    def to_json(self) -> dict[str, Any]:
        return {"content": self.content, "by": self.by}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FinalRewritten:
        return cls(_text(d, "content"), _text(d, "by"))


@dataclass(frozen=True)
class CommandSent:
    kind: ClassVar[EntryKind] = "command"
    name: str
    args: str = ""
    choice: int | None = None  # `supervise send --choice N`: the answer to ui.select

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "args": self.args, "choice": self.choice}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CommandSent:
        return cls(_text(d, "name"), _text(d, "args"), _opt_int(d, "choice"))


@dataclass(frozen=True)
class CommandAnswered:
    kind: ClassVar[EntryKind] = "command_result"
    command_seq: int
    name: str
    ok: bool
    output: str
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "command_seq": self.command_seq,
            "name": self.name,
            "ok": self.ok,
            "output": self.output,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CommandAnswered:
        return cls(
            int(d.get("command_seq") or 0),
            _text(d, "name"),
            bool(d.get("ok")),
            _text(d, "output"),
            tuple(str(n) for n in d.get("notes") or []),
        )


@dataclass(frozen=True)
class Custom:
    kind: ClassVar[EntryKind] = "custom"
    type: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "data": self.data}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Custom:
        data = d.get("data")
        return cls(_text(d, "type"), dict(data) if isinstance(data, dict) else {})


Body = (
    UserText
    | AssistantReply
    | ToolStart
    | ToolPid
    | ToolOutput
    | Approval
    | Note
    | HookRan
    | HookContext
    | Reminder
    | Injected
    | RetryAsked
    | FinalRewritten
    | CommandSent
    | CommandAnswered
    | Custom
)
# Each kind's class, from the union itself: a kind added to `Body` is decoded too.
_KINDS: dict[str, Any] = {cls.kind: cls for cls in get_args(Body)}


def _fields(body: Any) -> dict[str, Any]:
    return {k: getattr(body, k) for k in body.__dataclass_fields__}


@dataclass(frozen=True)
class Entry:
    """One saved entry: where it is in the transcript, when, and what it says."""

    seq: int
    at: float
    body: Body

    @property
    def kind(self) -> EntryKind:
        return self.body.kind

    def to_json(self) -> dict[str, Any]:
        """The form extensions read in `ctx.entries` (and `thread show --json` prints)."""
        return {"seq": self.seq, "kind": self.kind, "at": self.at, "data": self.body.to_json()}


def decode(record: EntryRecord) -> Entry:
    """A saved entry as its typed body (a missing key in an old transcript takes its default)."""
    body: Body = _KINDS[record.kind].from_json(record.data)
    return Entry(record.seq, record.at, body)


# -- what to do next ---------------------------------------------------------------------


@dataclass(frozen=True)
class CallModel:
    """Ask the model for its next reply."""


@dataclass(frozen=True)
class Finish:
    """The model answered without tool calls and nobody has said anything since."""

    answer: str


@dataclass(frozen=True)
class CheckCall:
    """A tool call not yet decided: check its permission, then run it."""

    call: ToolCall


@dataclass(frozen=True)
class RunApproved:
    """A person approved this call: run it."""

    call: ToolCall


@dataclass(frozen=True)
class RefuseCall:
    """A person denied this call: tell the model."""

    call: ToolCall
    reason: str


@dataclass(frozen=True)
class AwaitApproval:
    """The call waits for `supervise approve` or `deny`."""

    call: ToolCall


@dataclass(frozen=True)
class Interrupted:
    """The call was running when the daemon died: report it, never re-run it."""

    call: ToolCall


Step = CallModel | Finish | CheckCall | RunApproved | RefuseCall | AwaitApproval | Interrupted


def last_reply(entries: Sequence[Entry]) -> int | None:
    """The index of the last model reply, if any."""
    for i in range(len(entries) - 1, -1, -1):
        if isinstance(entries[i].body, AssistantReply):
            return i
    return None


def _call_step(call: ToolCall, after: Sequence[Entry]) -> Step | None:
    """What `call` still needs, judged from the entries after its reply (None: done)."""
    started = False
    approval: Approval | None = None
    for e in after:
        b = e.body
        if isinstance(b, ToolOutput) and b.call_id == call.id:
            return None
        if isinstance(b, ToolStart) and b.call_id == call.id:
            started = True
        elif isinstance(b, Approval) and b.call_id == call.id:
            approval = b
    if started:
        return Interrupted(call)
    if approval is None:
        return CheckCall(call)
    if approval.decision == "approved":
        return RunApproved(call)
    if approval.decision == "denied":
        return RefuseCall(call, approval.reason)
    return AwaitApproval(call)


def next_step(entries: Sequence[Entry]) -> Step:
    """What the loop does next, from the saved entries alone."""
    last = last_reply(entries)
    if last is None:
        return CallModel()
    reply, after = entries[last].body, entries[last + 1 :]
    assert isinstance(reply, AssistantReply)
    for call in reply.tool_calls:
        step = _call_step(call, after)
        if step is not None:
            return step
    if reply.tool_calls or any(isinstance(e.body, UserText | RetryAsked) for e in after):
        return CallModel()
    return Finish(reply.content)


def pending_approval(entries: Sequence[Entry]) -> ToolCall | None:
    """The call a thread waits on, if its next step is a person's decision."""
    step = next_step(entries)
    return step.call if isinstance(step, AwaitApproval) else None


# -- what the model sees -----------------------------------------------------------------


def conversation(entries: Sequence[Entry]) -> list[Message]:
    """The conversation: what the model sees, what lifecycle hooks get, in entry order.

    Each reply is followed at once by its calls' results, wherever they were saved (providers
    require it); each message keeps the `seq` of the entry it came from.
    """
    results = {e.body.call_id: e for e in entries if isinstance(e.body, ToolOutput)}
    out: list[Message] = []
    for e in entries:
        b = e.body
        if isinstance(b, UserText | Reminder):
            out.append(UserMessage(b.text, e.seq))
        elif isinstance(b, HookContext):
            out.append(UserMessage(hook_output(b.event, b.text), e.seq))
        elif isinstance(b, Injected):
            cls = SystemMessage if b.role == "system" else UserMessage
            out.append(cls(b.text, e.seq))
        elif isinstance(b, AssistantReply):
            calls = [ToolCall(c.id, c.name, dict(c.arguments), c.invalid) for c in b.tool_calls]
            out.append(AssistantMessage(b.content, calls, e.seq, list(b.thinking)))
            for c in b.tool_calls:
                r = results.get(c.id)
                if r is not None:
                    assert isinstance(r.body, ToolOutput)
                    out.append(
                        ToolResult(c.id, c.name, r.body.output, r.body.is_error, None, r.seq)
                    )
    return out


@dataclass(frozen=True)
class Totals:
    """What the model calls of a transcript cost, as the providers reported it."""

    model_calls: int = 0
    usage: Usage = field(default_factory=Usage)


def totals(entries: Sequence[Entry]) -> Totals:
    calls, usage = 0, Usage()
    for e in entries:
        if isinstance(e.body, AssistantReply):
            calls += 1
            usage = usage + (e.body.usage or Usage())
    return Totals(calls, usage)


def final_answer(entries: Sequence[Entry]) -> str | None:
    """The last answer: a hook's rewrite if there is one after the last reply."""
    for e in reversed(entries):
        if isinstance(e.body, FinalRewritten):
            return e.body.content
        if isinstance(e.body, AssistantReply):
            return e.body.content or "(no text)"
    return None
