"""The one subprocess runner, with real processes: deadlines, cancels, process groups, pipes.

No assertion depends on a process being fast: where a test needs the command to have got
somewhere (its children started), `on_spawn` waits for exactly that, by looking at /proc,
before the deadline starts counting.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.lowlevel
import psutil
import pytest
from test_sandbox import needs_bwrap

from agent_threads.command import MAX_OUTPUT, Completed, Confinement, OnSpawn, run_command
from agent_threads.sandbox import SandboxError, resolve
from state.sandboxpolicy import SandboxPolicy


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


ENV = {"PATH": os.environ["PATH"]}
WAIT_S = 30.0  # how long a test waits for something a busy machine may be slow to do


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state, ppid, pgrp, ...)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def running(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not: it is dead and only waits to be reaped)."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def group(pgid: int) -> list[int]:
    """The running processes of process group `pgid`."""
    return [p for p in _pids() if (f := _stat(p)) and f[0] != "Z" and int(f[2]) == pgid]


def with_cmdline(*argv: str) -> list[int]:
    """The running processes whose argv is exactly `argv`."""
    want = "\0".join(argv).encode() + b"\0"
    found = []
    for p in _pids():
        try:
            cmdline = Path(f"/proc/{p}/cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if cmdline == want and running(p):
            found.append(p)
    return found


async def wait_for(what: str, found: Callable[[], list[int]], count: int) -> list[int]:
    """Poll until `found()` lists `count` pids; fail naming `what` after WAIT_S."""
    pids: list[int] = []
    with anyio.move_on_after(WAIT_S):
        while len(pids := found()) < count:
            await anyio.sleep(0.02)
    assert len(pids) >= count, f"waited {WAIT_S:g}s for {what}; found {pids}"
    return pids


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


async def all_gone(pids: list[int]) -> None:
    """Wait for SIGKILLed `pids` to stop running (the kernel delivers a kill, not at once)."""
    with anyio.move_on_after(WAIT_S):
        while any(running(p) for p in pids):
            await anyio.sleep(0.02)
    assert not [p for p in pids if running(p)], f"still running {WAIT_S:g}s after the kill"


async def sh(
    script: str,
    cwd: Path,
    *,
    deadline_s: float,
    stdin: bytes | None = None,
    merge_stderr: bool = False,
    max_output: int = MAX_OUTPUT,
    sandbox: Confinement | None = None,
    on_spawn: OnSpawn | None = None,
) -> Completed:
    return await run_command(
        ["sh", "-c", script],
        cwd=cwd,
        env=ENV,
        deadline_s=deadline_s,
        stdin=stdin,
        merge_stderr=merge_stderr,
        max_output=max_output,
        sandbox=sandbox,
        on_spawn=on_spawn,
    )


class GroupStarted:
    """An on_spawn that waits until the command's group holds `count` `sleep` processes,
    and remembers every process of the group then."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.pids: list[int] = []
        self.ready = anyio.Event()

    async def __call__(self, pid: int) -> None:
        def sleeps() -> list[int]:
            return [p for p in group(pid) if Path(f"/proc/{p}/comm").read_text() == "sleep\n"]

        await wait_for(f"{self.count} sleeps in group {pid}", sleeps, self.count)
        self.pids = group(pid)
        self.ready.set()


# The process group


@pytest.mark.anyio
async def test_the_deadline_kills_the_whole_group_grandchild_included(tmp_path: Path) -> None:
    started = GroupStarted(2)
    done = await sh("sleep 100 & sleep 100", tmp_path, deadline_s=0.5, on_spawn=started)
    assert (done.timed_out, done.returncode) == (True, None)
    # The shell (or the sleep it became) and the background sleep it forked: two or three.
    assert len(started.pids) >= 2
    await all_gone(started.pids)


@pytest.mark.anyio
async def test_a_cancel_from_outside_kills_the_group(tmp_path: Path) -> None:
    started = GroupStarted(2)
    finished: list[Completed] = []

    async def go() -> None:
        finished.append(
            await sh("sleep 100 & sleep 100", tmp_path, deadline_s=600, on_spawn=started)
        )

    fds = open_fds()
    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        await started.ready.wait()
        tg.cancel_scope.cancel()
    # The cancel reached the runner (no result), and its cleanup, shielded from that cancel,
    # still killed the group and closed the pipes.
    assert finished == [] and open_fds() == fds
    await all_gone(started.pids)


@pytest.mark.anyio
async def test_a_cancel_while_the_process_starts_leaves_nothing_running_or_unreaped(
    tmp_path: Path,
) -> None:
    # A cancel can land anywhere in process creation (an async hook cancelled with its
    # thread did): after 0, 1, 2, ... scheduling points, one of which is inside it.
    before = {p.pid for p in psutil.Process().children()}
    for points in range(40):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: sh("sleep 30", tmp_path, deadline_s=600))
            for _ in range(points):
                await anyio.lowlevel.checkpoint()
            tg.cancel_scope.cancel()
        left = [p for p in psutil.Process().children() if p.pid not in before]
        assert left == [], (points, [(p.pid, p.status()) for p in left])  # zombie: unreaped


@pytest.mark.anyio
async def test_a_background_child_holding_stdout_neither_hangs_it_nor_survives(
    tmp_path: Path,
) -> None:
    # The shell exits at once, but `sleep` keeps its stdout open for 100 s: the runner must
    # stop reading shortly after the shell ended, well before the deadline.
    done = await sh("sleep 100 & echo $!; echo done", tmp_path, deadline_s=WAIT_S)
    assert (done.timed_out, done.returncode) == (False, 0)
    assert done.duration_s < WAIT_S
    background, last = done.stdout.decode().split()
    assert last == "done"
    await all_gone([int(background)])


# Output


@pytest.mark.anyio
async def test_output_past_the_bound_is_counted_not_kept(tmp_path: Path) -> None:
    script = "head -c 5000 /dev/zero | tr '\\0' o; head -c 3000 /dev/zero | tr '\\0' e >&2"
    done = await sh(script, tmp_path, deadline_s=WAIT_S, max_output=1000)
    assert (done.stdout, done.stdout_dropped) == (b"o" * 1000, 4000)
    assert (done.stderr, done.stderr_dropped) == (b"e" * 1000, 2000)


@pytest.mark.anyio
async def test_stdout_and_stderr_separate_or_merged(tmp_path: Path) -> None:
    script = "echo out; echo err >&2; echo out2"
    apart = await sh(script, tmp_path, deadline_s=WAIT_S)
    assert (apart.stdout, apart.stderr, apart.returncode) == (b"out\nout2\n", b"err\n", 0)
    merged = await sh(script, tmp_path, deadline_s=WAIT_S, merge_stderr=True)
    assert (merged.stdout, merged.stderr) == (b"out\nerr\nout2\n", b"")


@pytest.mark.anyio
async def test_exit_code_cwd_and_exactly_the_env_given(tmp_path: Path) -> None:
    env = {**ENV, "ONLY_THIS": "1"}
    done = await run_command(
        ["sh", "-c", 'pwd; echo "$ONLY_THIS/${HOME:-unset}"; exit 7'],
        cwd=tmp_path,
        env=env,
        deadline_s=WAIT_S,
    )
    assert (done.stdout, done.returncode, done.timed_out) == (
        f"{tmp_path}\n1/unset\n".encode(),
        7,
        False,
    )


# Stdin


@pytest.mark.anyio
async def test_stdin_is_written_then_closed(tmp_path: Path) -> None:
    # cat ends only at the end of its input: stdin was closed after the bytes.
    done = await sh("cat; echo end", tmp_path, deadline_s=WAIT_S, stdin=b"hello\n")
    assert (done.stdout, done.timed_out) == (b"hello\nend\n", False)


@pytest.mark.anyio
async def test_a_command_that_ignores_its_stdin_is_fine(tmp_path: Path) -> None:
    # Far more than a pipe holds: the write fails once the command exited without reading.
    done = await sh("exit 3", tmp_path, deadline_s=WAIT_S, stdin=b"x" * (4 << 20))
    assert (done.returncode, done.timed_out) == (3, False)


@pytest.mark.anyio
async def test_no_stdin_is_dev_null(tmp_path: Path) -> None:
    done = await sh("readlink /proc/$$/fd/0; cat", tmp_path, deadline_s=WAIT_S)
    assert (done.stdout, done.returncode) == (b"/dev/null\n", 0)


# The sandbox, applied here


class EnvPrefix:
    """A stand-in sandbox: `env VAR=...` before the command shows the prefix was applied."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.asked: list[Path] = []

    def prefix(self, cwd: Path) -> list[str]:
        self.asked.append(cwd)
        if self.fail:
            raise SandboxError(f"cannot confine {cwd}")
        return ["env", f"CONFINED_IN={cwd}"]


@pytest.mark.anyio
async def test_the_sandbox_prefix_wraps_the_command(tmp_path: Path) -> None:
    box = EnvPrefix()
    done = await sh('echo "$CONFINED_IN"', tmp_path, deadline_s=WAIT_S, sandbox=box)
    assert (done.stdout, box.asked) == (f"{tmp_path}\n".encode(), [tmp_path])


@pytest.mark.anyio
async def test_a_sandbox_that_cannot_be_built_starts_nothing(tmp_path: Path) -> None:
    spawned: list[int] = []

    async def record(pid: int) -> None:
        spawned.append(pid)

    with pytest.raises(SandboxError, match="cannot confine"):
        await sh(
            "touch ran", tmp_path, deadline_s=WAIT_S, sandbox=EnvPrefix(fail=True), on_spawn=record
        )
    assert spawned == [] and not (tmp_path / "ran").exists()


@needs_bwrap
@pytest.mark.anyio
async def test_under_real_bwrap_confined_and_killed_at_the_deadline(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    home.mkdir()
    (home / "state.db").write_text("secret state")
    box = resolve(SandboxPolicy("required"), home, search_path=ENV["PATH"])
    script = f"cat {home}/state.db 2>&1; touch {home}/f 2>&1; touch here"
    done = await sh(script, work, deadline_s=WAIT_S, sandbox=box)
    # SUPERVISE_HOME is hidden and read-only in there; the working directory is writable.
    assert b"secret" not in done.stdout and b"Read-only file system" in done.stdout, done.stdout
    assert not (home / "f").exists() and (work / "here").exists()

    # Inside bwrap the command has its own session; the group kill still ends it (bwrap's PID
    # namespace dies with bwrap). A sleep of an odd length is how to find it from outside.
    nap = f"{os.getpid()}.25"
    sleeps: list[int] = []

    async def both_started(pid: int) -> None:
        sleeps.extend(
            await wait_for("both sandboxed sleeps", lambda: with_cmdline("sleep", nap), 2)
        )

    done = await sh(
        f"sleep {nap} & sleep {nap}", work, deadline_s=0.5, sandbox=box, on_spawn=both_started
    )
    assert (done.timed_out, done.returncode) == (True, None)
    await all_gone(sleeps)


@pytest.mark.anyio
async def test_a_deadline_is_always_a_number_of_seconds(tmp_path: Path) -> None:
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="deadline"):
            await sh("touch ran", tmp_path, deadline_s=bad)
    assert not (tmp_path / "ran").exists()
