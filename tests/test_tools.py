"""The tools, run for real: subprocesses, process groups, files in tmp_path."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakes import RecordingRunner, completed

from agent_threads.tools.base import LaunchedProcess, ToolContext, ToolResult
from agent_threads.tools.bash import BashArgs, BashTool
from agent_threads.tools.registry import call_tool, default_tools, truncate
from supervise.errors import LaunchError


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


TOOLS = default_tools()


def ctx(tmp_path: Path, **kw: Any) -> ToolContext:
    env = {"PATH": os.environ["PATH"], "SUPERVISE_THREAD_ID": "t9"}
    return ToolContext(thread_id=9, cwd=tmp_path, env=env, **kw)


async def call(tmp_path: Path, tool: str, **args: Any) -> ToolResult:
    return await call_tool(TOOLS[tool], args, ctx(tmp_path))


def alive(pid: int, within: float = 2.0) -> bool:
    """Whether `pid` still runs after up to `within` seconds (a kill takes a moment)."""
    deadline = time.monotonic() + within
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return _running(pid)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


@pytest.mark.anyio
async def test_bash_output_exit_code_env_and_cwd(tmp_path: Path) -> None:
    r = await call(tmp_path, "Bash", command="echo out; echo err >&2; echo $SUPERVISE_THREAD_ID")
    # Claude Code's BashOutput: the command's two streams interleaved in stdout.
    assert (r.output, r.is_error, r.data) == (
        "out\nerr\nt9",
        False,
        {
            "stdout": "out\nerr\nt9",
            "stderr": "",
            "interrupted": False,
            "exitCode": 0,
            "isImage": False,
        },
    )
    r = await call(tmp_path, "Bash", command="pwd; exit 3")
    assert r.is_error and r.output == f"{tmp_path}\n[exit code 3]"


@pytest.mark.anyio
async def test_bash_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    started = time.monotonic()
    r = await call(tmp_path, "Bash", command="sleep 30 & echo $! > bg; sleep 30", timeout=500)
    assert time.monotonic() - started < 5
    assert r.is_error and "[timed out after 0.5s; process group killed]" in r.output
    assert not alive(int((tmp_path / "bg").read_text()))


@pytest.mark.anyio
async def test_a_background_child_holding_the_pipe_does_not_hang(tmp_path: Path) -> None:
    started = time.monotonic()
    r = await call(tmp_path, "Bash", command="sleep 30 & echo $! > bg; echo done")
    assert r.output == "done" and not r.is_error
    assert time.monotonic() - started < 3
    assert not alive(int((tmp_path / "bg").read_text()))  # the group is cleaned up


@pytest.mark.anyio
async def test_cancelling_the_call_kills_its_group(tmp_path: Path) -> None:
    with anyio.move_on_after(0.5):
        await call(tmp_path, "Bash", command="echo $$ > pid; sleep 30")
    assert not alive(int((tmp_path / "pid").read_text()))


@pytest.mark.anyio
async def test_bash_asks_its_runner_and_reports_what_came_back(tmp_path: Path) -> None:
    runner = RecordingRunner(
        [
            completed(b"hi", stdout_dropped=5),
            completed(b"partial\n", timed_out=True),
            completed(b"", 3),
            completed(b"\n\n"),
        ]
    )
    c = ctx(tmp_path, runner=runner)
    results = [
        await BashTool().run(BashArgs(command=f"step {i}", timeout=7000), c) for i in range(4)
    ]
    assert [(r.output, r.is_error) for r in results] == [
        ("hi\n[... 5 more bytes of output were dropped ...]", False),
        ("partial\n[timed out after 7s; process group killed]", True),
        ("[exit code 3]", True),
        ("(no output)", False),
    ]
    # Claude Code's BashOutput: what the command printed, and the tool's own notices apart.
    assert [r.data for r in results] == [
        {
            "stdout": "hi",
            "stderr": "... 5 more bytes of output were dropped ...",
            "interrupted": False,
            "exitCode": 0,
            "isImage": False,
        },
        {
            "stdout": "partial",
            "stderr": "timed out after 7s; process group killed",
            "interrupted": True,
            "isImage": False,
        },
        {"stdout": "", "stderr": "", "interrupted": False, "exitCode": 3, "isImage": False},
        {"stdout": "", "stderr": "", "interrupted": False, "exitCode": 0, "isImage": False},
    ]
    # The tool asked for a shell running the command in the thread's place, stderr merged,
    # with the model's timeout as the deadline and the thread's (here: no) sandbox.
    first = runner.calls[0]
    assert first.argv[1:] == ("-c", "step 0") and first.argv[0].endswith("sh")
    assert (first.cwd, first.env, first.deadline_s) == (tmp_path, dict(c.env), 7)
    assert (first.merge_stderr, first.stdin, first.sandbox) == (True, None, None)
    assert [call.argv[2] for call in runner.calls] == [f"step {i}" for i in range(4)]


@pytest.mark.anyio
async def test_huge_output_is_bounded_and_truncated_with_a_note(tmp_path: Path) -> None:
    r = await call(tmp_path, "Bash", command="head -c 3000000 /dev/zero | tr '\\0' x")
    assert len(r.output) < 40_000
    assert "characters truncated: the output was longer than 30000 characters" in r.output


@pytest.mark.anyio
async def test_read_write_edit(tmp_path: Path) -> None:
    r = await call(tmp_path, "Write", path="sub/a.txt", content="one\ntwo\nthree\ntwo\n")
    assert not r.is_error and (tmp_path / "sub/a.txt").read_text() == "one\ntwo\nthree\ntwo\n"
    r = await call(tmp_path, "Read", path="sub/a.txt", offset=2, limit=2)
    assert r.output == "     2\ttwo\n     3\tthree"
    r = await call(tmp_path, "Edit", path="sub/a.txt", old_string="two", new_string="2")
    assert r.is_error and "occurs 2 times" in r.output and "replace_all" in r.output
    r = await call(tmp_path, "Edit", path="sub/a.txt", old_string="four", new_string="4")
    assert r.is_error and "not found" in r.output
    r = await call(tmp_path, "Edit", path="sub/a.txt", old_string="one", new_string="1")
    assert not r.is_error
    r = await call(
        tmp_path, "Edit", path="sub/a.txt", old_string="two", new_string="2", replace_all=True
    )
    assert r.output == "replaced 2 occurrences in sub/a.txt"
    assert (tmp_path / "sub/a.txt").read_text() == "1\n2\nthree\n2\n"
    r = await call(tmp_path, "Read", path="missing.txt")
    assert r.is_error and r.output == "missing.txt: no such file"
    (tmp_path / "bin").write_bytes(b"\0\1\2")
    assert "binary" in (await call(tmp_path, "Read", path="bin")).output


@pytest.mark.anyio
async def test_update_plan(tmp_path: Path) -> None:
    tasks = [
        {"title": "read", "status": "completed"},
        {"title": "fix", "status": "in_progress"},
        {"title": "test", "status": "pending"},
    ]
    r = await call(tmp_path, "UpdatePlan", tasks=tasks)
    assert json.loads(r.output)["summary"] == {"total": 3, "completed": 1}
    tasks[2]["status"] = "in_progress"
    r = await call(tmp_path, "UpdatePlan", tasks=tasks)
    assert r.is_error and "2 tasks are in_progress" in r.output


@pytest.mark.anyio
async def test_runprocess_uses_the_launcher(tmp_path: Path) -> None:
    seen: list[Any] = []

    async def launch(argv: list[str], hooks: Any, name: str | None, cwd: Path) -> LaunchedProcess:
        seen.append((argv, hooks, name, cwd))
        if name == "bad":
            raise LaunchError("command not found: nope")
        return LaunchedProcess(7, 4242, name or "sh")

    c = ctx(tmp_path, launch=launch)
    r = await call_tool(TOOLS["RunProcess"], {"command": "make test", "hooks": "h.yaml"}, c)
    assert r.output == "started process 7 (pid 4242, name sh)" and r.data == {
        "process_id": 7,
        "pid": 4242,
        "name": "sh",
    }
    assert seen[0] == (["/bin/sh", "-c", "make test"], "h.yaml", None, tmp_path)
    r = await call_tool(TOOLS["RunProcess"], {"command": ["nope"], "name": "bad"}, c)
    assert r.is_error and r.output == "could not start it: command not found: nope"
    r = await call(tmp_path, "RunProcess", command="x")  # no launcher wired
    assert r.is_error


@pytest.mark.anyio
async def test_bad_arguments_are_observations(tmp_path: Path) -> None:
    r = await call(tmp_path, "Bash")
    assert r.is_error and r.output == "Invalid arguments:\n- command: Field required"
    r = await call(tmp_path, "Read", path="a", bogus=1)
    assert "- bogus: Extra inputs are not permitted" in r.output
    r = await call(tmp_path, "Bash", command="true", timeout="soon")
    assert "- timeout: Input should be a valid number" in r.output
    r = await call(tmp_path, "Bash", command="true", timeout=0)
    assert "- timeout: Input should be greater than 0" in r.output


def test_truncate_keeps_head_and_tail() -> None:
    assert truncate("short", 10) == "short"
    text = truncate("a" * 50 + "b" * 50, 20)
    assert text.startswith("a" * 10) and text.endswith("b" * 10)
    assert "80 characters truncated" in text


def test_every_tool_has_a_json_schema() -> None:
    specs = {t.spec().name: t.spec().parameters for t in TOOLS.values()}
    assert set(specs) == {
        "Bash",
        "Read",
        "Write",
        "Edit",
        "Glob",
        "Grep",
        "UpdatePlan",
        "RunProcess",
    }
    assert specs["Bash"]["required"] == ["command"]
    assert specs["Edit"]["additionalProperties"] is False
