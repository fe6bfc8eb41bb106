"""Shell-command hooks as configured: which events, which matcher, which command.

Two shapes are read. Ours (the design document's): `{PreToolUse: [{matcher, command,
timeout (ms), continueOnFailure, condition, fail_mode}]}`. Claude Code's, as its hooks
reference defines it, so settings files and plugins load unchanged: `{PreToolUse: [{matcher,
hooks: [{type: command, command, args, timeout (seconds), if, async, asyncRewake}]}]}`.

Both become `ShellHook` values, or warnings: every event of Claude Code's table is accepted,
and what will not run here (an event that never fires, another handler type, an `if` on an
event that never evaluates it) or is not read (a display-only field, an unknown one) is a
`ConfigWarning` with its key path, never a refusal. What cannot be read at all (a hook that
is not a mapping, a command that is not text) is a `ShellHookError`. Pure, no I/O.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent_threads.hooks.ccevents import (
    EVENT_TABLE,
    HANDLER_FIELDS_IGNORED,
    HANDLER_FIELDS_USED,
    IF_EVENTS,
    OTHER_HANDLER_TYPES,
    EventInfo,
)
from agent_threads.hooks.ccevents import EVENTS as EVENT_INFO
from agent_threads.hooks.ifrule import check_if, if_applies
from agent_threads.permissions import Rule, rule_applies
from agent_threads.problems import ConfigWarning, KeyPath, WarningKind

# The events hooks run at here; the others of Claude Code's table are accepted, never run.
EVENTS = tuple(e.name for e in EVENT_TABLE if e.fires)
TOOL_EVENTS = tuple(e.name for e in EVENT_TABLE if e.matcher_field == "tool_name")
DEFAULT_TIMEOUT_MS = 5000
MAX_TIMEOUT_MS = 600_000
# Claude Code's defaults for a command handler: 600 s, 30 s on UserPromptSubmit.
CLAUDE_TIMEOUT_MS = 600_000
CLAUDE_TIMEOUTS_MS = {"UserPromptSubmit": 30_000}
_NATIVE_KEYS = ("matcher", "command", "timeout", "continueOnFailure", "condition", "fail_mode")
_GROUP_KEYS = ("matcher", "hooks")
_OURS = ("fail_mode",)  # our field, also on a Claude Code handler
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Claude Code's exact-name matchers: these characters only (FileChanged and StopFailure
# take a narrower set, and only | separates there); anything else is a regular expression.
_NAMES = re.compile(r"[A-Za-z0-9_\-, |]+")
_NARROW_NAMES = re.compile(r"[A-Za-z0-9_|]+")
_NARROW_EVENTS = frozenset({"FileChanged", "StopFailure"})
_RULE_LIKE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\(.*\)$", re.DOTALL)

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
        if self.claude:
            return self.applies({"tool_name": tool, "tool_input": dict(arguments)})
        return self.event not in TOOL_EVENTS or matcher_matches(self.matcher, tool, arguments)

    def applies(self, payload: Mapping[str, Any]) -> bool:
        """Whether this hook runs for an event whose stdin JSON is `payload`: its matcher
        against the event's matcher field and, in Claude Code's shape, its `if` rule."""
        tool = payload.get("tool_name")
        arguments = payload.get("tool_input")
        tool = tool if isinstance(tool, str) else ""
        arguments = arguments if isinstance(arguments, Mapping) else {}
        if not self.claude:
            return self.event not in TOOL_EVENTS or matcher_matches(self.matcher, tool, arguments)
        info = EVENT_INFO.get(self.event)
        if info is None:
            return False
        if self.if_rule is not None and self.event not in IF_EVENTS:
            return False  # as in Claude Code: `if` elsewhere means never
        if info.matcher_field is not None and not cc_matcher_matches(
            self.matcher, payload.get(info.matcher_field), self.event
        ):
            return False
        if self.if_rule is None:
            return True
        cwd = payload.get("cwd")
        return if_applies(self.if_rule, tool, arguments, cwd if isinstance(cwd, str) else None)

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


def cc_matcher_matches(matcher: str | None, value: Any, event: str = "PreToolUse") -> bool:
    """Claude Code's matcher against the event's matcher field (`tool_name`, `source`,
    ...): `*`, empty or none match all; exact names split on | or , when it has only name
    characters; else an unanchored regular expression (`^Notebook`, `mcp__.*`)."""
    if matcher is None or matcher.strip() in ("", "*"):
        return True
    return isinstance(value, str) and _names_match(matcher, value, event in _NARROW_EVENTS)


def _names_match(matcher: str, value: str, narrow: bool = False) -> bool:
    if (_NARROW_NAMES if narrow else _NAMES).fullmatch(matcher):
        return value in {n.strip() for n in re.split(r"[|]" if narrow else r"[|,]", matcher)}
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
        raise ShellHookError(
            path, f"timeout must be a number of {unit} above 0, got {value!r}; write timeout: 30"
        )
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


@dataclass(frozen=True)
class Plugin:
    """The plugin hooks come from: its root is CLAUDE_PLUGIN_ROOT when they run."""

    root: str
    name: str


class _Reader:
    """One `hooks` mapping: the hooks to run, and what will not run and why."""

    def __init__(self, source: str, plugin: Plugin | None) -> None:
        self.source = source
        self.plugin = plugin
        self.warnings: list[ConfigWarning] = []

    def warn(self, path: KeyPath, kind: WarningKind, message: str) -> None:
        self.warnings.append(ConfigWarning(path, kind, message))

    def group(self, event: str, group: Mapping[str, Any], path: KeyPath) -> list[ShellHook]:
        """A matcher group in Claude Code's shape: `{matcher, hooks: [handler, ...]}`."""
        for key in group:
            if key not in _GROUP_KEYS:
                self.warn((*path, key), "field", f"not read: a matcher group has {_both()}")
        matcher = group.get("matcher")
        if matcher is not None and not isinstance(matcher, str):
            raise ShellHookError(
                (*path, "matcher"),
                f'matcher must be text, got {matcher!r}; write "matcher": "Edit|Write"',
            )
        matcher = self._matcher(event, matcher, (*path, "matcher"))
        inner = group.get("hooks")
        if not isinstance(inner, list):
            raise ShellHookError(
                (*path, "hooks"),
                f"hooks must be a list of handlers, got {inner!r}; write "
                '"hooks": [{"type": "command", "command": "./check.sh"}]',
            )
        out = []
        for i, h in enumerate(inner):
            hook = self.handler(event, matcher, h, (*path, "hooks", i))
            if hook is not None:
                out.append(hook)
        return out

    def _matcher(self, event: str, matcher: str | None, path: KeyPath) -> str | None:
        if matcher is None or matcher.strip() in ("", "*"):
            return matcher or None
        info = EVENT_INFO[event]
        if info.matcher_field is None:
            self.warn(path, "matcher", f"ignored: {event} takes no matcher (as in Claude Code)")
            return None
        narrow = (_NARROW_NAMES if event in _NARROW_EVENTS else _NAMES).fullmatch(matcher)
        if narrow is None:
            try:
                re.compile(matcher)
            except re.error as exc:
                self.warn(
                    path, "matcher", f"never matches: {matcher!r} is no regular expression ({exc})"
                )
        if info.matcher_field == "tool_name" and _RULE_LIKE.match(matcher):
            self.warn(
                path,
                "matcher",
                f"{matcher!r} is a regular expression on the tool name (it never matches "
                'Bash itself); to filter on the command write if: "Bash(git *)"',
            )
        return matcher

    def handler(self, event: str, matcher: str | None, h: Any, where: KeyPath) -> ShellHook | None:
        """One handler; None when it never runs here (another type, an `if` that can never
        hold), which is then a warning."""
        if not isinstance(h, Mapping):
            raise ShellHookError(
                where,
                f"must be a mapping with type and command, got {h!r}; write "
                '{"type": "command", "command": "./check.sh"}',
            )
        if not self._is_command(h, where):
            return None
        command, args = _command(h, where)
        timeout = h.get("timeout")
        default = CLAUDE_TIMEOUTS_MS.get(event, CLAUDE_TIMEOUT_MS)
        ms = default if timeout is None else _ms(timeout, (*where, "timeout"), True)
        if_rule = _text(h, "if", where)
        if if_rule is not None and (why := check_if(if_rule)) is not None:
            raise ShellHookError((*where, "if"), f"if {why}, got {if_rule!r}; write one rule")
        flags = {key: h.get(key, False) for key in ("async", "asyncRewake")}
        for key, value in flags.items():
            if not isinstance(value, bool):
                raise ShellHookError(
                    (*where, key), f"{key} must be true or false, got {value!r}; write true"
                )
        self._fields(h, where)
        if args is not None and "/" not in command and len(command.split()) > 1:
            self.warn(
                (*where, "command"),
                "field",
                f"with args, command is the program alone: no program is named {command!r}; "
                "move the other words into args",
            )
        if if_rule is not None and event not in IF_EVENTS:
            self.warn(
                (*where, "if"),
                "if",
                f"this hook never runs: if is evaluated on tool events only "
                f"({', '.join(TOOL_EVENTS)}), so Claude Code never runs it on {event} either",
            )
            return None
        return ShellHook(
            event,
            command,
            matcher or None,
            ms,
            True,
            None,
            _fail_mode(h, where, True),
            True,
            self.source,
            None if args is None else tuple(args),
            if_rule,
            flags["async"] or flags["asyncRewake"],  # asyncRewake implies async
            flags["asyncRewake"],
            None if self.plugin is None else self.plugin.root,
            None if self.plugin is None else self.plugin.name,
        )

    def _is_command(self, h: Mapping[str, Any], where: KeyPath) -> bool:
        """Whether the handler is a command hook (no type is read as one); another type of
        Claude Code's is a warning, any other type an error."""
        kind = h.get("type")
        if kind is None:
            self.warn(where, "field", "has no type (Claude Code requires one): read as a command")
            return True
        if not isinstance(kind, str) or kind not in ("command", *OTHER_HANDLER_TYPES):
            raise ShellHookError(
                (*where, "type"),
                f"type must be command, {', '.join(OTHER_HANDLER_TYPES)}, got {kind!r}; "
                'write "type": "command"',
            )
        if kind != "command":
            why = OTHER_HANDLER_TYPES[kind]
            self.warn((*where, "type"), "type", f"{kind} hooks never run: {why}")
            return False
        return True

    def _fields(self, h: Mapping[str, Any], where: KeyPath) -> None:
        for key in h:
            if key in HANDLER_FIELDS_IGNORED:
                self.warn((*where, key), "field", f"not used: {HANDLER_FIELDS_IGNORED[key]}")
            elif key not in HANDLER_FIELDS_USED and key not in _OURS:
                self.warn(
                    (*where, key),
                    "field",
                    f"not read: not a field of a command hook "
                    f"({', '.join(HANDLER_FIELDS_USED)}, {', '.join(HANDLER_FIELDS_IGNORED)})",
                )


def _command(h: Mapping[str, Any], where: KeyPath) -> tuple[str, list[str] | None]:
    """A command handler's `command` and `args` (exec form when given)."""
    command = h.get("command")
    if not isinstance(command, str) or not command.strip():
        fix = "write the command as one string, or the program in command and its words in args"
        if command is None:
            raise ShellHookError(where, f"a command hook needs a command; {fix}")
        raise ShellHookError(
            (*where, "command"), f"command must be non-empty text, got {command!r}; {fix}"
        )
    args = h.get("args")
    if args is not None and (
        not isinstance(args, list) or not all(isinstance(a, str) for a in args)
    ):
        raise ShellHookError(
            (*where, "args"),
            f'args must be a list of text, got {args!r}; write "args": ["--fix", "src"]',
        )
    return command, args


def _both() -> str:
    return " and ".join(_GROUP_KEYS)


@dataclass(frozen=True)
class ShellHookSet:
    """What a `hooks` mapping says: the hooks that run here, and warnings (each with its
    key path under the mapping) for what was written but will not run or is not read."""

    hooks: tuple[ShellHook, ...] = ()
    warnings: tuple[ConfigWarning, ...] = ()


def read_shell_hooks(
    data: Any,
    source: str = "",
    *,
    plugin: Plugin | None = None,
    strict_events: bool = True,
) -> ShellHookSet:
    """`agent.hooks`, a settings file's `hooks` or a plugin's: hooks and warnings.

    Every event of Claude Code's table is accepted; the hooks of one that never fires here
    are a warning, not hooks. An event name not in the table is an error when
    `strict_events` (a hook file), else skipped with a warning, as Claude Code skips it.

    Raises:
        ShellHookError: the first entry that cannot be read, with its key path.
    """
    if data is None:
        return ShellHookSet()
    if not isinstance(data, Mapping):
        raise ShellHookError(
            (),
            f"hooks must be a mapping of event name to a list of hooks, got {data!r}; write "
            "hooks: {PreToolUse: [...]}",
        )
    hooks: list[ShellHook] = []
    warnings: list[ConfigWarning] = []
    for event, entries in data.items():
        info = EVENT_INFO.get(event) if isinstance(event, str) else None
        if info is None:
            warnings.append(_unknown_event(event, strict_events))
            continue
        found, said = _event_hooks(info, entries, source, plugin)
        if info.fires:
            hooks += found
            warnings += said
        elif entries:
            warnings.append(
                ConfigWarning(
                    (event,), "event", f"never runs: {event} never fires here ({info.note})"
                )
            )
    return ShellHookSet(tuple(hooks), tuple(warnings))


def _unknown_event(event: Any, strict: bool) -> ConfigWarning:
    """The warning for an event name Claude Code does not define; raises when `strict`."""
    close = difflib.get_close_matches(str(event), list(EVENT_INFO), n=1)
    guess = f"; did you mean {close[0]!r}?" if close else ""
    if strict:
        raise ShellHookError(
            (event,), f"unknown hook event {event!r}{guess} (events: {', '.join(EVENTS)})"
        )
    return ConfigWarning(
        (event,), "event", f"never runs: no such hook event{guess} (skipped, as in Claude Code)"
    )


def _event_hooks(
    info: EventInfo, entries: Any, source: str, plugin: Plugin | None
) -> tuple[list[ShellHook], list[ConfigWarning]]:
    """One event's entries: Claude Code's matcher groups or our own entries."""
    event = info.name
    if not isinstance(entries, list):
        raise ShellHookError(
            (event,), f"{event} must be a list of hook entries, got {entries!r}; write [...]"
        )
    reader = _Reader(source, plugin)
    found: list[ShellHook] = []
    for i, entry in enumerate(entries):
        path: tuple[str | int, ...] = (event, i)
        if not isinstance(entry, Mapping):
            raise ShellHookError(
                path,
                f"must be a mapping, got {entry!r}; write a matcher group "
                '{"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh"}]}',
            )
        if "hooks" in entry:
            found += reader.group(event, entry, path)
        else:
            found.append(_native(event, entry, path, source))
    return found, reader.warnings


def parse_shell_hooks(data: Any, source: str = "") -> tuple[ShellHook, ...]:
    """The hooks of `read_shell_hooks` (a hook file's strict reading), without warnings.

    Raises:
        ShellHookError: the first problem, with its key path under `hooks`.
    """
    return read_shell_hooks(data, source).hooks
