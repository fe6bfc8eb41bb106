"""A process's launch record: what it runs, and what its threads run under.

Built in one place (`launch._spec`) from the launch request; kept in the process's row (the
truth) and copied to its run dir's spec.json for people. The tracker reads its hooks back,
the thread host the rest. `from_json` also reads the records older versions wrote, which
lack some fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_threads.config import AgentConfigError
from agent_threads.hooks.shellspec import ShellHook
from agent_threads.permissions import Profile
from state.sandboxpolicy import SandboxPolicy
from supervise.errors import StateError
from supervisor.hookspec import HookFile


@dataclass(frozen=True)
class SettingsHooks:
    """The shell hooks and extensions of a `--settings` file (or `SUPERVISE_SETTINGS`): for
    a run's threads (in its record) or an `ask` thread (in the thread's row)."""

    shell: tuple[ShellHook, ...] = ()
    extensions: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"shell": [h.to_json() for h in self.shell], "extensions": list(self.extensions)}

    @classmethod
    def from_json(cls, data: Any) -> SettingsHooks:
        """`to_json`'s shape, as a value or JSON text; also a bare list of shell hooks (what
        was written before extensions came in), or nothing."""
        if isinstance(data, str):
            data = json.loads(data)
        if isinstance(data, list):
            data = {"shell": data}
        data = data or {}
        return cls(
            tuple(ShellHook.from_json(h) for h in data.get("shell") or ()),
            tuple(str(e) for e in data.get("extensions") or ()),
        )


@dataclass(frozen=True)
class Inherited:
    """What a process started by a thread takes from that thread: its own threads are never
    looser than the one that started it, and keep its hooks and extensions."""

    permissions: Profile = field(default_factory=Profile)
    shell_hooks: tuple[ShellHook, ...] = ()
    extensions: tuple[str, ...] = ()
    sandbox: SandboxPolicy | None = None  # None: a record from before sandboxes

    def to_json(self) -> dict[str, Any]:
        return {
            "parent_permissions": self.permissions.to_json(),
            "parent_shell_hooks": [h.to_json() for h in self.shell_hooks],
            "parent_extensions": list(self.extensions),
            "parent_sandbox": None if self.sandbox is None else self.sandbox.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Inherited | None:
        """From a record's `parent_*` keys; None for a process a person started."""
        if not any(k in data for k in ("parent_permissions", "parent_shell_hooks")):
            return None
        return cls(
            Profile.from_json(data.get("parent_permissions") or []),
            tuple(ShellHook.from_json(h) for h in data.get("parent_shell_hooks") or ()),
            tuple(str(e) for e in data.get("parent_extensions") or ()),
            SandboxPolicy.from_json(data.get("parent_sandbox")),
        )


@dataclass(frozen=True)
class ProgramRef:
    """A process started by `supervise up` from a program file: which file and program, the
    fingerprint of its definition as started (`up` restarts it when that changes), and
    whether the daemon starts it again after a reboot."""

    file: str  # the program file's absolute path
    name: str
    fingerprint: str
    autostart: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "name": self.name,
            "fingerprint": self.fingerprint,
            "autostart": self.autostart,
        }

    @classmethod
    def from_json(cls, data: Any) -> ProgramRef | None:
        if not isinstance(data, Mapping):
            return None
        return cls(
            str(data["file"]),
            str(data["name"]),
            str(data["fingerprint"]),
            bool(data.get("autostart", True)),
        )


@dataclass(frozen=True)
class RunSpec:
    """The launch record of one process."""

    id: int
    name: str
    argv: tuple[str, ...]
    cwd: Path
    env_keys: tuple[str, ...]  # names given with --env or env files; never values (secrets)
    depth: int
    parent_thread_id: int | None
    started_at: float
    hooks: HookFile
    unbuffered: bool
    # The model its threads fall back to: SUPERVISE_MODEL as `run` saw it (the daemon may
    # run in another shell), or the model of the thread that started it.
    model_default: str | None = None
    settings_hooks: SettingsHooks = SettingsHooks()
    inherited: Inherited | None = None  # started by a thread
    # Put before argv when it starts (a thread's sandbox: `bwrap ... --`): a restart starts
    # it the same way. Not part of the command.
    wrap: tuple[str, ...] = ()
    program: ProgramRef | None = None  # started by `supervise up`

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "argv": list(self.argv),
            "cwd": str(self.cwd),
            "env_keys": list(self.env_keys),
            "depth": self.depth,
            "parent_thread_id": self.parent_thread_id,
            "started_at": self.started_at,
            "hooks": self.hooks.to_json(),
            "unbuffered": self.unbuffered,
            "model_default": self.model_default,
            "settings_hooks": self.settings_hooks.to_json(),
        }
        if self.inherited is not None:
            out.update(self.inherited.to_json())
        if self.wrap:
            out["wrap"] = list(self.wrap)
        if self.program is not None:
            out["program"] = self.program.to_json()
        return out

    def text(self) -> str:
        """The record as stored in the DB and in spec.json, byte for byte."""
        return json.dumps(self.to_json(), indent=1)  # key order kept: context as written

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSpec:
        """Raises: KeyError, TypeError, ValueError or AgentConfigError (see `from_text`)."""
        return cls(
            id=int(data["id"]),
            name=str(data.get("name") or Path(data["argv"][0]).name),
            argv=tuple(str(a) for a in data["argv"]),
            cwd=Path(data["cwd"]),
            env_keys=tuple(str(k) for k in data.get("env_keys") or ()),
            depth=int(data.get("depth") or 0),
            parent_thread_id=_int_or_none(data.get("parent_thread_id")),
            started_at=float(data.get("started_at") or 0.0),
            hooks=HookFile.from_json(data.get("hooks") or {}),
            # Not recorded before PYTHONUNBUFFERED was set for the child: it was not.
            unbuffered=bool(data.get("unbuffered", False)),
            model_default=_str_or_none(data.get("model_default")),
            settings_hooks=SettingsHooks.from_json(data.get("settings_hooks")),
            inherited=Inherited.from_json(data),
            wrap=tuple(str(a) for a in data.get("wrap") or ()),
            program=ProgramRef.from_json(data.get("program")),
        )

    @classmethod
    def from_text(cls, text: str, where: str) -> RunSpec:
        """Read a stored record; `where` names it in the error.

        Raises:
            StateError: it is not a launch record this version can read.
        """
        try:
            data = json.loads(text)
            if not isinstance(data, Mapping):
                raise TypeError(f"a JSON object was expected, not {type(data).__name__}")
            return cls.from_json(data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            reason = f"no {exc}" if isinstance(exc, KeyError) else str(exc)
            raise StateError(
                f"{where}: the launch record cannot be read ({reason}); stop the process "
                "and start it again with `supervise run`"
            ) from exc
        except AgentConfigError as exc:
            raise StateError(
                f"{where}: the launch record's agent section is invalid ({exc}); stop the "
                "process and start it again with `supervise run`"
            ) from exc


def renumbered(text: str, run_id: int, started_at: float) -> str:
    """A launch record as the next run of its process keeps it: the same record, naming the
    new run's id and start (key order and every other value as recorded)."""
    data = json.loads(text)
    data["id"] = run_id
    data["started_at"] = started_at
    return json.dumps(data, indent=1)


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)
