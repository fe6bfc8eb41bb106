"""How rows read: as `--json` objects and as the tables a person sees. Pure.

The tables behind them, and what each time means: ARCHITECTURE.md, "State".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agent_threads.spawn import format_runtime

if TYPE_CHECKING:  # records only as types here: `ps` imports SQLAlchemy when it reads
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


def thread_json(t: ThreadRecord) -> dict[str, Any]:
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
    return data


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
