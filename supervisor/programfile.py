"""Program files (`supervise up`): named programs, like a Procfile or a pm2 ecosystem file.

    env_file: .env                   # optional, for every program (relative to this file)
    hooks: hooks.yaml                # optional, for every program: a hook file, or its body
    programs:
      web:
        command: python -m http.server 8000      # a string (shlex) or a list
        cwd: site                                # relative to this file (default: its dir)
        env: {PORT: "8000"}
        env_file: [.env.web]                     # one or a list, relative to this file
        hooks: {hooks: [{name: down, on_exit: {}, instructions: "why did it stop?"}]}
        restart: always                          # as a hook file's restart:
        autostart: true                          # started again after a reboot (default)

Read with the hook files' reader (hooktext.py), so every problem is `FILE:LINE: what; how
to fix it`; an inline `hooks:` body is checked by the hook file loader itself. Env files
are read here (a missing file is an error before anything starts), and their values go
into each program's fingerprint: `up` restarts a program whose env file changed.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent_threads.problems import KeyPath, Problems, show, where
from supervise.errors import HookFileError
from supervisor.hookspec import HookFile
from supervisor.hooktext import read_document, read_utf8
from supervisor.restartfile import check_restart

NAMES = ("supervise.yaml", "supervise.yml", "supervise.json")  # looked for when no -f
EXTENSIONS = (".yaml", ".yml", ".json")
_TOP_KEYS = ("programs", "env_file", "hooks")
_PROGRAM_KEYS = ("command", "cwd", "env", "env_file", "hooks", "restart", "autostart")
# Not all digits: `stop 12` means process 12, so a program named 12 could not be named.
_NAME = re.compile(r"^(?![0-9]+$)[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
EXAMPLE = "programs.yaml from `supervise examples DIR`"

_Locate = Callable[[KeyPath], tuple[int, str]]


@dataclass(frozen=True)
class Program:
    """One program as `up` starts it: everything resolved (absolute paths, env files read)."""

    name: str
    argv: tuple[str, ...]
    cwd: Path
    env: tuple[tuple[str, str], ...]  # the env files' variables, then `env:`; in order
    hooks: HookFile
    autostart: bool
    line: int  # where it is defined, for messages
    fingerprint: str  # of all of the above but the line: `up` restarts it when this changes

    @property
    def env_keys(self) -> tuple[str, ...]:
        return tuple(sorted({k for k, _ in self.env}))


@dataclass(frozen=True)
class ProgramFile:
    path: Path  # absolute
    programs: tuple[Program, ...]

    def names(self) -> list[str]:
        return [p.name for p in self.programs]


def find_program_file(given: str | None, cwd: Path) -> Path:
    """`-f FILE`, else the first of supervise.yaml, .yml, .json in `cwd`.

    Raises:
        HookFileError: none given and none found.
    """
    if given is not None:
        return (cwd / Path(given).expanduser()).resolve()
    for name in NAMES:
        if (cwd / name).is_file():
            return (cwd / name).resolve()
    raise HookFileError(
        [
            f"no program file: none of {', '.join(NAMES)} in {cwd}; write one (see "
            f"{EXAMPLE}) or name it with -f FILE"
        ]
    )


def load_program_file(path: Path) -> ProgramFile:
    """Read and check a program file; `path` absolute.

    Raises:
        HookFileError: every problem, each as `FILE:LINE: what; how to fix it`.
    """
    name = str(path)
    if not name.endswith(EXTENSIONS):
        raise HookFileError(
            [f"{name}: program file must end in .yaml, .yml or .json; rename it to say its format"]
        )
    text = read_utf8(path, name, "program file")
    data, composer, locate = read_document(text, name, kind="program file", example=EXAMPLE)
    checker = _Checker(path, locate)
    for line, message in composer.problems:
        checker.located.append((line, message))
    programs = checker.file(data)
    checker.raise_found()
    return ProgramFile(path, tuple(programs))


class _Checker(Problems):
    """Problems found so far, each at its FILE:LINE, sorted by line when raised."""

    def __init__(self, path: Path, locate: _Locate) -> None:
        super().__init__()
        self.path = path
        self.base = path.parent
        self.locate = locate
        self.located: list[tuple[int, str]] = []

    def add(self, path: KeyPath, message: str) -> None:
        super().add(path, message)
        line, at = self.locate(path)
        self.located.append((line, f"{at}: {message}"))

    def hook_problems(self, exc: HookFileError) -> None:
        for text in exc.problems:
            m = re.match(r"^.*?:(\d+):", text)
            self.located.append((int(m.group(1)) if m else 0, text))

    def raise_found(self) -> None:
        if self.located:
            ordered = [t for _, t in sorted(self.located, key=lambda p: p[0])]
            raise HookFileError(list(dict.fromkeys(ordered)))

    # -- the file ----------------------------------------------------------------------------

    def file(self, data: Any) -> list[Program]:
        if not isinstance(data, Mapping):
            self.add((), f"program file must be a mapping with programs:, got {show(data)}; "
                         f"see {EXAMPLE}")  # fmt: skip
            return []
        self.unknown_keys(data, (), _TOP_KEYS)
        shared_files = self.env_files(data.get("env_file"), ("env_file",))
        shared_hooks = self.hooks(data.get("hooks"), ("hooks",))
        progs = data.get("programs")
        if not isinstance(progs, Mapping) or not progs:
            self.bad(
                ("programs",),
                "must be a mapping of program names to programs",
                progs,
                "write programs: {web: {command: ./serve.sh}}",
            )
            return []
        out = []
        for pname, body in progs.items():
            prog = self.program(str(pname), body, shared_files, shared_hooks)
            if prog is not None:
                out.append(prog)
        return out

    def program(
        self, name: str, body: Any, shared_files: list[Path], shared_hooks: HookFile | None
    ) -> Program | None:
        at: KeyPath = ("programs", name)
        before = len(self.located)
        if not _NAME.match(name):
            self.add(at, f"program name {name!r} must be letters, digits, _ . @ - (not only "
                         "digits: a number names a process id); rename it")  # fmt: skip
        if not isinstance(body, Mapping):
            self.bad(
                at, "must be a mapping with a command", body, "write web: {command: ./serve.sh}"
            )
            return None
        self.unknown_keys(body, at, _PROGRAM_KEYS)
        argv = self.command(body.get("command"), (*at, "command"))
        cwd = self.cwd(body.get("cwd"), (*at, "cwd"))
        env = self.env(body.get("env"), (*at, "env"))
        files = self.env_files(body.get("env_file"), (*at, "env_file"))
        own = self.hooks(body.get("hooks"), (*at, "hooks"))
        restart = check_restart(body.get("restart"), self, (*at, "restart"))
        autostart = body.get("autostart", True)
        if not isinstance(autostart, bool):
            self.bad(
                (*at, "autostart"), "must be true or false", autostart, "write autostart: false"
            )
        hooks = shared_hooks or HookFile()
        if own is not None:
            try:
                hooks = hooks.merge(own)
            except ValueError as exc:
                self.add((*at, "hooks"), f"{exc} (the top-level hooks: and this program's)")
        if restart is not None:
            hooks = replace(hooks, restart=restart)
        values = self.env_values([*shared_files, *(Path(f) for f in hooks.env_files), *files])
        if len(self.located) > before or argv is None or cwd is None:
            return None
        merged = (*values.items(), *env.items())
        line, _ = self.locate(at)
        print_ = _fingerprint(argv, cwd, merged, hooks, bool(autostart))
        return Program(name, argv, cwd, merged, hooks, bool(autostart), line, print_)

    # -- the keys ----------------------------------------------------------------------------

    def command(self, value: Any, at: KeyPath) -> tuple[str, ...] | None:
        fix = "write command: ./serve.sh --port 8000, or command: [./serve.sh, --port, '8000']"
        if value is None:
            self.add(at[:-1], f"{where(at[:-1])} has no command; {fix}")
            return None
        if isinstance(value, str):
            try:
                argv = shlex.split(value)
            except ValueError as exc:
                self.bad(at, f"cannot be split as a shell would ({exc})", value, fix)
                return None
        elif isinstance(value, list) and all(isinstance(a, str | int | float) for a in value):
            argv = [str(a) for a in value]
        else:
            self.bad(at, "must be a command line or a list of words", value, fix)
            return None
        if not argv:
            self.bad(at, "is empty", value, fix)
            return None
        return tuple(argv)

    def cwd(self, value: Any, at: KeyPath) -> Path | None:
        if value is None:
            return self.base
        if not isinstance(value, str) or not value.strip():
            self.bad(at, "must be a directory", value, "write cwd: ./site (relative to this file)")
            return None
        path = (self.base / Path(value).expanduser()).resolve()
        if not path.is_dir():
            self.add(at, f"cwd {value!r} is not a directory ({path}); create it or fix the path")
            return None
        return path

    def env(self, value: Any, at: KeyPath) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.bad(at, "must be a mapping of names to values", value, 'write env: {PORT: "8000"}')
            return {}
        out = {}
        for key, v in value.items():
            if not _ENV_NAME.match(str(key)):
                self.add((*at, key), f"env name {str(key)!r} must be letters, digits and _, "
                                     "not starting with a digit; rename it")  # fmt: skip
            elif isinstance(v, bool) or not isinstance(v, str | int | float):
                # YAML reads yes/no/on/off as booleans: say so rather than guess the spelling.
                self.bad((*at, key), "must be text or a number", v, f'quote it: {key}: "{v}"')
            else:
                out[str(key)] = str(v)
        return out

    def env_files(self, value: Any, at: KeyPath) -> list[Path]:
        fix = "write env_file: .env, or env_file: [.env, .env.local]"
        if value is None:
            return []
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            self.bad(at, "must be a file name or a non-empty list of them", value, fix)
            return []
        out = []
        for i, item in enumerate(items):
            key = at if isinstance(value, str) else (*at, i)
            if not isinstance(item, str) or not item.strip():
                self.bad(key, "must be a file name", item, fix)
                continue
            file = (self.base / Path(item).expanduser()).resolve()
            if not file.is_file():
                self.add(
                    key, f"env_file {item!r} does not exist ({file}); create it or fix the path"
                )
                continue
            out.append(file)
        return out

    def env_values(self, files: list[Path]) -> dict[str, str]:
        from supervisor.envfile import read_env_files

        try:
            return read_env_files([(f, str(f)) for f in dict.fromkeys(files)])
        except HookFileError as exc:
            self.hook_problems(exc)
            return {}

    def hooks(self, value: Any, at: KeyPath) -> HookFile | None:
        """A hook file's path (relative to this file), or a hook file's body inline."""
        if value is None:
            return None
        try:
            if isinstance(value, str):
                from supervisor.hookfile import load_hook_file

                return load_hook_file(self.base / Path(value).expanduser())
            if isinstance(value, Mapping):
                from supervisor.hookfile import load_inline_hooks

                return load_inline_hooks(value, self.path, self.locate, at)
        except HookFileError as exc:
            self.hook_problems(exc)
            return None
        self.bad(at, "must be a hook file's path or a hook file's body (a mapping)", value,
                 "write hooks: hooks.yaml, or hooks: {hooks: [...]}")  # fmt: skip
        return None


def _fingerprint(
    argv: tuple[str, ...],
    cwd: Path,
    env: tuple[tuple[str, str], ...],
    hooks: HookFile,
    autostart: bool,
) -> str:
    """A stable digest of the resolved definition: values of env and env files included
    (hashed, never stored), the hooks as their launch record holds them."""
    data = {
        "argv": list(argv),
        "cwd": str(cwd),
        "env": sorted(dict(env).items()),
        "hooks": hooks.to_json(),
        "autostart": autostart,
    }
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
