"""What the file tools (Read, Write, Edit, Glob, Grep) never reach, whatever the rules say.

A path is resolved first (`~` from the tools' HOME, relative to the working directory, `..`
and symlinks followed), and a path inside supervise's state directory ($SUPERVISE_HOME) or
the daemon's own /proc entry is refused: these tools run inside the daemon, and that is where
its records and its model keys are. One exception: reading the triggering process's own
output ($SUPERVISE_OUTPUT), which the thread is there to look at. What is really opened is
checked again through its descriptor, so a symlink swapped in meanwhile gains nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from agent_threads.tools.base import ToolContext, ToolFailure

_PROC_PID = re.compile(r"^/proc/(\d+)(?:/|$)")


def expand_user(raw: str, env: Mapping[str, str]) -> str:
    """`~` as the tools' shell would expand it: from their HOME, not the daemon's."""
    if (raw == "~" or raw.startswith("~/")) and env.get("HOME"):
        return env["HOME"] + raw[1:]
    return os.path.expanduser(raw)


def absolute(raw: str, ctx: ToolContext) -> str:
    """`raw` made absolute the way Claude Code shows it to hooks: `~` expanded, relative to
    the working directory, `.` and `..` folded (by spelling: symlinks are left to the tool,
    which resolves this very string). Pure but for reading the tools' HOME."""
    p = expand_user(raw, ctx.env)
    return os.path.normpath(p if os.path.isabs(p) else os.path.join(ctx.cwd, p))


def resolve_path(ctx: ToolContext, raw: str, *, write: bool) -> Path:
    """The real path `raw` names (nothing of it need exist), once it is not off limits."""
    if "\0" in raw:
        raise ToolFailure(f"{raw!r}: a path cannot contain a NUL byte")
    p = Path(expand_user(raw, ctx.env))
    real = Path(os.path.realpath(p if p.is_absolute() else ctx.cwd / p))
    refuse_protected(ctx, real, raw, write=write)
    return real


def own_output(ctx: ToolContext, real: Path) -> bool:
    if ctx.output_path is None:
        return False
    output = Path(os.path.realpath(ctx.output_path))
    return real in (output, output.with_name(output.name + ".1"))  # and its scanned head


def refuse_protected(ctx: ToolContext, real: Path, raw: str, *, write: bool) -> None:
    if not write and own_output(ctx, real):
        return
    why = protected(ctx.env, real)
    if why is not None:
        shown = raw if str(real) == raw else f"{raw} (that is {real})"
        raise ToolFailure(
            f"{shown}: refused: {why}; tools never read or write it, whatever the permissions say"
        )


def protected(env: Mapping[str, str], real: Path) -> str | None:
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


def withheld(env: Mapping[str, str]) -> Callable[[str], bool]:
    """`protected` for the many paths of a walk: whether a real path is off limits, with
    the state directory resolved once. The triggering output is no exception here: a walk
    never enters $SUPERVISE_HOME."""
    home = env.get("SUPERVISE_HOME")
    state = os.path.realpath(home) if home else None
    inside = state.rstrip("/") + "/" if state else None

    def off_limits(real: str) -> bool:
        if state is not None and inside is not None and (real == state or real.startswith(inside)):
            return True
        m = _PROC_PID.match(real)
        return m is not None and _tgid(int(m.group(1))) == os.getpid()

    return off_limits


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


def check_opened(ctx: ToolContext, fd: int, raw: str, *, write: bool) -> None:
    """Refuse what `fd` really is, if a path changed under us between resolving and opening."""
    try:
        opened = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return  # no /proc: the resolved path was checked
    refuse_protected(ctx, Path(opened), raw, write=write)
