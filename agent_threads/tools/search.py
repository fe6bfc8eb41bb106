"""Glob and Grep: Claude Code's file-finding tools, on a guarded walk (`walk`).

Their inputs are Claude Code's (hooks reference, "PreToolUse input"; Agent SDK `GlobInput`,
`GrepInput`): Glob `pattern`, `path`; Grep `pattern`, `path`, `glob`, `type`, `output_mode`
(files_with_matches, the default, content or count), `-i`, `-n` (default true), `-A`, `-B`,
`-C` (and `context`), `multiline`, `head_limit` (default 250; 0 for no limit), `offset`.
Their results are Claude Code's `GlobOutput` and `GrepOutput` (`responses`).

As in Claude Code, Glob's files come oldest first by modification time (its tools reference
says "sorted by modification time"; it ran `rg --sort=modified`, oldest first), at most 100
with `truncated` set past that; Grep's files_with_matches come newest first (name order on a
tie); content and count follow the walk (name order). Grep patterns are RE2 (linear time, the
syntax of ripgrep's default engine, which Claude Code's Grep runs: no lookaround, no
backreferences), searched in the daemon on bytes, line by line unless `multiline`, where `.`
also matches a newline (ripgrep's `-U --multiline-dotall`). Grep skips binary files (a NUL in
the first 8 KiB) and files over 16 MiB, and cuts shown lines at 500 characters (Claude Code
passes `--max-columns 500`).

The searched directory (`path`, else the working directory, joined with a glob's leading
directories) is what permission rules judge as a Read of it; below it the walk leaves out
what Read rules deny or ask for, supervise's state and the daemon's /proc entry.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import re2
from pydantic import Field

from agent_threads.permissions import Where
from agent_threads.tools.base import Tool, ToolArgs, ToolContext, ToolFailure, ToolResult
from agent_threads.tools.guard import absolute, check_opened, resolve_path
from agent_threads.tools.responses import GlobResponse, GrepResponse, as_data
from agent_threads.tools.walk import Found, Walk, compile_glob, split_pattern

MAX_GLOB_FILES = 100
DEFAULT_HEAD_LIMIT = 250
MAX_HEAD_LIMIT = 10_000  # what head_limit 0 ("no limit") means here
MAX_COLUMNS = 500
MAX_FILE_BYTES = 16 << 20
MAX_TOTAL_BYTES = 256 << 20
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

# ripgrep's --type names for the common languages (a subset of `rg --type-list`).
FILE_TYPES: dict[str, tuple[str, ...]] = {
    "c": ("*.c", "*.h"),
    "cpp": ("*.cpp", "*.cc", "*.cxx", "*.c++", "*.hpp", "*.hh", "*.hxx", "*.h++", "*.h", "*.inl"),
    "cs": ("*.cs",),
    "css": ("*.css", "*.scss", "*.sass", "*.less"),
    "dart": ("*.dart",),
    "docker": ("Dockerfile", "Dockerfile.*", "*.dockerfile"),
    "elixir": ("*.ex", "*.exs", "*.eex", "*.heex"),
    "erlang": ("*.erl", "*.hrl"),
    "go": ("*.go",),
    "haskell": ("*.hs", "*.lhs"),
    "html": ("*.html", "*.htm", "*.xhtml"),
    "java": ("*.java", "*.jsp"),
    "js": ("*.js", "*.jsx", "*.mjs", "*.cjs", "*.vue"),
    "json": ("*.json", "*.jsonl", "*.geojson"),
    "kotlin": ("*.kt", "*.kts"),
    "lua": ("*.lua",),
    "make": ("Makefile", "makefile", "GNUmakefile", "*.mk", "*.mak"),
    "markdown": ("*.md", "*.markdown", "*.mdx", "*.mkd"),
    "md": ("*.md", "*.markdown", "*.mdx", "*.mkd"),
    "perl": ("*.pl", "*.pm", "*.t"),
    "php": ("*.php", "*.phtml"),
    "proto": ("*.proto",),
    "py": ("*.py", "*.pyi", "*.pyw"),
    "python": ("*.py", "*.pyi", "*.pyw"),
    "r": ("*.R", "*.r", "*.Rmd"),
    "rb": ("*.rb", "*.gemspec", "Gemfile", "Rakefile"),
    "ruby": ("*.rb", "*.gemspec", "Gemfile", "Rakefile"),
    "rust": ("*.rs",),
    "scala": ("*.scala", "*.sbt"),
    "sh": ("*.sh", "*.bash", "*.zsh", ".bashrc", ".bash_profile", ".zshrc", ".profile"),
    "sql": ("*.sql",),
    "svelte": ("*.svelte",),
    "swift": ("*.swift",),
    "terraform": ("*.tf", "*.tfvars"),
    "toml": ("*.toml", "Cargo.lock"),
    "ts": ("*.ts", "*.tsx", "*.mts", "*.cts"),
    "txt": ("*.txt",),
    "xml": ("*.xml", "*.xsd", "*.xsl", "*.xslt", "*.svg"),
    "yaml": ("*.yaml", "*.yml"),
    "zig": ("*.zig",),
}


def search_arguments(arguments: dict[str, Any], ctx: ToolContext, *, glob: bool) -> dict[str, Any]:
    """Glob's and Grep's arguments as rules and hooks see them: `path` absolute, and a glob
    pattern's leading directories moved into it (`src/**/*.py` from /w is `**/*.py` in
    /w/src), so the directory judged is the one searched. Pure."""
    out = dict(arguments)
    raw = out.get("path")
    pattern = out.get("pattern")
    base = raw if isinstance(raw, str) and raw and "\0" not in raw else None
    if glob and isinstance(pattern, str) and "\0" not in pattern:
        prefix, rest = split_pattern(pattern)
        if prefix:
            base = os.path.join(base or ".", prefix)  # an absolute prefix replaces the base
            out["pattern"] = rest
    if base is not None:
        out["path"] = absolute(base, ctx)
    return out


def _rules_hide(ctx: ToolContext, tool: str, root: Path) -> Callable[[str], bool] | None:
    if ctx.profile is None:
        return None
    home = ctx.env.get("SUPERVISE_HOME")
    where = Where(ctx.cwd, Path(home) if home else None, ctx.output_path)
    return ctx.profile.hider(tool, str(root), where)


def _shown_from(ctx: ToolContext) -> Callable[[str], str]:
    """How results show a real path: relative to the working directory when under it."""
    inside = os.path.realpath(ctx.cwd).rstrip("/") + "/"

    def shown(real: str) -> str:
        return real[len(inside) :] if real.startswith(inside) else real

    return shown


def _withheld_note(walk: Walk) -> str:
    notes = []
    if walk.left_out:
        notes.append(
            f"{walk.left_out} path{'s' * (walk.left_out > 1)} left out: denied by the "
            "permission rules, or supervise's own"
        )
    if walk.stopped:
        notes.append(f"{walk.stopped}; results are partial: narrow the path or pattern")
    return "".join(f"\n[{n}]" for n in notes)


# -- Glob -----------------------------------------------------------------------------------


class GlobArgs(ToolArgs):
    pattern: str = Field(
        min_length=1, description='The glob to match file paths against, e.g. "**/*.py".'
    )
    path: str | None = Field(
        default=None,
        description="The directory to search in (default: the working directory).",
    )


class GlobTool(Tool):
    name = "Glob"
    description = (
        "Find files by name pattern: `**` matches any depth, `*` within a directory, "
        '`{a,b}` either; e.g. "**/*.py" or "src/**/test_*.ts". Returns paths (oldest '
        f"modification first), at most {MAX_GLOB_FILES}."
    )
    Args = GlobArgs

    def prepare(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return search_arguments(arguments, ctx, glob=True)

    async def run(self, args: GlobArgs, ctx: ToolContext) -> ToolResult:
        prepared = search_arguments(args.model_dump(exclude_none=True), ctx, glob=True)
        raw = prepared.get("path") or str(ctx.cwd)
        root = resolve_path(ctx, raw, write=False)
        if not root.is_dir():
            why = "not a directory" if root.exists() else "no such directory"
            raise ToolFailure(f"{raw}: {why}")
        rx = compile_glob(prepared["pattern"])
        walk = Walk(ctx, root, _rules_hide(ctx, self.name, root))
        started = time.monotonic()
        found = await anyio.to_thread.run_sync(_glob, walk, rx, abandon_on_cancel=True)
        found.sort()
        shown = _shown_from(ctx)
        names = [shown(real) for _, real in found[:MAX_GLOB_FILES]]
        response = GlobResponse(
            durationMs=int((time.monotonic() - started) * 1000),
            numFiles=len(names),
            filenames=names,
            truncated=len(found) > MAX_GLOB_FILES,
            totalMatches=len(found),
            countIsComplete=walk.stopped is None,
        )
        text = "\n".join(names) if names else "No files found"
        if response.truncated:
            text += (
                f"\n(Results are truncated: {len(found)} files match, the first "
                f"{MAX_GLOB_FILES} are shown. Use a more specific path or pattern.)"
            )
        return ToolResult(text + _withheld_note(walk), data=as_data(response))


def _glob(walk: Walk, rx: Any) -> list[tuple[float, str]]:
    out = []
    for f in walk.files():
        if rx.fullmatch(f.rel) is None:
            continue
        try:
            mtime = os.stat(f.name, dir_fd=f.dir_fd, follow_symlinks=False).st_mtime
        except OSError:
            continue
        out.append((mtime, f.real))
    return out


# -- Grep -----------------------------------------------------------------------------------

OutputMode = Literal["content", "files_with_matches", "count"]


class GrepArgs(ToolArgs):
    pattern: str = Field(description="The regular expression to search for (RE2 syntax).")
    path: str | None = Field(
        default=None,
        description="The file or directory to search in (default: the working directory).",
    )
    glob: str | None = Field(
        default=None,
        description='Only files matching these globs, e.g. "*.py" or "*.{ts,tsx}"; a leading '
        "! leaves files out.",
    )
    type: str | None = Field(
        default=None, description='Only files of this type, e.g. "py", "js", "rust", "go".'
    )
    output_mode: OutputMode = Field(
        default="files_with_matches",
        description='"files_with_matches" (the default): the files; "content": the matching '
        'lines; "count": matching lines per file.',
    )
    case_insensitive: bool | None = Field(default=None, alias="-i", description="Ignore case.")
    line_numbers: bool | None = Field(
        default=None, alias="-n", description="Show line numbers (content; default true)."
    )
    after: int | None = Field(default=None, ge=0, alias="-A", description="Lines after a match.")
    before: int | None = Field(default=None, ge=0, alias="-B", description="Lines before a match.")
    around: int | None = Field(
        default=None, ge=0, alias="-C", description="Lines before and after a match."
    )
    context: int | None = Field(default=None, ge=0, description="Same as -C.")
    multiline: bool | None = Field(
        default=None, description="Let matches span lines (`.` matches a newline)."
    )
    head_limit: int | None = Field(
        default=None,
        ge=0,
        description=f"Show the first N lines or files (default {DEFAULT_HEAD_LIMIT}; 0: all).",
    )
    offset: int | None = Field(default=None, ge=0, description="Skip the first N lines or files.")


class GrepTool(Tool):
    name = "Grep"
    description = (
        "Search file contents with a regular expression (RE2, like ripgrep: no lookaround). "
        "Filter files with glob or type; output_mode files_with_matches (default), content "
        "(with -n, -A/-B/-C) or count. Skips .gitignored, hidden VCS and binary files."
    )
    Args = GrepArgs

    def prepare(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return search_arguments(arguments, ctx, glob=False)

    async def run(self, args: GrepArgs, ctx: ToolContext) -> ToolResult:
        raw = args.path or str(ctx.cwd)
        root = resolve_path(ctx, raw, write=False)
        if not root.exists():
            raise ToolFailure(f"{raw}: no such file or directory")
        q = _Query.of(args)
        walk = Walk(ctx, root, _rules_hide(ctx, self.name, root), ignores=True)
        single = not root.is_dir()
        scan = _Scan(ctx, q, single)
        if single:
            await anyio.to_thread.run_sync(scan.one, root, abandon_on_cancel=True)
        else:
            await anyio.to_thread.run_sync(scan.walk, walk, abandon_on_cancel=True)
        return scan.result(walk)


@dataclass(frozen=True)
class _Query:
    rx: Any
    mode: OutputMode
    multiline: bool
    numbers: bool
    before: int
    after: int
    limit: int
    offset: int
    keep: Callable[[str, str], bool]  # (relative path, name) -> searched?

    @classmethod
    def of(cls, a: GrepArgs) -> _Query:
        around = a.around if a.around is not None else a.context or 0
        limit = DEFAULT_HEAD_LIMIT if a.head_limit is None else a.head_limit or MAX_HEAD_LIMIT
        return cls(
            rx=_compile(a.pattern, bool(a.case_insensitive), bool(a.multiline)),
            mode=a.output_mode,
            multiline=bool(a.multiline),
            numbers=a.line_numbers is not False,
            before=a.before if a.before is not None else around,
            after=a.after if a.after is not None else around,
            limit=min(limit, MAX_HEAD_LIMIT),
            offset=a.offset or 0,
            keep=_file_filter(a.glob, a.type),
        )


def _compile(pattern: str, fold: bool, multiline: bool) -> Any:
    opts = re2.Options()
    opts.log_errors = False
    opts.case_sensitive = not fold
    opts.dot_nl = multiline
    try:
        return re2.compile(b"(?m)" + pattern.encode("utf-8", "surrogateescape"), opts)
    except re2.error as exc:
        arg = exc.args[0] if exc.args else exc
        reason = arg.decode(errors="replace") if isinstance(arg, bytes) else str(arg)
        raise ToolFailure(
            f"pattern {pattern!r} does not compile: {reason} (RE2 syntax, as ripgrep's: no "
            "lookaround or backreferences; escape { } ( ) [ ] . * + ? to match them)"
        ) from None
    except UnicodeEncodeError:
        raise ToolFailure(f"pattern {pattern!r} is not text") from None


def _file_filter(globs: str | None, kind: str | None) -> Callable[[str, str], bool]:
    """Which files Grep searches: ripgrep's --glob (a glob without / matches the name at any
    depth, one with / the path from the searched directory; ! excludes) and --type."""
    include: list[tuple[Any, bool]] = []
    exclude: list[tuple[Any, bool]] = []
    for g in _split_globs(globs or ""):
        negated = g.startswith("!")
        g = g[1:] if negated else g
        if g:
            (exclude if negated else include).append((compile_glob(g.lstrip("/")), "/" in g))
    types: list[Any] = []
    if kind:
        if kind not in FILE_TYPES:
            known = ", ".join(sorted(FILE_TYPES))
            raise ToolFailure(f"unknown file type {kind!r}; known types: {known}")
        types = [compile_glob(g) for g in FILE_TYPES[kind]]

    def hit(rules: list[tuple[Any, bool]], rel: str, name: str) -> bool:
        return any(rx.fullmatch(rel if anchored else name) for rx, anchored in rules)

    def keep(rel: str, name: str) -> bool:
        if include and not hit(include, rel, name):
            return False
        if exclude and hit(exclude, rel, name):
            return False
        return not types or any(rx.fullmatch(name) for rx in types)

    return keep


def _split_globs(text: str) -> list[str]:
    """Globs separated by spaces, or by commas outside braces (as Claude Code splits them)."""
    out = []
    for word in text.split():
        if "{" in word:
            out.append(word)
        else:
            out += [w for w in word.split(",") if w]
    return out


@dataclass
class _Scan:
    """What one Grep call found, gathered as the walk goes (in a worker thread)."""

    ctx: ToolContext
    q: _Query
    single: bool  # a file was named: no file name on content lines, as ripgrep
    files: list[tuple[float, str]] = field(default_factory=list)  # (mtime, shown) with hits
    lines: list[str] = field(default_factory=list)  # content or count lines kept
    shown_files: list[str] = field(default_factory=list)
    total_lines: int = 0
    total_matches: int = 0
    skipped: int = 0  # too big
    read_bytes: int = 0

    def __post_init__(self) -> None:
        self.shown = _shown_from(self.ctx)

    def walk(self, walk: Walk) -> None:
        with contextlib.closing(walk.files()) as files:  # closes its directories if we stop
            for f in files:
                if not self.q.keep(f.rel, f.name):
                    continue
                self._file(f, checked=True)
                if self.read_bytes > MAX_TOTAL_BYTES:
                    walk.stopped = f"the search stopped after reading {MAX_TOTAL_BYTES >> 20} MiB"
                    return

    def one(self, path: Path) -> None:
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self._file(Found(path.name, str(path), fd, path.name), checked=False)
        finally:
            os.close(fd)

    def _file(self, f: Found, *, checked: bool) -> None:
        """Search one file (`checked`: the walk met it, so it is no protected path)."""
        read = _read(f, self.ctx, checked=checked)
        if read is None:
            return
        data, mtime = read
        if data is _TOO_BIG:
            self.skipped += 1
            return
        self.read_bytes += len(data)
        hits = _matching_lines(self.q.rx, data, self.q.multiline)
        if not hits:
            return
        shown = self.shown(f.real)
        self.files.append((mtime, shown))
        self.total_matches += len(hits)
        if self.q.mode == "count":
            self._keep_line(f"{shown}:{len(hits)}" if not self.single else str(len(hits)))
        elif self.q.mode == "content":
            added = False
            for line in _content(data, hits, self.q, None if self.single else shown):
                added = self._keep_line(line) or added
            if added:
                self.shown_files.append(shown)

    def _keep_line(self, line: str) -> bool:
        n = self.total_lines
        self.total_lines += 1
        if self.q.offset <= n < self.q.offset + self.q.limit:
            self.lines.append(line)
            return True
        return False

    def result(self, walk: Walk) -> ToolResult:
        q = self.q
        note = _withheld_note(walk)
        if self.skipped:
            note += f"\n[{self.skipped} file(s) over {MAX_FILE_BYTES >> 20} MiB not searched]"
        if q.mode == "files_with_matches":
            return self._files_result(note)
        cut = self.total_lines > q.offset + q.limit or q.offset > 0
        applied = q.limit if cut else None
        body = "\n".join(self.lines)
        if q.mode == "count":
            response = GrepResponse(
                "count",
                len(self.files),
                content=body,
                numMatches=self.total_matches,
                appliedLimit=applied,
                appliedOffset=q.offset or None,
            )
            files = len(self.files)
            text = (body or "No matches found") + (
                f"\n\nFound {self.total_matches} total occurrence"
                f"{'s' * (self.total_matches != 1)} across {files} file{'s' * (files != 1)}."
            )
        else:
            response = GrepResponse(
                "content",
                len(self.shown_files),
                self.shown_files,
                content=body,
                numLines=len(self.lines),
                totalLines=self.total_lines,
                appliedLimit=applied,
                appliedOffset=q.offset or None,
            )
            text = body or "No matches found"
        if cut:
            text += f"\n\n[Showing results with pagination = limit: {q.limit}, offset: {q.offset}]"
        return ToolResult(text + note, data=as_data(response))

    def _files_result(self, note: str) -> ToolResult:
        q = self.q
        ordered = [s for _, s in sorted(self.files, key=lambda t: (-t[0], t[1]))]
        names = ordered[q.offset : q.offset + q.limit]
        cut = len(ordered) > q.offset + q.limit or q.offset > 0
        response = GrepResponse(
            "files_with_matches",
            len(names),
            names,
            totalFiles=len(ordered),
            appliedLimit=q.limit if cut else None,
            appliedOffset=q.offset or None,
        )
        if not ordered:
            return ToolResult("No files found" + note, data=as_data(response))
        head = f"Found {len(ordered)} file{'s' * (len(ordered) != 1)}"
        if cut:
            head += f" limit: {q.limit}, offset: {q.offset}"
        return ToolResult("\n".join([head, *names]) + note, data=as_data(response))


_TOO_BIG = b"\0too big"


def _read(f: Found, ctx: ToolContext, *, checked: bool) -> tuple[bytes, float] | None:
    """A file's bytes and mtime; None for what is not searched (gone, unreadable, binary)."""
    try:
        fd = os.open(f.name, _FILE_FLAGS, dir_fd=f.dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if not checked:
            check_opened(ctx, fd, f.real, write=False)
        if st.st_size > MAX_FILE_BYTES:
            return _TOO_BIG, st.st_mtime
        with os.fdopen(os.dup(fd), "rb") as r:
            data = r.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if b"\0" in data[:8192]:
        return None
    return data, st.st_mtime


def _matching_lines(rx: Any, data: bytes, multiline: bool) -> list[int]:
    """The 0-based numbers of the lines a match touches, in order, each once.

    Line mode (ripgrep's default): a match never spans lines; one that would (`\\s`, `[^a]`
    take a newline) counts only if the line alone matches."""
    hits: list[int] = []
    n = len(data)
    ends_clean = n == 0 or data.endswith(b"\n")
    pos, line, counted = 0, 0, 0
    while pos <= n:
        m = rx.search(data, pos)
        if m is None or (m.start() >= n and ends_clean):
            break
        s, e = m.start(), m.end()
        start = data.rfind(b"\n", 0, s) + 1
        line += data.count(b"\n", counted, start)
        counted = start
        if multiline:
            last = line + data.count(b"\n", s, max(s, e - 1))
            hits += [i for i in range(line, last + 1) if not hits or i > hits[-1]]
            pos = e if e > s else s + 1
            continue
        end = data.find(b"\n", s)
        end = n if end < 0 else end
        if e <= end or rx.search(data, start, end) is not None:
            hits.append(line)
        pos = end + 1
    return hits


def _content(data: bytes, hits: list[int], q: _Query, name: str | None) -> Iterator[str]:
    """ripgrep's output for one file: `name:12:text` for a match, `name-13-text` for context,
    `--` between groups that do not touch."""
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    matched = set(hits)
    groups: list[list[int]] = []
    for h in hits:
        lo, hi = max(0, h - q.before), min(len(lines) - 1, h + q.after)
        if groups and lo <= groups[-1][1] + 1:
            groups[-1][1] = max(groups[-1][1], hi)
        else:
            groups.append([lo, hi])
    for k, (lo, hi) in enumerate(groups):
        if k and (q.before or q.after):
            yield "--"
        for i in range(lo, hi + 1):
            sep = ":" if i in matched else "-"
            text = lines[i].decode("utf-8", errors="replace").rstrip("\r")
            if len(text) > MAX_COLUMNS:
                text = f"{text[:MAX_COLUMNS]}… [line cut: {len(text)} characters]"
            where = f"{name}{sep}" if name is not None else ""
            number = f"{i + 1}{sep}" if q.numbers else ""
            yield f"{where}{number}{text}"
