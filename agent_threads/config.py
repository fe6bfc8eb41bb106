"""A hook file's `agent:` section, parsed once into an `AgentConfig`.

The hook-file loader hands the section to `AgentConfig.parse` and turns each problem's key
path into FILE:LINE; a run keeps the record in its launch record (`to_json`, `from_json`),
and the daemon builds a thread from its typed fields. Nothing else reads the section.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from agent_threads.hooks.shellspec import ShellHook, ShellHookError, read_shell_hooks
from agent_threads.hooks.system import SystemHookConfig
from agent_threads.permissions import Layer, Rule
from agent_threads.problems import (
    MAX_SECONDS,
    ConfigWarning,
    KeyPath,
    Problems,
    dotted,
    is_number,
    where,
)
from state.sandboxpolicy import SandboxConfigError, SandboxPolicy
from state.settings import PROVIDERS
from supervise.errors import UserError

KEYS = (
    "model",
    "permissions",
    "max_turns",
    "timeout",
    "hooks",
    "system_hooks",
    "extensions",
    "sandbox",
    "plugins",
)
# In a launch record only: the hooks of `plugins`, read when the run started.
_STORED_KEYS = (*KEYS, "plugin_hooks")
_RULE_LISTS = ("allow", "ask", "deny")


class AgentConfigError(UserError):
    """The agent section is invalid: every problem, each with its key path (for FILE:LINE)."""

    def __init__(self, problems: list[tuple[KeyPath, str]], source: str) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(f"{source}: {message}" for _, message in self.problems))


@dataclass(frozen=True)
class AgentConfig:
    """What the agent section says. None is "not said": the settings apply, and a later
    hook file given to the same run may say it (see `merge`)."""

    model: str | None = None
    permissions: Layer | None = None
    max_turns: int | None = None
    timeout: float | None = None  # seconds a thread may run
    hooks: tuple[ShellHook, ...] | None = None  # shell hooks
    system_hooks: SystemHookConfig | None = None
    extensions: tuple[str, ...] | None = None
    sandbox: SandboxPolicy | None = None
    # Claude Code plugin directories (as written; the hook file's loader makes them absolute
    # and reads their hooks into `plugin_hooks`).
    plugins: tuple[str, ...] | None = None
    plugin_hooks: tuple[ShellHook, ...] | None = None

    @classmethod
    def parse(
        cls,
        data: Any,
        source: str,
        path: KeyPath = ("agent",),
        warnings: list[ConfigWarning] | None = None,
    ) -> AgentConfig:
        """The section as written in a hook file (`source` names it; `path` is where the
        section sits in it). What is accepted but will not be used is added to `warnings`.

        Raises:
            AgentConfigError: every problem found, each with its key path.
        """
        problems = Problems()
        config = _parse(data, source, path, problems, stored=False)
        if problems.found:
            raise AgentConfigError(problems.found, source)
        if warnings is not None:
            warnings += problems.warnings
        return config

    def merge(self, other: AgentConfig) -> AgentConfig:
        """Two hook files given to one run: each key the later one sets wins."""
        mine, theirs = vars(self), vars(other)
        return AgentConfig(
            **{
                f.name: mine[f.name] if theirs[f.name] is None else theirs[f.name]
                for f in fields(self)
            }
        )

    def to_json(self) -> dict[str, Any]:
        """For the launch record; `from_json` reads it back (keys not said are left out)."""
        out = {
            "model": self.model,
            "permissions": None if self.permissions is None else self.permissions.to_json(),
            "max_turns": self.max_turns,
            "timeout": self.timeout,
            "hooks": None if self.hooks is None else [h.to_json() for h in self.hooks],
            "system_hooks": None if self.system_hooks is None else self.system_hooks.to_json(),
            "extensions": None if self.extensions is None else list(self.extensions),
            "sandbox": None if self.sandbox is None else self.sandbox.to_json(),
            "plugins": None if self.plugins is None else list(self.plugins),
            "plugin_hooks": None
            if self.plugin_hooks is None
            else [h.to_json() for h in self.plugin_hooks],
        }
        return {k: v for k, v in out.items() if v is not None}

    @classmethod
    def from_json(cls, data: Any, source: str) -> AgentConfig:
        """A launch record's section: `to_json`'s shape, or a record from before it, which
        kept the section as the hook file wrote it.

        Raises:
            AgentConfigError: the record does not hold a valid section.
        """
        problems = Problems()
        config = _parse(data, source, ("agent",), problems, stored=True)
        if problems.found:
            raise AgentConfigError(problems.found, source)
        return config


def _parse(data: Any, source: str, path: KeyPath, p: Problems, *, stored: bool) -> AgentConfig:
    if data is None:
        return AgentConfig()
    if not isinstance(data, Mapping):
        p.bad(path, "must be a mapping", data, "write agent: {model: openai:gpt-4.1-mini}")
        return AgentConfig()
    p.unknown_keys(data, path, _STORED_KEYS if stored else KEYS)
    # In the order a hook file's loader always checked them: its messages keep their order.
    system_hooks = _system_hooks(data.get("system_hooks"), (*path, "system_hooks"), p)
    hooks = _shell_hooks(data.get("hooks"), (*path, "hooks"), p, source, stored)
    extensions = _extensions(data.get("extensions"), (*path, "extensions"), p)
    model = _model(data.get("model"), (*path, "model"), p)
    max_turns = p.count(data, (*path, "max_turns"), low=1, eg=50)
    sandbox = _sandbox(data.get("sandbox"), (*path, "sandbox"), p)
    timeout = _timeout(data.get("timeout"), (*path, "timeout"), p)
    permissions = _permissions(data.get("permissions"), (*path, "permissions"), p)
    plugins = _plugins(data.get("plugins"), (*path, "plugins"), p)
    plugin_hooks = None
    if stored and data.get("plugin_hooks") is not None:
        plugin_hooks = _shell_hooks(data["plugin_hooks"], (*path, "plugin_hooks"), p, source, True)
    return AgentConfig(
        model,
        permissions,
        max_turns,
        timeout,
        hooks,
        system_hooks,
        extensions,
        sandbox,
        plugins,
        plugin_hooks,
    )


def _system_hooks(value: Any, path: KeyPath, p: Problems) -> SystemHookConfig | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        fix = "write system_hooks: {many_files: false}"
        p.bad(path, "must be a mapping of system hooks", value, fix)
        return None
    try:
        return SystemHookConfig.from_mapping(value)
    except ValueError as exc:
        p.add(path, f"{dotted(path)}: {exc}")
        return None


def _shell_hooks(
    value: Any, path: KeyPath, p: Problems, source: str, stored: bool
) -> tuple[ShellHook, ...] | None:
    if value is None:
        return None
    if stored and isinstance(value, list):  # to_json's records (never a hook file's shape)
        try:
            return tuple(ShellHook.from_json(h) for h in value)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            p.add(path, f"{dotted(path)}: a stored shell hook cannot be read ({exc!r})")
            return None
    try:
        read = read_shell_hooks(value, source=source)
    except ShellHookError as exc:
        at = ".".join(str(part) for part in exc.path)
        p.add((*path, *exc.path), f"{dotted(path)}{'.' + at if at else ''}: {exc}")
        return None
    p.warnings += [w.under(path) for w in read.warnings]
    return read.hooks


def _plugins(value: Any, path: KeyPath, p: Problems) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(x, str) and x.strip() for x in value):
        return tuple(value)
    fix = "write plugins: [./my-plugin] (Claude Code plugin directories, relative to this file)"
    p.bad(path, "must be a list of plugin directories", value, fix)
    return None


def _extensions(value: Any, path: KeyPath, p: Problems) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(x, str) and x.strip() for x in value):
        return tuple(value)
    fix = "write extensions: [stack.py] (a path relative to the hook file, or a module)"
    p.bad(path, "must be a list of paths or module names", value, fix)
    return None


def _model(value: Any, path: KeyPath, p: Problems) -> str | None:
    if value is None:
        return None
    provider, _, name = str(value).partition(":")
    if isinstance(value, str) and provider in PROVIDERS and name.strip():
        return value
    fix = "write model: openai:gpt-4.1-mini (or anthropic:NAME, scripted:FILE)"
    p.bad(path, "must be provider:name", value, fix)
    return None


def _sandbox(value: Any, path: KeyPath, p: Problems) -> SandboxPolicy | None:
    if value is None:
        return None
    try:
        return SandboxPolicy.parse(value)
    except SandboxConfigError as exc:
        at: KeyPath = (*path, *([exc.key] if exc.key else []))
        p.add(at, f"{where(at)} {exc}")
        return None


def _timeout(value: Any, path: KeyPath, p: Problems) -> float | None:
    if value is None:
        return None
    if is_number(value) and 0 < value <= MAX_SECONDS:
        return float(value)
    p.bad(path, "must be seconds above 0", value, "write timeout: 1800")
    return None


def _permissions(value: Any, path: KeyPath, p: Problems) -> Layer | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        fix = "write permissions: {allow: [Read], ask: [Edit], deny: ['Bash(rm:*)']}"
        p.bad(path, "must be a mapping", value, fix)
        return None
    before = len(p.found)
    lists: dict[str, tuple[Rule, ...]] = {}
    for key, rules in value.items():
        if key not in _RULE_LISTS:
            continue  # reported below with the key's line
        if not isinstance(rules, list | tuple):
            p.bad((*path, key), "must be a list of rules", rules, "write [Read]")
            continue
        parsed = []
        for i, rule in enumerate(rules):
            try:
                parsed.append(Rule.parse(rule if isinstance(rule, str) else repr(rule)))
            except ValueError as exc:
                p.add((*path, key, i), f"{dotted((*path, key, i))}: {exc}")
        lists[key] = tuple(parsed)
    p.unknown_keys(value, path, _RULE_LISTS)
    if len(p.found) > before:
        return None
    return Layer(lists.get("allow", ()), lists.get("ask", ()), lists.get("deny", ()))
