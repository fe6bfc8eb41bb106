"""System hooks: reminders pushed to the model after a batch of tool results.

Trigger functions look at each tool result, `(tool_name, result) -> message | None`; their
messages are collected over the whole batch and sent as ONE user message of
`<system-hook>` blocks (the design document's format). Built in: plan completion, and the
document's future ones: context use, sensitive file modified, code changed without tests,
many files changed without a commit, tool output truncated. Each can be turned off or given
new text under `agent.system_hooks`. Pure: values in, messages out.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from agent_threads.hooks.base import Decision, Hooks, Turn, go_on
from agent_threads.permissions import file_argument
from agent_threads.transcript import AssistantReply, Entry, Reminder, ToolOutput, last_reply

Trigger = Callable[[str, Mapping[str, Any]], "str | None"]

NAMES = (
    "plan_completion",
    "context_usage",
    "sensitive_file",
    "tests_not_run",
    "many_files",
    "output_truncated",
)
DEFAULT_DOCS = (
    "CLAUDE.md - Project conventions, commands, architecture changes",
    "README.md - User-facing documentation, setup instructions, feature descriptions",
)
SENSITIVE = (".env", ".env.*", "*.pem", "*.key", "id_rsa*", "id_ed25519*", "*secret*", "*.p12")
CODE = re.compile(r"\.(py|js|jsx|ts|tsx|go|rs|java|kt|c|h|cc|cpp|hpp|rb|php|cs|swift|scala|sh)$")
TEST_RUN = re.compile(
    r"\b(pytest|tox|nox|unittest|npm (run )?test|yarn test|go test|cargo test|"
    r"make (test|check)|mvn test|gradle test|rspec|jest|vitest)\b"
)
COMMIT = re.compile(r"\bgit\s+commit\b")
TRUNCATED = re.compile(r"\[\.\.\. (\d+) characters truncated")


@dataclass(frozen=True)
class SystemHookConfig:
    """`agent.system_hooks`: which built-ins run, their text and thresholds."""

    off: frozenset[str] = frozenset()
    messages: Mapping[str, str] = field(default_factory=dict)
    docs: tuple[str, ...] = DEFAULT_DOCS
    sensitive: tuple[str, ...] = SENSITIVE
    many_files: int = 5
    window: int = 128_000  # the model's context window, in tokens
    ratio: float = 0.8
    extra: tuple[Trigger, ...] = ()  # triggers added by extensions

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> SystemHookConfig:
        """Read `agent.system_hooks`.

        Raises:
            ValueError: an unknown trigger or a bad setting, saying how to write it.
        """
        if not data:
            return cls()
        off: set[str] = set()
        messages: dict[str, str] = {}
        opts: dict[str, Any] = {}
        for name, value in data.items():
            if name not in NAMES:
                raise ValueError(f"unknown system hook {name!r}; known: {', '.join(NAMES)}")
            if value is False:
                off.add(name)
                continue
            if value is True or value is None:
                continue
            if not isinstance(value, Mapping):
                raise ValueError(
                    f"{name} must be false, true or a mapping such as {{message: ...}}"
                )
            _options(name, value, off, messages, opts)
        return cls(frozenset(off), messages, **opts)

    def to_json(self) -> dict[str, Any]:
        """The `agent.system_hooks` mapping that `from_mapping` reads back as this config
        (the extensions' triggers aside: they come with the extensions)."""
        default = SystemHookConfig()
        options: dict[str, dict[str, Any]] = {name: {} for name in NAMES}
        if self.docs != default.docs:
            options["plan_completion"]["docs"] = list(self.docs)
        if self.sensitive != default.sensitive:
            options["sensitive_file"]["globs"] = list(self.sensitive)
        if self.window != default.window:
            options["context_usage"]["window"] = self.window
        if self.ratio != default.ratio:
            options["context_usage"]["ratio"] = self.ratio
        if self.many_files != default.many_files:
            options["many_files"]["threshold"] = self.many_files
        out: dict[str, Any] = {}
        for name in NAMES:
            body = options[name]
            if name in self.messages:
                body["message"] = self.messages[name]
            if name in self.off:
                out[name] = {"enabled": False, **body} if body else False
            elif body:
                out[name] = body
        return out


_KEYS = {
    "plan_completion": ("enabled", "message", "docs"),
    "context_usage": ("enabled", "message", "window", "ratio"),
    "sensitive_file": ("enabled", "message", "globs"),
    "tests_not_run": ("enabled", "message"),
    "many_files": ("enabled", "message", "threshold"),
    "output_truncated": ("enabled", "message"),
}


def _options(
    name: str,
    value: Mapping[str, Any],
    off: set[str],
    messages: dict[str, str],
    opts: dict[str, Any],
) -> None:
    for key, v in value.items():
        if key not in _KEYS[name]:
            raise ValueError(f"{name}: unknown key {key!r}; known: {', '.join(_KEYS[name])}")
        if key == "enabled" and v is False:
            off.add(name)
        elif key == "message":
            messages[name] = str(v)
        elif key in ("docs", "globs"):
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise ValueError(f"{name}.{key} must be a list of text")
            opts["docs" if key == "docs" else "sensitive"] = tuple(v)
        elif key in ("window", "threshold"):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}.{key} must be a whole number above 0, got {v!r}")
            opts["window" if key == "window" else "many_files"] = v
        elif key == "ratio":
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1:
                raise ValueError(f"{name}.ratio must be a number in (0, 1], got {v!r}")
            opts["ratio"] = float(v)


def _safe(trig: Trigger, tool: str, result: Mapping[str, Any]) -> str | None:
    """An extension's trigger that raises says so instead of stopping the thread."""
    try:
        return trig(tool, result)
    except Exception as exc:
        return f"(a system-hook trigger failed: {exc!r})"


def format_system_hooks(messages: Sequence[str]) -> str:
    """The design document's format: one block per message, a blank line between."""
    return "\n\n".join(f"<system-hook>\n{m}\n</system-hook>" for m in messages)


# -- per-result triggers ---------------------------------------------------------------------


def plan_complete(tool_name: str, result: Mapping[str, Any]) -> bool:
    if tool_name != "UpdatePlan" or result.get("is_error"):
        return False
    summary = (result.get("data") or {}).get("summary") or {}
    total = summary.get("total")
    return isinstance(total, int) and total > 0 and total == summary.get("completed")


def _path(result: Mapping[str, Any]) -> str | None:
    """The file a call named: `file_path` (Claude Code's), or `path` (this tool's first key)."""
    return file_argument(result.get("arguments") or {})


def _changed(tool_name: str, result: Mapping[str, Any]) -> str | None:
    """The file a successful Write or Edit changed."""
    if tool_name in ("Write", "Edit") and not result.get("is_error"):
        return _path(result)
    return None


@dataclass
class _Batch:
    """The built-in triggers, given the thread's history before this batch."""

    cfg: SystemHookConfig
    history: Sequence[Entry]

    def text(self, name: str, default: str) -> str:
        return self.cfg.messages.get(name, default)

    def plan_completion(self, tool_name: str, result: Mapping[str, Any]) -> str | None:
        if not plan_complete(tool_name, result):
            return None
        docs = "\n".join(f"- {d}" for d in self.cfg.docs)
        return self.text(
            "plan_completion",
            "All tasks have been completed. Consider updating the following files with any new "
            f"or updated information from this session:\n{docs}",
        )

    def sensitive_file(self, tool_name: str, result: Mapping[str, Any]) -> str | None:
        path = _changed(tool_name, result)
        if path is None:
            return None
        name = PurePath(path).name
        if not any(
            fnmatch.fnmatch(name, g) or fnmatch.fnmatch(path, g) for g in self.cfg.sensitive
        ):
            return None
        return self.text(
            "sensitive_file",
            f"You modified a sensitive file ({path}). Review the change for secrets and "
            "permissions before it is committed or shared; do not print its contents.",
        )

    def output_truncated(self, tool_name: str, result: Mapping[str, Any]) -> str | None:
        m = TRUNCATED.search(str(result.get("output") or ""))
        if m is None:
            return None
        return self.text(
            "output_truncated",
            f"The output of {tool_name} was truncated ({m.group(1)} characters were cut from "
            "the middle). Narrow the command (grep, head, tail, a smaller range) to see what is "
            "missing before you rely on it.",
        )


def _answered(entries: Sequence[Entry]) -> list[tuple[str, Mapping[str, Any]]]:
    """(tool, result with its call's arguments) of every answered call, in order.

    The mapping is what triggers get: the result's JSON form plus `arguments` (the shape
    extensions' `api.on("system_hook", fn)` triggers read).
    """
    args = {
        c.id: c.arguments
        for e in entries
        if isinstance(e.body, AssistantReply)
        for c in e.body.tool_calls
    }
    return [
        (e.body.name, {**e.body.to_json(), "arguments": args.get(e.body.call_id, {})})
        for e in entries
        if isinstance(e.body, ToolOutput)
    ]


def _is_test_run(tool: str, result: Mapping[str, Any]) -> bool:
    cmd = (result.get("arguments") or {}).get("command")
    return tool == "Bash" and isinstance(cmd, str) and TEST_RUN.search(cmd) is not None


def _is_commit(tool: str, result: Mapping[str, Any]) -> bool:
    cmd = (result.get("arguments") or {}).get("command")
    return tool == "Bash" and isinstance(cmd, str) and COMMIT.search(cmd) is not None


def collect_system_hooks(
    batch: Sequence[tuple[str, Mapping[str, Any]]],
    history: Sequence[Entry],
    cfg: SystemHookConfig,
    extra: Sequence[Trigger] = (),
    *,
    input_tokens: int = 0,
) -> list[str]:
    """Messages for one batch of results (each a result dict with its call's arguments).

    `history` are the entries before this batch; `input_tokens` what the last model call
    used (for context use); `extra` are triggers added by extensions.
    """
    b = _Batch(cfg, history)
    per_result: list[tuple[str, Trigger]] = [
        ("plan_completion", b.plan_completion),
        ("sensitive_file", b.sensitive_file),
        ("output_truncated", b.output_truncated),
    ]
    out: list[str] = []
    for tool, result in batch:
        for name, trig in per_result:
            if name not in cfg.off and (msg := trig(tool, result)):
                out.append(msg)
        for trig in (*extra, *cfg.extra):
            if msg := _safe(trig, tool, result):
                out.append(msg)
    before = _answered(history)
    out += _streaks(b, before, batch)
    if "context_usage" not in cfg.off and input_tokens > cfg.ratio * cfg.window:
        share = round(100 * input_tokens / cfg.window)
        out.append(
            b.text(
                "context_usage",
                f"Context use is at {share}% of the model's window ({input_tokens} of "
                f"{cfg.window} tokens). Finish the current step, keep tool output short, and "
                "summarise what you know before it runs out.",
            )
        )
    return list(dict.fromkeys(out))  # the same reminder once per batch


def _code_changes(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> int:
    """Code files changed since the last test run."""
    n = 0
    for tool, res in calls:
        if _is_test_run(tool, res):
            n = 0
        elif (p := _changed(tool, res)) and CODE.search(p):
            n += 1
    return n


def _files_changed(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> int:
    """Distinct files changed since the last commit."""
    changed: set[str] = set()
    for tool, res in calls:
        if _is_commit(tool, res):
            changed = set()
        elif (p := _changed(tool, res)) is not None:
            changed.add(p)
    return len(changed)


def _streaks(
    b: _Batch,
    before: Sequence[tuple[str, Mapping[str, Any]]],
    batch: Sequence[tuple[str, Mapping[str, Any]]],
) -> list[str]:
    """Reminders that depend on what happened since the last test run or commit."""
    out = []
    cfg, after = b.cfg, [*before, *batch]
    # Once per streak: at the first code change after the last test run.
    if "tests_not_run" not in cfg.off and _code_changes(before) == 0 < _code_changes(after):
        out.append(
            b.text(
                "tests_not_run",
                "You changed code and have not run the tests since. Run the relevant tests "
                "before you call the work done.",
            )
        )
    n_before, n_after = _files_changed(before), _files_changed(after)
    if "many_files" not in cfg.off and n_before < cfg.many_files <= n_after:
        out.append(
            b.text(
                "many_files",
                f"{n_after} files changed since the last commit. Consider committing a "
                "checkpoint (git add -p; git commit) so the work can be reviewed and undone.",
            )
        )
    return out


class SystemHooks(Hooks):
    """After a batch of tool results, before the next model call: the reminders, as ONE
    user message (saved, so a restarted thread does not send them twice)."""

    def __init__(self, cfg: SystemHookConfig) -> None:
        self.cfg = cfg

    async def new_input(self, *, turn: Turn) -> Decision[None]:
        entries = turn.entries
        last = last_reply(entries)
        if last is None:
            return go_on()
        reply = entries[last].body
        assert isinstance(reply, AssistantReply)
        after = entries[last + 1 :]
        if not reply.tool_calls or any(isinstance(e.body, Reminder) for e in after):
            return go_on()
        batch = _answered(entries[last:])  # the results of this reply's calls only
        used = reply.usage.input_tokens if reply.usage else 0
        msgs = collect_system_hooks(batch, entries[:last], self.cfg, input_tokens=used)
        if msgs:
            await turn.save(Reminder(format_system_hooks(msgs), tuple(msgs)))
        return go_on()
