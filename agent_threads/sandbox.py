"""The sandbox a thread's commands run in: bubblewrap (bwrap), as Claude Code uses on Linux.

Inside it the whole filesystem is read-only except the working directory and the directories
the policy lists, /tmp is private to each command, `$SUPERVISE_HOME` is an empty read-only
directory (only the triggering process's output.log shows through, read-only), and the
network is there or not per policy. Threads cannot reach the state that decides what they may
do, whatever their permission rules say.

`SandboxPolicy` (state/sandboxpolicy.py) is what a hook file or the settings file says;
`bwrap_args` turns it into
bwrap's argv (pure); `Sandbox` is a thread's resolved sandbox, probed once per daemon.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from state.sandboxpolicy import SandboxPolicy
from supervise.errors import SuperviseError

log = logging.getLogger("supervise.sandbox")

PROBE_TIMEOUT_S = 15.0


class SandboxError(SuperviseError):
    """The sandbox is required but cannot run, or cannot be built for this directory."""


@dataclass(frozen=True)
class Mounts:
    """Paths, already resolved, that the argv is built from."""

    cwd: Path
    home: Path  # $SUPERVISE_HOME: hidden
    write: tuple[Path, ...] = ()  # writable besides cwd (existing directories)
    visible: tuple[Path, ...] = ()  # files under home shown read-only (output.log)
    protect: tuple[Path, ...] = ()  # read-only inside the writable dirs (git hooks, config)


def bwrap_args(policy: SandboxPolicy, m: Mounts, *, supervised: bool = False) -> list[str]:
    """bwrap's options for `policy` (everything between `bwrap` and `--`). Pure.

    `supervised` is for a process started with RunProcess: it must outlive the thread and
    take `supervise stop`'s signals itself, so it keeps bwrap's process group (no
    --new-session; the shim already gave it its own session with no terminal) and does not
    die with its parent.

    Raises:
        SandboxError: a writable directory is, or is inside, $SUPERVISE_HOME.
    """
    for w in (m.cwd, *m.write):
        if _inside(w, m.home):
            raise SandboxError(
                f"the sandbox cannot make {w} writable: it is inside SUPERVISE_HOME "
                f"({m.home}), which threads must never write; run the process elsewhere"
            )
    args = [] if supervised else ["--die-with-parent", "--new-session"]
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not policy.network_on:
        args.append("--unshare-net")  # a network namespace with only loopback
    # Mounts apply left to right, later ones covering earlier ones.
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for w in dict.fromkeys((m.cwd, *m.write)):
        args += ["--bind", str(w), str(w)]
    # A hook or config key planted here would run outside the sandbox at the person's next
    # `git status` (core.fsmonitor, hooks), or in a shell hook, which runs unsandboxed.
    for p in m.protect:
        args += ["--ro-bind", str(p), str(p)]
    # Hidden after the binds, so a cwd that holds SUPERVISE_HOME still cannot reach it.
    args += ["--tmpfs", str(m.home)]
    for f in m.visible:
        if _inside(f, m.home):
            args += ["--ro-bind-try", str(f), str(f)]
    args += ["--remount-ro", str(m.home)]
    # As root, bwrap keeps every capability unless told: root could unmount the hiding.
    args += ["--cap-drop", "ALL", "--chdir", str(m.cwd), "--setenv", "TMPDIR", "/tmp"]
    return args


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def find_bwrap(given: str | None, search_path: str | None) -> str | None:
    """The bwrap to use: `given` (the bwrap setting: a path, or empty for none) if set,
    else bwrap on `search_path` (a PATH)."""
    if given is not None:
        return given if given and os.access(given, os.X_OK) else None
    return shutil.which("bwrap", path=search_path or os.defpath)


_probed: dict[tuple[str, bool, Path], str | None] = {}
_probe_lock = threading.Lock()


def probe(bwrap: str, network: bool, home: Path) -> str | None:
    """Why bwrap cannot run here with the options threads use, or None when it can.

    Each option can fail on its own (containers refuse a new /proc or namespaces), so the
    probe uses all of them, and hides `home` as a real call does. The answer is kept for
    the daemon's life, except a probe that did not finish (a busy machine): that one is
    asked again next time rather than leaving threads unsandboxed for good.
    """
    key = (bwrap, network, home)
    with _probe_lock:
        if key in _probed:
            return _probed[key]
    why, final = _probe(bwrap, network, home)
    if final:
        with _probe_lock:
            _probed[key] = why
    return why


def _probe(bwrap: str, network: bool, home: Path) -> tuple[str | None, bool]:
    m = Mounts(cwd=Path("/tmp"), home=home)
    argv = [bwrap, *bwrap_args(SandboxPolicy(network=network), m), "--", "/bin/true"]
    try:
        done = subprocess.run(
            argv, capture_output=True, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return f"{bwrap} did not finish a trial run within {PROBE_TIMEOUT_S:g}s", False
    except OSError as exc:
        return f"{bwrap} did not run: {exc}", True
    if done.returncode == 0:
        return None, True
    err = done.stderr.decode(errors="replace").strip().splitlines()
    return f"{bwrap} failed (exit {done.returncode}): {err[-1] if err else 'no message'}", True


class _Once:
    """Gives its text out once: a warning said once per thread."""

    def __init__(self, text: str | None) -> None:
        self._text = text
        self._lock = threading.Lock()

    def take(self) -> str | None:
        with self._lock:
            text, self._text = self._text, None
        return text


_warned: set[str] = set()


@dataclass(frozen=True)
class Sandbox:
    """A thread's sandbox, resolved: bwrap's path and the policy, or why it runs without."""

    policy: SandboxPolicy
    bwrap: str | None  # None: commands run unsandboxed
    home: Path
    visible: tuple[Path, ...] = ()
    warning: str | None = None  # auto mode without bwrap: said once in the transcript
    notice: _Once = field(default_factory=lambda: _Once(None), compare=False, repr=False)

    @property
    def active(self) -> bool:
        return self.bwrap is not None

    def prefix(self, cwd: Path, *, supervised: bool = False) -> list[str]:
        """`bwrap ... --` to put before a command run in `cwd`; [] when unsandboxed.

        Raises:
            SandboxError: the directories cannot be set up (see `bwrap_args`).
        """
        if self.bwrap is None:
            return []
        cwd = Path(os.path.realpath(cwd))
        write = tuple(
            Path(os.path.realpath(Path(w).expanduser()))
            for w in self.policy.write
            if Path(w).expanduser().is_dir()  # bwrap needs the source to exist
        )
        home = Path(os.path.realpath(self.home))
        visible = tuple(Path(os.path.realpath(v)) for v in self.visible)
        m = Mounts(cwd=cwd, home=home, write=write, visible=visible, protect=_protected(cwd, write))
        return [self.bwrap, *bwrap_args(self.policy, m, supervised=supervised), "--"]


GIT_PROTECTED = (".git/hooks", ".git/config", ".git")  # `.git` only when it is a file


def _protected(cwd: Path, write: tuple[Path, ...]) -> tuple[Path, ...]:
    """What exists of a repository's hooks and config in the writable directories.

    `.git` as a file (a worktree's `gitdir:` pointer) is protected too: rewritten, it would
    point git at a config the sandbox wrote.
    """
    found: list[Path] = []
    for w in dict.fromkeys((cwd, *write)):
        for rel in GIT_PROTECTED:
            p = w / rel
            if (p.is_file() if rel == ".git" else p.exists()) and not p.is_symlink():
                found.append(p)
    return tuple(found)


def resolve(
    policy: SandboxPolicy,
    home: Path,
    visible: Sequence[Path] = (),
    *,
    bwrap: str | None = None,
    search_path: str | None = None,
) -> Sandbox:
    """The sandbox a thread gets under `policy`, probing bwrap once per daemon.

    `bwrap` is the bwrap setting (SUPERVISE_BWRAP: a path, empty for none; None: look for
    it on `search_path`).

    Raises:
        SandboxError: mode `required` and bwrap cannot run here.
    """
    if policy.mode == "off":
        return Sandbox(policy, None, home)
    found = find_bwrap(bwrap, search_path)
    if found is not None:
        why = probe(found, policy.network_on, Path(os.path.realpath(home)))
    elif bwrap is not None:
        why = f"SUPERVISE_BWRAP={bwrap!r} is not an executable bwrap"
    else:
        why = "bwrap (Debian/Ubuntu package bubblewrap) is not installed"
    if why is None:
        return Sandbox(policy, found, home, tuple(visible))
    if policy.mode == "required":
        raise SandboxError(
            f"agent.sandbox is required but the sandbox cannot run: {why}; install bubblewrap "
            "(apt-get install bubblewrap) or set agent.sandbox: auto or off"
        )
    warning = (
        f"commands run WITHOUT a sandbox: {why}; install bubblewrap (apt-get install "
        "bubblewrap), or set agent.sandbox: required to refuse to run unsandboxed"
    )
    if warning not in _warned:  # once per daemon in daemon.log
        _warned.add(warning)
        log.warning("%s", warning)
    return Sandbox(policy, None, home, tuple(visible), warning, _Once(warning))
