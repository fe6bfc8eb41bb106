"""Read, Write and Edit, in Claude Code's shapes: `file_path`, `offset`/`limit`, `content`,
`old_string`/`new_string`/`replace_all`.

`prepare` makes `file_path` absolute (relative to the thread's working directory, `~` from
the tools' HOME) before permission rules and hooks see it, as Claude Code does, so a guard
cannot be bypassed by a relative spelling. The old key `path` is still taken for
`file_path` (scripted model files and transcripts of earlier versions); `prepare` renames it,
so hooks see `file_path` either way. What these tools never reach is in `guard`. Each
returns Claude Code's `tool_response` object (`responses`) besides the text the model reads.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field

from agent_threads.tools.base import Tool, ToolArgs, ToolContext, ToolFailure, ToolResult
from agent_threads.tools.guard import absolute, check_opened, resolve_path
from agent_threads.tools.responses import (
    EditResponse,
    ReadFile,
    ReadResponse,
    WriteResponse,
    as_data,
    structured_patch,
)

MAX_READ_BYTES = 10 << 20
DEFAULT_READ_LINES = 2000  # Claude Code's Read: at most 2000 lines unless `limit` says
MAX_LINE_CHARS = 2000  # and longer lines are cut

# `path` was these tools' key before they took Claude Code's `file_path`.
FILE_PATH = AliasChoices("file_path", "path")

# Kept importable from here (tests use it).
_check_opened = check_opened


def file_path_arguments(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """`arguments` with `path` renamed `file_path` (in its place) and made absolute. Pure."""
    out = arguments
    if "file_path" not in arguments and "path" in arguments:
        out = {("file_path" if k == "path" else k): v for k, v in arguments.items()}
    raw = out.get("file_path")
    if isinstance(raw, str) and raw and "\0" not in raw:
        out = {**out, "file_path": absolute(raw, ctx)}
    return out


class FileTool(Tool):
    def prepare(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return file_path_arguments(arguments, ctx)


def _read_text(ctx: ToolContext, path: Path, raw: str, *, write: bool = False) -> str:
    try:
        # O_NONBLOCK: a FIFO must not hang the thread; O_NOFOLLOW: the path was resolved, so
        # a symlink here was put in since.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ToolFailure(f"{raw}: no such file") from None
    except OSError as exc:
        raise ToolFailure(f"{raw}: cannot read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        check_opened(ctx, fd, raw, write=write)
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise ToolFailure(f"{raw}: is a directory; list it with Glob (or Bash ls)")
        if not stat.S_ISREG(mode):
            raise ToolFailure(f"{raw}: not a regular file; read it with Bash")
        try:
            data = f.read(MAX_READ_BYTES + 1)
        except OSError as exc:
            raise ToolFailure(f"{raw}: cannot read: {exc.strerror}") from None
    if b"\0" in data[:8192]:
        raise ToolFailure(f"{raw}: binary file; not shown")
    if len(data) > MAX_READ_BYTES:
        raise ToolFailure(f"{raw}: over {MAX_READ_BYTES >> 20} MiB; read parts with Bash")
    return data.decode("utf-8", errors="replace")


def _write_atomic(ctx: ToolContext, path: Path, text: str, raw: str) -> None:
    """Write through a temporary file renamed over `path`, all inside the directory opened
    and checked once: a symlink swapped in on the way cannot send the write elsewhere."""
    path.parent.mkdir(parents=True, exist_ok=True)
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        check_opened(ctx, dfd, raw, write=True)
        try:
            mode: int | None = os.stat(path.name, dir_fd=dfd).st_mode & 0o7777
        except FileNotFoundError:
            mode = None
        tmp = f".{path.name}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                if mode is not None:
                    os.fchmod(f.fileno(), mode)
            os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
    finally:
        os.close(dfd)


class ReadArgs(ToolArgs):
    file_path: str = Field(
        validation_alias=FILE_PATH,
        description="The file to read: an absolute path (a relative one is taken from the "
        "working directory).",
    )
    offset: int | None = Field(
        default=None, ge=0, description="The line number to start reading from (1-based)."
    )
    limit: int | None = Field(
        default=None,
        ge=1,
        description=f"How many lines to read (default {DEFAULT_READ_LINES}).",
    )


class ReadTool(FileTool):
    name = "Read"
    description = (
        "Read a text file; lines come back numbered (cat -n). By default up to "
        f"{DEFAULT_READ_LINES} lines from the start; offset and limit read a part. Lines over "
        f"{MAX_LINE_CHARS} characters are cut."
    )
    Args = ReadArgs

    async def run(self, args: ReadArgs, ctx: ToolContext) -> ToolResult:
        raw = args.file_path
        path = resolve_path(ctx, raw, write=False)
        lines = _read_text(ctx, path, raw).splitlines()
        first = max(args.offset or 1, 1)
        limit = args.limit or DEFAULT_READ_LINES
        last = min(len(lines), first - 1 + limit)
        shown = [_cut_line(line) for line in lines[first - 1 : last]]
        file = ReadFile(absolute(raw, ctx), "\n".join(shown), len(shown), first, len(lines))
        data = as_data(ReadResponse("text", file))
        if not shown:
            return ToolResult(f"{raw}: no lines from {first} (it has {len(lines)})", data=data)
        text = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(shown, first))
        if args.limit is None and last < len(lines):
            text += (
                f"\n[... lines {first}-{last} of {len(lines)} shown; read on with "
                f"offset={last + 1} ...]"
            )
        return ToolResult(text, data=data)


def _cut_line(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return f"{line[:MAX_LINE_CHARS]}… [line cut: {len(line)} characters]"


class WriteArgs(ToolArgs):
    file_path: str = Field(
        validation_alias=FILE_PATH,
        description="The file to write (created with its folders if missing): an absolute "
        "path (a relative one is taken from the working directory).",
    )
    content: str = Field(description="The whole new content.")


class WriteTool(FileTool):
    name = "Write"
    description = "Write a whole file, replacing what it held."
    Args = WriteArgs

    async def run(self, args: WriteArgs, ctx: ToolContext) -> ToolResult:
        raw = args.file_path
        path = resolve_path(ctx, raw, write=True)
        if path.is_dir():
            raise ToolFailure(f"{raw}: is a directory")
        existed = path.is_file()
        original = _old_text(ctx, path, raw) if existed else None
        try:
            _write_atomic(ctx, path, args.content, raw)
        except OSError as exc:
            raise ToolFailure(f"{raw}: cannot write: {exc.strerror}") from None
        patch = structured_patch(original, args.content) if original is not None else []
        response = WriteResponse(
            "update" if existed else "create", absolute(raw, ctx), args.content, patch, original
        )
        size = len(args.content.encode())
        return ToolResult(f"wrote {size} bytes to {raw}", data=as_data(response))


def _old_text(ctx: ToolContext, path: Path, raw: str) -> str | None:
    """What a file held before Write replaces it; None if it is no text to show."""
    try:
        return _read_text(ctx, path, raw, write=True)
    except ToolFailure:
        return None


class EditArgs(ToolArgs):
    file_path: str = Field(
        validation_alias=FILE_PATH,
        description="The file to edit: an absolute path (a relative one is taken from the "
        "working directory).",
    )
    old_string: str = Field(description="Exact text to replace; must occur exactly once.")
    new_string: str = Field(description="The replacement text.")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")


class EditTool(FileTool):
    name = "Edit"
    description = "Replace an exact string in a file (it must be unique unless replace_all)."
    Args = EditArgs

    async def run(self, args: EditArgs, ctx: ToolContext) -> ToolResult:
        raw = args.file_path
        path = resolve_path(ctx, raw, write=True)
        text = _read_text(ctx, path, raw, write=True)
        if args.old_string == args.new_string:
            raise ToolFailure("old_string and new_string are the same; nothing to change")
        if not args.old_string:
            raise ToolFailure("old_string is empty; give the exact text to replace")
        count = text.count(args.old_string)
        if count == 0:
            raise ToolFailure(f"old_string was not found in {raw}; Read it and copy exactly")
        if count > 1 and not args.replace_all:
            raise ToolFailure(
                f"old_string occurs {count} times in {raw}; it must be unique: add "
                "surrounding lines, or set replace_all"
            )
        new = text.replace(args.old_string, args.new_string)
        try:
            _write_atomic(ctx, path, new, raw)
        except OSError as exc:
            raise ToolFailure(f"{raw}: cannot write: {exc.strerror}") from None
        response = EditResponse(
            absolute(raw, ctx),
            args.old_string,
            args.new_string,
            text,
            structured_patch(text, new),
            args.replace_all,
        )
        return ToolResult(
            f"replaced {count} occurrence{'s' * (count > 1)} in {raw}", data=as_data(response)
        )
