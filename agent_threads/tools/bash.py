"""Bash: run a shell command in the thread's directory, its whole process group bounded."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from contextlib import suppress

import anyio
from anyio.abc import ByteReceiveStream, Process
from pydantic import Field

from agent_threads.sandbox import SandboxError
from agent_threads.tools.base import Tool, ToolArgs, ToolContext, ToolFailure, ToolResult

DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 600.0
MAX_KEEP = 1 << 20  # bytes of output kept in memory; the rest is counted
DRAIN_S = 0.2  # after the shell exits, how long a background child may keep the pipe busy


class BashArgs(ToolArgs):
    command: str = Field(description="The shell command (bash) to run.")
    timeout: float | None = Field(
        default=None,
        gt=0,
        le=MAX_TIMEOUT_S,
        description=f"Seconds before the command's process group is killed "
        f"(default {DEFAULT_TIMEOUT_S:g}, at most {MAX_TIMEOUT_S:g}).",
    )


class _Output:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.kept = 0
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = MAX_KEEP - self.kept
        if room > 0:
            self.chunks.append(data[:room])
            self.kept += min(room, len(data))
        self.dropped += max(0, len(data) - max(room, 0))

    def text(self) -> str:
        text = b"".join(self.chunks).decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n[... {self.dropped} more bytes of output were dropped ...]"
        return text


def _kill_group(pgid: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def _read(stream: ByteReceiveStream, out: _Output, eof: anyio.Event) -> None:
    try:
        with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            while True:
                out.add(await stream.receive())
    finally:
        eof.set()


class BashTool(Tool):
    name = "Bash"
    description = (
        "Run a bash command in the working directory; stdout and stderr come back together. "
        "$SUPERVISE_OUTPUT is the output log of the process that started this thread. "
        "In the sandbox (the default where bubblewrap works) only the working directory and "
        "the directories the hook file lists can be written, and /tmp is fresh for each "
        "command: keep files you need later in the working directory."
    )
    Args = BashArgs

    async def run(self, args: BashArgs, ctx: ToolContext) -> ToolResult:
        if "\0" in args.command:
            raise ToolFailure("the command contains a NUL byte, which no shell can take")
        shell = shutil.which("bash") or "/bin/sh"
        timeout = args.timeout or DEFAULT_TIMEOUT_S
        out = _Output()
        argv, notice = [shell, "-c", args.command], None
        if ctx.sandbox is not None:
            try:
                argv = [*ctx.sandbox.prefix(ctx.cwd), *argv]
            except SandboxError as exc:
                raise ToolFailure(str(exc)) from None
            notice = ctx.sandbox.notice.take()
        # bwrap keeps this group (its PID namespace dies with it: --die-with-parent), so one
        # group kill still ends everything the command started.
        proc = await anyio.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=ctx.cwd,
            env=dict(ctx.env),
            start_new_session=True,  # its own group: a timeout kills everything it started
        )
        timed_out = False
        try:
            if ctx.on_spawn is not None:
                await ctx.on_spawn(proc.pid)
            timed_out = await self._wait(proc, out, timeout)
        finally:
            with anyio.CancelScope(shield=True):
                # Whatever still runs in the group (a timeout, a cancel, `sleep &`) is killed.
                _kill_group(proc.pid)
                with anyio.move_on_after(5):
                    await proc.wait()
                await proc.aclose()
        code = proc.returncode
        text = out.text().rstrip("\n")
        if timed_out:
            text += f"\n[timed out after {timeout:g}s; process group killed]"
        elif code:
            text += f"\n[exit code {code}]"
        text = text.strip("\n") or "(no output)"
        if notice:
            text = f"[warning: {notice}]\n{text}"
        return ToolResult(
            text,
            is_error=timed_out or bool(code),
            data={"exit_code": code, "timed_out": timed_out},
        )

    async def _wait(self, proc: Process, out: _Output, timeout: float) -> bool:
        """Read until the shell exits; True if the timeout came first."""
        assert proc.stdout is not None
        stdout = proc.stdout
        eof = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_read, stdout, out, eof)
            with anyio.move_on_after(timeout) as scope:
                await proc.wait()
            if scope.cancelled_caught:
                _kill_group(proc.pid)
            # A background child may hold the pipe open: drain briefly, then stop reading.
            with anyio.move_on_after(DRAIN_S):
                await eof.wait()
            tg.cancel_scope.cancel()
        return scope.cancelled_caught
