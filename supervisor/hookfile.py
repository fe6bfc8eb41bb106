"""Hook files (YAML or JSON) into `HookFile` values, with every problem at FILE:LINE.

`hooktext.py` reads the text into plain values and a line per key path. Validation here is a
hand-written walk over those values: each check knows its key path, so a message can name the
key, its line and the fix.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent_threads.extensions import ExtensionError, check_syntax, is_path, module_file, pin
from agent_threads.hooks.shellspec import ShellHook, ShellHookError, parse_shell_hooks
from agent_threads.hooks.system import SystemHookConfig
from agent_threads.permissions import Rule
from state.sandboxpolicy import SandboxConfigError, SandboxPolicy
from supervise.errors import HookFileError
from supervisor.hookspec import (
    Hook,
    HookFile,
    Limits,
    OnExit,
    OnOutputMatch,
    OnTimeout,
    Rate,
    Trigger,
    trigger_kind,
)
from supervisor.hooktext import (
    EXAMPLE,
    KeyPath,
    ReadAbort,
    read_json,
    read_yaml,
    where,
)
from supervisor.matching import compile_pattern

EXTENSIONS = (".yaml", ".yml", ".json")
__all__ = ["EXAMPLE", "EXTENSIONS", "load_hook_file", "load_hook_mapping", "parse_hook_text"]
_MAX_COUNT = 1_000_000  # far above any sane value, low enough for SQLite and float maths
_MAX_SECONDS = 10 * 365 * 86400
_TOP_KEYS = ("purpose", "context", "hooks", "agent", "limits")
_TRIGGERS = ("on_exit", "on_output_match", "on_timeout")
_HOOK_KEYS = ("name", *_TRIGGERS, "instructions", "max_spawns")
_AGENT_KEYS = (
    "model",
    "permissions",
    "max_turns",
    "timeout",
    "hooks",
    "system_hooks",
    "extensions",
    "sandbox",
)
_PROVIDERS = ("openai", "anthropic", "scripted")
_SURROGATE = re.compile("[\ud800-\udfff]")


def load_hook_file(path: str | Path) -> HookFile:
    """Read and validate one hook file; the format follows the extension.

    Raises:
        HookFileError: listing every problem, each as `FILE:LINE: what; how to fix it`.
    """
    name = str(path)
    _check_extension(name)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise HookFileError([f"{name}: cannot read hook file: {reason}; check the path"]) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise HookFileError(
            [f"{name}:{line}: cannot read hook file: not UTF-8 ({exc.reason}); save it as UTF-8"]
        ) from None
    return _anchor_script(parse_hook_text(text, name), Path(path))


def load_settings_hooks(path: str | Path) -> tuple[ShellHook, ...]:
    """The shell hooks of a settings file (see `load_settings_file`)."""
    return load_settings_file(path)[0]


def load_settings_file(path: str | Path) -> tuple[tuple[ShellHook, ...], list[str]]:
    """A settings file (JSON or YAML, Claude Code's settings.json shape): its shell hooks and
    its `extensions` (paths relative to the file, made absolute and syntax-checked).

    Raises:
        HookFileError: `FILE:LINE: what; how to fix it`.
    """
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise HookFileError([f"{name}: cannot read settings file: {exc}; check the path"]) from None
    try:
        read = read_yaml if name.endswith((".yaml", ".yml")) else read_json
        data, composer = read(text, name)
    except ReadAbort as exc:
        raise HookFileError([str(exc)]) from None
    if not isinstance(data, Mapping):
        raise HookFileError([f"{name}:1: a settings file must be a mapping with a hooks key"])
    unknown = sorted(set(data) - {"hooks", "extensions"})
    if unknown:
        line = composer.lines.get((unknown[0],), 1)
        raise HookFileError(
            [f"{name}:{line}: unknown key {unknown[0]!r}; a settings file has hooks and extensions"]
        )
    ext = data.get("extensions") or []
    if not isinstance(ext, list) or not all(isinstance(x, str) for x in ext):
        line = composer.lines.get(("extensions",), 1)
        raise HookFileError([f"{name}:{line}: extensions must be a list of paths or modules"])
    hf = _anchor_extensions(HookFile(agent={"extensions": ext}), Path(path))
    try:
        return parse_shell_hooks(data.get("hooks"), source=name), list(
            hf.agent.get("extensions") or []
        )
    except ShellHookError as exc:
        key: KeyPath = ("hooks", *exc.path)
        while key and key not in composer.lines:
            key = key[:-1]
        line = composer.lines.get(key, 1)
        raise HookFileError(
            [f"{name}:{line}: hooks.{'.'.join(map(str, exc.path))}: {exc}"]
        ) from None


def _anchor_extensions(hf: HookFile, path: Path) -> HookFile:
    """Extension paths are relative to the hook file; a syntax error is found now; each is
    pinned to its content (see agent_threads.extensions)."""
    specs = hf.agent.get("extensions") or []
    if not specs:
        return hf
    anchored, problems = [], []
    for spec in specs:
        if is_path(spec):
            file = Path(spec).expanduser()
            file = file if file.is_absolute() else path.resolve().parent / file
            try:
                check_syntax(file)
            except ExtensionError as exc:
                problems.append(f"{path}: agent.extensions: {exc}")
            spec = pin(str(file), file)
        else:
            spec = pin(spec, module_file(spec))
        anchored.append(spec)
    if problems:
        raise HookFileError(problems)
    return replace(hf, agent={**hf.agent, "extensions": anchored})


def _anchor_script(hf: HookFile, path: Path) -> HookFile:
    """A relative `scripted:FILE` model means relative to the hook file, wherever it runs."""
    hf = _anchor_extensions(hf, path)
    model = hf.agent.get("model")
    if isinstance(model, str) and model.startswith("scripted:"):
        script = Path(model.removeprefix("scripted:")).expanduser()
        if not script.is_absolute():
            agent = {**hf.agent, "model": f"scripted:{path.resolve().parent / script}"}
            return replace(hf, agent=agent)
    return hf


def parse_hook_text(text: str, filename: str) -> HookFile:
    """Validate hook file text; `filename` names it in messages and picks YAML or JSON.

    Raises:
        HookFileError: listing every problem, each as `FILE:LINE: what; how to fix it`.
    """
    _check_extension(filename)
    text = text.removeprefix("\ufeff")
    try:
        if not text.strip():
            raise ReadAbort(f"{filename}:1: hook file is empty; see {EXAMPLE}")
        read = read_json if filename.endswith(".json") else read_yaml
        data, composer = read(text, filename)
    except ReadAbort as exc:
        raise HookFileError([str(exc)]) from None
    except RecursionError:
        msg = f"{filename}:1: hook file is nested too deeply to read; flatten its structure"
        raise HookFileError([msg]) from None

    def locate(path: KeyPath) -> tuple[int, str]:
        while path and path not in composer.lines:
            path = path[:-1]
        line = composer.lines.get(path, 1)
        return line, f"{filename}:{line}"

    return _validate(data, _Report(locate, composer.problems), (filename,))


def load_hook_mapping(data: Mapping[str, Any], where: str) -> HookFile:
    """Validate hooks already parsed, e.g. given inline to an agent tool.

    Args:
        data: the mapping a hook file would hold.
        where: names the source in messages and in `sources`; there are no line numbers.

    Raises:
        HookFileError: listing every problem, each as `WHERE: what; how to fix it`.
    """
    return _validate(data, _Report(lambda _path: (0, where)), (where,))


def _check_extension(filename: str) -> None:
    if not filename.endswith(EXTENSIONS):
        raise HookFileError(
            [f"{filename}: hook file must end in .yaml, .yml or .json; rename it to say its format"]
        )


# Validation: plain values -> HookFile, or every problem found.


@dataclass
class _Report:
    """Problems found so far, each located by key path and sorted by line at the end."""

    locate: Callable[[KeyPath], tuple[int, str]]  # key path -> (line, "FILE:LINE")
    problems: list[tuple[int, str]] = field(default_factory=list)

    def add(self, path: KeyPath, message: str) -> None:
        line, where = self.locate(path)
        self.problems.append((line, f"{where}: {message}"))

    def bad(self, path: KeyPath, what: str, value: Any, fix: str) -> None:
        """Report that the value at `path` is not `what`, ending with how to `fix` it."""
        self.add(path, f"{where(path)} {what}, got {_show(value)}; {fix}")

    def check(self) -> None:
        if self.problems:
            ordered = [text for _, text in sorted(self.problems, key=lambda p: p[0])]
            # A message quoting a lone surrogate could not even be printed: show it escaped.
            raise HookFileError([t.encode(errors="backslashreplace").decode() for t in ordered])


def _validate(data: Any, r: _Report, sources: tuple[str, ...]) -> HookFile:
    if not isinstance(data, Mapping):
        got = "is empty" if data is None else f"must be a mapping, got {_show(data)}"
        r.add((), f"hook file {got}; see {EXAMPLE}")
        r.check()
    _check_surrogates(data, r)
    _check_keys(data, (), _TOP_KEYS, r)
    purpose = _text(data, ("purpose",), r, "write purpose: what the process is for")
    context = _mapping(data, "context", r, "write context: {related_files: [a.py]}")
    agent = _mapping(data, "agent", r, "write agent: {model: openai:gpt-4.1-mini}")
    _check_agent(agent, r)
    limits = _check_limits(data.get("limits"), r)
    hooks = _check_hooks(data.get("hooks"), r)
    r.check()
    given = data.get("limits")
    limits_set = frozenset(given) & {"max_depth", "rate"} if isinstance(given, Mapping) else None
    return HookFile(hooks, purpose, context, limits, agent, sources, limits_set or frozenset())


def _check_agent_hooks(agent: Mapping[str, Any], r: _Report) -> None:
    try:
        SystemHookConfig.from_mapping(agent.get("system_hooks"))
    except ValueError as exc:
        r.add(("agent", "system_hooks"), f"agent.system_hooks: {exc}")
    try:
        parse_shell_hooks(agent.get("hooks"))
    except ShellHookError as exc:
        at = ".".join(str(p) for p in exc.path)
        r.add(("agent", "hooks", *exc.path), f"agent.hooks{'.' + at if at else ''}: {exc}")


def _check_agent(agent: Mapping[str, Any], r: _Report) -> None:
    _check_keys(agent, ("agent",), _AGENT_KEYS, r)
    _check_agent_hooks(agent, r)
    ext = agent.get("extensions")
    if ext is not None and not (
        isinstance(ext, list) and all(isinstance(x, str) and x.strip() for x in ext)
    ):
        fix = "write extensions: [stack.py] (a path relative to the hook file, or a module)"
        r.bad(("agent", "extensions"), "must be a list of paths or module names", ext, fix)
    model = agent.get("model")
    if model is not None:
        provider, _, name = str(model).partition(":")
        if not isinstance(model, str) or provider not in _PROVIDERS or not name.strip():
            fix = "write model: openai:gpt-4.1-mini (or anthropic:NAME, scripted:FILE)"
            r.bad(("agent", "model"), "must be provider:name", model, fix)
    _count(agent, ("agent", "max_turns"), r, low=1, eg=50)
    _check_sandbox(agent, r)
    timeout = agent.get("timeout")
    if timeout is not None and not (
        isinstance(timeout, int | float)
        and not isinstance(timeout, bool)
        and 0 < timeout <= _MAX_SECONDS
    ):
        r.bad(("agent", "timeout"), "must be seconds above 0", timeout, "write timeout: 1800")
    perms = agent.get("permissions")
    if perms is None:
        return
    if not isinstance(perms, Mapping):
        fix = "write permissions: {allow: [Read], ask: [Edit], deny: ['Bash(rm:*)']}"
        r.bad(("agent", "permissions"), "must be a mapping", perms, fix)
        return
    for key, rules in perms.items():
        if key not in ("allow", "ask", "deny"):
            continue  # reported below with the key's line
        if not isinstance(rules, list | tuple):
            r.bad(("agent", "permissions", key), "must be a list of rules", rules, "write [Read]")
            continue
        for i, rule in enumerate(rules):
            try:
                Rule.parse(rule if isinstance(rule, str) else repr(rule))
            except ValueError as exc:
                r.add(("agent", "permissions", key, i), f"agent.permissions.{key}[{i}]: {exc}")
    _check_keys(perms, ("agent", "permissions"), ("allow", "ask", "deny"), r)


def _check_sandbox(agent: Mapping[str, Any], r: _Report) -> None:
    try:
        SandboxPolicy.parse(agent.get("sandbox"))
    except SandboxConfigError as exc:
        path: KeyPath = ("agent", "sandbox", *([exc.key] if exc.key else []))
        r.add(path, f"{where(path)} {exc}")


def _check_surrogates(data: Mapping[str, Any], r: _Report) -> None:
    """Refuse lone surrogates (`"\\ud800"` escapes): not text, so SQLite would refuse them later."""
    seen: set[int] = set()  # inline mappings from Python code could be cyclic
    todo: deque[tuple[KeyPath, Any]] = deque([((), data)])
    while todo:  # a loop, not recursion: the data may nest as deep as the parser allowed
        path, value = todo.popleft()
        if isinstance(value, str) and _SURROGATE.search(value):
            r.add(path, f"{where(path)} holds a lone surrogate escape; write the character itself")
        elif isinstance(value, Mapping | list | tuple) and id(value) not in seen:
            seen.add(id(value))
            items = value.items() if isinstance(value, Mapping) else enumerate(value)
            todo.extend([((*path, k), v) for k, v in items])
            todo.extend([(path, k) for k in value if isinstance(value, Mapping)])


def _check_keys(data: Mapping[Any, Any], path: KeyPath, known: tuple[str, ...], r: _Report) -> None:
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            guess = f"did you mean {close[0]!r}?" if close else "remove it"
            what = f"unknown key {str(key)!r} in {where(path)}"
            r.add((*path, key), f"{what}; {guess} (known: {', '.join(known)})")


def _text(data: Mapping[str, Any], path: KeyPath, r: _Report, fix: str) -> str | None:
    value = data.get(str(path[-1]))
    if value is None or (isinstance(value, str) and value.strip()):
        return value
    r.bad(path, "must be non-empty text", value, fix)
    return None


def _mapping(data: Mapping[str, Any], key: str, r: _Report, fix: str) -> dict[str, Any]:
    value = data.get(key)
    if value is not None and not isinstance(value, Mapping):
        r.bad((key,), "must be a mapping", value, fix)
    return dict(value) if isinstance(value, Mapping) else {}


def _count(data: Mapping[str, Any], path: KeyPath, r: _Report, low: int, eg: int) -> int | None:
    value = data.get(str(path[-1]))
    if value is None or (_is_int(value) and low <= value <= _MAX_COUNT):
        return value
    digits = re.findall(r"\d+", value if isinstance(value, str) else "")
    fix = f"write {path[-1]}: {digits[0][:6] if digits else eg}"
    r.bad(path, f"must be a whole number from {low} to {_MAX_COUNT}", value, fix)
    return None


def _check_limits(value: Any, r: _Report) -> Limits:
    if value is not None and not isinstance(value, Mapping):
        r.bad(("limits",), "must be a mapping", value, "write limits: {rate: 10/minute}")
    if not isinstance(value, Mapping):
        return Limits()
    _check_keys(value, ("limits",), ("max_depth", "rate"), r)
    depth = _count(value, ("limits", "max_depth"), r, low=0, eg=3)
    raw, rate = value.get("rate"), Limits().rate
    try:
        if raw is not None and not isinstance(raw, str):
            raise ValueError(f"rate must be text like 10/minute, got {_show(raw)}")
        rate = rate if raw is None else Rate.parse(raw)
        if rate.count > _MAX_COUNT:
            raise ValueError(f"rate allows over {_MAX_COUNT} threads, got {raw!r}; write 10/minute")
    except ValueError as exc:
        fix = "" if ";" in str(exc) else "; write rate: 10/minute"
        r.add(("limits", "rate"), f"limits.{exc}{fix}")  # Rate's message starts with "rate "
    return Limits(rate=rate) if depth is None else Limits(depth, rate)


def _check_hooks(value: Any, r: _Report) -> tuple[Hook, ...]:
    if value is not None and not isinstance(value, list | tuple):
        r.bad(("hooks",), "must be a list", value, f"start each hook with '- ' (see {EXAMPLE})")
    if not isinstance(value, list | tuple):
        return ()
    hooks: list[Hook] = []
    first: dict[str, int] = {}
    for i, item in enumerate(value):
        hook = _check_hook(item, ("hooks", i), r)
        if hook is not None and hook.name in first:
            taken = f"hook name {hook.name!r} is already used by hooks[{first[hook.name]}]"
            r.add(("hooks", i, "name"), f"{taken}; give each hook its own name")
        elif hook is not None:
            first[hook.name] = i
            hooks.append(hook)
    return tuple(hooks)


def _check_hook(item: Any, path: KeyPath, r: _Report) -> Hook | None:
    if not isinstance(item, Mapping):
        r.bad(path, "must be a mapping with a trigger and instructions", item, f"see {EXAMPLE}")
        return None
    before = len(r.problems)
    _check_keys(item, path, _HOOK_KEYS, r)
    name = _text(item, (*path, "name"), r, "write name: migration-failed")
    trigger = _check_trigger(item, path, r)
    fix = "write instructions: what the spawned thread should do"
    instructions = _text(item, (*path, "instructions"), r, fix)
    if item.get("instructions") is None:
        r.add(path, f"{where(path)} has no instructions; {fix}")
    max_spawns = _count(item, (*path, "max_spawns"), r, low=1, eg=1)
    if len(r.problems) > before or trigger is None or instructions is None:
        return None
    name = name or f"{trigger_kind(trigger)}-{int(path[-1]) + 1}"
    return Hook(name, trigger, instructions, 1 if max_spawns is None else max_spawns)


def _check_trigger(item: Mapping[str, Any], path: KeyPath, r: _Report) -> Trigger | None:
    present = [k for k in _TRIGGERS if k in item]
    if len(present) != 1:
        many = f"has {len(present)} triggers ({', '.join(present)}); keep one per hook"
        none = f"has no trigger; add one of {', '.join(_TRIGGERS)}"
        r.add((*path, *present[1:2]), f"{where(path)} {many if present else none}")
        return None
    kind = present[0]
    check = {"on_exit": _check_on_exit, "on_output_match": _check_on_output_match}
    return check.get(kind, _check_on_timeout)(item[kind], (*path, kind), r)


def _check_on_exit(body: Any, path: KeyPath, r: _Report) -> OnExit | None:
    codes = body.get("exit_codes") if isinstance(body, Mapping) else body
    listed = ", ".join(re.findall(r"\d+", codes if isinstance(codes, str) else _show(codes))[:5])
    if body is not None and not isinstance(body, Mapping):
        fix = f"write on_exit: {{exit_codes: [{listed or 1}]}}, or on_exit: {{}} for any code"
        r.bad(path, "must be a mapping", body, fix)
        return None
    if isinstance(body, Mapping):
        _check_keys(body, path, ("exit_codes",), r)
    path = (*path, "exit_codes")
    if codes is None:
        return OnExit()
    if not isinstance(codes, list | tuple) or not all(_is_int(c) for c in codes):
        r.bad(path, "must be a list of integers", codes, f"write exit_codes: [{listed or 1}]")
    elif not codes:
        r.bad(path, "must not be empty (the hook would never fire)", codes, "omit it for any code")
    elif not all(0 <= c <= 255 for c in codes):
        r.bad(path, "must hold exit codes from 0 to 255", codes, "drop the others")
    else:
        return OnExit(tuple(codes))
    return None


def _check_on_output_match(body: Any, path: KeyPath, r: _Report) -> OnOutputMatch | None:
    if not isinstance(body, Mapping):
        example = json.dumps(body if isinstance(body, str) else "deadlock detected")
        r.bad(path, "must be a mapping", body, f"write on_output_match: {{pattern: {example}}}")
        return None
    _check_keys(body, path, ("pattern",), r)
    path, pattern = (*path, "pattern"), body.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        fix = "write pattern: 'deadlock detected'"
        r.bad(path, "must be a non-empty regular expression", pattern, fix)
        return None
    try:
        compile_pattern(pattern)
    except ValueError as exc:
        r.add(path, f"{where(path)}: {exc}")
        return None
    return OnOutputMatch(pattern)


def _check_on_timeout(body: Any, path: KeyPath, r: _Report) -> OnTimeout | None:
    seconds: Any = body.get("seconds") if isinstance(body, Mapping) else body
    if not isinstance(body, Mapping):
        fix = f"write on_timeout: {{seconds: {seconds if _is_number(seconds) else 7200}}}"
        r.bad(path, "must be a mapping", body, fix)
        return None
    _check_keys(body, path, ("seconds",), r)
    if _is_number(seconds) and 0 < seconds <= _MAX_SECONDS:
        return OnTimeout(float(seconds))
    what = f"must be a number of seconds above 0 and at most {_MAX_SECONDS} (10 years)"
    r.bad((*path, "seconds"), what, seconds, "write seconds: 7200")
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # YAML `yes` is a bool


def _is_number(value: Any) -> bool:
    return _is_int(value) or (isinstance(value, float) and math.isfinite(value))


def _show(value: Any) -> str:
    """A value as the file would spell it (JSON is close enough), cut short."""
    if value is None:
        return "nothing"
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):  # circular, or an int too long to print
        text = type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."
