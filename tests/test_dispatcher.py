"""The dispatcher keeps serving when the database cannot be written (in process, real SQLite)."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import anyio
import pytest

from agent_threads.dispatch import Dispatcher
from state import threads as th
from state.db import DatabaseTarget, Store
from state.ratelimit import Rate


def test_a_claim_that_cannot_be_saved_is_retried_not_fatal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A locked database (or a full disk) when a queued thread is due: the claim fails.
    # Before the fix, the error left the dispatcher's task group and took the daemon down.
    target = DatabaseTarget.sqlite(tmp_path / "state.db")
    store = Store(target, timeout=0.2)
    new = th.NewThread(trigger="user", depth=0, prompt="why?", first_message="q", created_at=1.0)
    tid = store.transact(lambda conn: th.create_thread(conn, new, Rate(1000, 60.0))).id
    blocker = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    ran: list[int] = []

    async def run(thread_id: int, resumed: bool) -> None:
        ran.append(thread_id)

    async def main() -> None:
        dispatcher = Dispatcher(store, run, concurrency=2)
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.serve)
            with anyio.fail_after(20):
                while "claiming queued threads failed" not in caplog.text:
                    await anyio.sleep(0.05)
            assert ran == []
            blocker.execute("ROLLBACK")  # the database can be written again
            with anyio.fail_after(20):
                while not ran:
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()

    with caplog.at_level(logging.INFO, logger="supervise.threads"):
        anyio.run(main)
    assert ran == [tid]
    assert "claiming queued threads works again (failing since" in caplog.text
    blocker.close()
    store.close()
