"""How rows read: as `--json` objects and as the tables a person sees. Pure.

The tables behind them, and what each time means: ARCHITECTURE.md, "State".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agent_threads.spawn import format_runtime

if TYPE_CHECKING:  # records only as types here: `ps` imports SQLAlchemy when it reads
    from state.entries import EntryRecord
    from state.fires import FireRecord
    from state.processes import ProcessRecord
    from state.threads import ThreadRecord


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


def local(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts).strftime("%H:%M:%S")


def thread_ref(thread_id: int | None) -> str | None:
    return None if thread_id is None else f"t{thread_id}"


def process_json(p: ProcessRecord) -> dict[str, Any]:
    return {
        "id": p.id,
        "name": p.name,
        "command": p.command,
        "argv": json.loads(p.argv),
        "cwd": p.cwd,
        "pid": p.pid,
        "state": "running" if p.state == "starting" else p.state,
        "exit_code": p.exit_code,
        "signal": p.signal,
        "result": p.result,
        "reason": p.end_reason,
        "started_at": iso(p.started_at),
        "ended_at": iso(p.ended_at),
        "depth": p.depth,
        "parent_thread": thread_ref(p.parent_thread_id),
    }


def thread_json(
    t: ThreadRecord, *, full: bool = False, entries: Sequence[EntryRecord] | None = None
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": thread_ref(t.id),
        "process_id": t.process_id,
        "hook": t.hook,
        "trigger": t.trigger,
        "depth": t.depth,
        "status": t.status,
        "created_at": iso(t.created_at),
        "not_before": iso(t.not_before),
        "ended_at": iso(t.ended_at),
        "model": t.model,
        "waiting": t.waiting,
        "error": t.error,
        "turns": t.turns,
    }
    if full:
        items = list(entries or [])
        data["prompt"] = t.prompt
        data["entries"] = [{"seq": e.seq, "kind": e.kind, "at": iso(e.at), **e.data} for e in items]
        data["usage"] = usage_json(items)
    return data


def usage_json(entries: Sequence[EntryRecord]) -> dict[str, int]:
    """Tokens over all model replies, as the providers reported them."""
    total = {"input_tokens": 0, "output_tokens": 0, "model_calls": 0}
    for e in entries:
        if e.kind == "assistant":
            total["model_calls"] += 1
            u = e.data.get("usage") or {}
            total["input_tokens"] += int(u.get("input_tokens", 0))
            total["output_tokens"] += int(u.get("output_tokens", 0))
    return total


def fire_json(f: FireRecord) -> dict[str, Any]:
    return {
        "id": f.id,
        "process_id": f.process_id,
        "hook": f.hook,
        "trigger": f.trigger,
        "at": iso(f.at),
        "detail": f.detail,
        "exit_code": f.exit_code,
        "spawned": f.spawned,
        "reason": f.reason,
        "thread_id": thread_ref(f.thread_id),
    }


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*headers)] + [fmt.format(*r) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def process_table(rows: Sequence[ProcessRecord], now: float) -> str:
    body = []
    for p in rows:
        end = p.ended_at if p.ended_at is not None else now
        code = "-" if p.exit_code is None else str(p.exit_code)
        if p.signal:
            code = f"{code} ({p.signal})"
        elif p.end_reason:
            code = f"{code} ({p.end_reason})"
        state = "running" if p.state == "starting" else p.state
        body.append(
            [
                str(p.id),
                _clip(p.name, 20),
                state,
                str(p.pid or "-"),
                code,
                local(p.started_at),
                format_runtime(end - p.started_at),
                str(p.depth),
                _clip(p.command, 60),
            ]
        )
    headers = ["ID", "NAME", "STATE", "PID", "EXIT", "STARTED", "RUNTIME", "DEPTH", "COMMAND"]
    return table(headers, body)


def thread_table(rows: Sequence[ThreadRecord], now: float) -> str:
    body = []
    for t in rows:
        status = t.status
        if status == "queued" and t.not_before > now + 0.5:
            status_text = f"queued until {local(t.not_before)}"
        else:
            status_text = status
        detail = t.waiting or t.error or ""
        body.append(
            [
                thread_ref(t.id) or "",
                str(t.process_id or "-"),
                t.hook or "-",
                t.trigger,
                str(t.depth),
                status_text,
                local(t.created_at),
                _clip(detail, 70),
            ]
        )
    headers = ["ID", "PROCESS", "HOOK", "TRIGGER", "DEPTH", "STATUS", "CREATED", "DETAIL"]
    return table(headers, body)


def fire_table(rows: Sequence[FireRecord]) -> str:
    body = []
    for f in rows:
        outcome = f"spawned {thread_ref(f.thread_id)}" if f.spawned else f"refused: {f.reason}"
        body.append(
            [
                str(f.id),
                str(f.process_id),
                f.hook,
                f.trigger,
                local(f.at),
                outcome,
                _clip(f.detail, 60),
            ]
        )
    return table(["ID", "PROCESS", "HOOK", "TRIGGER", "AT", "OUTCOME", "DETAIL"], body)


def thread_head(t: ThreadRecord) -> str:
    where = (
        f"process {t.process_id}  hook {t.hook}  trigger {t.trigger}"
        if t.process_id is not None
        else f"trigger {t.trigger} (asked by a person)"
    )
    lines = [
        f"thread {thread_ref(t.id)}  status {t.status}  depth {t.depth}"
        + (f"  model {t.model}" if t.model else ""),
        where,
        f"created {iso(t.created_at)}  not before {iso(t.not_before)}",
    ]
    if t.waiting:
        lines.append(f"waiting for approval to run {t.waiting}")
    if t.error:
        lines.append(f"error: {t.error}")
    return "\n".join(lines)


def _indent(text: str, limit: int | None) -> list[str]:
    lines = text.rstrip("\n").split("\n") if text else []
    if limit is not None and len(lines) > limit:
        lines = [*lines[:limit], f"… ({len(lines) - limit} more lines; thread show has all)"]
    return [f"    {ln}" for ln in lines]


def _args(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False)


def _assistant(e: EntryRecord, d: dict[str, Any], limit: int | None) -> list[str]:
    out = [f"[{local(e.at)}] assistant ({d.get('model', '?')}):"]
    out += _indent(str(d.get("content") or ""), limit)
    return out + [f"  -> {c['name']} {_args(c.get('arguments') or {})}" for c in d["tool_calls"]]


def _approval(d: dict[str, Any]) -> list[str]:
    by = {"user": "a person", "hook": "a PreToolUse hook"}.get(
        str(d.get("by")), "the permission rules"
    )
    words = {"ask": "needs approval", "approved": "approved", "denied": "denied"}
    why = f": {d['reason']}" if d.get("reason") else ""
    return [f"  ?? {d['name']} {words.get(d['decision'], d['decision'])} by {by}{why}"]


def _command_result(d: dict[str, Any], limit: int | None) -> list[str]:
    mark = "" if d.get("ok") else " (failed)"
    out = [f"  <- /{d['name']}{mark}", *_indent(str(d.get("output") or ""), limit)]
    return out + [f"    note: {n}" for n in d.get("notes") or []]


_Render = Callable[["EntryRecord", dict[str, Any], "int | None"], list[str]]
_RENDER: dict[str, _Render] = {
    "user": lambda e, d, n: [f"[{local(e.at)}] user:", *_indent(str(d["text"]), n)],
    "assistant": _assistant,
    "tool_result": lambda e, d, n: [
        f"  <- {d['name']} [{d['status']}]",
        *_indent(str(d["output"]), n),
    ],
    "approval": lambda e, d, n: _approval(d),
    "note": lambda e, d, n: [f"  -- {d['text']}"],
    "hook": lambda e, d, n: hook_lines(d),
    "injected": lambda e, d, n: [
        f"  ++ {d['event']} hook added a {d['role']} message:",
        *_indent(str(d["text"]), n),
    ],
    "retry": lambda e, d, n: [f"  -- {d['event']} hook asked for another answer ({d['by']})"],
    "final": lambda e, d, n: [
        f"  -- final answer rewritten by {d['by']}:",
        *_indent(str(d["content"]), n),
    ],
    "command": lambda e, d, n: [
        f"[{local(e.at)}] command: /{d['name']} {d.get('args') or ''}".rstrip()
    ],
    "command_result": lambda e, d, n: _command_result(d, n),
    "system_hook": lambda e, d, n: ["  << system hooks:", *_indent(str(d["text"]), n)],
    "context": lambda e, d, n: [
        f"  ++ {d['event']} hook added to the context:",
        *_indent(str(d["text"]), n),
    ],
    "tool_pid": lambda e, d, n: [],  # bookkeeping: what to kill if the daemon dies mid-call
}
_DETAIL: dict[str, _Render] = {  # shown by `thread show`, not while following
    "tool_start": lambda e, d, n: [f"  .. {d['name']} started"],
    "custom": lambda e, d, n: [f"  .. custom entry {d['type']}: {_args(d['data'])}"],
}


def entry_lines(e: EntryRecord, *, full: bool = True) -> list[str]:
    """How one transcript entry reads for a person."""
    d, kind = e.data, e.kind
    limit = None if full else 12
    if kind in _DETAIL:
        return _DETAIL[kind](e, d, limit) if full else []
    render = _RENDER.get(kind)
    return render(e, d, limit) if render else [f"  {kind}: {_args(d)}"]


def hook_lines(d: dict[str, Any]) -> list[str]:
    """One shell hook run: which hook, on what, how long, how it ended, what it decided."""
    how = "timed out" if d.get("timed_out") else f"exit {d.get('exit_code')}"
    if d.get("decision") == "skipped":
        how = "skipped (condition not met)"
    on = f" on {d['matcher']}" if d.get("matcher") else ""
    said = f" -> {d['decision']}" if d.get("decision") not in (None, "skipped") else ""
    why = f": {d['reason']}" if d.get("reason") else ""
    ms = d.get("duration_ms", 0)
    out = [f"  ## {d['event']} hook `{d['hook']}`{on}: {how} in {ms} ms{said}{why}"]
    if d.get("updated_input") is not None:
        out.append(f"     input rewritten to {_args(d['updated_input'])}")
    return out


def thread_text(t: ThreadRecord, entries: Sequence[EntryRecord]) -> str:
    u = usage_json(entries)
    lines = [
        thread_head(t),
        f"usage: {u['model_calls']} model calls, {u['input_tokens']} input tokens, "
        f"{u['output_tokens']} output tokens",
        "",
        *prompt_lines(t),
    ]
    for e in entries:
        lines += entry_lines(e)
    if not entries:
        lines.append("(no entries yet)")
    return "\n".join(lines + final_lines(t, entries))


def prompt_lines(t: ThreadRecord) -> list[str]:
    """The system prompt, then the heading the transcript's entries follow."""
    return ["--- prompt ---", t.prompt.rstrip("\n"), "--- transcript ---"]


def final_lines(t: ThreadRecord, entries: Sequence[EntryRecord]) -> list[str]:
    """The final answer of a completed thread, under its heading; nothing otherwise."""
    final = _final_answer(t, entries)
    return [] if final is None else ["--- final answer ---", final]


def _final_answer(t: ThreadRecord, entries: Sequence[EntryRecord]) -> str | None:
    if t.status != "completed":
        return None
    for e in reversed(entries):
        if e.kind == "final":
            return str(e.data["content"])
        if e.kind == "assistant":
            return str(e.data.get("content") or "(no text)")
    return None
