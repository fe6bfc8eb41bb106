"""`supervise hooks check`: what a hook file, a Claude Code settings file or a plugin will
and will not use. `hooks test` reads files through `load_checked` too, so both commands
agree on what is valid.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agent_threads.hooks.shellspec import ShellHook
from supervise.errors import HookFileError
from supervisor.hookspec import FileWarning, Hook, HookFile, OnResource, OnSchedule, OnSilence

Kind = Literal["hook file", "settings file", "plugin"]


@dataclass(frozen=True)
class Checked:
    """One file (or plugin directory) as a run would read it."""

    path: str
    kind: Kind
    shell: tuple[ShellHook, ...]  # the shell hooks its threads run
    warnings: tuple[FileWarning, ...]
    hook_file: HookFile | None = None  # a hook file's whole contents
    name: str | None = None  # a plugin's


def load_checked(path: str, notify_targets: Collection[str] | None = None) -> Checked:
    """A plugin directory (or its plugin.json), a settings file or a plugin's hooks.json
    (told apart by their keys), else a hook file.

    Raises:
        HookFileError: every problem, `FILE:LINE: what; how to fix it`.
    """
    from supervisor.ccfiles import load_claude_file, load_plugin, looks_like_settings
    from supervisor.hookfile import load_hook_file

    p = Path(path)
    if p.is_dir() or (p.name == "plugin.json" and p.parent.name == ".claude-plugin"):
        plugin = load_plugin(p if p.is_dir() else p.parent.parent, where=path)
        loaded = plugin.hooks
        return Checked(path, "plugin", loaded.shell, loaded.warnings, name=plugin.name)
    if looks_like_settings(p):
        loaded = load_claude_file(p)
        return Checked(path, "settings file", loaded.shell, loaded.warnings)
    hf = load_hook_file(p, notify_targets=notify_targets)
    shell = (*(hf.agent.hooks or ()), *(hf.agent.plugin_hooks or ()))
    return Checked(path, "hook file", shell, hf.warnings, hf)


def hook_label(h: Hook, now: float | None = None) -> str:
    """`name (kind)`; the newer triggers say what they wait for (a schedule: its next time)."""
    t = h.trigger
    if isinstance(t, OnSilence | OnResource):
        return f"{h.name} ({h.kind}: {t.text()})"
    if isinstance(t, OnSchedule):
        import time

        from supervisor.schedule import describe_time, next_time

        after = time.time() if now is None else now
        upcoming = next_time(t.cron, t.timezone, after)
        when = "never" if upcoming is None else describe_time(upcoming, t.cron, t.timezone)
        return f"{h.name} ({h.kind}: {t.text()}; next {when})"
    return f"{h.name} ({h.kind})"


def hook_line(h: ShellHook) -> str:
    """One shell hook as `hooks check` lists it: event, matcher, command, how it runs."""
    matcher = f" [{h.matcher}]" if h.matcher else ""
    how = []
    if h.if_rule:
        how.append(f"if {h.if_rule}")
    if h.async_rewake:
        how.append("asyncRewake")
    elif h.run_async:
        how.append("async")
    if h.args is not None:
        how.append(f"exec form, {len(h.args)} args")
    how.append(f"timeout {h.timeout_ms / 1000:g}s")
    if h.plugin_name:
        how.append(f"plugin {h.plugin_name}")
    return f"  runs: {h.event}{matcher} {h.label} ({'; '.join(how)})"


def env_file_lines(hf: HookFile) -> list[str]:
    """How many variables each `env_file:` sets (read and checked by the loader already);
    never their values, which may be secrets."""
    from supervisor.envfile import read_env_file

    lines = []
    for file in hf.env_files:
        n = len(read_env_file(Path(file)))
        lines.append(f"  env_file: {file}: sets {n} variable{'' if n == 1 else 's'}")
    return lines


def hook_setup_lines(hf: HookFile) -> list[str]:
    """Each hook's `dedup:` and its own `agent:` (what its threads run with, merged over the
    file's), one line per hook that has either."""
    lines = []
    for h in hf.hooks:
        parts = [h.dedup.text()] if h.dedup is not None else []
        if h.agent is not None:
            own = ", ".join(sorted(h.agent.to_json()))
            merged = hf.agent_for(h.name)
            model = f"; model {merged.model}" if merged.model else ""
            parts.append(f"own agent ({own}){model}")
        if parts:
            lines.append(f"  hook {h.name}: {'; '.join(parts)}")
    return lines


def cmd_hooks_check(args: argparse.Namespace, notify_targets: Collection[str] | None = None) -> int:
    from state.sandboxpolicy import SandboxPolicy

    problems: list[str] = []
    together, hook_files = HookFile(), 0
    for f in args.files:
        try:
            c = load_checked(f, notify_targets)
        except HookFileError as exc:
            problems += exc.problems
            continue
        hf = c.hook_file
        if hf is not None:
            names = ", ".join(hook_label(h) for h in hf.hooks) or "no hooks"
            sandbox = (hf.agent.sandbox or SandboxPolicy()).text()
            if hf.agent.sandbox is None:
                sandbox += " (default; the settings file or SUPERVISE_SANDBOX may set it)"
            restart = f"; restart {hf.restart.text()}" if hf.restart is not None else ""
            print(f"{f}: OK: {names}; limits {hf.limits_text()}; sandbox {sandbox}{restart}")
            for line in env_file_lines(hf):
                print(line)
            for line in hook_setup_lines(hf):
                print(line)
            # The limits `run --hook A --hook B` applies (the same merge; hooks left out).
            together = together.merge(HookFile(limits=hf.limits, limits_set=hf.limits_set))
            hook_files += 1
        else:
            what = (
                "Claude Code settings file" if c.kind == "settings file" else "Claude Code plugin"
            )
            what += f" {c.name}" if c.name else ""
            count = f"{len(c.shell)} shell hook{'' if len(c.shell) == 1 else 's'} run"
            print(f"{f}: OK: {what}: {count}")
        for h in c.shell:
            print(hook_line(h))
        for w in c.warnings:
            print(w)
    if problems:
        raise HookFileError(problems)
    if hook_files > 1:
        print(f"given together to one run: limits {together.limits_text()}")
    return 0
