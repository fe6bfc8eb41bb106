"""Shell-command hooks as configured: which events, which matcher, which command.

Two shapes are read. Ours (the design document's): `{PreToolUse: [{matcher, command,
timeout (ms), continueOnFailure, condition, fail_mode}]}`. Claude Code's, so users can
reuse their hooks: `{PreToolUse: [{matcher, hooks: [{type: command, command, timeout
(seconds)}]}]}`. Both become `ShellHook` values; pure, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent_threads.hooks.ccevents import EVENTS as EVENT_INFO
from agent_threads.permissions import Rule, rule_applies

EVENTS = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "SessionStart", "SessionEnd")
TOOL_EVENTS = ("PreToolUse", "PostToolUse")
DEFAULT_TIMEOUT_MS = 5000
MAX_TIMEOUT_MS = 600_000
_NATIVE_KEYS = ("matcher", "command", "timeout", "continueOnFailure", "condition", "fail_mode")
_CLAUDE_KEYS = ("type", "command", "timeout", "fail_mode")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

FailMode = Literal["open", "closed"]


@dataclass(frozen=True)
class ShellHook:
    event: str
    command: str
    matcher: str | None = None
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    continue_on_failure: bool = True
    condition: str | None = None
    fail_mode: FailMode = "open"
    claude: bool = False  # Claude Code's shape: its protocol is what the user expects
    source: str = ""
    # Exec form (Claude Code's `args`): `command` is the executable, no shell involved.
    args: tuple[str, ...] | None = None
    if_rule: str | None = None  # Claude Code's `if`: one permission rule, tool events only
    run_async: bool = False  # `async`: runs in the background, its answer comes later
    async_rewake: bool = False  # `asyncRewake`: exit 2 in the background wakes the model
    plugin_root: str | None = None  # the plugin it came from: CLAUDE_PLUGIN_ROOT
    plugin_name: str | None = None

    @property
    def label(self) -> str:
        text = " ".join(self.command.split())
        return text if len(text) <= 80 else text[:79] + "…"

    def matches(self, tool: str, arguments: Mapping[str, Any]) -> bool:
        """Whether this hook applies to a call of `tool` (always, outside tool events)."""
        return self.event not in TOOL_EVENTS or matcher_matches(self.matcher, tool, arguments)

    def applies(self, payload: Mapping[str, Any]) -> bool:
        """Whether this hook runs for an event whose stdin JSON is `payload`: its matcher
        against the event's matcher field, and its `if` rule on tool events."""
        info = EVENT_INFO.get(self.event)
        if self.claude and self.event not in TOOL_EVENTS and info is not None:
            if info.matcher_field is None or self.matcher in (None, "", "*"):
                return True
            value = payload.get(info.matcher_field)
            return isinstance(value, str) and _names_match(self.matcher or "", value)
        tool = payload.get("tool_name")
        arguments = payload.get("tool_input")
        return self.matches(
            tool if isinstance(tool, str) else "",
            arguments if isinstance(arguments, Mapping) else {},
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "command": self.command,
            "matcher": self.matcher,
            "timeout_ms": self.timeout_ms,
            "continue_on_failure": self.continue_on_failure,
            "condition": self.condition,
            "fail_mode": self.fail_mode,
            "claude": self.claude,
            "source": self.source,
            "args": None if self.args is None else list(self.args),
            "if": self.if_rule,
            "async": self.run_async,
            "async_rewake": self.async_rewake,
            "plugin_root": self.plugin_root,
            "plugin_name": self.plugin_name,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ShellHook:
        return cls(
            str(d["event"]),
            str(d["command"]),
            d.get("matcher"),
            int(d.get("timeout_ms", DEFAULT_TIMEOUT_MS)),
            bool(d.get("continue_on_failure", True)),
            d.get("condition"),
            "closed" if d.get("fail_mode") == "closed" else "open",
            bool(d.get("claude", False)),
            str(d.get("source", "")),
            None if d.get("args") is None else tuple(str(a) for a in d["args"]),
            d.get("if"),
            bool(d.get("async", False)),
            bool(d.get("async_rewake", False)),
            d.get("plugin_root"),
            d.get("plugin_name"),
        )


def matcher_matches(matcher: str | None, tool: str, arguments: Mapping[str, Any]) -> bool:
    """`Bash`, `Bash(git:*)`, `*` or empty, and regular expressions such as `Edit|Write`."""
    if matcher is None or matcher.strip() in ("", "*"):
        return True
    text = matcher.strip()
    if _IDENT.match(text):
        return text == tool
    try:
        rule = Rule.parse(text)
    except ValueError:
        rule = None
    if rule is not None and rule.pattern is not None:
        # On the same parse as permission rules: `Bash(git:*)` sees `cd x && git push`.
        return rule_applies(rule, tool, arguments)
    try:
        return re.fullmatch(text, tool) is not None
    except re.error:
        return False


def _names_match(matcher: str, value: str) -> bool:
    """Claude Code's matcher: exact names split on | or , when it has only name characters,
    else an unanchored regular expression."""
    if re.fullmatch(r"[A-Za-z0-9_\-, |]+", matcher):
        return value in {n.strip() for n in re.split(r"[|,]", matcher)}
    try:
        return re.search(matcher, value) is not None
    except re.error:
        return False


class ShellHookError(ValueError):
    """A bad hook entry; `path` is where it sits under `hooks` (for FILE:LINE messages)."""

    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.path = path


def _ms(value: Any, path: tuple[str | int, ...], seconds: bool) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        unit = "seconds" if seconds else "milliseconds"
        raise ShellHookError(path, f"timeout must be a number of {unit} above 0, got {value!r}")
    ms = int(value * 1000) if seconds else int(value)
    return min(ms, MAX_TIMEOUT_MS)


def _text(entry: Mapping[str, Any], key: str, path: tuple[str | int, ...]) -> str | None:
    value = entry.get(key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ShellHookError((*path, key), f"{key} must be non-empty text, got {value!r}")
    return value


def _check_keys(
    entry: Mapping[str, Any], known: Sequence[str], path: tuple[str | int, ...]
) -> None:
    for key in entry:
        if key not in known:
            raise ShellHookError(
                (*path, key), f"unknown key {key!r} in a hook entry; known: {', '.join(known)}"
            )


def _fail_mode(entry: Mapping[str, Any], path: tuple[str | int, ...], cont: bool) -> FailMode:
    value = entry.get("fail_mode")
    if value is None:
        # A hook that must not fail (continueOnFailure: false) also fails closed.
        return "open" if cont else "closed"
    if value not in ("open", "closed"):
        raise ShellHookError(
            (*path, "fail_mode"), f"fail_mode must be open or closed, got {value!r}"
        )
    return "closed" if value == "closed" else "open"


def _native(
    event: str, entry: Mapping[str, Any], path: tuple[str | int, ...], src: str
) -> ShellHook:
    _check_keys(entry, _NATIVE_KEYS, path)
    command = _text(entry, "command", path)
    if command is None:
        raise ShellHookError(path, "a hook entry needs a command, e.g. command: ./check.sh")
    cont = entry.get("continueOnFailure", True)
    if not isinstance(cont, bool):
        raise ShellHookError(
            (*path, "continueOnFailure"), f"continueOnFailure must be true or false, got {cont!r}"
        )
    timeout = entry.get("timeout")
    return ShellHook(
        event,
        command,
        _text(entry, "matcher", path),
        DEFAULT_TIMEOUT_MS if timeout is None else _ms(timeout, (*path, "timeout"), False),
        cont,
        _text(entry, "condition", path),
        _fail_mode(entry, path, cont),
        False,
        src,
    )


def _claude(
    event: str, group: Mapping[str, Any], path: tuple[str | int, ...], src: str
) -> list[ShellHook]:
    _check_keys(group, ("matcher", "hooks"), path)
    matcher = group.get("matcher")
    if matcher is not None and not isinstance(matcher, str):
        raise ShellHookError((*path, "matcher"), f"matcher must be text, got {matcher!r}")
    inner = group.get("hooks")
    if not isinstance(inner, list):
        raise ShellHookError((*path, "hooks"), "hooks must be a list of {type: command, command}")
    out = []
    for i, h in enumerate(inner):
        where = (*path, "hooks", i)
        if not isinstance(h, Mapping):
            raise ShellHookError(where, f"must be a mapping with type and command, got {h!r}")
        _check_keys(h, _CLAUDE_KEYS, where)
        if h.get("type", "command") != "command":
            raise ShellHookError(
                (*where, "type"), f"only type: command is supported, got {h.get('type')!r}"
            )
        command = _text(h, "command", where)
        if command is None:
            raise ShellHookError(where, "a hook needs a command")
        timeout = h.get("timeout")
        ms = 60_000 if timeout is None else _ms(timeout, (*where, "timeout"), True)
        out.append(
            ShellHook(
                event,
                command,
                matcher or None,
                ms,
                True,
                None,
                _fail_mode(h, where, True),
                True,
                src,
            )
        )
    return out


def parse_shell_hooks(data: Any, source: str = "") -> tuple[ShellHook, ...]:
    """`agent.hooks` (or a settings file's `hooks`) into hooks, in the order written.

    Raises:
        ShellHookError: the first problem, with its key path under `hooks`.
    """
    if data is None:
        return ()
    if not isinstance(data, Mapping):
        raise ShellHookError((), "hooks must be a mapping of event name to a list of hooks")
    hooks: list[ShellHook] = []
    for event, entries in data.items():
        if event not in EVENTS:
            raise ShellHookError(
                (event,), f"unknown hook event {event!r}; events: {', '.join(EVENTS)}"
            )
        if not isinstance(entries, list):
            raise ShellHookError((event,), f"{event} must be a list of hook entries")
        for i, entry in enumerate(entries):
            path: tuple[str | int, ...] = (event, i)
            if not isinstance(entry, Mapping):
                raise ShellHookError(path, f"must be a mapping with a command, got {entry!r}")
            if "hooks" in entry:
                hooks += _claude(event, entry, path, source)
            else:
                hooks.append(_native(event, entry, path, source))
    return tuple(hooks)
