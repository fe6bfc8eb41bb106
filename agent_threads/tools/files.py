"""Read, Write and Edit: files relative to the thread's working directory.

A path is resolved first (`~` from the tools' HOME, relative to the working directory, `..`
and symlinks followed), and a file inside supervise's state directory ($SUPERVISE_HOME) or
the daemon's own /proc entry is refused whatever the permissions say: these tools run inside
the daemon, and that is where its records and its model keys are. One exception: Read may
read the triggering process's own output ($SUPERVISE_OUTPUT), which the thread is there to
look at. What is really opened is checked again through its descriptor, so a symlink
swapped in meanwhile gains nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from pydantic import Field

from agent_threads.tools.base import Tool, ToolArgs, ToolContext, ToolFailure, ToolResult

MAX_READ_BYTES = 10 << 20


_PROC_PID = re.compile(r"^/proc/(\d+)(?:/|$)")


def _expand_user(raw: str, env: Mapping[str, str]) -> str:
    """`~` as the tools' shell would expand it: from their HOME, not the daemon's."""
    if (raw == "~" or raw.startswith("~/")) and env.get("HOME"):
        return env["HOME"] + raw[1:]
    return os.path.expanduser(raw)


def _path(ctx: ToolContext, raw: str, *, write: bool) -> Path:
    """The real path `raw` names (nothing of it need exist), once it is not off limits."""
    if "\0" in raw:
        raise ToolFailure(f"{raw!r}: a path cannot contain a NUL byte")
    p = Path(_expand_user(raw, ctx.env))
    real = Path(os.path.realpath(p if p.is_absolute() else ctx.cwd / p))
    _refuse_protected(ctx, real, raw, write=write)
    return real


def _own_output(ctx: ToolContext, real: Path) -> bool:
    if ctx.output_path is None:
        return False
    output = Path(os.path.realpath(ctx.output_path))
    return real in (output, output.with_name(output.name + ".1"))  # and its scanned head


def _refuse_protected(ctx: ToolContext, real: Path, raw: str, *, write: bool) -> None:
    if not write and _own_output(ctx, real):
        return
    why = _protected(ctx.env, real)
    if why is not None:
        shown = raw if str(real) == raw else f"{raw} (that is {real})"
        raise ToolFailure(
            f"{shown}: refused: {why}; tools never read or write it, whatever the permissions say"
        )


def _protected(env: Mapping[str, str], real: Path) -> str | None:
    """Why `real` is off limits to these tools, or None."""
    home = env.get("SUPERVISE_HOME")
    if home:
        state = Path(os.path.realpath(home))
        if real == state or state in real.parents:
            return "it is inside supervise's state directory ($SUPERVISE_HOME)"
    m = _PROC_PID.match(str(real))
    if m is not None and _tgid(int(m.group(1))) == os.getpid():
        # /proc/self/environ and /proc/<a thread of ours>/mem: the daemon's keys and memory.
        return "it is the supervise daemon's own /proc entry"
    return None


def _tgid(pid: int) -> int | None:
    """The process a /proc/PID entry belongs to (a thread's id names its process's too)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Tgid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _check_opened(ctx: ToolContext, fd: int, raw: str, *, write: bool) -> None:
    """Refuse what `fd` really is, if a path changed under us between resolving and opening."""
    try:
        opened = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return  # no /proc: the resolved path was checked
    _refuse_protected(ctx, Path(opened), raw, write=write)


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
        _check_opened(ctx, fd, raw, write=write)
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise ToolFailure(f"{raw}: is a directory; use Bash with ls to list it")
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
        _check_opened(ctx, dfd, raw, write=True)
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
    path: str = Field(description="File to read (relative to the working directory).")
    offset: int | None = Field(default=None, ge=1, description="First line to show (1-based).")
    limit: int | None = Field(default=None, ge=1, description="How many lines to show.")


class ReadTool(Tool):
    name = "Read"
    description = "Read a text file; lines come back numbered. offset/limit show a part."
    Args = ReadArgs

    async def run(self, args: ReadArgs, ctx: ToolContext) -> ToolResult:
        lines = _read_text(ctx, _path(ctx, args.path, write=False), args.path).splitlines()
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
        path = _path(ctx, args.path, write=True)
        if path.is_dir():
            raise ToolFailure(f"{args.path}: is a directory")
        try:
            _write_atomic(ctx, path, args.content, args.path)
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
        path = _path(ctx, args.path, write=True)
        text = _read_text(ctx, path, args.path, write=True)
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
            _write_atomic(ctx, path, text.replace(args.old_string, args.new_string), args.path)
        except OSError as exc:
            raise ToolFailure(f"{args.path}: cannot write: {exc.strerror}") from None
        return ToolResult(f"replaced {count} occurrence{'s' * (count > 1)} in {args.path}")
