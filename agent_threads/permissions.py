"""Which tool calls a thread may make: allow / ask / deny rules, strictest layer wins.

Rules: `Tool` (any call of it), `Tool(prefix:*)` (its subject starts with prefix),
`Tool(exact)` (its subject is exactly that), `*` (any tool). In a layer, deny beats ask beats
allow, and a tool no rule names asks. A profile is a stack of layers (the hook file's, and
those of the threads above it); a call gets the strictest of their decisions, so a thread can
never have more than its parent had. Pure: no I/O.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Decision = Literal["allow", "ask", "deny"]
_RANK: dict[Decision, int] = {"allow": 0, "ask": 1, "deny": 2}
_RULE = re.compile(r"^\s*(\*|[A-Za-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*$", re.DOTALL)
_FORMS = "write Bash, Bash(git:*), Read(/etc/hosts) or *"
_OPAQUE = ("$(", "`", "<(", ">(")  # constructs whose commands we cannot see
_KEYS = ("allow", "ask", "deny")
_FREE = frozenset({"UpdatePlan"})  # no effect outside the thread: allowed unless a rule says


@dataclass(frozen=True)
class Rule:
    tool: str  # "*" for any tool
    pattern: str | None = None
    prefix: bool = False

    @classmethod
    def parse(cls, text: str) -> Rule:
        """`Bash`, `Bash(git:*)`, `Read(/etc/hosts)` or `*`.

        Raises:
            ValueError: saying which forms are accepted.
        """
        m = _RULE.match(text) if isinstance(text, str) else None
        if m is None:
            raise ValueError(f"bad permission rule {text!r}; {_FORMS}")
        tool, inner = m.group(1), m.group(2)
        if inner is None:
            return cls(tool)
        if tool == "*":
            raise ValueError(f"bad permission rule {text!r}: * takes no pattern; {_FORMS}")
        prefix = inner.endswith(":*")
        pattern = inner[:-2] if prefix else inner
        if not pattern.strip():
            raise ValueError(f"bad permission rule {text!r}: empty pattern; {_FORMS}")
        return cls(tool, pattern, prefix)

    def __str__(self) -> str:
        if self.pattern is None:
            return self.tool
        return f"{self.tool}({self.pattern}{':*' if self.prefix else ''})"

    def names(self, tool: str) -> bool:
        return self.tool in ("*", tool)

    def matches_text(self, text: str) -> bool:
        assert self.pattern is not None
        if not self.prefix:
            return text == self.pattern
        if not text.startswith(self.pattern):
            return False
        rest = text[len(self.pattern) :]
        # A word boundary: `git:*` matches `git status`, not `gitk`; `out/:*` needs none.
        return not rest or not self.pattern[-1].isalnum() or not rest[0].isalnum()


def subject(tool: str, arguments: Mapping[str, Any]) -> str | None:
    """What `Tool(...)` rules compare against: a command or a path; None for other tools."""
    if tool in ("Bash", "RunProcess"):
        cmd = arguments.get("command")
        if isinstance(cmd, list):
            return shlex.join(str(c) for c in cmd)
        return cmd if isinstance(cmd, str) else None
    if tool in ("Read", "Write", "Edit"):
        path = arguments.get("path")
        return path if isinstance(path, str) else None
    return None


def split_commands(command: str) -> list[str] | None:
    """A shell command's simple commands (split on ; && || | & and newlines, outside quotes).

    None when it holds something we cannot see through (`$(...)`, backticks, `<(...)`).
    """
    parts: list[str] = []
    buf: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(command):
        ch = command[i]
        if quote is None and command.startswith(_OPAQUE, i):
            return None
        if quote == '"' and command.startswith(("$(", "`"), i):
            return None
        if ch == "\\" and quote != "'" and i + 1 < len(command):
            buf.append(command[i : i + 2])
            i += 2
            continue
        if quote is not None:
            quote = None if ch == quote else quote
            buf.append(ch)
        elif ch in "'\"":
            quote = ch
            buf.append(ch)
        elif ch in ";&|\n":
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    parts.append("".join(buf))
    return [p.strip() for p in parts if p.strip()]


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    rule: str | None
    reason: str


@dataclass(frozen=True)
class Layer:
    allow: tuple[Rule, ...] = ()
    ask: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> Layer:
        """`{allow: [...], ask: [...], deny: [...]}`.

        Raises:
            ValueError: naming the bad key or rule and how to fix it.
        """
        if not isinstance(m, Mapping):
            raise ValueError("permissions must be a mapping with allow, ask and deny lists")
        for key in m:
            if key not in _KEYS:
                raise ValueError(f"unknown key {key!r} under permissions; use allow, ask or deny")
        lists: dict[str, tuple[Rule, ...]] = {}
        for key in _KEYS:
            raw = m.get(key) or []
            if isinstance(raw, str) or not isinstance(raw, Sequence):
                raise ValueError(f"permissions.{key} must be a list of rules; {_FORMS}")
            lists[key] = tuple(Rule.parse(r) for r in raw)
        return cls(lists["allow"], lists["ask"], lists["deny"])

    def to_json(self) -> dict[str, list[str]]:
        return {k: [str(r) for r in getattr(self, k)] for k in _KEYS}

    def check(self, tool: str, arguments: Mapping[str, Any]) -> Verdict:
        subj = subject(tool, arguments)
        segments = _segments(tool, subj)
        for rule in self.deny:
            if _hits(rule, tool, segments, subj):
                return Verdict("deny", str(rule), f"denied by rule {rule}")
        for rule in self.ask:
            if _hits(rule, tool, segments, subj):
                return Verdict("ask", str(rule), f"rule {rule} asks for approval")
        allowed = _allowed(self.allow, tool, segments)
        if allowed is not None:
            return Verdict("allow", allowed, f"allowed by rule {allowed}")
        if tool in _FREE:
            return Verdict("allow", None, f"{tool} changes nothing outside the thread")
        return Verdict("ask", None, f"no rule allows {tool}; approval needed")


def _segments(tool: str, subj: str | None) -> list[str] | None:
    """The texts subject rules look at: each simple command of Bash, else the subject."""
    if subj is None:
        return []
    if tool == "Bash":
        return split_commands(subj)
    return [subj]


def _loose_split(command: str) -> list[str]:
    """Every command-like piece, substitutions included: for deny and ask, never allow."""
    pieces = re.split(r"\$\(|<\(|>\(|[`;&|\n()]", command)
    return [p.strip().strip("\"'").strip() for p in pieces if p.strip()]


def _hits(rule: Rule, tool: str, segments: list[str] | None, subj: str | None) -> bool:
    """For deny and ask: the rule names the tool and, with a pattern, any part matches."""
    if not rule.names(tool):
        return False
    if rule.pattern is None:
        return True
    if segments is None:  # opaque: look inside the substitutions too
        segments = _loose_split(subj or "")
    return any(rule.matches_text(s) for s in segments)


def _allowed(rules: tuple[Rule, ...], tool: str, segments: list[str] | None) -> str | None:
    """For allow: a plain rule, or every part of the command matched by some pattern rule."""
    mine = [r for r in rules if r.names(tool)]
    plain = next((r for r in mine if r.pattern is None), None)
    if plain is not None:
        return str(plain)
    if not segments:
        return None  # no subject, or one we cannot see through: patterns prove nothing
    used: list[str] = []
    for seg in segments:
        rule = next((r for r in mine if r.pattern is not None and r.matches_text(seg)), None)
        if rule is None:
            return None
        used.append(str(rule))
    return ", ".join(dict.fromkeys(used))


@dataclass(frozen=True)
class Profile:
    layers: tuple[Layer, ...] = ()

    @classmethod
    def from_json(cls, data: Sequence[Mapping[str, Any]]) -> Profile:
        return cls(tuple(Layer.from_mapping(m) for m in data))

    def to_json(self) -> list[dict[str, list[str]]]:
        return [layer.to_json() for layer in self.layers]

    def inherit(self, child: Layer | None) -> Profile:
        """The parent's layers plus the child's own: a child can only be stricter."""
        return self if child is None else Profile((*self.layers, child))

    def check(self, tool: str, arguments: Mapping[str, Any]) -> Verdict:
        if not self.layers:
            return Layer().check(tool, arguments)
        verdicts = [layer.check(tool, arguments) for layer in self.layers]
        return max(verdicts, key=lambda v: _RANK[v.decision])
