"""The bounded, guarded walk under Glob and Grep, and the glob patterns they match with.

These tools run inside the daemon, so the walk itself keeps them where they may be:

- it never follows a symlink it meets (a symlinked file is not listed, a symlinked directory
  not entered), and opens each directory through its parent's descriptor with O_NOFOLLOW, so
  a directory swapped for a symlink meanwhile is not entered either; a path is therefore its
  real path, checked as it is met;
- it never lists or enters what `guard` protects ($SUPERVISE_HOME, the daemon's /proc
  entry), nor what the permission rules deny or ask for below the searched directory
  (Claude Code hides a Read-denied directory from Glob and Grep); both are counted as
  `left_out`, so the tool can say that something was;
- it skips version control directories (.git, ...) and, for Grep, what .gitignore, .ignore
  and .rgignore files leave out (as ripgrep, which Claude Code's Grep runs, does);
- it stops at a deadline and a number of entries, and says so (`stopped`).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pathspec
import re2

from agent_threads.tools.base import ToolContext, ToolFailure
from agent_threads.tools.guard import check_opened, withheld

DEADLINE_S = 20.0
MAX_ENTRIES = 200_000
MAX_DEPTH = 64
MAX_IGNORE_BYTES = 1 << 20
VCS_DIRS = frozenset({".git", ".hg", ".svn", ".bzr", ".jj", ".sl"})
IGNORE_FILES = (".gitignore", ".ignore", ".rgignore")
_META = re.compile(r"[*?\[{\\]")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Found:
    """A regular file the walk met; `dir_fd` is its directory, open until the walk goes on."""

    rel: str  # relative to the searched directory, '/'-separated
    real: str
    dir_fd: int
    name: str


@dataclass(frozen=True)
class _Ignores:
    """The ignore files of one directory, which sees a path `rel` of the walk as
    `above + rel[len(base) + 1:]`: `base` is a directory below the root (relative to it),
    `above` the way from a directory above the root down to it."""

    base: str
    above: str
    spec: Any  # pathspec.GitIgnoreSpec


@dataclass
class Walk:
    """Regular files under `root` (a real, checked directory), in name order."""

    ctx: ToolContext
    root: Path
    hidden: Callable[[str], bool] | None = None  # what the permission rules withhold
    ignores: bool = False  # honour .gitignore and the like (Grep)
    deadline_s: float = DEADLINE_S
    max_entries: int = MAX_ENTRIES
    left_out: int = 0  # entries withheld: protected, or denied by a rule
    stopped: str | None = None  # why the walk ended before it had seen everything
    _entries: int = 0
    _until: float = field(default=0.0, repr=False)

    def files(self) -> Generator[Found, None, None]:
        self._until = time.monotonic() + self.deadline_s
        off_limits = withheld(self.ctx.env)
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise ToolFailure(f"{self.root}: cannot list: {exc.strerror}") from None
        try:
            check_opened(self.ctx, fd, str(self.root), write=False)
            specs = self._parent_ignores() if self.ignores else []
            yield from self._dir(fd, str(self.root), "", specs, 0, off_limits)
        finally:
            os.close(fd)

    def over(self) -> bool:
        """Whether a bound is reached (and why, in `stopped`)."""
        if self.stopped is None and time.monotonic() > self._until:
            self.stopped = f"the search stopped after {self.deadline_s:g} s"
        elif self.stopped is None and self._entries >= self.max_entries:
            self.stopped = f"the search stopped after {self.max_entries} entries"
        return self.stopped is not None

    def _dir(
        self,
        fd: int,
        real: str,
        rel: str,
        specs: list[_Ignores],
        depth: int,
        off_limits: Callable[[str], bool],
    ) -> Iterator[Found]:
        try:
            with os.scandir(fd) as it:
                # Read while the listing is open: a DirEntry asks its listing's descriptor.
                entries = sorted(
                    (e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False))
                    for e in it
                )
        except OSError:
            return
        if self.ignores:
            specs = specs + _load_ignores(fd, rel)
        for name, is_dir, is_file in entries:
            if self.over():
                return
            self._entries += 1
            child_real = f"{real.rstrip('/')}/{name}"
            child_rel = f"{rel}/{name}" if rel else name
            if not self._keep(child_real, child_rel, name, is_dir, is_file, specs, off_limits):
                continue
            if is_file:
                yield Found(child_rel, child_real, fd, name)
            elif depth < MAX_DEPTH:
                yield from self._subdir(fd, name, child_real, child_rel, specs, depth, off_limits)

    def _keep(
        self,
        real: str,
        rel: str,
        name: str,
        is_dir: bool,
        is_file: bool,
        specs: list[_Ignores],
        off_limits: Callable[[str], bool],
    ) -> bool:
        if not (is_dir or is_file) or (is_dir and name in VCS_DIRS):
            return False  # symlinks, FIFOs, sockets, devices; .git and the like
        if off_limits(real) or (self.hidden is not None and self.hidden(real)):
            self.left_out += 1
            return False
        return not (specs and _ignored(specs, rel, is_dir))

    def _subdir(
        self,
        fd: int,
        name: str,
        real: str,
        rel: str,
        specs: list[_Ignores],
        depth: int,
        off_limits: Callable[[str], bool],
    ) -> Iterator[Found]:
        try:
            # O_NOFOLLOW: a directory replaced by a symlink since it was listed is not entered.
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError:
            return
        try:
            yield from self._dir(child, real, rel, specs, depth + 1, off_limits)
        finally:
            os.close(child)

    def _parent_ignores(self) -> list[_Ignores]:
        """The ignore files of the directories above the root, up to its git repository's
        top (none outside a repository), as ripgrep reads them; none if they leave out the
        root itself, which was named to be searched."""
        chain: list[Path] = []
        for d in self.root.parents:
            chain.append(d)
            if (d / ".git").exists():
                break
        else:
            return []
        out: list[_Ignores] = []
        for d in reversed(chain):
            above = os.path.relpath(self.root, d) + "/"
            try:
                fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                out += _load_ignores(fd, "", above)
            finally:
                os.close(fd)
        # A directory named on purpose is searched even if those files leave it out.
        said = [s.spec.check_file(s.above).include for s in out]
        return [] if [x for x in said if x is not None][-1:] == [True] else out


def _load_ignores(fd: int, base: str, above: str = "") -> list[_Ignores]:
    out = []
    for name in IGNORE_FILES:
        try:
            f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
        except OSError:
            continue
        try:
            text = os.read(f, MAX_IGNORE_BYTES).decode("utf-8", errors="replace")
        except OSError:
            continue
        finally:
            os.close(f)
        out.append(_Ignores(base, above, pathspec.GitIgnoreSpec.from_lines(text.splitlines())))
    return out


def _ignored(specs: list[_Ignores], rel: str, is_dir: bool) -> bool:
    """Whether the ignore files leave `rel` out: the deepest file that has a say wins."""
    verdict = False
    for s in specs:
        if s.base and not rel.startswith(s.base + "/"):
            continue
        sub = s.above + (rel[len(s.base) + 1 :] if s.base else rel)
        res = s.spec.check_file(sub + "/" if is_dir else sub)
        if res.include is not None:
            verdict = bool(res.include)
    return verdict


# -- glob patterns --------------------------------------------------------------------------


def split_pattern(pattern: str) -> tuple[str, str]:
    """(the leading directories of a glob that hold no wildcard, the rest). Pure.

    `/etc/*.conf` is (`/etc`, `*.conf`), `src/**/*.ts` is (`src`, `**/*.ts`), `*.py` is
    (``, `*.py`): the tools search from that directory, so what rules and hooks judge as the
    searched directory is the one searched.
    """
    segments = pattern.split("/")
    k = 0
    while k < len(segments) - 1 and not _META.search(segments[k]):
        k += 1
    prefix = "/".join(segments[:k])
    if k and not prefix:
        prefix = "/"
    return prefix, "/".join(segments[k:])


def compile_glob(pattern: str) -> Any:
    """A glob over '/'-separated relative paths, compiled with RE2 (linear time).

    `*` and `?` stay within a path segment and match a leading dot; `**` as a whole segment
    matches any number of directories; `[...]`, `[!...]` and `{a,b}` (nested) as in
    ripgrep's globs; a backslash escapes the next character.

    Raises:
        ToolFailure: the pattern is not a glob.
    """
    regex, _ = _translate(pattern, 0, 0)
    opts = re2.Options()
    opts.log_errors = False
    try:
        return re2.compile(regex, opts)
    except re2.error as exc:
        raise ToolFailure(f"bad glob {pattern!r}: {exc}") from None


def _translate(p: str, i: int, depth: int) -> tuple[str, int]:
    out: list[str] = []
    n = len(p)
    while i < n:
        c = p[i]
        if depth and c in ",}":
            break
        if c == "\\" and i + 1 < n:
            out.append(re.escape(p[i + 1]))
            i += 2
        elif c == "*":
            text, i = _stars(p, i, depth)
            out.append(text)
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            text, i = _char_class(p, i)
            out.append(text)
        elif c == "{" and depth < 8:
            text, i = _braces(p, i, depth)
            out.append(text)
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out), i


def _stars(p: str, i: int, depth: int) -> tuple[str, int]:
    j = i
    while j < len(p) and p[j] == "*":
        j += 1
    starts = i == 0 or p[i - 1] == "/" or (depth > 0 and p[i - 1] in "{,")
    ends = j == len(p) or p[j] == "/" or (depth > 0 and p[j] in ",}")
    if j - i < 2 or not (starts and ends):
        return "[^/]*", j
    if j < len(p) and p[j] == "/":
        return "(?:[^/]*/)*", j + 1  # `**/`: any number of directories, none included
    return ".*", j


def _char_class(p: str, i: int) -> tuple[str, int]:
    j = i + 1
    negate = j < len(p) and p[j] in "!^"
    if negate:
        j += 1
    start = j
    if j < len(p) and p[j] == "]":
        j += 1  # a leading ] is a member
    while j < len(p) and p[j] != "]":
        j += 1
    if j >= len(p):
        return re.escape("["), i + 1  # no closing bracket: a literal [
    members = "".join("-" if ch == "-" else re.escape(ch) for ch in p[start:j])
    return (f"[^/{members}]" if negate else f"[{members}]"), j + 1


def _braces(p: str, i: int, depth: int) -> tuple[str, int]:
    alternatives = []
    j = i + 1
    while True:
        text, j = _translate(p, j, depth + 1)
        alternatives.append(text)
        if j >= len(p):
            return re.escape("{"), i + 1  # unclosed: a literal {
        if p[j] == "}":
            return "(?:" + "|".join(alternatives) + ")", j + 1
        j += 1  # a comma
