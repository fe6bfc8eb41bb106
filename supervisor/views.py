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


def process_json(p: ProcessRecord, restarts: int = 0) -> dict[str, Any]:
    """A run's row; `restarts`: how often its process was restarted (by its policy)."""
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
        # Restarts: the chain this run belongs to (its first run's id), which run it is, who
        # started it, and for a pending run when it is due.
        "first_id": p.chain,
        "run": p.run_no,
        "cause": p.cause,
        "restarts": restarts,
        "due_at": iso(p.due_at),
        "stop_request": p.stop_request,
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
        "process_id": f.process_id,  # the run's own row
        "first_id": f.first_id,
        "run": f.run_no,
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


def restart_counts(rows: Sequence[ProcessRecord]) -> dict[int, int]:
    """By chain (its first run's id): the runs its restart policy started."""
    counts: dict[int, int] = {}
    for p in rows:
        counts[p.chain] = counts.get(p.chain, 0) + (p.cause == "restart")
    return counts


def newest_runs(rows: Sequence[ProcessRecord]) -> list[ProcessRecord]:
    """The newest run of each process, in the order the processes started."""
    newest: dict[int, ProcessRecord] = {}
    for p in rows:
        if p.chain not in newest or p.run_no > newest[p.chain].run_no:
            newest[p.chain] = p
    first = {p.chain: (p.started_at, p.id) for p in rows if p.run_no == 1}
    return sorted(newest.values(), key=lambda p: first.get(p.chain, (p.started_at, p.id)))


# What a person asked of a run that ended (`stop_request`): said beside its exit.
_BY_USER = {
    "stop": "stopped by user",
    "restart": "restarted by user",
    "hook": "restarted by a hook",
}


def _exit_text(p: ProcessRecord) -> str:
    code = "-" if p.exit_code is None else str(p.exit_code)
    why = [w for w in (p.signal or p.end_reason, _BY_USER.get(p.stop_request or "")) if w]
    if p.exit_code is None and p.state not in ("exited", "lost", "crash-loop"):
        why = []  # running: its stop is asked, not done
    return f"{code} ({', '.join(why)})" if why else code


def _state_text(p: ProcessRecord, now: float) -> str:
    if p.state == "starting":
        return "running"
    if p.state != "backoff":
        return p.state
    if p.due_at is not None and p.due_at > now + 0.5:
        return f"backoff until {local(p.due_at)}"
    return "backoff (waiting for its threads)" if p.after_thread else "backoff (starting)"


def process_table(rows: Sequence[ProcessRecord], now: float, *, all_runs: bool = False) -> str:
    """One line per process (its newest run), named by its id (its first run's, which every
    command takes), or with `all_runs` one per run with the run's own id. A pending run shows
    the exit of the run before it."""
    restarts = restart_counts(rows)
    by_run = {(p.chain, p.run_no): p for p in rows}
    body = []
    for p in rows if all_runs else newest_runs(rows):
        shown = p
        if p.state == "backoff":
            shown = by_run.get((p.chain, p.run_no - 1), p)  # its pending run has no exit
        end = shown.ended_at if shown.ended_at is not None else now
        ids = [str(p.id), str(p.chain)] if all_runs else [str(p.chain)]
        body.append(
            [
                *ids,
                _clip(p.name, 20),
                _state_text(p, now),
                str(shown.pid or "-"),
                _exit_text(shown),
                local(shown.started_at),
                format_runtime(end - shown.started_at),
                str(p.run_no),
                str(restarts.get(p.chain, 0)),
                str(p.depth),
                _clip(p.command, 60),
            ]
        )
    headers = [
        "ID", "NAME", "STATE", "PID", "EXIT", "STARTED", "RUNTIME", "RUN", "RESTARTS", "DEPTH",
        "COMMAND",
    ]  # fmt: skip
    if all_runs:
        headers.insert(1, "PROCESS")
    return table(headers, body)


def thread_table(
    rows: Sequence[ThreadRecord],
    now: float,
    runs: Sequence[ProcessRecord] = (),
) -> str:
    """Threads; with the process rows `runs`, a thread of a restarted process names it as
    `ps` does, and its run: `3 (run 2)`."""
    run_of = {p.id: p for p in runs}
    body = []
    for t in rows:
        proc = str(t.process_id or "-")
        if (p := run_of.get(t.process_id or -1)) is not None and p.run_no > 1:
            proc = f"{p.chain} (run {p.run_no})"
        status = t.status
        if status == "queued" and t.not_before > now + 0.5:
            status_text = f"queued until {local(t.not_before)}"
        else:
            status_text = status
        detail = t.waiting or t.error or ""
        body.append(
            [
                thread_ref(t.id) or "",
                proc,
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


def fire_outcome(f: FireRecord) -> str:
    """What came of a fire, as `fires` says it."""
    if f.spawned:
        return f"spawned {thread_ref(f.thread_id)}"
    if f.reason == "deduplicated" and f.thread_id is not None:
        return f"deduplicated into {thread_ref(f.thread_id)}"
    if f.reason == "cooldown" and f.thread_id is not None:
        return f"cooldown after {thread_ref(f.thread_id)}"
    if f.reason is None:
        return "acted (no agent)"  # a hook without instructions: notify, run, restart
    return f"refused: {f.reason}"


def fire_table(rows: Sequence[FireRecord]) -> str:
    body = []
    for f in rows:
        outcome = fire_outcome(f)
        body.append(
            [
                str(f.id),
                str(f.first_id or f.process_id),  # the process, as `ps` names it
                "-" if f.run_no is None else str(f.run_no),
                f.hook,
                f.trigger,
                local(f.at),
                outcome,
                _clip(f.detail, 60),
            ]
        )
    return table(["ID", "PROCESS", "RUN", "HOOK", "TRIGGER", "AT", "OUTCOME", "DETAIL"], body)


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
