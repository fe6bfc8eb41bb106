"""Claude Code's own files, read unchanged: settings files and plugins.

A settings file (`.claude/settings.json`, or any file given with `--settings`; JSON, or YAML
by its extension) is accepted whole: its `hooks` run, `disableAllHooks: true` turns them off,
`extensions` (ours) loads extensions, and every other key is a warning that says why it is
not used. A plugin is a directory: `hooks/hooks.json`, and any hooks file or inline hooks its
`.claude-plugin/plugin.json` names; each hook gets the plugin's root (CLAUDE_PLUGIN_ROOT) and
name. What cannot be read is a `HookFileError`, `FILE:LINE: what; how to fix it`; what is
read but not used is a `FileWarning` at its line.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_threads.config import AgentConfig
from agent_threads.hooks.ccevents import EVENTS as CC_EVENTS
from agent_threads.hooks.shellspec import Plugin, ShellHook, ShellHookError, read_shell_hooks
from agent_threads.problems import ConfigWarning, KeyPath, WarningKind, dotted
from supervise.errors import HookFileError
from supervisor.hookspec import FileWarning, HookFile
from supervisor.hooktext import ReadAbort, read_json, read_yaml

MANIFEST = Path(".claude-plugin") / "plugin.json"
PLUGIN_HOOKS = Path("hooks") / "hooks.json"

# Why a Claude Code setting is not used here (any other key: "supervise reads only ...").
NOT_USED = {
    "permissions": "not applied: threads take their rules from the hook file's "
    "agent.permissions and the [permissions] table of settings.toml",
    "env": "not applied: a thread's tools get the environment its process was started with",
    "model": "not applied: the model comes from --model, agent.model or SUPERVISE_MODEL",
    "enabledPlugins": "not read: give plugins with --plugin DIR or a hook file's agent.plugins",
    "extraKnownMarketplaces": "not read: there are no marketplaces here; give plugins with "
    "--plugin DIR",
    "statusLine": "not used: nothing is displayed while a thread runs",
    "sandbox": "not applied: the sandbox comes from agent.sandbox, settings.toml or "
    "SUPERVISE_SANDBOX",
    "$schema": "not used: it is for editors",
    "allowManagedHooksOnly": "not used: there are no managed settings here",
    "description": "not used: Claude Code shows it in its /hooks menu",
}
# Claude Code settings that say a file is a settings file (for `hooks check` and `hooks
# test`, which take hook files too): the common ones, and every one NOT_USED names.
SETTINGS_KEYS = frozenset(
    {
        *NOT_USED,
        "hooks",
        "disableAllHooks",
        "apiKeyHelper",
        "cleanupPeriodDays",
        "includeCoAuthoredBy",
        "alwaysThinkingEnabled",
        "outputStyle",
        "attribution",
        "theme",
        "verbose",
        "forceLoginMethod",
        "awsAuthRefresh",
        "enableAllProjectMcpServers",
        "enabledMcpjsonServers",
        "disabledMcpjsonServers",
    }
)
# A plugin's parts other than hooks: none is loaded here.
_PLUGIN_PARTS = (
    "skills",
    "commands",
    "agents",
    "workflows",
    "output-styles",
    "themes",
    "monitors",
    "bin",
    ".mcp.json",
    ".lsp.json",
    "settings.json",
)
_MANIFEST_PARTS = (
    "skills",
    "commands",
    "agents",
    "workflows",
    "mcpServers",
    "lspServers",
    "outputStyles",
    "userConfig",
    "channels",
    "experimental",
)


@dataclass(frozen=True)
class ClaudeHooks:
    """Shell hooks (and extensions) read from settings files and plugins, and the warnings
    about what they hold that will not be used."""

    shell: tuple[ShellHook, ...] = ()
    extensions: tuple[str, ...] = ()
    warnings: tuple[FileWarning, ...] = ()

    def __add__(self, other: ClaudeHooks) -> ClaudeHooks:
        return ClaudeHooks(
            self.shell + other.shell,
            self.extensions + other.extensions,
            self.warnings + other.warnings,
        )


@dataclass(frozen=True)
class _Read:
    """A file's plain values, and the line of each key path."""

    name: str
    data: Any
    lines: dict[KeyPath, int]

    def line(self, path: KeyPath) -> int:
        while path and path not in self.lines:
            path = path[:-1]
        return self.lines.get(path, 1)

    def error(self, path: KeyPath, message: str) -> HookFileError:
        return HookFileError([f"{self.name}:{self.line(path)}: {message}"])

    def warning(self, w: ConfigWarning) -> FileWarning:
        return FileWarning(self.name, self.line(w.path), w)


def _read(path: Path, what: str) -> _Read:
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise HookFileError([f"{name}: cannot read {what}: not UTF-8 ({exc.reason})"]) from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise HookFileError([f"{name}: cannot read {what}: {reason}; check the path"]) from None
    if not text.strip():
        raise HookFileError([f"{name}:1: {what} is empty; write {{}} for one that says nothing"])
    try:
        read = read_yaml if name.endswith((".yaml", ".yml")) else read_json
        data, composer = read(text, name)
    except ReadAbort as exc:
        raise HookFileError([str(exc)]) from None
    except RecursionError:
        raise HookFileError([f"{name}:1: {what} is nested too deeply to read"]) from None
    return _Read(name, data, composer.lines)


def is_settings(data: Any) -> bool:
    """Whether plain values read from a file are a Claude Code settings file or a plugin's
    hooks.json (a hook file's `hooks` is a list; its keys are purpose, agent, ...)."""
    if not isinstance(data, Mapping):
        return False
    return isinstance(data.get("hooks"), Mapping) or any(
        isinstance(k, str) and k != "hooks" and (k in SETTINGS_KEYS or k in CC_EVENTS) for k in data
    )


def looks_like_settings(path: str | Path) -> bool:
    """`is_settings` of a file's contents; False when it cannot be read (the hook file's
    loader then says what is wrong, with its line)."""
    try:
        return is_settings(_read(Path(path), "file").data)
    except HookFileError:
        return False


def load_settings_file(path: str | Path) -> ClaudeHooks:
    """A settings file: its hooks (unless `disableAllHooks`), its extensions (paths relative
    to it, made absolute and syntax-checked), and warnings for everything else in it.

    Raises:
        HookFileError: `FILE:LINE: what; how to fix it`.
    """
    f = _read(Path(path), "settings file")
    return _claude_file(f, Path(path), None)


def _claude_file(f: _Read, path: Path, plugin: Plugin | None) -> ClaudeHooks:
    """A settings file, or (with `plugin`) a plugin's hooks file: same format."""
    data = f.data
    if not isinstance(data, Mapping):
        raise f.error(
            (), f'must be a JSON object, got {_kind(data)}; write {{"hooks": {{"Stop": [...]}}}}'
        )
    warnings: list[ConfigWarning] = []

    def warn(key: KeyPath, kind: WarningKind, message: str) -> None:
        warnings.append(ConfigWarning(key, kind, message))

    extensions: tuple[str, ...] = ()
    disabled = False
    for key, value in data.items():
        if key == "hooks":
            continue
        if key == "extensions" and plugin is None:
            extensions = _extensions(f, value, path)
        elif key == "disableAllHooks" and plugin is None:
            if not isinstance(value, bool):
                raise f.error(
                    (key,), f"disableAllHooks must be true or false, got {value!r}; write true"
                )
            disabled = value
        elif isinstance(key, str) and key in CC_EVENTS:
            warn(
                (key,),
                "key",
                'not read: hooks go under a "hooks" key (Claude Code does not read them here '
                "either); move it into hooks",
            )
        else:
            why = NOT_USED.get(str(key))
            if why is None:
                known = ("hooks",) if plugin else ("hooks", "disableAllHooks", "extensions")
                close = difflib.get_close_matches(str(key), known, n=1)
                why = f"not read: supervise reads only {', '.join(known)} from this file"
                why += f"; did you mean {close[0]!r}?" if close else ""
            warn((key,), "key", why)
    try:
        read = read_shell_hooks(data.get("hooks"), str(path), plugin=plugin, strict_events=False)
    except ShellHookError as exc:
        raise f.error(("hooks", *exc.path), f"{dotted(('hooks', *exc.path))}: {exc}") from None
    hooks = read.hooks
    warnings += [w.under(("hooks",)) for w in read.warnings]
    if disabled and hooks:
        warn(
            ("disableAllHooks",),
            "disabled",
            f"none of this file's {len(hooks)} hooks run (other files' hooks and plugins still do)",
        )
        hooks = ()
    located = [f.warning(w) for w in warnings]
    located.sort(key=lambda w: w.line or 0)
    return ClaudeHooks(hooks, extensions, tuple(located))


def _extensions(f: _Read, value: Any, path: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise f.error(
            ("extensions",),
            f'extensions must be a list of paths or modules, got {value!r}; write ["stack.py"]',
        )
    from supervisor.hookfile import anchor_extensions

    hf = anchor_extensions(HookFile(agent=AgentConfig(extensions=tuple(value))), path)
    return tuple(hf.agent.extensions or ())


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


# -- plugins ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadedPlugin:
    root: Path
    name: str
    hooks: ClaudeHooks


def load_plugin(
    spec: str | Path, base: Path | None = None, where: str = "--plugin"
) -> LoadedPlugin:
    """The Claude Code plugin in directory `spec` (relative to `base`, else here): the
    hooks of hooks/hooks.json and of what its manifest names, each with the plugin's root
    and name; warnings for its parts that are not loaded.

    Raises:
        HookFileError: no such directory (`where` names what gave it), or a file in it that
            cannot be read, at its line.
    """
    root = Path(spec).expanduser()
    if not root.is_absolute():
        root = (base or Path.cwd()) / root
    root = root.resolve()
    if not root.is_dir():
        raise HookFileError(
            [
                f"{where}: no plugin directory {root}; give the directory that holds "
                f"{PLUGIN_HOOKS} (and {MANIFEST})"
            ]
        )
    name, sources, inline, warnings = _manifest(root)
    plugin = Plugin(str(root), name)
    loaded = ClaudeHooks(warnings=tuple(warnings))
    for file in sources:
        loaded += _claude_file(_read(file, "plugin hooks file"), file, plugin)
    if inline is not None:
        man, value = inline
        events = value.get("hooks") if isinstance(value.get("hooks"), Mapping) else value
        at: KeyPath = ("hooks", "hooks") if events is not value else ("hooks",)
        try:
            read = read_shell_hooks(
                events, str(root / MANIFEST), plugin=plugin, strict_events=False
            )
        except ShellHookError as exc:
            raise man.error((*at, *exc.path), f"{dotted((*at, *exc.path))}: {exc}") from None
        shown = tuple(man.warning(w.under(at)) for w in read.warnings)
        loaded += ClaudeHooks(read.hooks, (), shown)
    named = {w.warning.path[0] for w in warnings if w.warning.path}
    parts = [p for p in _PLUGIN_PARTS if (root / p).exists() and p not in named]
    if parts:
        w = ConfigWarning(
            (), "plugin", f"not loaded: {', '.join(parts)} (supervise loads a plugin's hooks only)"
        )
        loaded += ClaudeHooks(warnings=(FileWarning(str(root), None, w),))
    if not sources and inline is None:
        w = ConfigWarning((), "plugin", f"has no hooks: no {PLUGIN_HOOKS}, none in {MANIFEST}")
        loaded += ClaudeHooks(warnings=(FileWarning(str(root), None, w),))
    return LoadedPlugin(root, name, loaded)


def _manifest(
    root: Path,
) -> tuple[str, list[Path], tuple[_Read, Mapping[str, Any]] | None, list[FileWarning]]:
    """The plugin's name, its hooks files, its inline hooks, and warnings: from
    .claude-plugin/plugin.json when there is one (the name is then required), else the
    directory's name and hooks/hooks.json."""
    default = root / PLUGIN_HOOKS
    sources = [default] if default.is_file() else []
    path = root / MANIFEST
    if not path.exists():
        return root.name, sources, None, []
    man = _read(path, "plugin manifest")
    data = man.data
    if not isinstance(data, Mapping):
        raise man.error(
            (), f'must be a JSON object, got {_kind(data)}; write {{"name": "{root.name}"}}'
        )
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise man.error(
            ("name",), f'name must be the plugin\'s name, got {name!r}; write "name": "{root.name}"'
        )
    warnings: list[FileWarning] = []

    def warn(key: KeyPath, message: str) -> None:
        warnings.append(man.warning(ConfigWarning(key, "plugin", message)))

    for key in _MANIFEST_PARTS:
        if key in data:
            warn((key,), "not loaded: supervise loads a plugin's hooks only")
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, Mapping):
        warnings += _named_hooks(man, root, hooks, sources)
    warnings.sort(key=lambda w: w.line or 0)
    inline = (man, hooks) if isinstance(hooks, Mapping) else None
    return name, sources, inline, warnings


def _named_hooks(man: _Read, root: Path, hooks: Any, sources: list[Path]) -> list[FileWarning]:
    """The hooks files a manifest names (added to `sources`); warnings for those loaded
    anyway."""
    named = [hooks] if isinstance(hooks, str) else hooks
    if not isinstance(named, list) or not all(isinstance(x, str) for x in named):
        raise man.error(
            ("hooks",),
            "hooks must be a path such as ./config/hooks.json, a list of paths, or the hooks "
            f'themselves, got {hooks!r}; write "hooks": "./hooks/more.json"',
        )
    warnings = []
    for i, rel in enumerate(named):
        key: KeyPath = ("hooks",) if isinstance(hooks, str) else ("hooks", i)
        file = (root / rel).resolve()
        if not file.is_relative_to(root):
            raise man.error(key, f"{rel!r} is outside the plugin; write a path that starts with ./")
        if file in sources:
            message = (
                f"{rel} is read once: {PLUGIN_HOOKS} is always loaded (Claude Code reports a "
                "duplicate hooks file)"
            )
            warnings.append(man.warning(ConfigWarning(key, "plugin", message)))
        elif not file.is_file():
            raise man.error(key, f"no hooks file {rel} in {root}; check the path")
        else:
            sources.append(file)
    return warnings


def plugin_dir_of(path: Path) -> Path | None:
    """The plugin a path names: the directory itself, its manifest, or its hooks.json."""
    path = path.resolve()
    if path.is_dir():
        return path
    if path.name == "plugin.json" and path.parent.name == ".claude-plugin":
        return path.parent.parent
    if path.name == "hooks.json" and path.parent.name == "hooks":
        return path.parent.parent
    return None


def load_plugins(specs: Sequence[str], base: Path | None = None) -> ClaudeHooks:
    """Every `--plugin DIR` given to a run: their hooks and warnings, in order.

    Raises:
        HookFileError: every plugin that cannot be loaded.
    """
    out, problems = ClaudeHooks(), []
    for spec in specs:
        try:
            out += load_plugin(spec, base, f"--plugin {spec}").hooks
        except HookFileError as exc:
            problems += exc.problems
    if problems:
        raise HookFileError(problems)
    return out


def load_claude_file(path: str | Path) -> ClaudeHooks:
    """A settings file, or a plugin's hooks.json: one in a plugin's hooks/ directory gives
    its hooks the plugin's root and name (CLAUDE_PLUGIN_ROOT), as the plugin would.

    Raises:
        HookFileError: `FILE:LINE: what; how to fix it`.
    """
    file = Path(path)
    root = plugin_dir_of(file) if file.name == "hooks.json" else None
    plugin = None
    if root is not None:
        plugin = Plugin(str(root), _manifest(root)[0])
    return _claude_file(_read(file, "settings file"), file, plugin)
