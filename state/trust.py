"""Whether a state directory may be used: checked as ssh checks `~/.ssh`, before any use.

supervise runs what its state says (run dirs, their specs, the database), so a state
directory that another user owns or can write to is refused, as is `runs/` or `state.db`
swapped for a symbolic link. A directory supervise cannot write to is refused too, with the
reason, instead of failing later in SQLite or a pid file. `judge` decides from stat results;
`check_state_dir` gathers them.
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from supervise.errors import StateDirError

Kind = Literal["home", "runs", "db"]


@dataclass(frozen=True)
class Entry:
    """What one path of the state directory is, as `lstat` (or `stat`, for home) saw it."""

    path: Path
    kind: Kind
    mode: int
    uid: int
    writable: bool  # access(W_OK): mode bits, a read-only mount, an immutable flag
    read_only_fs: bool


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def judge(entry: Entry, uid: int) -> str | None:
    """The problem with one entry for user `uid`, ending with the fix; None if it is fine."""
    p, chmod = entry.path, "chmod 600" if entry.kind == "db" else "chmod 700"
    if stat.S_ISLNK(entry.mode):
        make = f"mv {_target(p)} {p}" if entry.kind == "db" else f"mkdir -m 700 {p}"
        return (
            f"{p} is a symbolic link (to {_target(p)}): supervise trusts what it finds there "
            f"and must not follow a link to files another user may control; replace the link "
            f"with your own: rm {p} && {make}"
        )
    want = stat.S_ISREG if entry.kind == "db" else stat.S_ISDIR
    if not want(entry.mode):
        return f"{p} is not a {'file' if entry.kind == 'db' else 'directory'}; move it aside"
    if entry.uid != uid:
        return (
            f"{p} is owned by {_user(entry.uid)}, not by you, {_user(uid)}: its owner could "
            f"change what supervise runs; set SUPERVISE_HOME to a directory of your own, or "
            f"have it handed to you: sudo chown -R {_user_name(uid)} {p}"
        )
    if entry.mode & 0o022:
        return (
            f"{p} is writable by group or others (mode {stat.S_IMODE(entry.mode):04o}): they "
            f"could change what supervise runs; run: {chmod} {p}"
        )
    if not entry.writable:
        if entry.read_only_fs:
            return (
                f"{p} is on a read-only filesystem; remount it read-write, or set "
                "SUPERVISE_HOME to a writable directory"
            )
        return (
            f"{p} is not writable (mode {stat.S_IMODE(entry.mode):04o}, or an immutable flag: "
            f"lsattr -d {p}); run: chmod u+w {p} (chattr -i {p} if immutable), or set "
            "SUPERVISE_HOME to a writable directory"
        )
    return None


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _entry(path: Path, kind: Kind, look: Callable[[Path], os.stat_result]) -> Entry | None:
    try:
        st = look(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateDirError(
            f"{path}: cannot inspect it: {exc.strerror}; check its permissions"
        ) from exc
    try:
        ro = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        ro = False
    return Entry(path, kind, st.st_mode, st.st_uid, os.access(path, os.W_OK), ro)


def check_state_dir(home: Path, runs: Path, db: Path, uid: int | None = None) -> None:
    """Refuse a state directory that is not safely ours and writable.

    The home itself may be a symbolic link (as `~/.ssh` may): what it points to is judged.

    Raises:
        StateError: naming the path, what is wrong and the fix (exit 2).
    """
    me = os.geteuid() if uid is None else uid
    entries = [
        _entry(home, "home", Path.stat),
        _entry(runs, "runs", Path.lstat),
        _entry(db, "db", Path.lstat),
    ]
    for entry in entries:
        if entry is not None and (problem := judge(entry, me)) is not None:
            raise StateDirError(problem)
