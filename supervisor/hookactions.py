"""A hook's actions besides a thread: `notify:`, `run:`, `restart: true`, as plain values.

Their hook-file checks (every problem at its key path, for FILE:LINE) and their JSON for
spec.json live here, apart from hookfile.py and hookspec.py, so other hook keys can grow
there without touching these. What a fire's facts become for a `run:` command (environment
variables only, never its text) is `run_env`, a pure function.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent_threads.problems import MAX_SECONDS, KeyPath, Problems, is_number

ACTION_KEYS = ("notify", "run", "restart")
DEFAULT_RUN_TIMEOUT = 60.0
TARGET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class RunCommand:
    """`run:` text (run by `sh -c`) or an argv list; killed after `timeout` seconds."""

    shell: str | None = None
    argv: tuple[str, ...] = ()
    timeout: float = DEFAULT_RUN_TIMEOUT

    def args(self) -> list[str]:
        """What is executed: the fire's facts are never part of it (they are variables)."""
        return ["/bin/sh", "-c", self.shell] if self.shell is not None else list(self.argv)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"timeout": self.timeout}
        if self.shell is not None:
            body["shell"] = self.shell
        else:
            body["argv"] = list(self.argv)
        return body

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunCommand:
        shell = data.get("shell")
        argv = tuple(str(a) for a in data.get("argv") or ())
        return cls(None if shell is None else str(shell), argv, float(data["timeout"]))


def actions_json(notify: tuple[str, ...], run: RunCommand | None, restart: bool) -> dict[str, Any]:
    """A hook's actions for spec.json; none written when it has none (old records match)."""
    out: dict[str, Any] = {}
    if notify:
        out["notify"] = list(notify)
    if run is not None:
        out["run"] = run.to_json()
    if restart:
        out["restart"] = True
    return out


def actions_from_json(data: Mapping[str, Any]) -> tuple[tuple[str, ...], RunCommand | None, bool]:
    run = data.get("run")
    return (
        tuple(str(n) for n in data.get("notify") or ()),
        RunCommand.from_json(run) if run else None,
        bool(data.get("restart", False)),
    )


@dataclass(frozen=True)
class Actions:
    notify: tuple[str, ...] = ()
    run: RunCommand | None = None
    restart: bool = False

    @property
    def any(self) -> bool:
        return bool(self.notify) or self.run is not None or self.restart


def check_actions(item: Mapping[str, Any], path: KeyPath, r: Problems) -> Actions:
    """A hook's `notify:`, `run:` and `restart:` keys; each problem reported at its key."""
    return Actions(
        _check_notify(item.get("notify"), (*path, "notify"), r),
        _check_run(item.get("run"), (*path, "run"), r),
        _check_restart(item.get("restart"), (*path, "restart"), r),
    )


def _check_notify(value: Any, path: KeyPath, r: Problems) -> tuple[str, ...]:
    fix = "write notify: ops, or notify: [ops, team] (names from settings.toml [notify.targets])"
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not items:
        r.bad(path, "must be a target name or a non-empty list of them", value, fix)
        return ()
    names: list[str] = []
    for i, item in enumerate(items):
        key = path if isinstance(value, str) else (*path, i)
        if not isinstance(item, str) or not TARGET_NAME.match(item):
            r.bad(key, "must be a target name (letters, digits, _ . -)", item, fix)
        elif "://" in item:
            r.bad(key, "must name a target, not hold its URL", item, fix)
        elif item not in names:
            names.append(item)
    return tuple(names)


def _check_run(value: Any, path: KeyPath, r: Problems) -> RunCommand | None:
    fix = (
        'write run: "notify-send \\"$SUPERVISE_HOOK\\"", run: [cmd, arg], '
        'or run: {command: "...", timeout: 30}'
    )
    if value is None:
        return None
    timeout: Any = DEFAULT_RUN_TIMEOUT
    command: Any = value
    if isinstance(value, Mapping):
        r.unknown_keys(value, path, ("command", "timeout"))
        command = value.get("command")
        timeout = value.get("timeout", DEFAULT_RUN_TIMEOUT)
        if not (is_number(timeout) and 0 < timeout <= MAX_SECONDS):
            r.bad((*path, "timeout"), "must be a number of seconds above 0", timeout, fix)
            return None
        path = (*path, "command")
    if isinstance(command, str):
        if not command.strip():
            r.bad(path, "must be a non-empty command", command, fix)
            return None
        return RunCommand(shell=command, timeout=float(timeout))
    if (
        isinstance(command, list | tuple)
        and command
        and all(isinstance(a, str) for a in command)
        and command[0]
    ):
        return RunCommand(argv=tuple(command), timeout=float(timeout))
    r.bad(path, "must be a command: text (run by sh -c) or a list of arguments", command, fix)
    return None


def _check_restart(value: Any, path: KeyPath, r: Problems) -> bool:
    if value is None or value is False:
        return False
    if value is True:
        return True
    fix = "write restart: true to restart the process when the hook fires"
    r.bad(path, "must be true or false", value, fix)
    return False


@dataclass(frozen=True)
class FireFactsEnv:
    """What a `run:` command is told about its fire."""

    hook: str
    trigger: str
    process_id: int
    process_name: str
    fire_id: int
    output: str  # the output log's path
    exit_code: int | None = None
    matched_line: str | None = None
    detail: str = ""


def run_env(base: Mapping[str, str], facts: FireFactsEnv) -> dict[str, str]:
    """`base` plus the SUPERVISE_* facts. Variables only: a matched line such as
    `$(touch pwned)` is data to the command, never part of its text."""
    env = dict(base)
    env.update(
        SUPERVISE_HOOK=facts.hook,
        SUPERVISE_TRIGGER=facts.trigger,
        SUPERVISE_PROCESS_ID=str(facts.process_id),
        SUPERVISE_PROCESS_NAME=facts.process_name,
        SUPERVISE_FIRE_ID=str(facts.fire_id),
        SUPERVISE_OUTPUT=facts.output,
        SUPERVISE_DETAIL=facts.detail,
    )
    env.pop("SUPERVISE_EXIT_CODE", None)
    env.pop("SUPERVISE_MATCHED_LINE", None)
    if facts.exit_code is not None:
        env["SUPERVISE_EXIT_CODE"] = str(facts.exit_code)
    if facts.matched_line is not None:
        env["SUPERVISE_MATCHED_LINE"] = facts.matched_line
    return env
