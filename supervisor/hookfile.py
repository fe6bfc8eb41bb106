"""Hook files (YAML or JSON) into `HookFile` values, with every problem at FILE:LINE.

`hooktext.py` reads the text into plain values and a line per key path. Validation here is a
hand-written walk over those values: each check knows its key path, so a message can name the
key, its line and the fix.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args

from agent_threads.config import AgentConfig, AgentConfigError
from agent_threads.extensions import ExtensionError, check_syntax, is_path, module_file, pin
from agent_threads.hooks.shellspec import ShellHook
from agent_threads.problems import (
    MAX_COUNT,
    MAX_SECONDS,
    ConfigWarning,
    KeyPath,
    Problems,
    is_int,
    is_number,
    show,
    where,
)
from supervise.errors import HookFileError
from supervisor.dedup import check_dedup
from supervisor.hookactions import ACTION_KEYS, check_actions
from supervisor.hookspec import (
    FileWarning,
    Hook,
    HookFile,
    Limits,
    OnCrashLoop,
    OnExit,
    OnOutputMatch,
    OnResource,
    OnSchedule,
    OnSilence,
    OnTimeout,
    Rate,
    Trigger,
    TriggerKind,
    trigger_kind,
)
from supervisor.hooktext import EXAMPLE, read_document, read_utf8
from supervisor.matching import compile_pattern
from supervisor.restartfile import check_restart

EXTENSIONS = (".yaml", ".yml", ".json")
__all__ = [
    "EXAMPLE",
    "EXTENSIONS",
    "anchor_extensions",
    "load_hook_file",
    "load_hook_mapping",
    "load_inline_hooks",
    "parse_hook_text",
]
_TOP_KEYS = ("purpose", "context", "hooks", "agent", "limits", "restart", "env_file")
_TRIGGERS: tuple[str, ...] = get_args(TriggerKind)  # in the order messages list them
_HOOK_KEYS = ("name", *_TRIGGERS, "instructions", "max_spawns", "dedup", "agent", *ACTION_KEYS)
# Keys a hook's own `agent:` may not set: they are pinned and anchored for the whole file.
_FILE_ONLY_AGENT_KEYS = ("extensions", "plugins")
_SURROGATE = re.compile("[\ud800-\udfff]")


def load_hook_file(
    path: str | Path,
    *,
    read_env_files: bool = True,
    notify_targets: Collection[str] | None = None,
) -> HookFile:
    """Read and validate one hook file; the format follows the extension. `read_env_files`
    False leaves `env_file:` unread (a thread's RunProcess refuses it: the daemon must not
    read a file the thread's sandbox keeps from it). `notify_targets`: the targets the
    settings file defines; a `notify:` naming another is an error (None: not checked).

    Raises:
        HookFileError: listing every problem, each as `FILE:LINE: what; how to fix it`.
    """
    name = str(path)
    _check_extension(name)
    text = read_utf8(Path(path), name, "hook file")
    hf, locate = _parse(text, name)
    if notify_targets is not None:
        check_notify_targets(hf, notify_targets, locate)
    if read_env_files:
        hf = _anchor_env_files(hf, Path(path), locate)
    return _anchor_plugins(_anchor_script(hf, Path(path)), Path(path), locate)


def check_notify_targets(hf: HookFile, known: Collection[str], locate: _Locate) -> None:
    """Each hook's `notify:` names a target of the settings file.

    Raises:
        HookFileError: one problem per unknown name, at its line.
    """
    problems = []
    for i, hook in enumerate(hf.hooks):  # no problem found: hooks[i] is the file's hooks[i]
        for name in hook.notify:
            if name not in known:
                _, at = locate(("hooks", i, "notify"))
                have = ", ".join(sorted(known)) or "none defined"
                problems.append(
                    f"{at}: hooks[{i}].notify: no target {name!r} in the settings file's "
                    f"[notify.targets] ({have}); define it there, e.g. {name} = "
                    '"ntfy://ntfy.sh/TOPIC", or fix the name'
                )
    if problems:
        raise HookFileError(problems)


def _anchor_env_files(hf: HookFile, path: Path, locate: _Locate) -> HookFile:
    """env_file: each relative to the hook file, made absolute, and read now: a missing file
    or a line dotenv cannot parse is found by `hooks check` and before `run` starts anything.
    Only the paths are kept (the launch record is no place for values); `run` reads them."""
    if not hf.env_files:
        return hf
    from supervisor.envfile import read_env_file

    anchored, problems = [], []
    for i, given in enumerate(hf.env_files):
        file = Path(given).expanduser()
        file = file if file.is_absolute() else path.resolve().parent / file
        _, at = locate(("env_file", i) if len(hf.env_files) > 1 else ("env_file",))
        try:
            read_env_file(file)
        except HookFileError as exc:
            problems += [f"{at}: env_file: {p}" for p in exc.problems]
        anchored.append(str(file))
    if problems:
        raise HookFileError(problems)
    return replace(hf, env_files=tuple(anchored))


def anchor_extensions(hf: HookFile, path: Path) -> HookFile:
    """Extension paths are relative to the hook file; a syntax error is found now; each is
    pinned to its content (see agent_threads.extensions)."""
    specs = hf.agent.extensions or ()
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
    return replace(hf, agent=replace(hf.agent, extensions=tuple(anchored)))


def _anchor_script(hf: HookFile, path: Path) -> HookFile:
    """A relative `scripted:FILE` model means relative to the hook file, wherever it runs
    (the file's `agent:` and each hook's own)."""
    hf = anchor_extensions(hf, path)
    hooks = tuple(
        replace(h, agent=_anchor_model(h.agent, path)) if h.agent is not None else h
        for h in hf.hooks
    )
    return replace(hf, agent=_anchor_model(hf.agent, path), hooks=hooks)


def _anchor_model(agent: AgentConfig, path: Path) -> AgentConfig:
    model = agent.model
    if model is not None and model.startswith("scripted:"):
        script = Path(model.removeprefix("scripted:")).expanduser()
        if not script.is_absolute():
            return replace(agent, model=f"scripted:{path.resolve().parent / script}")
    return agent


def _anchor_plugins(hf: HookFile, path: Path, locate: _Locate) -> HookFile:
    """agent.plugins: each directory (relative to the hook file) loaded now, its hooks in
    `plugin_hooks`, so the launch record holds what its threads run."""
    specs = hf.agent.plugins
    if not specs:
        return hf
    from supervisor.ccfiles import load_plugin

    roots: list[str] = []
    hooks: list[ShellHook] = []
    warnings: list[FileWarning] = []
    problems: list[str] = []
    for i, spec in enumerate(specs):
        _, at = locate(("agent", "plugins", i))
        try:
            plugin = load_plugin(spec, path.resolve().parent, f"{at}: agent.plugins[{i}]")
        except HookFileError as exc:
            problems += exc.problems
            continue
        roots.append(str(plugin.root))
        hooks += plugin.hooks.shell
        warnings += plugin.hooks.warnings
    if problems:
        raise HookFileError(problems)
    agent = replace(hf.agent, plugins=tuple(roots), plugin_hooks=tuple(hooks))
    return replace(hf, agent=agent, warnings=(*hf.warnings, *warnings))


def parse_hook_text(text: str, filename: str) -> HookFile:
    """Validate hook file text; `filename` names it in messages and picks YAML or JSON.

    Raises:
        HookFileError: listing every problem, each as `FILE:LINE: what; how to fix it`.
    """
    return _parse(text, filename)[0]


def _parse(text: str, filename: str) -> tuple[HookFile, _Locate]:
    _check_extension(filename)
    data, composer, locate = read_document(text, filename)
    return _validate(data, _Report(locate, composer.problems), (filename,)), locate


def load_hook_mapping(data: Mapping[str, Any], where: str) -> HookFile:
    """Validate hooks already parsed, e.g. given inline to an agent tool.

    Args:
        data: the mapping a hook file would hold.
        where: names the source in messages and in `sources`; there are no line numbers.

    Raises:
        HookFileError: listing every problem, each as `WHERE: what; how to fix it`.
    """
    return _validate(data, _Report(lambda _path: (0, where)), (where,))


def load_inline_hooks(
    data: Any, path: Path, locate: Callable[[KeyPath], tuple[int, str]], prefix: KeyPath
) -> HookFile:
    """A hook file's body written inside another file (a program file's `hooks:`), checked
    as a hook file is: each problem at the outer file's line, relative paths (env_file,
    extensions, plugins, `scripted:FILE`) relative to that file.

    Args:
        data: the body's values.
        path: the outer file.
        locate: the outer file's key path -> (line, "FILE:LINE").
        prefix: where the body sits in the outer file.

    Raises:
        HookFileError: every problem, each as `FILE:LINE: what; how to fix it`.
    """

    def inner(p: KeyPath) -> tuple[int, str]:
        return locate((*prefix, *p))

    hf = _validate(data, _Report(inner), (str(path),))
    hf = _anchor_env_files(hf, path, inner)
    return _anchor_plugins(_anchor_script(hf, path), path, inner)


def _check_extension(filename: str) -> None:
    if not filename.endswith(EXTENSIONS):
        raise HookFileError(
            [f"{filename}: hook file must end in .yaml, .yml or .json; rename it to say its format"]
        )


# Validation: plain values -> HookFile, or every problem found.


_Locate = Callable[[KeyPath], tuple[int, str]]  # key path -> (line, "FILE:LINE")


class _Report(Problems):
    """Problems found so far, each located by key path and sorted by line at the end."""

    def __init__(
        self,
        locate: _Locate,
        located: list[tuple[int, str]] | None = None,  # the reader's, located already
    ) -> None:
        super().__init__()
        self.locate = locate
        self.located = list(located or [])

    def add(self, path: KeyPath, message: str) -> None:
        super().add(path, message)
        line, at = self.locate(path)
        self.located.append((line, f"{at}: {message}"))

    def check(self) -> None:
        if self.located:
            ordered = [text for _, text in sorted(self.located, key=lambda p: p[0])]
            # A message quoting a lone surrogate could not even be printed: show it escaped.
            raise HookFileError([t.encode(errors="backslashreplace").decode() for t in ordered])


def _validate(data: Any, r: _Report, sources: tuple[str, ...]) -> HookFile:
    if not isinstance(data, Mapping):
        got = "is empty" if data is None else f"must be a mapping, got {show(data)}"
        r.add((), f"hook file {got}; see {EXAMPLE}")
        r.check()
    _check_surrogates(data, r)
    r.unknown_keys(data, (), _TOP_KEYS)
    purpose = _text(data, ("purpose",), r, "write purpose: what the process is for")
    context = _mapping(data, "context", r, "write context: {related_files: [a.py]}")
    warned: list[ConfigWarning] = []
    agent = _agent(data.get("agent"), sources[0], r, warned)
    limits = _check_limits(data.get("limits"), r)
    hooks = _check_hooks(data.get("hooks"), r, source=sources[0], warned=warned)
    restart = check_restart(data.get("restart"), r)
    env_files = _check_env_file(data.get("env_file"), r)
    r.check()
    given = data.get("limits")
    limits_set = frozenset(given) & {"max_depth", "rate"} if isinstance(given, Mapping) else None
    warnings = []
    for w in warned:
        line, _ = r.locate(w.path)
        warnings.append(FileWarning(sources[0], line or None, w))
    return HookFile(
        hooks,
        purpose,
        context,
        limits,
        agent,
        sources,
        limits_set or frozenset(),
        tuple(sorted(warnings, key=lambda w: w.line or 0)),
        restart=restart,
        env_files=env_files,
    )


def _check_env_file(value: Any, r: _Report) -> tuple[str, ...]:
    """`env_file: FILE` or `env_file: [FILE, ...]`: dotenv files whose variables the process
    gets (a later file's win)."""
    fix = "write env_file: .env, or env_file: [.env, .env.local]"
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not items:
        r.bad(("env_file",), "must be a file name or a non-empty list of them", value, fix)
        return ()
    paths: list[str] = []
    for i, item in enumerate(items):
        key: KeyPath = ("env_file", i) if not isinstance(value, str) else ("env_file",)
        if not isinstance(item, str) or not item.strip():
            r.bad(key, "must be a file name", item, fix)
        else:
            paths.append(item)
    return tuple(paths)


def _agent(value: Any, source: str, r: _Report, warned: list[ConfigWarning]) -> AgentConfig:
    try:
        return AgentConfig.parse(value, source, warnings=warned)
    except AgentConfigError as exc:
        for path, message in exc.problems:
            r.add(path, message)
        return AgentConfig()


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


def _check_limits(value: Any, r: _Report) -> Limits:
    if value is not None and not isinstance(value, Mapping):
        r.bad(("limits",), "must be a mapping", value, "write limits: {rate: 10/minute}")
    if not isinstance(value, Mapping):
        return Limits()
    r.unknown_keys(value, ("limits",), ("max_depth", "rate"))
    depth = r.count(value, ("limits", "max_depth"), low=0, eg=3)
    raw, rate = value.get("rate"), Limits().rate
    try:
        if raw is not None and not isinstance(raw, str):
            raise ValueError(f"rate must be text like 10/minute, got {show(raw)}")
        rate = rate if raw is None else Rate.parse(raw)
        if rate.count > MAX_COUNT:
            raise ValueError(f"rate allows over {MAX_COUNT} threads, got {raw!r}; write 10/minute")
    except ValueError as exc:
        fix = "" if ";" in str(exc) else "; write rate: 10/minute"
        r.add(("limits", "rate"), f"limits.{exc}{fix}")  # Rate's message starts with "rate "
    return Limits(rate=rate) if depth is None else Limits(depth, rate)


def _check_hooks(
    value: Any, r: _Report, *, source: str = "", warned: list[ConfigWarning] | None = None
) -> tuple[Hook, ...]:
    if value is not None and not isinstance(value, list | tuple):
        r.bad(("hooks",), "must be a list", value, f"start each hook with '- ' (see {EXAMPLE})")
    if not isinstance(value, list | tuple):
        return ()
    hooks: list[Hook] = []
    first: dict[str, int] = {}
    for i, item in enumerate(value):
        hook = _check_hook(item, ("hooks", i), r)
        if hook is not None and isinstance(item, Mapping):
            hook = _check_hook_extras(hook, item, ("hooks", i), r, source, warned)
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
    before = len(r.found)
    r.unknown_keys(item, path, _HOOK_KEYS)
    name = _text(item, (*path, "name"), r, "write name: migration-failed")
    trigger = _check_trigger(item, path, r)
    fix = "write instructions: what the spawned thread should do"
    instructions = _text(item, (*path, "instructions"), r, fix)
    actions = check_actions(item, path, r)
    if item.get("instructions") is None and not actions.any:
        also = "; or give the hook an action instead: notify: TARGET, run: COMMAND or restart: true"
        r.add(path, f"{where(path)} has no instructions; {fix}{also}")
    max_spawns = r.count(item, (*path, "max_spawns"), low=1, eg=1)
    if len(r.found) > before or trigger is None:
        return None
    name = name or f"{trigger_kind(trigger)}-{int(path[-1]) + 1}"
    if max_spawns is None:
        # A schedule is its own bound: a nightly hook fires every night unless told less.
        max_spawns = MAX_COUNT if isinstance(trigger, OnSchedule) else 1
    return Hook(
        name,
        trigger,
        instructions or "",  # none: no agent, the hook only acts
        max_spawns,
        notify=actions.notify,
        run=actions.run,
        restart=actions.restart,
    )


def _check_hook_extras(
    hook: Hook,
    item: Mapping[str, Any],
    path: KeyPath,
    r: _Report,
    source: str,
    warned: list[ConfigWarning] | None,
) -> Hook | None:
    """A hook's `dedup:` and its own `agent:` (checked by the file section's parser, each
    problem at its key path under the hook)."""
    before = len(r.found)
    dedup = check_dedup(item.get("dedup"), r, (*path, "dedup"))
    agent = None
    given = item.get("agent")
    if given is not None:
        at: KeyPath = (*path, "agent")
        try:
            agent = AgentConfig.parse(given, source, path=at, warnings=warned)
        except AgentConfigError as exc:
            for where_, message in exc.problems:
                r.add(where_, message)
        if isinstance(given, Mapping):
            for key in _FILE_ONLY_AGENT_KEYS:
                if key in given:
                    r.add(
                        (*at, key),
                        f"{where((*at, key))} is for the whole file: move it to the top-level "
                        f"agent: section (a hook's own agent: sets model, permissions, "
                        "max_turns, timeout, hooks, system_hooks, sandbox)",
                    )
    if len(r.found) > before:
        return None
    return replace(hook, dedup=dedup, agent=agent)


def _check_trigger(item: Mapping[str, Any], path: KeyPath, r: _Report) -> Trigger | None:
    present = [k for k in _TRIGGERS if k in item]
    if len(present) != 1:
        many = f"has {len(present)} triggers ({', '.join(present)}); keep one per hook"
        none = f"has no trigger; add one of {', '.join(_TRIGGERS)}"
        r.add((*path, *present[1:2]), f"{where(path)} {many if present else none}")
        return None
    kind = present[0]
    check = {
        "on_exit": _check_on_exit,
        "on_output_match": _check_on_output_match,
        "on_crash_loop": _check_on_crash_loop,
        "on_silence": _check_on_silence,
        "on_schedule": _check_on_schedule,
        "on_resource": _check_on_resource,
    }
    return check.get(kind, _check_on_timeout)(item[kind], (*path, kind), r)


def _check_on_exit(body: Any, path: KeyPath, r: _Report) -> OnExit | None:
    codes = body.get("exit_codes") if isinstance(body, Mapping) else body
    listed = ", ".join(re.findall(r"\d+", codes if isinstance(codes, str) else show(codes))[:5])
    if body is not None and not isinstance(body, Mapping):
        fix = f"write on_exit: {{exit_codes: [{listed or 1}]}}, or on_exit: {{}} for any code"
        r.bad(path, "must be a mapping", body, fix)
        return None
    by_user: Any = True
    if isinstance(body, Mapping):
        r.unknown_keys(body, path, ("exit_codes", "stopped_by_user"))
        by_user = body.get("stopped_by_user", True)
        if by_user is None:
            by_user = True
        elif not isinstance(by_user, bool):
            fix = "write stopped_by_user: false to skip exits `supervise stop` or `restart` caused"
            r.bad((*path, "stopped_by_user"), "must be true or false", by_user, fix)
            return None
    path = (*path, "exit_codes")
    if codes is None:
        return OnExit(stopped_by_user=by_user)
    if not isinstance(codes, list | tuple) or not all(is_int(c) for c in codes):
        r.bad(path, "must be a list of integers", codes, f"write exit_codes: [{listed or 1}]")
    elif not codes:
        r.bad(path, "must not be empty (the hook would never fire)", codes, "omit it for any code")
    elif not all(0 <= c <= 255 for c in codes):
        r.bad(path, "must hold exit codes from 0 to 255", codes, "drop the others")
    else:
        return OnExit(tuple(codes), stopped_by_user=by_user)
    return None


def _check_on_output_match(body: Any, path: KeyPath, r: _Report) -> OnOutputMatch | None:
    if not isinstance(body, Mapping):
        example = json.dumps(body if isinstance(body, str) else "deadlock detected")
        r.bad(path, "must be a mapping", body, f"write on_output_match: {{pattern: {example}}}")
        return None
    r.unknown_keys(body, path, ("pattern",))
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
    seconds = _check_seconds(body, path, r, "on_timeout", 7200)
    return None if seconds is None else OnTimeout(seconds)


def _check_seconds(body: Any, path: KeyPath, r: _Report, key: str, example: int) -> float | None:
    """A `{seconds: N}` trigger's N (on_timeout, on_silence); None with the problem added."""
    seconds: Any = body.get("seconds") if isinstance(body, Mapping) else body
    if not isinstance(body, Mapping):
        fix = f"write {key}: {{seconds: {seconds if is_number(seconds) else example}}}"
        r.bad(path, "must be a mapping", body, fix)
        return None
    r.unknown_keys(body, path, ("seconds",))
    if is_number(seconds) and 0 < seconds <= MAX_SECONDS:
        return float(seconds)
    what = f"must be a number of seconds above 0 and at most {MAX_SECONDS} (10 years)"
    r.bad((*path, "seconds"), what, seconds, f"write seconds: {example}")
    return None


def _check_on_crash_loop(body: Any, path: KeyPath, r: _Report) -> OnCrashLoop | None:
    if body is not None and not isinstance(body, Mapping):
        r.bad(path, "must be an empty mapping", body, "write on_crash_loop: {}")
        return None
    if isinstance(body, Mapping) and body:
        key = next(iter(body))
        what = f"{where(path)} takes no keys, got {show(key)} (restart: sets when a crash loop is)"
        r.add((*path, key), f"{what}; write on_crash_loop: {{}}")
        return None
    return OnCrashLoop()


def _check_on_silence(body: Any, path: KeyPath, r: _Report) -> OnSilence | None:
    seconds = _check_seconds(body, path, r, "on_silence", 300)
    return None if seconds is None else OnSilence(seconds)


def _check_on_schedule(body: Any, path: KeyPath, r: _Report) -> OnSchedule | None:
    from supervisor.schedule import EXAMPLE_CRON, cron_problem

    if not isinstance(body, Mapping):
        given = body if isinstance(body, str) else EXAMPLE_CRON
        r.bad(path, "must be a mapping", body, f"write on_schedule: {{cron: {json.dumps(given)}}}")
        return None
    r.unknown_keys(body, path, ("cron", "timezone"))
    cron, zone = body.get("cron"), body.get("timezone")
    if not isinstance(cron, str) or not cron.strip():
        fix = f"write cron: {json.dumps(EXAMPLE_CRON)} (minute hour day-of-month month weekday)"
        r.bad((*path, "cron"), "must be a crontab expression", cron, fix)
        return None
    if zone is not None and (not isinstance(zone, str) or not zone.strip()):
        r.bad((*path, "timezone"), "must be an IANA time zone name", zone, "write timezone: UTC")
        return None
    problem = cron_problem(cron, zone)
    if problem is not None:
        key = "timezone" if problem.startswith("timezone") else "cron"
        r.add((*path, key), f"{where((*path, key))}: {problem}")
        return None
    return OnSchedule(cron.strip(), zone)


def _check_on_resource(body: Any, path: KeyPath, r: _Report) -> OnResource | None:
    example = "write on_resource: {rss_mb: 500, for_seconds: 30}"
    if not isinstance(body, Mapping):
        r.bad(path, "must be a mapping", body, example)
        return None
    r.unknown_keys(body, path, ("rss_mb", "cpu_percent", "for_seconds"))
    ok = True
    values: dict[str, float | None] = {}
    for key, eg in (("rss_mb", 500), ("cpu_percent", 90)):
        value = body.get(key)
        if value is None:
            values[key] = None
        elif is_number(value) and 0 < value <= MAX_COUNT:
            values[key] = float(value)
        else:
            what = f"must be a number above 0 and at most {MAX_COUNT}"
            r.bad((*path, key), what, value, f"write {key}: {eg}")
            ok = False
    if ok and values["rss_mb"] is None and values["cpu_percent"] is None:
        r.add(path, f"{where(path)} has no threshold; give rss_mb, cpu_percent or both")
        ok = False
    seconds = body.get("for_seconds", 0)
    if not (is_number(seconds) and 0 <= seconds <= MAX_SECONDS):
        what = f"must be a number of seconds from 0 to {MAX_SECONDS} (10 years)"
        r.bad((*path, "for_seconds"), what, seconds, "write for_seconds: 30")
        ok = False
    if not ok:
        return None
    return OnResource(values["rss_mb"], values["cpu_percent"], float(seconds))
