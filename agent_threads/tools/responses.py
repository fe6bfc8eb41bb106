"""Claude Code's `tool_response` objects, as typed records turned to JSON in one place.

What a built-in tool returns besides the text the model reads: saved as the result's `data`
in the transcript, written as `toolUseResult` in the JSONL transcript hooks read, and sent to
PostToolUse hooks as `tool_response`, so that hooks written for Claude Code find the keys
they index (`.tool_response.filePath`, `.tool_response.file.content`,
`.tool_response.stdout`, `.tool_response.filenames`, ...).

Where each shape comes from (public Claude Code documentation, mirrored in the repository
thevibeworks/claude-code-docs):

- the Agent SDK TypeScript reference, "Tool Output Types" (agent-sdk/typescript.md):
  `BashOutput`, `FileReadOutput`, `FileWriteOutput`, `FileEditOutput`, `GlobOutput`,
  `GrepOutput`: every field name and its meaning below;
- the hooks reference, "PostToolUse input" (hooks.md): `tool_response` for Write is
  `{"filePath": ..., "success": true}`, so Write and Edit also carry `success`; its
  `updatedToolOutput` example gives Bash's `stdout`, `stderr`, `interrupted`, `isImage`;
- the tools reference (tools-reference.md): Glob sorted by modification time and capped at
  100 files with a truncation flag; Grep's three output modes;
- public hook scripts that index these keys: formatters and linters reading
  `.tool_response.filePath // .tool_input.file_path`, token counters reading
  `.tool_response.file.content`, commit hooks reading `.tool_response.stdout`, and trackers
  testing `.tool_response.success === false`.

Names are Claude Code's (camelCase); `exitCode` on Bash is ours (Claude Code keeps the exit
status in its text only). The Agent SDK's Python reference lists other output shapes
(`bytes_written`, `matches`, ...) that neither Claude Code's transcripts nor the hooks above
use; they are not followed.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from typing import Any, Literal

# Any one string in a response is kept to this many characters (head and tail), so a huge
# file or output does not swell the transcript; the model's text has its own bound.
MAX_DATA_CHARS = 100_000


@dataclass(frozen=True)
class Hunk:
    """One hunk of a unified diff, as jsdiff's structuredPatch (Claude Code's) gives it."""

    oldStart: int
    oldLines: int
    newStart: int
    newLines: int
    lines: list[str]


@dataclass(frozen=True)
class ReadFile:
    filePath: str
    content: str  # the lines shown, as in the file (no line numbers)
    numLines: int
    startLine: int
    totalLines: int


@dataclass(frozen=True)
class ReadResponse:
    type: Literal["text"]
    file: ReadFile


@dataclass(frozen=True)
class WriteResponse:
    type: Literal["create", "update"]
    filePath: str
    content: str
    structuredPatch: list[Hunk]
    originalFile: str | None
    success: bool = True


@dataclass(frozen=True)
class EditResponse:
    filePath: str
    oldString: str
    newString: str
    originalFile: str
    structuredPatch: list[Hunk]
    replaceAll: bool
    userModified: bool = False
    success: bool = True


@dataclass(frozen=True)
class BashResponse:
    stdout: str  # the command's stdout and stderr, interleaved
    stderr: str  # notices of the tool itself (sandbox, dropped output, timeout)
    interrupted: bool  # killed at its timeout
    exitCode: int | None = None  # ours: None when it was killed
    isImage: bool = False


@dataclass(frozen=True)
class GlobResponse:
    durationMs: int
    numFiles: int
    filenames: list[str]
    truncated: bool
    totalMatches: int
    countIsComplete: bool  # False: a bound stopped the walk, totalMatches is a lower bound


@dataclass(frozen=True)
class GrepResponse:
    mode: Literal["content", "files_with_matches", "count"]
    numFiles: int
    filenames: list[str] = field(default_factory=list)
    content: str | None = None
    numLines: int | None = None
    numMatches: int | None = None
    totalFiles: int | None = None
    totalLines: int | None = None
    appliedLimit: int | None = None
    appliedOffset: int | None = None


Response = ReadResponse | WriteResponse | EditResponse | BashResponse | GlobResponse | GrepResponse


def as_data(response: Response) -> dict[str, Any]:
    """The JSON object of a response: the one place records become `ToolResult.data`.

    An optional field (one that defaults to None) left None is omitted, as Claude Code omits
    it; a required one is sent as null (`originalFile` of a new file). Long strings are cut.
    """
    out = _json(response)
    assert isinstance(out, dict)
    return out


def _json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _json(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) is not None or f.default is not None
        }
    if isinstance(value, list):
        return [_json(v) for v in value]
    if isinstance(value, str):
        return _cut(value)
    return value


def _cut(text: str) -> str:
    if len(text) <= MAX_DATA_CHARS:
        return text
    keep = MAX_DATA_CHARS // 2
    return f"{text[:keep]}\n[... {len(text) - 2 * keep} characters cut ...]\n{text[-keep:]}"


def structured_patch(old: str, new: str, context: int = 3) -> list[Hunk]:
    """The hunks turning `old` into `new`, `context` lines around each change. Pure.

    Each line is prefixed " ", "-" or "+", without its newline, as in Claude Code's
    `structuredPatch`; an empty side starts at the line before (0 for an empty file).
    """
    a, b = old.splitlines(), new.splitlines()
    hunks = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        lines: list[str] = []
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                lines += [f" {x}" for x in a[a1:a2]]
                continue
            lines += [f"-{x}" for x in a[a1:a2]]
            lines += [f"+{x}" for x in b[b1:b2]]
        hunks.append(
            Hunk(i1 + 1 if i2 > i1 else i1, i2 - i1, j1 + 1 if j2 > j1 else j1, j2 - j1, lines)
        )
    return hunks
