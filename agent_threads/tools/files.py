"""Read, Write and Edit: files relative to the thread's working directory."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pydantic import Field

from agent_threads.tools.base import Tool, ToolArgs, ToolContext, ToolFailure, ToolResult

MAX_READ_BYTES = 10 << 20


def _path(ctx: ToolContext, raw: str) -> Path:
    if "\0" in raw:
        raise ToolFailure(f"{raw!r}: a path cannot contain a NUL byte")
    p = Path(raw).expanduser()
    return p if p.is_absolute() else ctx.cwd / p


def _read_text(path: Path, raw: str) -> str:
    if not path.exists():
        raise ToolFailure(f"{raw}: no such file")
    if path.is_dir():
        raise ToolFailure(f"{raw}: is a directory; use Bash with ls to list it")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_READ_BYTES + 1)
    except OSError as exc:
        raise ToolFailure(f"{raw}: cannot read: {exc.strerror}") from None
    if b"\0" in data[:8192]:
        raise ToolFailure(f"{raw}: binary file; not shown")
    if len(data) > MAX_READ_BYTES:
        raise ToolFailure(f"{raw}: over {MAX_READ_BYTES >> 20} MiB; read parts with Bash")
    return data.decode("utf-8", errors="replace")


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ReadArgs(ToolArgs):
    path: str = Field(description="File to read (relative to the working directory).")
    offset: int | None = Field(default=None, ge=1, description="First line to show (1-based).")
    limit: int | None = Field(default=None, ge=1, description="How many lines to show.")


class ReadTool(Tool):
    name = "Read"
    description = "Read a text file; lines come back numbered. offset/limit show a part."
    Args = ReadArgs

    async def run(self, args: ReadArgs, ctx: ToolContext) -> ToolResult:
        lines = _read_text(_path(ctx, args.path), args.path).splitlines()
        first = args.offset or 1
        last = len(lines) if args.limit is None else min(len(lines), first - 1 + args.limit)
        shown = [f"{n:>6}\t{lines[n - 1]}" for n in range(first, last + 1)]
        if not shown:
            return ToolResult(f"{args.path}: no lines from {first} (it has {len(lines)})")
        return ToolResult("\n".join(shown))


class WriteArgs(ToolArgs):
    path: str = Field(description="File to write (created with its folders if missing).")
    content: str = Field(description="The whole new content.")


class WriteTool(Tool):
    name = "Write"
    description = "Write a whole file, replacing what it held."
    Args = WriteArgs

    async def run(self, args: WriteArgs, ctx: ToolContext) -> ToolResult:
        path = _path(ctx, args.path)
        if path.is_dir():
            raise ToolFailure(f"{args.path}: is a directory")
        try:
            _write_atomic(path, args.content)
        except OSError as exc:
            raise ToolFailure(f"{args.path}: cannot write: {exc.strerror}") from None
        return ToolResult(f"wrote {len(args.content.encode())} bytes to {args.path}")


class EditArgs(ToolArgs):
    path: str = Field(description="File to edit.")
    old_string: str = Field(description="Exact text to replace; must occur exactly once.")
    new_string: str = Field(description="The replacement text.")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")


class EditTool(Tool):
    name = "Edit"
    description = "Replace an exact string in a file (it must be unique unless replace_all)."
    Args = EditArgs

    async def run(self, args: EditArgs, ctx: ToolContext) -> ToolResult:
        path = _path(ctx, args.path)
        text = _read_text(path, args.path)
        if args.old_string == args.new_string:
            raise ToolFailure("old_string and new_string are the same; nothing to change")
        if not args.old_string:
            raise ToolFailure("old_string is empty; give the exact text to replace")
        count = text.count(args.old_string)
        if count == 0:
            raise ToolFailure(f"old_string was not found in {args.path}; Read it and copy exactly")
        if count > 1 and not args.replace_all:
            raise ToolFailure(
                f"old_string occurs {count} times in {args.path}; it must be unique: add "
                "surrounding lines, or set replace_all"
            )
        try:
            _write_atomic(path, text.replace(args.old_string, args.new_string))
        except OSError as exc:
            raise ToolFailure(f"{args.path}: cannot write: {exc.strerror}") from None
        return ToolResult(f"replaced {count} occurrence{'s' * (count > 1)} in {args.path}")
