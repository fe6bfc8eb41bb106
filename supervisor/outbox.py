"""The daemon's worker for the outbox (state/outbox.py): it sends notifications, runs `run:`
commands and does `restart: true`, each after the commit that recorded it, off the loop.

Every send and command runs in its own task (sends in a worker thread, with Apprise's
socket timeouts and ours on top), so a target that is down or slow delays neither fires
nor threads nor other targets. Its outcome is recorded: done, a retry at a later time, or
failed after the settings' `attempts`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from anyio.abc import TaskGroup

from state import outbox
from state.db import Store
from state.outbox import ActionRecord
from state.paths import StatePaths
from state.settings import NotifySettings
from supervise.errors import StateError, SuperviseError
from supervisor.delivery import coalesced, plan_sends, retry_delay
from supervisor.hookactions import FireFactsEnv, RunCommand, run_env
from supervisor.notices import naming_thread
from supervisor.notifysend import Sent, send
from supervisor.redaction import redact_text

log = logging.getLogger("supervise.outbox")

SEND_TIMEOUT_S = 30.0  # on top of Apprise's own socket timeouts: a target's URLs in turn
IDLE_S = 60.0  # looked at this often even without news (a clock step, a missed poke)
RETRY_S = 2.0  # after the outbox's own failure (a locked database): try again then
TAIL_BYTES = 4000  # of a `run:` command's output, recorded
STOP_GRACE_S = 10.0  # `restart: true` of a running process: SIGTERM, then SIGKILL after
# What a `run:` command gets of the daemon's environment: not the model keys.
RUN_ENV_KEEP = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SHELL")


class Outbox:
    def __init__(
        self,
        store: Store,
        paths: StatePaths,
        settings: NotifySettings,
        *,
        env: Mapping[str, str],
        restarted: Callable[[int], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`restarted(run_id)`: a `restart: true` recorded this next run (the daemon starts it)."""
        self.store = store
        self.paths = paths
        self.settings = settings
        self.clock = clock
        self.restarted = restarted
        self.base_env = {k: env[k] for k in RUN_ENV_KEEP if k in env}
        self.base_env["SUPERVISE_HOME"] = str(paths.home)
        self.in_hand: set[int] = set()
        self.busy_targets: set[str] = set()
        self.wake = anyio.Event()

    def poke(self) -> None:
        self.wake.set()

    async def serve(self) -> None:
        failed = await anyio.to_thread.run_sync(outbox.interrupted, self.store, self.clock())
        for row in failed:
            log.warning(
                "action %d (%s, process %s): the daemon stopped while it ran; not run again",
                row.id,
                row.title,
                row.process_id,
            )
        async with anyio.create_task_group() as tg:
            while True:
                self.wake = anyio.Event()
                try:
                    wait = await self._dispatch(tg)
                except Exception as exc:
                    # A locked database, a full disk: the outbox waits, the daemon goes on.
                    log.error("outbox: %s; trying again in %gs", exc, RETRY_S)
                    wait = RETRY_S
                if wait > 0:
                    with anyio.move_on_after(wait):
                        await self.wake.wait()

    async def _dispatch(self, tg: TaskGroup) -> float:
        """Start a task for each due action (one per target for notifications); returns
        how long to wait for the next."""
        due = await anyio.to_thread.run_sync(
            outbox.due_actions, self.store, self.clock(), sorted(self.in_hand)
        )
        by_target: dict[str, list[ActionRecord]] = {}
        waiting: set[int] = set()  # due, but their target's task is still sending
        for row in due:
            if row.action == "notify":
                if (row.target or "") in self.busy_targets:
                    waiting.add(row.id)
                else:
                    by_target.setdefault(row.target or "", []).append(row)
                continue
            self.in_hand.add(row.id)
            tg.start_soon(self._act, row)
        for target, rows in by_target.items():
            self.busy_targets.add(target)
            self.in_hand.update(r.id for r in rows)
            tg.start_soon(self._notify_target, target, rows)
        skip = sorted(self.in_hand | waiting)
        nxt = await anyio.to_thread.run_sync(outbox.next_due, self.store, skip)
        return IDLE_S if nxt is None else min(IDLE_S, nxt - self.clock())

    # -- notifications -----------------------------------------------------------------

    async def _notify_target(self, target: str, rows: list[ActionRecord]) -> None:
        try:
            await self._send_rows(target, rows)
        except Exception:
            log.exception("notifications to %s: failed; trying again in %gs", target, RETRY_S)
            with contextlib.suppress(Exception):  # not at once: the cause may persist
                for row in rows:
                    await self._settle(row.id, "pending", next_at=self.clock() + RETRY_S)
        finally:
            self.busy_targets.discard(target)
            self.in_hand.difference_update(r.id for r in rows)
            self.poke()

    async def _send_rows(self, target: str, rows: list[ActionRecord]) -> None:
        urls = self.settings.targets.get(target)
        now = self.clock()
        if urls is None:
            why = f"no target {target!r} in the settings file's [notify.targets]; define it"
            for row in rows:
                await self._settle(row.id, "failed", error=why)
            return
        rate = self.settings.rate
        sent = await anyio.to_thread.run_sync(
            outbox.sent_since, self.store, target, now - rate.per_seconds
        )
        plan = plan_sends([r.id for r in rows], sent, rate, now)
        by_id = {r.id: r for r in rows}
        if plan.wait_until is not None:
            for row in rows:
                await self._settle(
                    row.id,
                    "pending",
                    next_at=plan.wait_until,
                    attempted=False,
                    error=row.last_error,
                )
            return
        for rid in plan.alone:
            row = by_id[rid]
            await self._deliver(row, urls, row.title, _body(row))
        if plan.together:
            group = [by_id[i] for i in plan.together]
            title, body = coalesced([r.title for r in group], [_body(r) for r in group])
            await self._deliver(group[0], urls, title, body, carried=plan.together[1:])

    async def _deliver(
        self,
        row: ActionRecord,
        urls: tuple[str, ...],
        title: str,
        body: str,
        carried: tuple[int, ...] = (),
    ) -> None:
        result: Sent = Sent(False, f"no answer within {SEND_TIMEOUT_S:g}s")
        with anyio.move_on_after(SEND_TIMEOUT_S):
            result = await anyio.to_thread.run_sync(send, urls, title, body, abandon_on_cancel=True)
        attempts = row.attempts + 1
        if result.ok:
            note = f"sent with {len(carried)} more event(s)" if carried else "sent"
            await self._settle(row.id, "done", result=note, batch=carried)
            log.info("notification %d to %s: %s", row.id, row.target, note)
            return
        if attempts >= self.settings.attempts:
            await self._settle(row.id, "failed", error=result.error)
            log.warning(
                "notification %d to %s failed %d time(s), given up: %s",
                row.id,
                row.target,
                attempts,
                result.error,
            )
            return
        delay = retry_delay(attempts)
        await self._settle(row.id, "pending", error=result.error, next_at=self.clock() + delay)
        log.info(
            "notification %d to %s failed (%s); try %d in %.3gs",
            row.id,
            row.target,
            result.error,
            attempts + 1,
            delay,
        )

    async def _settle(self, action_id: int, status: outbox.ActionStatus, **kw: Any) -> None:
        now = self.clock()
        await anyio.to_thread.run_sync(
            lambda: outbox.settle(self.store, action_id, status, now, **kw)
        )

    # -- run: and restart: -------------------------------------------------------------

    async def _act(self, row: ActionRecord) -> None:
        try:
            if row.action == "run":
                await self._run(row)
            elif row.action == "restart":
                await self._restart(row)
            else:
                await self._settle(row.id, "failed", error=f"unknown action {row.action!r}")
        except Exception as exc:
            log.exception("action %d (%s): failed", row.id, row.action)
            await self._settle(row.id, "failed", error=redact_text(str(exc))[:500])
        finally:
            self.in_hand.discard(row.id)

    async def _run(self, row: ActionRecord) -> None:
        data = json.loads(row.data or "{}")
        command = RunCommand.from_json(data["command"])
        facts = FireFactsEnv(**{**data["facts"], "fire_id": row.fire_id or 0})
        # Committed before it starts: a daemon killed while it runs does not run it again.
        if not await anyio.to_thread.run_sync(outbox.start_once, self.store, row.id):
            return
        env = run_env(self.base_env, facts)
        cwd = data.get("cwd") or None
        if cwd is not None and not os.path.isdir(cwd):
            cwd = None  # its directory went away: run it where the daemon is rather than not
        tail = bytearray()
        code: int | None = None
        timed_out = False
        try:
            proc = await anyio.open_process(
                command.args(),
                cwd=cwd,
                env=env,
                stdin=None,
                stderr=-2,  # subprocess.STDOUT: one stream, in order
                start_new_session=True,
            )
        except OSError as exc:
            await self._settle(row.id, "failed", error=f"cannot start: {exc}", attempted=False)
            return
        async with proc:
            with anyio.move_on_after(command.timeout) as scope:
                assert proc.stdout is not None
                async for chunk in proc.stdout:
                    tail += chunk
                    del tail[:-TAIL_BYTES]
                code = await proc.wait()
            if scope.cancelled_caught:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                code = await proc.wait()
        out = redact_text(tail.decode(errors="replace"))
        status = (
            f"exit {code}" if code is not None and code >= 0 else f"killed by signal {-(code or 0)}"
        )
        if timed_out:
            status = f"killed after its timeout of {command.timeout:g}s"
        result = f"{status}\n{out}" if out else status
        ok = code == 0 and not timed_out
        await self._settle(
            row.id,
            "done" if ok else "failed",
            result=result,
            error=None if ok else status,
            attempted=False,
        )
        log.info("action %d: run for hook %s: %s", row.id, facts.hook, status)

    async def _restart(self, row: ActionRecord) -> None:
        """Restart the run that fired, once: a later run of its chain means it was (by its
        policy, or by this action before a daemon died)."""
        if row.process_id is None:
            await self._settle(row.id, "failed", error="no process recorded")
            return
        note, new_id = await anyio.to_thread.run_sync(self._restart_sync, row.process_id)
        await self._settle(row.id, "done", result=note)
        log.info("action %d: restart of process %d: %s", row.id, row.process_id, note)
        if new_id is not None:
            self.restarted(new_id)

    def _restart_sync(self, run_id: int) -> tuple[str, int | None]:
        from state.processes import ENDED
        from state.runs import (
            NextRun,
            get_run,
            newest_run,
            record_next_run,
            request_stop,
            run_history,
        )
        from supervisor import restarts
        from supervisor.firing import run_fact
        from supervisor.rundir import RunDir
        from supervisor.runspec import RunSpec
        from supervisor.stopping import stop_process

        row = get_run(self.store, run_id)
        if row is None:
            return "its process is gone", None
        newest = newest_run(self.store, row.chain) or row
        if newest.id != row.id:
            return f"already restarted (run {newest.run_no} is process {newest.id})", None
        if row.state in ENDED:
            # Counted as an automatic restart: a hook firing on every run ends in a crash
            # loop (`restarts.hook_restart`), not in restarts forever.
            runs = [run_fact(r) for r in run_history(self.store, row.id).runs]
            spec = (
                RunSpec.from_text(row.spec, f"process {row.id}").hooks.restart if row.spec else None
            )
            decision = restarts.hook_restart(spec, runs)
            if isinstance(decision, restarts.CrashLoop):
                return f"not restarted: {decision.text()} (restart.max_restarts)", None
            try:
                new = record_next_run(
                    self.store, row.id, NextRun(self.clock(), "restart"), self.clock()
                )
            except StateError:
                return "already restarted", None
            return f"recorded run {new.run_no} (process {new.id})", new.id
        # Its end records the next run (`restarts.decide` with the request `hook`).
        asked = request_stop(self.store, row.id, "hook")
        if asked is None:
            return "it ended meanwhile; its end decides", None
        try:
            stop_process(asked, RunDir(self.paths.run_dir(row.id)), grace=STOP_GRACE_S)
        except SuperviseError as exc:
            return f"asked to restart; {exc}", None
        return f"stopped run {row.run_no}; its end records the next run", None


def _body(row: ActionRecord) -> str:
    """What a notification says: a fire's names the thread the fire spawned."""
    return naming_thread(row.body, row.thread_id) if row.event == "fire" else row.body
