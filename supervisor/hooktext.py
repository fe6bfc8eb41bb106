"""Hook file text to plain values, remembering the line of every key path.

YAML is composed, not loaded, so each node keeps its line; the values and a map from key
path to line are built here, which also catches duplicate keys PyYAML would silently drop.
JSON values come from `json` (PyYAML reads `1e5` as a string); their lines come from
composing the same text as YAML.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from agent_threads.problems import KeyPath, where
from supervise.errors import HookFileError

# Named as a wheel's user can get it (no configs/ folder outside the repo).
EXAMPLE = "migrate.yaml from `supervise examples DIR`"
_MAX_NODES = 100_000  # aliases can blow a small YAML file up exponentially ("billion laughs")
# Tabs (JSON whitespace) YAML refuses; NEL, LS, PS (allowed in JSON strings) YAML counts as
# line breaks. Spaces keep JSON's line numbers.
_JSON_AS_YAML = str.maketrans("\t\x85\u2028\u2029", "    ")


class ReadAbort(Exception):
    """The file cannot be read far enough to validate; the message is the one problem."""


class Composer:
    """Builds plain values from a composed YAML node tree, noting each key path's line."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.lines: dict[KeyPath, int] = {}
        self.problems: list[tuple[int, str]] = []
        self._constructor = yaml.constructor.SafeConstructor()
        self._nodes = 0
        self._open: set[int] = set()  # collections being built, to stop at `&a [*a]`

    def build(self, node: Node, path: KeyPath) -> Any:
        self._nodes += 1
        if self._nodes > _MAX_NODES:
            raise ReadAbort(
                f"{self.filename}:1: hook file holds over {_MAX_NODES} values (aliases?); "
                "write it out with fewer aliases"
            )
        self.lines[path] = line = node.start_mark.line + 1
        if isinstance(node, ScalarNode):
            return self._scalar(node, line)
        if id(node) in self._open:
            self._problem(line, "an alias refers to a collection containing it; remove it")
            return None
        self._open.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
            return self._mapping(node, path) if isinstance(node, MappingNode) else None
        finally:
            self._open.discard(id(node))

    def _mapping(self, node: MappingNode, path: KeyPath) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, ScalarNode):
                self._problem(line, f"a key in {where(path)} is a list or mapping; use a word")
                continue
            # The key as written: `yes:` stays "yes" rather than becoming True.
            key = key_node.value
            if key in out:
                self._problem(line, f"duplicate key {key!r} in {where(path)}; keep only one")
            out[key] = self.build(value_node, (*path, key))
            self.lines[(*path, key)] = line  # report a key's problems at the key
        return out

    def _scalar(self, node: ScalarNode, line: int) -> Any:
        try:
            value = self._constructor.construct_object(node, deep=True)
        except Exception as exc:  # a tag picks the constructor, and each fails its own way
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self._problem(
                line, f"cannot read {node.value!r} ({reason}); remove the tag or quote it"
            )
            return node.value
        # A run snapshots its hooks as JSON, which holds no dates or bytes: keep their text.
        if isinstance(value, bytes | datetime.date):
            return node.value
        return value

    def _problem(self, line: int, message: str) -> None:
        self.problems.append((line, f"{self.filename}:{line}: {message}"))


def read_yaml(text: str, filename: str) -> tuple[Any, Composer]:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark, problem = exc.problem_mark, exc.problem or "syntax error"
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = f"{exc.context}, {problem}" if exc.context else problem
        fix = "indent with spaces, not tabs," if "'\\t'" in problem else "fix the syntax"
        raise ReadAbort(
            f"{filename}:{line}: invalid YAML: {what}; {fix} near column {column}"
        ) from None
    except yaml.YAMLError as exc:  # ReaderError: a character YAML forbids; it has no mark
        line = text.count("\n", 0, getattr(exc, "position", 0)) + 1
        what = str(exc).splitlines()[0]
        raise ReadAbort(f"{filename}:{line}: invalid YAML: {what}; remove that character") from None
    if root is None:  # only comments
        raise ReadAbort(f"{filename}:1: hook file is empty; see {EXAMPLE}")
    composer = Composer(filename)
    return composer.build(root, ()), composer


def read_json(text: str, filename: str) -> tuple[Any, Composer]:
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                duplicates.append(key)
            out[key] = value
        return out

    try:
        data = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise ReadAbort(
            f"{filename}:{exc.lineno}: invalid JSON: {exc.msg}; "
            f"fix the syntax near column {exc.colno}"
        ) from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise ReadAbort(f"{filename}:1: invalid JSON: {exc}; fix the value") from None
    composer = Composer(filename)
    try:
        root = yaml.compose(text.translate(_JSON_AS_YAML), Loader=yaml.SafeLoader)
        if root is not None:
            composer.build(root, ())  # only for its lines and duplicate keys
    except (yaml.YAMLError, RecursionError, ReadAbort):
        # Valid JSON that is not YAML (rare): no lines, so every problem is at line 1.
        composer = Composer(filename)
        for key in duplicates:
            composer.problems.append((1, f"{filename}:1: duplicate key {key!r}; keep only one"))
    return data, composer


Locate = Callable[[KeyPath], tuple[int, str]]


def read_document(
    text: str, filename: str, *, kind: str = "hook file", example: str = EXAMPLE
) -> tuple[Any, Composer, Locate]:
    """A YAML or JSON `kind` (by its extension) as plain values, its composer (each key
    path's line, and the problems found reading) and where a key path is (`FILE:LINE`).

    Raises:
        HookFileError: it is empty, not valid YAML or JSON, or nested too deeply.
    """
    text = text.removeprefix("\ufeff")
    try:
        if not text.strip():
            raise ReadAbort(f"{filename}:1: hook file is empty; see {example}")
        read = read_json if filename.endswith(".json") else read_yaml
        data, composer = read(text, filename)
    except ReadAbort as exc:
        raise HookFileError([str(exc).replace("hook file", kind)]) from None
    except RecursionError:
        msg = f"{filename}:1: {kind} is nested too deeply to read; flatten its structure"
        raise HookFileError([msg]) from None

    def locate(path: KeyPath) -> tuple[int, str]:
        while path and path not in composer.lines:
            path = path[:-1]
        line = composer.lines.get(path, 1)
        return line, f"{filename}:{line}"

    return data, composer, locate


def read_utf8(path: Path, name: str, kind: str) -> str:
    """A user's file as text (a BOM dropped), or a `FILE[:LINE]: cannot read KIND: ...; fix`
    HookFileError: the path given, or the line where it stops being UTF-8."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise HookFileError([f"{name}: cannot read {kind}: {reason}; check the path"]) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise HookFileError(
            [f"{name}:{line}: cannot read {kind}: not UTF-8 ({exc.reason}); save it as UTF-8"]
        ) from None
