"""How rows read: the JSON of DESIGN.md section 6 and the tables a person sees. Pure."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from agent_threads.spawn import format_runtime
from state.reader import Row


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


def local(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts).strftime("%H:%M:%S")


def thread_ref(thread_id: int | None) -> str | None:
    return None if thread_id is None else f"t{thread_id}"


def process_json(p: Row) -> dict[str, Any]:
    return {
        "id": p["id"],
        "name": p["name"],
        "command": p["command"],
        "argv": json.loads(p["argv"]),
        "cwd": p["cwd"],
        "pid": p["pid"],
        "state": "running" if p["state"] == "starting" else p["state"],
        "exit_code": p["exit_code"],
        "signal": p["signal"],
        "result": p["result"],
        "started_at": iso(p["started_at"]),
        "ended_at": iso(p["ended_at"]),
        "depth": p["depth"],
        "parent_thread": thread_ref(p["parent_thread_id"]),
    }


def thread_json(t: Row, *, full: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": thread_ref(t["id"]),
        "process_id": t["process_id"],
        "hook": t["hook"],
        "trigger": t["trigger"],
        "depth": t["depth"],
        "status": t["status"],
        "created_at": iso(t["created_at"]),
        "not_before": iso(t["not_before"]),
    }
    if full:
        data["prompt"] = t["prompt"]
        data["entries"] = []
    return data


def fire_json(f: Row) -> dict[str, Any]:
    return {
        "id": f["id"],
        "process_id": f["process_id"],
        "hook": f["hook"],
        "trigger": f["trigger"],
        "at": iso(f["at"]),
        "detail": f["detail"],
        "exit_code": f["exit_code"],
        "spawned": bool(f["spawned"]),
        "reason": f["reason"],
        "thread_id": thread_ref(f["thread_id"]),
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


def process_table(rows: Sequence[Row], now: float) -> str:
    body = []
    for p in rows:
        end = p["ended_at"] if p["ended_at"] is not None else now
        code = "-" if p["exit_code"] is None else str(p["exit_code"])
        if p["signal"]:
            code = f"{code} ({p['signal']})"
        state = "running" if p["state"] == "starting" else p["state"]
        body.append(
            [
                str(p["id"]),
                _clip(p["name"], 20),
                state,
                str(p["pid"] or "-"),
                code,
                local(p["started_at"]),
                format_runtime(end - p["started_at"]),
                str(p["depth"]),
                _clip(p["command"], 60),
            ]
        )
    headers = ["ID", "NAME", "STATE", "PID", "EXIT", "STARTED", "RUNTIME", "DEPTH", "COMMAND"]
    return table(headers, body)


def thread_table(rows: Sequence[Row], now: float) -> str:
    body = []
    for t in rows:
        status = t["status"]
        if status == "queued" and t["not_before"] > now + 0.5:
            status = f"queued until {local(t['not_before'])}"
        body.append(
            [
                thread_ref(t["id"]) or "",
                str(t["process_id"] or "-"),
                t["hook"] or "-",
                t["trigger"],
                str(t["depth"]),
                status,
                local(t["created_at"]),
            ]
        )
    return table(["ID", "PROCESS", "HOOK", "TRIGGER", "DEPTH", "STATUS", "CREATED"], body)


def fire_table(rows: Sequence[Row]) -> str:
    body = []
    for f in rows:
        outcome = (
            f"spawned {thread_ref(f['thread_id'])}" if f["spawned"] else f"refused: {f['reason']}"
        )
        body.append(
            [
                str(f["id"]),
                str(f["process_id"]),
                f["hook"],
                f["trigger"],
                local(f["at"]),
                outcome,
                _clip(f["detail"], 60),
            ]
        )
    return table(["ID", "PROCESS", "HOOK", "TRIGGER", "AT", "OUTCOME", "DETAIL"], body)


def thread_text(t: Row) -> str:
    head = [
        f"thread {thread_ref(t['id'])}  status {t['status']}  depth {t['depth']}",
        f"process {t['process_id']}  hook {t['hook']}  trigger {t['trigger']}",
        f"created {iso(t['created_at'])}  not before {iso(t['not_before'])}",
        "",
        "--- prompt ---",
        t["prompt"].rstrip("\n"),
        "--- transcript ---",
        "(no entries yet: the agent loop that runs queued threads is not built yet)"
        if t["status"] == "queued"
        else "(no entries)",
    ]
    return "\n".join(head)
