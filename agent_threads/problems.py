"""Problems found in configuration values, each at its key path.

A hook file's loader (supervisor/hookfile.py) and the agent section's parser (config.py)
both check plain values and say, for each problem, where it is (`agent.max_turns`), what a
good value is and how to fix it. The key path is what the loader turns into FILE:LINE.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

KeyPath = tuple[str | int, ...]
MAX_COUNT = 1_000_000  # far above any sane value, low enough for SQLite and float maths
MAX_SECONDS = 10 * 365 * 86400


def dotted(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def where(path: KeyPath) -> str:
    return dotted(path) or "the top level"


def show(value: Any) -> str:
    """A value as the file would spell it (JSON is close enough), cut short."""
    if value is None:
        return "nothing"
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):  # circular, or an int too long to print
        text = type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # YAML `yes` is a bool


def is_number(value: Any) -> bool:
    return is_int(value) or (isinstance(value, float) and math.isfinite(value))


# What a warning is about: an event that never fires here, a handler type or field not run
# or not read, an `if` that can never hold, a matcher that is ignored or never matches, a
# top-level key not read, hooks turned off (disableAllHooks), a plugin part not loaded.
WarningKind = Literal["event", "type", "field", "if", "matcher", "key", "disabled", "plugin"]


@dataclass(frozen=True)
class ConfigWarning:
    """Something written that is accepted but not used, and why: never a refusal.

    `path` is where it sits (a loader prefixes where its section is, and turns the path into
    FILE:LINE); `message` says what is not used and why.
    """

    path: KeyPath
    kind: WarningKind
    message: str

    def under(self, prefix: KeyPath) -> ConfigWarning:
        return ConfigWarning((*prefix, *self.path), self.kind, self.message)

    def __str__(self) -> str:
        return f"{where(self.path)}: {self.message}"


@dataclass
class Problems:
    """Every problem found so far, in the order found, each with its key path; and the
    warnings (accepted, but not used)."""

    found: list[tuple[KeyPath, str]] = field(default_factory=list)
    warnings: list[ConfigWarning] = field(default_factory=list)

    def add(self, path: KeyPath, message: str) -> None:
        self.found.append((path, message))

    def bad(self, path: KeyPath, what: str, value: Any, fix: str) -> None:
        """Report that the value at `path` is not `what`, ending with how to `fix` it."""
        self.add(path, f"{where(path)} {what}, got {show(value)}; {fix}")

    def unknown_keys(self, data: Mapping[Any, Any], path: KeyPath, known: tuple[str, ...]) -> None:
        for key in data:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                guess = f"did you mean {close[0]!r}?" if close else "remove it"
                what = f"unknown key {str(key)!r} in {where(path)}"
                self.add((*path, key), f"{what}; {guess} (known: {', '.join(known)})")

    def count(self, data: Mapping[str, Any], path: KeyPath, low: int, eg: int) -> int | None:
        """The whole number at `path` (None if absent or bad: reported)."""
        value = data.get(str(path[-1]))
        if value is None:
            return None
        if is_int(value) and low <= value <= MAX_COUNT:
            return int(value)
        digits = re.findall(r"\d+", value if isinstance(value, str) else "")
        fix = f"write {path[-1]}: {digits[0][:6] if digits else eg}"
        self.bad(path, f"must be a whole number from {low} to {MAX_COUNT}", value, fix)
        return None
