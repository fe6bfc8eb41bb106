"""The built-in tools in Claude Code's shapes: what they take, what hooks see, what they return.

The shapes come from Claude Code's public documentation (mirrored in the repository
thevibeworks/claude-code-docs):

- inputs: the hooks reference, "PreToolUse input" (hooks.md: Bash `command`, `description`,
  `timeout` in milliseconds; Write `file_path`, `content`; Edit `file_path`, `old_string`,
  `new_string`, `replace_all`; Read `file_path`, `offset`, `limit`; Glob `pattern`, `path`;
  Grep `pattern`, `path`, `glob`, `output_mode`, `-i`, `multiline`), completed by the Agent
  SDK TypeScript reference's `BashInput` (max 600000, higher values clamped) and `GrepInput`
  (`type`, `-n`, `-A`, `-B`, `-C`, `context`, `head_limit`, `offset`); "tool_input.file_path
  is always absolute" for Write, Edit and Read (hooks.md);
- outputs: the Agent SDK TypeScript reference, "Tool Output Types" (`BashOutput`,
  `FileReadOutput`, `FileWriteOutput`, `FileEditOutput`, `GlobOutput`, `GrepOutput`), and
  the hooks reference's PostToolUse example (`{"filePath": ..., "success": true}`);
- behaviour: the tools reference (tools-reference.md): Glob sorted by modification time and
  capped at 100 files with a truncation flag; Grep's modes, its default files_with_matches,
  .gitignore respected;
- the keys real hooks index (public hook scripts): `.tool_input.file_path` (file guards such
  as "block edits to .env"), `.tool_response.filePath` (formatters and linters),
  `.tool_response.success`, `.tool_response.file.content`, `.tool_response.stdout`.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon, Env
from fakes import RecordingRunner, completed
from test_threads_e2e import hook_file, results, run_hooked, script, settled

from agent_threads.hooks.base import HookSet
from agent_threads.hooks.shell import ShellHooks, ShellSite
from agent_threads.hooks.shellspec import ShellHook, matcher_matches
from agent_threads.hooks.system import SystemHookConfig, collect_system_hooks
from agent_threads.loop import LoopConfig, run_loop
from agent_threads.messages import AssistantMessage, Message, Reply, ToolCall, ToolSpec, Usage
from agent_threads.permissions import Profile, Where
from agent_threads.tools.base import ToolContext, ToolResult
from agent_threads.tools.bash import BashArgs, BashTool
from agent_threads.tools.registry import MAX_OUTPUT_CHARS, call_tool, default_tools
from agent_threads.tools.responses import MAX_DATA_CHARS, structured_patch
from agent_threads.tools.walk import Walk, compile_glob, split_pattern
from agent_threads.transcript import Body, Entry, HookRan, ToolOutput, UserText


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


TOOLS = default_tools()


def context(tmp_path: Path, home: Path) -> ToolContext:
    work, user = tmp_path / "work", tmp_path / "user"
    for d in (work, home / "runs" / "1", user):
        d.mkdir(parents=True, exist_ok=True)
    (home / "state.db").write_text("TOPSECRET records\n")
    (home / "runs" / "1" / "output.log").write_text("boom: TOPSECRET in the output\n")
    env = {"PATH": os.environ["PATH"], "SUPERVISE_HOME": str(home), "HOME": str(user)}
    return ToolContext(thread_id=1, cwd=work, env=env)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    """A working directory `work`, supervise's state directory `state` beside it, and the
    tools' HOME `user`."""
    return context(tmp_path, tmp_path / "state")


@pytest.fixture
def nested(tmp_path: Path) -> ToolContext:
    """The hostile case: the state directory inside the working directory (`work/state`), so
    that a Glob or Grep from cwd passes by it."""
    return context(tmp_path, tmp_path / "work" / "state")


async def call(ctx: ToolContext, tool: str, **args: Any) -> ToolResult:
    """As the loop calls a tool: its arguments prepared first."""
    t = TOOLS[tool]
    return await call_tool(t, t.prepare(args, ctx), ctx)


async def grep(ctx: ToolContext, pattern: str, **args: Any) -> ToolResult:
    return await call(ctx, "Grep", pattern=pattern, **args)


def write(path: Path, text: str, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


# -- the schemas the model is shown -------------------------------------------------------------


def test_the_schemas_advertise_claude_codes_argument_names() -> None:
    specs = {name: t.spec().parameters for name, t in TOOLS.items()}
    props = {name: set(s["properties"]) for name, s in specs.items()}
    assert props["Read"] == {"file_path", "offset", "limit"}
    assert props["Write"] == {"file_path", "content"}
    assert props["Edit"] == {"file_path", "old_string", "new_string", "replace_all"}
    assert props["Bash"] == {"command", "timeout", "description", "run_in_background"}
    assert props["Glob"] == {"pattern", "path"}
    assert props["Grep"] == {
        "pattern",
        "path",
        "glob",
        "type",
        "output_mode",
        "-i",
        "-n",
        "-A",
        "-B",
        "-C",
        "context",
        "multiline",
        "head_limit",
        "offset",
    }
    assert specs["Read"]["required"] == ["file_path"]  # not `path`: the alias is not shown
    assert specs["Edit"]["required"] == ["file_path", "old_string", "new_string"]
    assert specs["Glob"]["required"] == ["pattern"] == specs["Grep"]["required"]
    assert "Milliseconds" in specs["Bash"]["properties"]["timeout"]["description"]
    modes = specs["Grep"]["properties"]["output_mode"]
    assert modes["enum"] == ["content", "files_with_matches", "count"]
    assert modes["default"] == "files_with_matches"


# -- what rules and hooks see: prepare ---------------------------------------------------------


def test_prepare_makes_file_path_absolute_and_renames_the_old_key(ctx: ToolContext) -> None:
    w, user = ctx.cwd, ctx.env["HOME"]
    read = TOOLS["Read"]
    assert read.prepare({"file_path": "a/../b.py", "limit": 3}, ctx) == {
        "file_path": f"{w}/b.py",
        "limit": 3,
    }
    # The old key becomes file_path, in its place: a guard reading file_path sees it.
    assert list(TOOLS["Write"].prepare({"path": "x", "content": "c"}, ctx).items()) == [
        ("file_path", f"{w}/x"),
        ("content", "c"),
    ]
    assert read.prepare({"file_path": "~/notes"}, ctx) == {"file_path": f"{user}/notes"}
    assert read.prepare({"file_path": "/etc/./hosts"}, ctx) == {"file_path": "/etc/hosts"}
    # What is not a path is left for the tool to refuse.
    for odd in ({"file_path": "a\0b"}, {"file_path": 3}, {"file_path": ""}):
        assert read.prepare(odd, ctx) == odd
    both = read.prepare({"path": "a", "file_path": "b"}, ctx)
    assert both == {"path": "a", "file_path": f"{w}/b"}  # and validation says `path` is extra


def test_prepare_moves_a_globs_leading_directories_into_path(ctx: ToolContext) -> None:
    w = ctx.cwd
    glob = TOOLS["Glob"]
    assert glob.prepare({"pattern": "**/*.py"}, ctx) == {"pattern": "**/*.py"}
    assert glob.prepare({"pattern": "src/**/*.py"}, ctx) == {
        "pattern": "**/*.py",
        "path": f"{w}/src",
    }
    assert glob.prepare({"pattern": "/etc/*.conf", "path": "src"}, ctx) == {
        "pattern": "*.conf",
        "path": "/etc",
    }
    assert glob.prepare({"pattern": "../other/*.txt", "path": "sub"}, ctx) == {
        "pattern": "*.txt",
        "path": f"{w}/other",
    }
    assert TOOLS["Grep"].prepare({"pattern": "x", "path": "src"}, ctx) == {
        "pattern": "x",
        "path": f"{w}/src",
    }
    assert split_pattern("a/b/c.txt") == ("a/b", "c.txt")
    assert split_pattern("/*") == ("/", "*")
    assert split_pattern("{a,b}/*.py") == ("", "{a,b}/*.py")


# -- Read, Write, Edit ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_old_path_key_still_works_and_both_keys_are_an_error(
    ctx: ToolContext,
) -> None:
    # Called as the scripted model files and transcripts of earlier versions call them.
    t = TOOLS["Write"]
    r = await call_tool(t, {"path": "old.txt", "content": "hi\n"}, ctx)
    assert not r.is_error and (ctx.cwd / "old.txt").read_text() == "hi\n"
    r = await call_tool(TOOLS["Read"], {"path": "old.txt"}, ctx)
    assert r.output == "     1\thi"
    r = await call_tool(TOOLS["Read"], {"path": "old.txt", "file_path": "old.txt"}, ctx)
    assert r.is_error and "- path: Extra inputs are not permitted" in r.output


@pytest.mark.anyio
async def test_read_returns_claude_codes_file_object(ctx: ToolContext) -> None:
    write(ctx.cwd / "a.txt", "one\ntwo\nthree\nfour\n")
    r = await call(ctx, "Read", file_path="a.txt", offset=2, limit=2)
    assert r.output == "     2\ttwo\n     3\tthree"
    assert r.data == {
        "type": "text",
        "file": {
            "filePath": f"{ctx.cwd}/a.txt",
            "content": "two\nthree",
            "numLines": 2,
            "startLine": 2,
            "totalLines": 4,
        },
    }
    r = await call(ctx, "Read", file_path="a.txt", offset=0)  # 0 is the first line too
    assert r.output.startswith("     1\tone") and r.data and r.data["file"]["startLine"] == 1


@pytest.mark.anyio
async def test_read_shows_2000_lines_and_cuts_long_lines(ctx: ToolContext) -> None:
    write(ctx.cwd / "big.txt", "".join(f"line {n}\n" for n in range(1, 2501)))
    r = await call(ctx, "Read", file_path="big.txt")
    assert r.data and r.data["file"]["numLines"] == 2000 and r.data["file"]["totalLines"] == 2500
    assert r.output.endswith("[... lines 1-2000 of 2500 shown; read on with offset=2001 ...]")
    write(ctx.cwd / "wide.txt", "x" * 5000 + "\n")
    r = await call(ctx, "Read", file_path="wide.txt")
    assert r.output.endswith("… [line cut: 5000 characters]") and len(r.output) < 2100


@pytest.mark.anyio
async def test_write_and_edit_return_claude_codes_records(ctx: ToolContext) -> None:
    r = await call(ctx, "Write", file_path="src/a.py", content="a = 1\nb = 2\n")
    path = f"{ctx.cwd}/src/a.py"
    assert r.data == {
        "type": "create",
        "filePath": path,
        "content": "a = 1\nb = 2\n",
        "structuredPatch": [],
        "originalFile": None,  # a required key: null, not missing
        "success": True,
    }
    r = await call(ctx, "Write", file_path="src/a.py", content="a = 1\nb = 3\n")
    assert r.data is not None and r.data["type"] == "update"
    assert r.data["originalFile"] == "a = 1\nb = 2\n"
    assert r.data["structuredPatch"] == [
        {
            "oldStart": 1,
            "oldLines": 2,
            "newStart": 1,
            "newLines": 2,
            "lines": [" a = 1", "-b = 2", "+b = 3"],
        }
    ]
    r = await call(ctx, "Edit", file_path="src/a.py", old_string="b = 3", new_string="b = 4")
    assert r.data == {
        "filePath": path,
        "oldString": "b = 3",
        "newString": "b = 4",
        "originalFile": "a = 1\nb = 3\n",
        "structuredPatch": [
            {
                "oldStart": 1,
                "oldLines": 2,
                "newStart": 1,
                "newLines": 2,
                "lines": [" a = 1", "-b = 3", "+b = 4"],
            }
        ],
        "replaceAll": False,
        "userModified": False,
        "success": True,
    }
    assert (ctx.cwd / "src/a.py").read_text() == "a = 1\nb = 4\n"


def test_structured_patch_is_a_unified_diffs_hunks() -> None:
    old = "".join(f"{n}\n" for n in range(1, 21))
    new = old.replace("2\n", "two\n", 1).replace("18\n", "")
    hunks = structured_patch(old, new)
    assert [(h.oldStart, h.oldLines, h.newStart, h.newLines) for h in hunks] == [
        (1, 5, 1, 5),
        (15, 6, 15, 5),
    ]
    assert hunks[0].lines == [" 1", "-2", "+two", " 3", " 4", " 5"]
    assert structured_patch("", "a\n")[0].oldStart == 0  # an empty side starts at line 0
    assert structured_patch("same\n", "same\n") == []


# -- Bash ---------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_bash_timeout_is_milliseconds_and_clamped_to_ten_minutes(tmp_path: Path) -> None:
    runner = RecordingRunner([completed(b"")] * 5)
    c = ToolContext(thread_id=1, cwd=tmp_path, env={}, runner=runner)
    for timeout in (1500, None, 10_000_000):
        r = await BashTool().run(BashArgs(command="true", timeout=timeout), c)
        assert not r.is_error
    assert [x.deadline_s for x in runner.calls] == [1.5, 120, 600]
    r = await call_tool(BashTool(), {"command": "true", "run_in_background": True}, c)
    assert r.is_error and "RunProcess" in r.output
    r = await call_tool(BashTool(), {"command": "true", "description": "Do nothing"}, c)
    assert not r.is_error


@pytest.mark.anyio
async def test_bash_kills_at_its_timeout_in_milliseconds(tmp_path: Path) -> None:
    c = ToolContext(thread_id=1, cwd=tmp_path, env={"PATH": os.environ["PATH"]})
    started = time.monotonic()
    r = await call_tool(BashTool(), {"command": "echo begun; sleep 30", "timeout": 300}, c)
    assert time.monotonic() - started < 5
    assert r.is_error and "[timed out after 0.3s; process group killed]" in r.output
    assert r.data is not None and r.data["interrupted"] is True
    assert r.data["stdout"] == "begun" and "timed out" in r.data["stderr"]


# -- Glob -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_glob_finds_files_oldest_first_and_says_when_it_cut(ctx: ToolContext) -> None:
    w = ctx.cwd
    write(w / "src/new.py", "", mtime=3000)
    write(w / "src/pkg/old.py", "", mtime=1000)
    write(w / "top.py", "", mtime=2000)
    write(w / ".hidden/h.py", "", mtime=500)  # dotted directories are searched
    write(w / "notes.md", "")
    r = await call(ctx, "Glob", pattern="**/*.py")
    assert r.data is not None
    assert r.data["filenames"] == [".hidden/h.py", "src/pkg/old.py", "top.py", "src/new.py"]
    assert r.data["numFiles"] == 4 and r.data["truncated"] is False
    assert set(r.data) == {
        "durationMs",
        "numFiles",
        "filenames",
        "truncated",
        "totalMatches",
        "countIsComplete",
    }
    assert r.output.splitlines()[:4] == r.data["filenames"]
    r = await call(ctx, "Glob", pattern="*.py")  # `*` stays in the directory searched
    assert r.data and r.data["filenames"] == ["top.py"]
    r = await call(ctx, "Glob", pattern="src/**/*.{py,md}")
    assert r.data and r.data["filenames"] == ["src/pkg/old.py", "src/new.py"]
    r = await call(ctx, "Glob", pattern="*.rs")
    assert r.output == "No files found" and r.data and r.data["numFiles"] == 0
    for n in range(150):
        write(w / "many" / f"f{n:03}.txt", "", mtime=10_000 + n)
    r = await call(ctx, "Glob", pattern="many/*.txt")
    assert r.data is not None and r.data["truncated"] is True
    assert (r.data["numFiles"], r.data["totalMatches"]) == (100, 150)
    assert r.data["filenames"][0] == "many/f000.txt" and "truncated" in r.output


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ("**/*.py", ["a.py", "x/y/a.py", ".h/a.py"], ["a.pyc", "a/py"]),
        ("src/**", ["src/a", "src/x/y"], ["src", "srcx/a"]),
        ("a/**/b", ["a/b", "a/x/b", "a/x/y/b"], ["a/xb", "ab"]),
        ("*.{ts,tsx}", ["a.ts", "a.tsx"], ["a.t", "d/a.ts"]),
        ("f?[0-9][!a]", ["fx1b"], ["fx1a", "f/1b", "fx10b"]),
        ("{a,b{c,d}}.txt", ["a.txt", "bc.txt", "bd.txt"], ["b.txt"]),
        ("lit\\*[", ["lit*["], ["litx["]),
        ("[]a]", ["]", "a"], ["b"]),
        ("{x", ["{x"], ["x"]),
    ],
)
def test_glob_patterns(pattern: str, yes: list[str], no: list[str]) -> None:
    rx = compile_glob(pattern)
    assert [p for p in yes if rx.fullmatch(p) is None] == []
    assert [p for p in no if rx.fullmatch(p) is not None] == []


@pytest.mark.anyio
async def test_glob_errors_are_observations(ctx: ToolContext) -> None:
    write(ctx.cwd / "f.txt", "")
    r = await call(ctx, "Glob", pattern="*", path="f.txt")
    assert r.is_error and "not a directory" in r.output
    r = await call(ctx, "Glob", pattern="*", path="nowhere")
    assert r.is_error and "no such directory" in r.output
    r = await call(ctx, "Glob", pattern="")
    assert r.is_error and "pattern" in r.output


# -- Grep -------------------------------------------------------------------------------------


@pytest.fixture
def tree(ctx: ToolContext) -> Path:
    w = ctx.cwd
    write(w / "src/app.py", "import os\n\ndef main():\n    return run()\n", mtime=1000)
    write(w / "src/util.py", "def run():\n    return 'RUN'\n", mtime=3000)
    write(w / "web/app.ts", "export function run() {}\n", mtime=2000)
    write(w / "README.md", "Run it: python -m app\n", mtime=500)
    return w


@pytest.mark.anyio
async def test_grep_files_with_matches_newest_first(ctx: ToolContext, tree: Path) -> None:
    r = await grep(ctx, "run")
    assert r.output == "Found 3 files\nsrc/util.py\nweb/app.ts\nsrc/app.py"
    assert r.data == {
        "mode": "files_with_matches",
        "numFiles": 3,
        "filenames": ["src/util.py", "web/app.ts", "src/app.py"],
        "totalFiles": 3,
    }
    r = await grep(ctx, "run", **{"-i": True})
    assert r.data and r.data["numFiles"] == 4
    r = await grep(ctx, "nothing here")
    assert r.output == "No files found" and r.data and r.data["filenames"] == []


@pytest.mark.anyio
async def test_grep_content_like_ripgrep(ctx: ToolContext, tree: Path) -> None:
    r = await grep(ctx, r"def \w+", output_mode="content")
    assert r.output == "src/app.py:3:def main():\nsrc/util.py:1:def run():"
    assert r.data == {
        "mode": "content",
        "numFiles": 2,
        "filenames": ["src/app.py", "src/util.py"],
        "content": r.output,
        "numLines": 2,
        "totalLines": 2,
    }
    r = await grep(ctx, "main", output_mode="content", **{"-B": 1, "-A": 1, "-n": False})
    assert r.output == "src/app.py-\nsrc/app.py:def main():\nsrc/app.py-    return run()"
    r = await grep(ctx, "return", output_mode="content", context=0, path="src/app.py")
    assert r.output == "4:    return run()"  # one file named: no file name, as ripgrep
    r = await grep(ctx, r"main\(\):\n\s+return", output_mode="content", multiline=True)
    assert r.output == "src/app.py:3:def main():\nsrc/app.py:4:    return run()"
    # Without multiline a match never spans lines, whatever the pattern's classes take.
    assert (await grep(ctx, r"main\(\):\s+return", output_mode="content")).output == (
        "No matches found"
    )


@pytest.mark.anyio
async def test_grep_count_and_filters(ctx: ToolContext, tree: Path) -> None:
    r = await grep(ctx, "(?i)run", output_mode="count")
    assert r.data == {
        "mode": "count",
        "numFiles": 4,
        "filenames": [],
        "content": "README.md:1\nsrc/app.py:1\nsrc/util.py:2\nweb/app.ts:1",
        "numMatches": 5,
    }
    assert r.output.endswith("Found 5 total occurrences across 4 files.")
    files = {
        "*.py": ["src/util.py", "src/app.py"],
        "!*.py": ["web/app.ts", "README.md"],
        "*.{ts,md}": ["web/app.ts", "README.md"],
        "src/**": ["src/util.py", "src/app.py"],
        "*.md, *.ts": ["web/app.ts", "README.md"],
    }
    for g, want in files.items():
        r = await grep(ctx, "(?i)run", glob=g)
        assert r.data and r.data["filenames"] == want, g
    r = await grep(ctx, "(?i)run", type="py")
    assert r.data and r.data["filenames"] == ["src/util.py", "src/app.py"]
    r = await grep(ctx, "x", type="klingon")
    assert r.is_error and "unknown file type 'klingon'" in r.output
    r = await grep(ctx, "(?<=a)b")
    assert r.is_error and "no lookaround" in r.output


@pytest.mark.anyio
async def test_grep_skips_gitignored_vcs_and_binary_files(ctx: ToolContext) -> None:
    w = ctx.cwd
    write(w / ".git/config", "needle\n")
    write(w / ".gitignore", "node_modules/\n*.log\n!keep.log\n")
    write(w / "node_modules/x/i.js", "needle\n")
    write(w / "a.log", "needle\n")
    write(w / "keep.log", "needle\n")
    write(w / "sub/.gitignore", "local.txt\n")
    write(w / "sub/local.txt", "needle\n")
    write(w / "sub/other.txt", "needle\n")
    (w / "bin.dat").write_bytes(b"needle\0\1")
    r = await grep(ctx, "needle")
    assert r.data and sorted(r.data["filenames"]) == ["keep.log", "sub/other.txt"]
    # From inside the repository, the ignore files above still count, as in ripgrep.
    r = await grep(ctx, "needle", path="sub")
    assert r.data and r.data["filenames"] == ["sub/other.txt"]
    write(w / "sub/x.log", "needle\n")
    r = await grep(ctx, "needle", path="sub")
    assert r.data and r.data["filenames"] == ["sub/other.txt"]
    # An ignored directory or file named on purpose is searched.
    r = await grep(ctx, "needle", path="node_modules")
    assert r.data and r.data["filenames"] == ["node_modules/x/i.js"]
    r = await grep(ctx, "needle", path="a.log")
    assert r.data and r.data["filenames"] == ["a.log"]
    # Glob does not read .gitignore (Claude Code's Glob finds ignored files too).
    r = await call(ctx, "Glob", pattern="**/*.log")
    assert r.data and sorted(r.data["filenames"]) == ["a.log", "keep.log", "sub/x.log"]


@pytest.mark.anyio
async def test_grep_output_is_bounded(ctx: ToolContext) -> None:
    w = ctx.cwd
    write(w / "big.txt", "".join(f"match {n}\n" for n in range(50_000)))
    r = await grep(ctx, "match", output_mode="content")
    assert r.data is not None
    assert (r.data["numLines"], r.data["totalLines"], r.data["appliedLimit"]) == (250, 50_000, 250)
    assert r.output.endswith("[Showing results with pagination = limit: 250, offset: 0]")
    r = await grep(ctx, "match", output_mode="content", head_limit=2, offset=10)
    assert r.output.startswith("big.txt:11:match 10\nbig.txt:12:match 11\n\n[Showing")
    r = await grep(ctx, "match", output_mode="content", head_limit=0)  # "no limit": bounded
    assert r.data is not None and r.data["numLines"] == 10_000
    assert len(r.output) < MAX_OUTPUT_CHARS + 500 and "characters truncated" in r.output
    assert len(r.data["content"]) < MAX_DATA_CHARS + 100
    write(w / "wide.txt", "needle" + "x" * 100_000 + "\n")
    r = await grep(ctx, "needle", output_mode="content", path="wide.txt")
    assert r.output.endswith("… [line cut: 100006 characters]") and len(r.output) < 600


# -- what Glob and Grep never reach --------------------------------------------------------------


@pytest.mark.anyio
async def test_glob_and_grep_from_cwd_never_reveal_the_state_dir_inside_it(
    nested: ToolContext,
) -> None:
    ctx = nested
    w = ctx.cwd
    home = Path(ctx.env["SUPERVISE_HOME"])
    write(w / "mine.txt", "TOPSECRET is a word in my own file\n")
    (w / "link").symlink_to(home)  # symlinks are not followed
    (w / "dblink").symlink_to(home / "state.db")
    r = await call(ctx, "Glob", pattern="**/*")
    assert r.data and r.data["filenames"] == ["mine.txt"]
    assert "1 path left out" in r.output
    r = await grep(ctx, "TOPSECRET", output_mode="content", **{"-i": True})
    assert r.output.startswith("mine.txt:1:TOPSECRET is a word in my own file")
    assert "records" not in r.output and "boom" not in r.output
    for tool, args in [
        ("Glob", {"pattern": "**/*", "path": "state"}),
        ("Glob", {"pattern": "state/**"}),  # the leading directory is where it searches
        ("Glob", {"pattern": "*", "path": "link"}),
        ("Grep", {"pattern": "TOPSECRET", "path": "link"}),
        ("Grep", {"pattern": "TOPSECRET", "path": "dblink"}),  # a symlink to a protected file
        ("Grep", {"pattern": "TOPSECRET", "path": "state/state.db"}),
    ]:
        for prepared in (True, False):  # through the loop, or called as is
            t = TOOLS[tool]
            r = await call_tool(t, t.prepare(args, ctx) if prepared else args, ctx)
            assert r.is_error and "inside supervise's state directory" in r.output, (tool, args)
    # The triggering process's output is the one file of the state dir a thread may search.
    c = replace(ctx, output_path=home / "runs/1/output.log")
    r = await grep(c, "boom", output_mode="content", path=str(home / "runs/1/output.log"))
    assert r.output == "1:boom: TOPSECRET in the output"


@pytest.mark.anyio
async def test_glob_and_grep_never_read_the_daemons_own_proc_entry(ctx: ToolContext) -> None:
    for path in ("/proc/self", f"/proc/{os.getpid()}", f"/proc/{threading.get_native_id()}"):
        r = await call(ctx, "Glob", pattern="*", path=path)
        assert r.is_error and "daemon's own /proc entry" in r.output
    r = await grep(ctx, "PATH", path="/proc/self/environ")
    assert r.is_error and "daemon's own /proc entry" in r.output
    r = await grep(ctx, "PATH", path="/proc/thread-self/environ")
    assert r.is_error and "daemon's own /proc entry" in r.output


@pytest.mark.anyio
async def test_read_deny_rules_hide_paths_from_glob_and_grep(ctx: ToolContext) -> None:
    w = ctx.cwd
    write(w / "public/a.txt", "needle\n")
    write(w / "private/b.txt", "needle\n")
    write(w / "asks/c.txt", "needle\n")
    write(w / ".env", "needle\n")
    profile = Profile.from_json(
        [
            {
                "allow": ["Read"],
                "deny": [f"Read({w}/private/:*)", "Read(.env)"],
                "ask": [f"Read({w}/asks/:*)"],
            }
        ]
    )
    c = replace(ctx, profile=profile)
    r = await call(c, "Glob", pattern="**/*")
    assert r.data and r.data["filenames"] == ["public/a.txt"]
    assert "3 paths left out: denied by the permission rules" in r.output
    r = await grep(c, "needle")
    assert r.data and r.data["filenames"] == ["public/a.txt"]
    # An ask rule over the searched directory itself was answered by a person: its files show.
    r = await grep(c, "needle", path="asks")
    assert r.data and r.data["filenames"] == ["asks/c.txt"]


# -- permission rules ---------------------------------------------------------------------------


def test_glob_and_grep_are_judged_by_read_rules(tmp_path: Path) -> None:
    w = tmp_path / "w"
    (w / "secret").mkdir(parents=True)
    where = Where(w, tmp_path / "home")
    reads = Profile.from_json([{"allow": [f"Read({w}/:*)"], "deny": [f"Read({w}/secret/:*)"]}])

    def decide(profile: Profile, tool: str, args: dict[str, Any]) -> str:
        return profile.check(tool, args, where).decision

    for tool in ("Glob", "Grep"):
        assert decide(reads, tool, {"pattern": "x"}) == "allow"  # cwd, by default
        assert decide(reads, tool, {"pattern": "x", "path": "sub"}) == "allow"
        assert decide(reads, tool, {"pattern": "x", "path": "/etc"}) == "ask"
        assert decide(reads, tool, {"pattern": "x", "path": "secret"}) == "deny"
        assert decide(reads, tool, {"pattern": "x", "path": "secret/deeper"}) == "deny"
        assert decide(reads, tool, {"pattern": "x", "path": str(tmp_path / "home")}) == "deny"
        assert decide(Profile(), tool, {"pattern": "x"}) == "ask"  # like Read: no rule asks
        assert decide(Profile.from_json([{"allow": ["Read"]}]), tool, {"pattern": "x"}) == "allow"
        named = Profile.from_json([{"allow": ["Read"], "deny": [tool]}])
        assert decide(named, tool, {"pattern": "x"}) == "deny"
    # file_path is the subject of Read, Write and Edit; path still is when it is all there is.
    edits = Profile.from_json([{"allow": [f"Edit({w}/:*)"]}])
    assert decide(edits, "Edit", {"file_path": f"{w}/a.py"}) == "allow"
    assert decide(edits, "Edit", {"path": "a.py"}) == "allow"
    assert decide(edits, "Edit", {"file_path": "/etc/passwd", "path": "a.py"}) == "ask"
    # A hook matcher `Read(...)` still names Read calls only.
    assert matcher_matches(f"Read({w}/:*)", "Read", {"file_path": f"{w}/a"})
    assert not matcher_matches(f"Read({w}/:*)", "Grep", {"pattern": "x", "path": str(w)})


def test_the_hider_leaves_out_only_what_is_below_the_searched_directory(tmp_path: Path) -> None:
    w = tmp_path / "w"
    where = Where(w)
    p = Profile.from_json([{"deny": [f"Read({w}/a/:*)"], "ask": [f"Read({w}/b/x.txt)"]}])
    hide = p.hider("Grep", str(w), where)
    assert hide is not None
    assert [hide(f"{w}/{x}") for x in ("a", "a/y", "ab", "b/x.txt", "b/y.txt")] == [
        True,
        True,
        False,
        True,
        False,
    ]
    inside = p.hider("Glob", f"{w}/a", where)  # the deny over the root judged the call
    assert inside is not None and not inside(f"{w}/a/y")
    assert Profile.from_json([{"deny": ["Bash(rm:*)"]}]).hider("Glob", str(w), where) is None


# -- a walk's bounds ------------------------------------------------------------------------------


def test_a_walk_stops_at_its_bounds_and_says_so(ctx: ToolContext) -> None:
    for n in range(20):
        write(ctx.cwd / "d" / f"{n}.txt", "")
    walk = Walk(ctx, ctx.cwd, max_entries=5)
    assert len(list(walk.files())) < 5 and walk.stopped == "the search stopped after 5 entries"
    walk = Walk(ctx, ctx.cwd, deadline_s=-1)
    assert list(walk.files()) == [] and walk.stopped is not None


# -- system hooks read file_path ----------------------------------------------------------------


def test_the_sensitive_file_reminder_reads_file_path() -> None:
    def call_(tool: str, **args: Any) -> tuple[str, dict[str, Any]]:
        return (tool, {"output": "ok", "is_error": False, "arguments": args})

    cfg = SystemHookConfig()
    (msg,) = collect_system_hooks([call_("Write", file_path="/w/config/.env")], [], cfg)
    assert "sensitive file (/w/config/.env)" in msg
    (msg,) = collect_system_hooks([call_("Edit", path="key.pem")], [], cfg)
    assert "sensitive file (key.pem)" in msg


# -- real hook scripts on the real loop ----------------------------------------------------------


@dataclass
class Journal:
    thread_id: int = 7
    saved: list[Entry] = field(default_factory=list)

    def append(self, body: Body) -> Entry:
        entry = Entry(len(self.saved) + 1, 1_700_000_000.0 + len(self.saved), body)
        self.saved.append(entry)
        return entry

    def of(self, kind: type[Any]) -> list[Any]:
        return [e.body for e in self.saved if isinstance(e.body, kind)]


@dataclass
class Table:
    replies: Sequence[Reply]
    name: str = "table:tools"

    async def complete(
        self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Reply:
        n = sum(1 for m in messages if isinstance(m, AssistantMessage))
        return self.replies[n] if n < len(self.replies) else Reply("(end of table)")


def tool_call(name: str, call_id: str, **args: Any) -> Reply:
    return Reply("", (ToolCall(call_id, name, args),), Usage(3, 1))


# A PreToolUse file guard written as the public ones are: bash, with python3 reading the
# event JSON from stdin, blocking by exit 2 with the reason on stderr.
ENV_GUARD = """#!/usr/bin/env bash
INPUT=$(cat)
FILE_PATH=$(printf '%s' "$INPUT" | python3 -c '
import json, sys
print(json.load(sys.stdin).get("tool_input", {}).get("file_path", ""))')
printf '%s\\n' "$FILE_PATH" >> "$CLAUDE_PROJECT_DIR/guard-saw.txt"
case "$(basename "$FILE_PATH")" in
  .env|.env.*) echo "BLOCKED: .env files hold secrets; edit them by hand" >&2; exit 2 ;;
esac
exit 0
"""

# A PostToolUse formatter's first lines, as the public ones read the event: with jq.
FORMATTER = """#!/usr/bin/env bash
INPUT=$(cat)
f=$(printf '%s' "$INPUT" | jq -r '.tool_response.filePath // .tool_input.file_path // empty')
ok=$(printf '%s' "$INPUT" | jq -r '.tool_response.success')
hunks=$(printf '%s' "$INPUT" | jq -r '.tool_response.structuredPatch | length')
printf '%s %s %s\\n' "$f" "$ok" "$hunks" >> "$CLAUDE_PROJECT_DIR/formatted.txt"
"""


def hook_script(tmp: Path, name: str, body: str) -> str:
    path = tmp / "hooks" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.anyio
@pytest.mark.skipif(shutil.which("jq") is None, reason="the formatter hook reads JSON with jq")
async def test_a_real_env_guard_blocks_edit_of_env_through_file_path(tmp_path: Path) -> None:
    work = tmp_path / "my project"
    write(work / ".env", "API_KEY=1\n")
    write(work / "app.py", "x = 1\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    guard = hook_script(tmp_path, "guard.sh", ENV_GUARD)
    formatter = hook_script(tmp_path, "fmt.sh", FORMATTER)
    hooks = [
        ShellHook("PreToolUse", guard, "Edit|Write", 10_000, claude=True),
        ShellHook("PostToolUse", formatter, "Edit|Write", 10_000, claude=True),
    ]
    replies = [
        # The model names the file relatively and with the old key: the guard sees
        # file_path, absolute, all the same.
        tool_call("Edit", "toolu_1", path=".env", old_string="API_KEY=1", new_string="API_KEY=2"),
        tool_call("Write", "toolu_2", file_path="sub/../.env.local", content="K=1\n"),
        tool_call("Edit", "toolu_3", file_path="app.py", old_string="x = 1", new_string="x = 2"),
        Reply("done", (), Usage(3, 1)),
    ]
    journal = Journal()
    journal.append(UserText("tidy up"))
    tools = {n: TOOLS[n] for n in ("Read", "Write", "Edit")}
    ctx = ToolContext(thread_id=7, cwd=work, env=env)
    site = ShellSite(work, env, "test-hook", transcript_path=tmp_path / "t7.jsonl")
    cfg = LoopConfig(
        model=Table(replies),
        tools=tools,
        profile=Profile.from_json([{"allow": ["Read", "Write", "Edit"]}]),
        ctx=ctx,
        system="sys",
        hooks=HookSet([ShellHooks(hooks, site)]),
        retry_attempts=1,
    )
    end = await run_loop(journal, cfg, list(journal.saved), 0)
    assert end.status == "completed"
    assert (work / ".env").read_text() == "API_KEY=1\n" and not (work / ".env.local").exists()
    assert (work / "app.py").read_text() == "x = 2\n"
    saw = (work / "guard-saw.txt").read_text().splitlines()
    assert saw == [f"{work}/.env", f"{work}/.env.local", f"{work}/app.py"]
    outs = journal.of(ToolOutput)
    assert [o.status for o in outs] == ["denied", "denied", "ok"]
    assert "BLOCKED: .env files hold secrets" in outs[0].output
    # The formatter found the file Edit changed, success, and one hunk.
    assert (work / "formatted.txt").read_text() == f"{work}/app.py true 1\n"
    assert [r.decision for r in journal.of(HookRan)].count("deny") == 2


@pytest.mark.anyio
async def test_post_tool_use_gets_each_tools_response(tmp_path: Path) -> None:
    """What a PostToolUse hook reads from stdin, per tool: Claude Code's objects."""
    work = tmp_path / "w"
    write(work / "notes.txt", "alpha\nbeta\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    recorder = hook_script(
        tmp_path,
        "rec.py",
        "#!/usr/bin/env python3\nimport os, sys\n"
        "open(os.path.join(os.environ['CLAUDE_PROJECT_DIR'], '..', 'seen.jsonl'), 'a')"
        ".write(sys.stdin.read().replace('\\n', ' ') + '\\n')\n",
    )
    post = ShellHook("PostToolUse", recorder, None, 10_000, claude=True)
    replies = [
        tool_call("Read", "r", file_path="notes.txt"),
        tool_call("Bash", "b", command="echo hi", description="Say hi"),
        tool_call("Glob", "g", pattern="*.txt"),
        tool_call("Grep", "p", pattern="beta", output_mode="content"),
        Reply("done", (), Usage(3, 1)),
    ]
    journal = Journal()
    journal.append(UserText("look"))
    cfg = LoopConfig(
        model=Table(replies),
        tools={n: TOOLS[n] for n in ("Read", "Bash", "Glob", "Grep")},
        profile=Profile.from_json([{"allow": ["Read", "Bash"]}]),
        ctx=ToolContext(thread_id=7, cwd=work, env=env),
        system="sys",
        hooks=HookSet([ShellHooks([post], ShellSite(work, env, "test-hook"))]),
        retry_attempts=1,
    )
    assert (await run_loop(journal, cfg, list(journal.saved), 0)).status == "completed"
    seen = {
        e["tool_name"]: e
        for e in map(json.loads, (tmp_path / "seen.jsonl").read_text().splitlines())
    }
    assert seen["Read"]["tool_input"] == {"file_path": f"{work}/notes.txt"}
    assert seen["Read"]["tool_response"]["file"]["content"] == "alpha\nbeta"
    assert seen["Bash"]["tool_input"] == {"command": "echo hi", "description": "Say hi"}
    assert seen["Bash"]["tool_response"]["stdout"] == "hi"
    assert seen["Bash"]["tool_response"]["interrupted"] is False
    assert seen["Glob"]["tool_response"]["filenames"] == ["notes.txt"]
    assert seen["Grep"]["tool_response"]["mode"] == "content"
    assert seen["Grep"]["tool_response"]["content"] == "notes.txt:2:beta"


# -- through the daemon ---------------------------------------------------------------------------


def test_the_daemon_gives_glob_and_grep_the_threads_rules(env: Env, daemon: Daemon) -> None:
    """A hook thread's Read deny hides a directory from its Glob and Grep (the daemon puts
    the thread's rules in the tools' context), and the old `path` key still reads a file."""
    write(env.work / "public/a.txt", "needle\n")
    write(env.work / "private/b.txt", "needle\n")
    turns = script(
        env,
        [
            {"tool_calls": [{"name": "Glob", "arguments": {"pattern": "**/*.txt"}}]},
            {"tool_calls": [{"name": "Grep", "arguments": {"pattern": "need[l]e"}}]},  # not itself
            {"tool_calls": [{"name": "Read", "arguments": {"path": "public/a.txt"}}]},
            {"content": "done"},
        ],
    )
    perms = {"allow": ["Read"], "deny": [f"Read({env.work}/private/:*)"]}
    hooks = hook_file(env, {"model": f"scripted:{turns.name}", "permissions": perms})
    run_hooked(env, hooks)
    t = settled(env, "t1", "completed")
    glob, grep_, read = results(t)
    assert glob["data"]["filenames"] == ["public/a.txt"] and "1 path left out" in glob["output"]
    assert grep_["data"]["filenames"] == ["public/a.txt"]
    assert read["data"]["file"] == {
        "filePath": f"{env.work}/public/a.txt",
        "content": "needle",
        "numLines": 1,
        "startLine": 1,
        "totalLines": 1,
    }
