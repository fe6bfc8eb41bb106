"""Settings, each resolved in one place: `SUPERVISE_*` variable, then settings file, default."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from state.sandboxpolicy import SandboxConfigError, SandboxPolicy
from supervise.errors import UserError


def busy_timeout(environ: dict[str, str] | None = None) -> float:
    """How long to wait for another writer: `SUPERVISE_DB_TIMEOUT` seconds, else 30."""
    env = os.environ if environ is None else environ
    try:
        return max(0.1, float(env.get("SUPERVISE_DB_TIMEOUT", "30")))
    except ValueError:
        return 30.0


def config_file(environ: Mapping[str, str] | None = None) -> Path:
    """`$SUPERVISE_CONFIG`, else `$XDG_CONFIG_HOME/supervise/settings.toml`, else ~/.config."""
    env = os.environ if environ is None else environ
    if env.get("SUPERVISE_CONFIG"):
        return Path(env["SUPERVISE_CONFIG"]).expanduser()
    xdg = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(xdg).expanduser() / "supervise" / "settings.toml"


_FILE_KEYS = {
    "model": "text such as openai:gpt-4.1-mini",
    "max_threads": "a whole number of threads run at once, e.g. 4",
    "max_turns": "a whole number of model calls per thread, e.g. 50",
    "thread_timeout": "seconds a thread may run, e.g. 1800",
    "stream": "true or false",
    "rate": "a rate such as 10/minute",
    "permissions": "a table with allow, ask and deny lists",
    "sandbox": 'off, auto or required, or a table: mode = "auto", network = false, write = [...]',
}


@dataclass(frozen=True)
class Settings:
    """The agent settings, each resolved once: `SUPERVISE_*` variable, then file, then default."""

    model: str | None = None
    max_threads: int = 4
    max_turns: int = 50
    thread_timeout: float = 1800.0
    stream: bool = True
    rate: str | None = None
    permissions: dict[str, Any] = field(default_factory=dict)
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)
    source: str = "defaults"


def _read_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"{path}: cannot read settings: {exc}; fix or remove the file") from exc
    unknown = sorted(set(data) - set(_FILE_KEYS))
    if unknown:
        raise UserError(
            f"{path}: unknown setting {unknown[0]!r}; known settings: {', '.join(_FILE_KEYS)}"
        )
    return data


def _value(name: str, raw: Any, where: str, kind: type) -> Any:
    try:
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        value = kind(raw)
        if kind in (int, float) and value <= 0:
            raise ValueError(raw)
        return value
    except (TypeError, ValueError):
        raise UserError(f"{where} must be {_FILE_KEYS[name]}, got {raw!r}; fix it") from None


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read the settings once.

    Raises:
        UserError: a bad value, naming the variable or the file and key.
    """
    env = os.environ if environ is None else environ
    path = config_file(env)
    data = _read_file(path)
    kinds: dict[str, type] = {
        "model": str,
        "max_threads": int,
        "max_turns": int,
        "thread_timeout": float,
        "stream": bool,
        "rate": str,
    }
    values: dict[str, Any] = {}
    for name, kind in kinds.items():
        var = f"SUPERVISE_{name.upper()}"
        if env.get(var):
            values[name] = _value(name, env[var], var, kind)
        elif name in data:
            values[name] = _value(name, data[name], f"{path}: {name}", kind)
    perms = data.get("permissions", {})
    if not isinstance(perms, dict):
        raise UserError(f"{path}: permissions must be {_FILE_KEYS['permissions']}")
    sandbox = _sandbox(data.get("sandbox"), f"{path}: sandbox")
    if env.get("SUPERVISE_SANDBOX"):  # the mode only; network and write stay the file's
        mode = _sandbox(env["SUPERVISE_SANDBOX"], "SUPERVISE_SANDBOX").mode
        sandbox = SandboxPolicy(mode, sandbox.network, sandbox.write)
    return Settings(
        **values, permissions=perms, sandbox=sandbox, source=str(path) if data else "defaults"
    )


def _sandbox(raw: Any, where: str) -> SandboxPolicy:
    try:
        return SandboxPolicy.parse(raw)
    except SandboxConfigError as exc:
        key = f".{exc.key}" if exc.key else ""
        raise UserError(f"{where}{key} {exc}") from None


@dataclass(frozen=True)
class StoreSettings:
    """Where the state database is, and how long to wait for another writer's lock."""

    url: str | None  # SUPERVISE_DB_URL; None: the SQLite file in the state directory
    timeout: float  # SUPERVISE_DB_TIMEOUT seconds, default 30


def store_settings(environ: Mapping[str, str] | None = None) -> StoreSettings:
    """Placeholder until the one settings resolver lands: SUPERVISE_DB_URL, SUPERVISE_DB_TIMEOUT."""
    env = os.environ if environ is None else environ
    url = env.get("SUPERVISE_DB_URL") or None
    if url is not None and url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return StoreSettings(url, busy_timeout(dict(env)))
