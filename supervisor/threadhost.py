"""The daemon's side of threads: everything the loop needs that comes from processes.

Which model, which permissions, which directory, and RunProcess's launcher are decided
here from the thread row, its process's launch record (in the DB, never spec.json) and the
settings, then handed to `agent_threads` as plain values and callables. A process's threads'
tools get the environment it was launched with (env.json, opened with the DB's key), without
the model providers' keys.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio

from agent_threads.config import AgentConfig
from agent_threads.extensions import load_extensions
from agent_threads.hooks.base import HookSet
from agent_threads.hooks.lifecycle import LifecycleHooks
from agent_threads.hooks.shell import ShellHooks, ShellSite
from agent_threads.hooks.shellspec import ShellHook
from agent_threads.hooks.system import SystemHookConfig, SystemHooks
from agent_threads.loop import BASE_PROMPT, LoopConfig
from agent_threads.models.resolve import NO_MODEL, build_model, choose
from agent_threads.permissions import Profile
from agent_threads.runner import Prepared
from agent_threads.sandbox import Sandbox, SandboxError, resolve
from agent_threads.tools.base import LaunchedProcess, ToolContext
from agent_threads.tools.registry import default_tools
from state.db import Store
from state.paths import StatePaths
from state.processes import get_process
from state.sandboxpolicy import SandboxPolicy
from state.settings import Settings
from state.threads import ThreadRecord
from supervise.errors import ModelError, StateError, UserError
from supervisor.hookspec import HookFile, Limits
from supervisor.launch import LaunchRequest, launch
from supervisor.redaction import make_redact, tool_env
from supervisor.rundir import RunDir
from supervisor.runspec import Inherited, RunSpec, SettingsHooks

log = logging.getLogger("supervise.daemon")


@dataclass(frozen=True)
class Launched:
    """What a process's threads run under, as recorded when it was launched."""

    spec: RunSpec
    env: dict[str, str] | None  # None: launched before env.json was kept


class ThreadHost:
    """Builds a `Prepared` loop for a thread (see agent_threads.runner.Prepare)."""

    def __init__(
        self, store: Store, paths: StatePaths, settings: Settings, env: Mapping[str, str]
    ) -> None:
        self.store = store
        self.paths = paths
        self.settings = settings
        self.env = dict(env)
        self.base_env = tool_env(env)
        self.redact = make_redact(env)

    def prepare(self, info: ThreadRecord) -> Prepared:
        launched = self._launched(info.process_id)
        spec = launched.spec if launched else None
        hooks = spec.hooks if spec else HookFile()
        # The hook's own `agent:` over the file's: each hook may have its own setup.
        agent = hooks.agent_for(info.hook)
        cwd = Path(info.cwd or (spec.cwd if spec else None) or self.paths.home)
        name = choose(info.model, agent.model, spec.model_default if spec else None)
        name = choose(name, self.settings.model)
        if name is None:
            raise ModelError(NO_MODEL)
        model = build_model(name, self.env, cwd=cwd, stream=self.settings.stream)
        profile = self._profile(info, spec, agent)
        env = self._tool_env(launched)
        env["SUPERVISE_THREAD_ID"] = f"t{info.id}"
        env["SUPERVISE_HOME"] = str(self.paths.home)
        output = None
        if info.process_id is not None:
            output = RunDir(self.paths.run_dir(info.process_id)).output
            env["SUPERVISE_OUTPUT"] = str(output)
            env["SUPERVISE_PROCESS_ID"] = str(info.process_id)
        limits = hooks.limits if spec else self._user_limits()
        policy = self._sandbox_policy(spec, agent)
        shell_hooks, extensions = _hooks_and_extensions(info, spec, agent)
        thread_dir = self.paths.thread_dir(info.id)
        # What SessionStart hooks write to CLAUDE_ENV_FILE every Bash command reads, as in
        # Claude Code: bash sources $BASH_ENV, and the sandbox shows this one file.
        env_file = thread_dir / "env.sh"
        if any(h.event == "SessionStart" for h in shell_hooks):
            env["BASH_ENV"] = str(env_file)
        sandbox = resolve(
            policy,
            self.paths.home,
            (output, env_file) if output else (env_file,),
            bwrap=self.settings.bwrap,
            search_path=self.env.get("PATH"),
        )
        ctx = ToolContext(
            thread_id=info.id,
            cwd=cwd,
            env=env,
            process_id=info.process_id,
            output_path=output,
            sandbox=sandbox,
            profile=profile,  # Glob and Grep leave out what its Read rules deny
        )
        ext = load_extensions(extensions, cwd)
        launcher = self._launcher(info, env, profile, limits, name, shell_hooks, ext.specs, sandbox)
        ctx = replace(ctx, launch=launcher)
        system = BASE_PROMPT if info.process_id is None else f"{BASE_PROMPT}\n{info.prompt}"
        site = ShellSite(
            cwd,
            {k: v for k, v in env.items() if k != "BASH_ENV"},  # for the tools' bash only
            agent_name=info.hook or "ask",
            transcript_path=thread_dir / "transcript.jsonl",
            env_file=env_file,
            model=model.name,
            # A thread of a process another thread started is Claude Code's subagent.
            agent_type=(info.hook or "thread") if spec and spec.inherited else None,
        )
        reminders = replace(agent.system_hooks or SystemHookConfig(), extra=tuple(ext.triggers))
        cfg = LoopConfig(
            model=model,
            tools=default_tools(),
            profile=profile,
            ctx=ctx,
            system=system,
            max_turns=agent.max_turns or self.settings.max_turns,
            budget_s=agent.timeout or self.settings.thread_timeout,
            # The documented order at every point: system hooks, shell hooks, extensions.
            hooks=HookSet(
                [
                    SystemHooks(reminders),
                    ShellHooks(shell_hooks, site),
                    LifecycleHooks(ext, cwd=cwd, model=model.name),
                ]
            ),
        )
        return Prepared(cfg, redact=self._redact(launched))

    def _launched(self, process_id: int | None) -> Launched | None:
        """The process's launch record from the DB, and its environment once verified.

        Raises:
            StateError: its run dir's spec.json or env.json was changed (logged here too).
        """
        if process_id is None:
            return None
        row = get_process(self.store, process_id)
        if row is None:
            raise StateError(f"process {process_id} is not in the state database")
        run = RunDir(self.paths.run_dir(process_id))
        if row.spec is None:  # launched before the DB kept the record: spec.json is all
            try:
                return Launched(RunSpec.from_text(run.read_spec(), str(run.spec)), None)
            except OSError as exc:
                raise ModelError(f"process {process_id}'s spec.json cannot be read: {exc}") from exc
        try:
            run.check_spec(row.spec)
            env = run.read_env(row.env_key) if row.env_key is not None else None
        except StateError as exc:
            log.warning("process %d: %s", process_id, exc)
            raise
        return Launched(RunSpec.from_text(row.spec, f"process {process_id}'s launch record"), env)

    def _tool_env(self, launched: Launched | None) -> dict[str, str]:
        """The process's own environment (minus the model providers' keys), else ours."""
        if launched is None or launched.env is None:
            return dict(self.base_env)
        return tool_env(launched.env)

    def _redact(self, launched: Launched | None) -> Callable[[str], str]:
        """Our secrets, and the process's: its tools may print either."""
        if launched is None or launched.env is None:
            return self.redact
        return make_redact(self.env, launched.env)

    def _profile(self, info: ThreadRecord, spec: RunSpec | None, agent: AgentConfig) -> Profile:
        if spec is None:
            return Profile.from_json(json.loads(info.permissions or "[]"))
        parent = spec.inherited.permissions if spec.inherited else Profile()
        return parent.inherit(agent.permissions)

    def _sandbox_policy(self, spec: RunSpec | None, agent: AgentConfig) -> SandboxPolicy:
        """The hook file's agent.sandbox over the settings', never looser than the parent's."""
        policy = self.settings.sandbox
        if agent.sandbox is not None:
            policy = agent.sandbox.over(policy)
        return policy.within(spec.inherited.sandbox if spec and spec.inherited else None)

    def _user_limits(self) -> Limits:
        return Limits(rate=self.settings.rate)

    def _launcher(
        self,
        info: ThreadRecord,
        env: Mapping[str, str],
        profile: Profile,
        limits: Limits,
        model: str,
        shell_hooks: tuple[ShellHook, ...],
        extensions: list[str],
        sandbox: Sandbox,
    ) -> Any:
        async def run_process(
            argv: list[str],
            hooks: str | Mapping[str, Any] | None,
            name: str | None,
            cwd: Path,
        ) -> LaunchedProcess:
            def start() -> LaunchedProcess:
                try:  # the process runs in the thread's sandbox, and so do its threads
                    wrap = sandbox.prefix(cwd, supervised=True)
                except SandboxError as exc:
                    raise UserError(str(exc)) from None
                req = LaunchRequest(
                    argv=argv,
                    cwd=cwd,
                    env=env,
                    hooks=_hooks(hooks, cwd),
                    name=name,
                    depth=info.depth,
                    parent_thread_id=info.id,
                    parent_limits=limits,
                    inherited=Inherited(profile, shell_hooks, tuple(extensions), sandbox.policy),
                    model_default=model,
                    wrap=wrap,
                )
                row = launch(self.store, self.paths, req)
                assert row.id is not None
                return LaunchedProcess(row.id, row.pid, row.name)

            return await anyio.to_thread.run_sync(start)

        return run_process


def _hooks_and_extensions(
    info: ThreadRecord, spec: RunSpec | None, agent: AgentConfig
) -> tuple[tuple[ShellHook, ...], list[str]]:
    """Every shell hook and extension of this thread: its parent thread's, its settings
    file's and plugins' (`--settings`, `--plugin`), its hook file's own and its plugins'.

    A thread started by a process that another thread launched runs the hooks of that
    thread too: sub-agents never lose their hooks.
    """
    given = spec.settings_hooks if spec else SettingsHooks.from_json(info.hooks)
    inherited = spec.inherited if spec and spec.inherited else Inherited()
    shell_hooks = (
        *inherited.shell_hooks,
        *given.shell,
        *(agent.hooks or ()),
        *(agent.plugin_hooks or ()),
    )
    extensions = [*inherited.extensions, *given.extensions, *(agent.extensions or ())]
    return shell_hooks, extensions


def _hooks(hooks: str | Mapping[str, Any] | None, cwd: Path) -> HookFile:
    from supervisor.hookfile import load_hook_file, load_hook_mapping

    if hooks is None:
        return HookFile()
    if isinstance(hooks, str):
        hf = load_hook_file(cwd / hooks, read_env_files=False)
    elif isinstance(hooks, Mapping):
        hf = load_hook_mapping(hooks, "RunProcess hooks")
    else:
        raise UserError("hooks must be a hook file path or a mapping")
    if hf.agent.extensions:
        # Python code a thread wrote must never run in the daemon: only a person adds it.
        raise UserError(
            "a thread cannot add extensions (agent.extensions); its processes inherit the "
            "thread's own. Start the process yourself with `supervise run` to add one"
        )
    if hf.agent.plugins:
        raise UserError(
            "a thread cannot add plugins (agent.plugins): their hooks run unchecked by "
            "permissions; its processes inherit the thread's own hooks. Start the process "
            "yourself with `supervise run --plugin DIR` to add one"
        )
    if hf.env_files:
        # The daemon would read them outside the thread's sandbox, for the process to print.
        raise UserError(
            "a thread cannot give its processes env files (env_file): the daemon would read "
            "them outside the thread's sandbox. Start the process yourself with `supervise "
            "run` to use one"
        )
    if hf.agent.hooks or any(h.agent is not None and h.agent.hooks for h in hf.hooks):
        # Shell hooks run unchecked by permissions: from a thread they would widen them.
        raise UserError(
            "a thread cannot add shell hooks (agent.hooks); its processes inherit the "
            "thread's own. Start the process yourself with `supervise run` to add some"
        )
    return hf
