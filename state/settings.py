"""Every setting, resolved in one place: the command-line option, then the `SUPERVISE_*`
variable, then the settings file (`$SUPERVISE_CONFIG`, TOML), then the default.

`SETTINGS` is the table of them all. A bad value is always a `SettingError` naming where it
came from (the option, the variable, or the file and key), what a good value looks like and
how to fix it: never a silent default. `load_settings()` builds the typed `Settings` once per
command or daemon; constructors take its values and read no environment. (Variables that
supervise sets for a child, such as SUPERVISE_HOME for the daemon `run` starts or a thread's
tools, are plumbing, not settings.)
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Generic, TypeVar

from state.ratelimit import DEFAULT_RATE, Rate
from state.sandboxpolicy import SandboxConfigError, SandboxPolicy
from supervise.errors import SettingError

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
Environ = Mapping[str, str]

PROVIDERS = ("openai", "anthropic", "scripted")  # the model providers agent_threads builds
DEFAULT_MAX_LOG_BYTES = 64 * 1024 * 1024
_PERMISSION_LISTS = ("allow", "ask", "deny")


class BadValue(ValueError):
    """A parser refused a value. `detail`, if given, says why in the parser's own words
    (instead of the table's description); `key` names the sub-key at fault."""

    def __init__(self, detail: str = "", key: str = "") -> None:
        super().__init__(detail)
        self.detail = detail
        self.key = key


@dataclass(frozen=True)
class Setting(Generic[T_co]):
    """One row of the table: where a setting may come from, how it is read, its default."""

    name: str
    variable: str | None  # SUPERVISE_*, or None: no variable sets it
    key: str | None  # its key in the settings file, or None: the file cannot set it
    parse: Callable[[object], T_co]  # text (option, variable) or a TOML value; raises BadValue
    default: Callable[[Environ], T_co]  # given the environment: some defaults follow XDG_*
    good: str  # what a good value looks like, said in every error about it
    option: str | None = None  # the command-line option that gives it, if any
    empty_is_unset: bool = True  # `VAR=` means "not set" (but SUPERVISE_BWRAP= means "none")


@dataclass(frozen=True)
class PermissionRules:
    """The settings file's `[permissions]` for `ask` threads, as rule texts.

    Their syntax is checked where they become rules (agent_threads.permissions, above this
    package); the file's shape is checked here.
    """

    allow: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()

    def as_mapping(self) -> dict[str, list[str]]:
        return {"allow": list(self.allow), "ask": list(self.ask), "deny": list(self.deny)}


@dataclass(frozen=True)
class StoreSettings:
    """Where the state database is and how long to wait for it."""

    url: str | None  # SUPERVISE_DB_URL / file key db_url; None = SQLite file in the state dir
    timeout: float  # SUPERVISE_DB_TIMEOUT / file key db_timeout; default 30.0, must be > 0


@dataclass(frozen=True)
class Settings:
    """Every setting's value, resolved once per command or daemon by `load_settings`."""

    home: Path
    config: Path
    model: str | None
    max_threads: int
    max_turns: int
    thread_timeout: float
    stream: bool
    rate: Rate
    permissions: PermissionRules | None
    sandbox: SandboxPolicy
    store: StoreSettings
    max_log_bytes: int
    autostart: bool
    bwrap: str | None
    hook_settings: Path | None
    notify: NotifySettings = field(default_factory=lambda: NotifySettings())


NOTIFY_EVENTS = ("fire", "approval", "thread_finished", "crash_loop")


@dataclass(frozen=True)
class NotifySettings:
    """The settings file's `[notify]`: named Apprise targets (each one or more URLs), the
    events that go to the `default` targets without a hook naming them, and each target's
    rate (over it, the events wait and go as one message)."""

    targets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    on: tuple[str, ...] = ()
    default: tuple[str, ...] = ()
    rate: Rate = DEFAULT_RATE  # 10/minute
    attempts: int = 5  # sends tried per notification before it is recorded as failed


@dataclass(frozen=True)
class SettingsFile:
    """The settings file's values (none if it does not exist)."""

    path: Path
    values: Mapping[str, object]


# -- parsers: a value (text from an option or variable, or a TOML value) to its type ----------


def _text(raw: object) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise BadValue()
    return raw.strip()


def _model(raw: object) -> str:
    text = _text(raw)
    provider, _, name = text.partition(":")
    if provider not in PROVIDERS or not name.strip():
        raise BadValue()
    return text


def _whole(low: int) -> Callable[[object], int]:
    def parse(raw: object) -> int:
        if isinstance(raw, str) and re.fullmatch(r"\s*[0-9]+\s*", raw):
            value = int(raw)
        elif isinstance(raw, int) and not isinstance(raw, bool):  # TOML `true` is no number
            value = raw
        else:
            raise BadValue()
        if value < low:
            raise BadValue()
        return value

    return parse


def _seconds(raw: object) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise BadValue()
    try:
        value = float(raw)
    except ValueError:
        raise BadValue() from None
    if not (math.isfinite(value) and value > 0):
        raise BadValue()
    return value


def _bool(raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    text = raw.strip().lower() if isinstance(raw, str) else None
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise BadValue()


def _rate(raw: object) -> Rate:
    try:
        return Rate.parse(_text(raw))
    except ValueError:
        raise BadValue() from None


def _sandbox(raw: object) -> SandboxPolicy:
    try:
        return SandboxPolicy.parse(raw)
    except SandboxConfigError as exc:
        raise BadValue(str(exc), exc.key) from None


def _sandbox_mode(raw: object) -> str:
    try:
        return SandboxPolicy.parse(_text(raw)).mode
    except SandboxConfigError:
        raise BadValue() from None  # the table's words: the hook file's example would not fit


def _permissions(raw: object) -> PermissionRules | None:
    if not isinstance(raw, Mapping):
        raise BadValue()
    lists: dict[str, tuple[str, ...]] = {}
    for key, rules in raw.items():
        if key not in _PERMISSION_LISTS:
            raise BadValue("is not a list of rules; the lists are allow, ask and deny", str(key))
        if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
            raise BadValue(f'must be a list of rules, e.g. {key} = ["Read"]', str(key))
        lists[str(key)] = tuple(rules)
    found = PermissionRules(**lists)
    return found if found != PermissionRules() else None  # an empty table says nothing


def _names(raw: object, key: str, eg: str) -> tuple[str, ...]:
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
        raise BadValue(f"must be a name or a list of names, e.g. {eg}", key)
    return tuple(str(i) for i in items)


def _notify(raw: object) -> NotifySettings:
    if not isinstance(raw, Mapping):
        raise BadValue()
    known = ("targets", "on", "default", "rate", "attempts")
    for key in raw:
        if key not in known:
            raise BadValue(f"is not a notify setting; they are {', '.join(known)}", str(key))
    targets = _notify_targets(raw.get("targets", {}))
    on = _names(raw.get("on", []), "on", '["fire", "approval"]')
    for event in on:
        if event not in NOTIFY_EVENTS:
            raise BadValue(f"names no event {event!r}; they are {', '.join(NOTIFY_EVENTS)}", "on")
    default = _names(raw.get("default", []), "default", '"ops"')
    for name in default:
        if name not in targets:
            raise BadValue(f"names no target {name!r}; define it in [notify.targets]", "default")
    if on and not default:
        raise BadValue('needs default = "TARGET": where the events in `on` go', "on")
    rate = NotifySettings().rate
    if "rate" in raw:
        try:
            rate = Rate.parse(_text(raw["rate"]))
        except (ValueError, BadValue):
            raise BadValue('must be a rate such as "10/minute"', "rate") from None
    attempts = raw.get("attempts", NotifySettings().attempts)
    if not isinstance(attempts, int) or isinstance(attempts, bool) or not 1 <= attempts <= 100:
        raise BadValue("must be a whole number of attempts from 1 to 100, e.g. 5", "attempts")
    return NotifySettings(targets, on, default, rate, attempts)


def _notify_targets(given: object) -> dict[str, tuple[str, ...]]:
    if not isinstance(given, Mapping):
        raise BadValue('must be a table: [notify.targets] ops = "ntfy://..."', "targets")
    targets: dict[str, tuple[str, ...]] = {}
    for name, urls in given.items():
        where = f"targets.{name}"
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", str(name)):
            raise BadValue("is not a target name (letters, digits, _ . -)", where)
        listed = [urls] if isinstance(urls, str) else urls
        if (
            not isinstance(listed, list)
            or not listed
            or not all(isinstance(u, str) and "://" in u for u in listed)
        ):
            # Not the value itself in the message: a URL holds its token.
            raise BadValue(
                'must be an Apprise URL or a list of them, e.g. "ntfy://ntfy.sh/topic"', where
            )
        targets[str(name)] = tuple(listed)
    return targets


def _db_url(raw: object) -> str:
    text = _text(raw)
    if text.startswith("postgresql://"):  # the driver we use: psycopg (3)
        text = "postgresql+psycopg://" + text.removeprefix("postgresql://")
    for prefix in ("sqlite:///", "postgresql+psycopg://"):
        if text.startswith(prefix) and len(text) > len(prefix):
            return text
    raise BadValue()


def _path(raw: object) -> Path:
    # Absolute now: a daemon that `run` starts elsewhere gets it as SUPERVISE_HOME.
    return Path(os.path.abspath(Path(_text(raw)).expanduser()))


def _bwrap(raw: object) -> str:
    if not isinstance(raw, str):
        raise BadValue()
    return raw


def _const(value: T) -> Callable[[Environ], T]:
    return lambda _env: value


def _default_home(env: Environ) -> Path:
    xdg = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(os.path.abspath(Path(xdg).expanduser())) / "supervise"


def _default_config(env: Environ) -> Path:
    xdg = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(os.path.abspath(Path(xdg).expanduser())) / "supervise" / "settings.toml"


# -- the table ---------------------------------------------------------------------------------

HOME = Setting(
    name="home",
    variable="SUPERVISE_HOME",
    key=None,
    parse=_path,
    default=_default_home,
    good="a directory for supervise's state (default $XDG_STATE_HOME/supervise)",
)
CONFIG = Setting(
    name="config",
    variable="SUPERVISE_CONFIG",
    key=None,
    parse=_path,
    default=_default_config,
    good="the path of the settings file (default ~/.config/supervise/settings.toml)",
)
MODEL = Setting[str | None](
    name="model",
    variable="SUPERVISE_MODEL",
    key="model",
    parse=_model,
    default=_const(None),
    good=f"provider:name with provider one of {', '.join(PROVIDERS)}, e.g. "
    "openai:gpt-4.1-mini, anthropic:claude-sonnet-4-5 or scripted:turns.yaml",
    option="--model",
)
MAX_THREADS = Setting(
    name="max_threads",
    variable="SUPERVISE_MAX_THREADS",
    key="max_threads",
    parse=_whole(1),
    default=_const(4),
    good="a whole number of threads run at once, e.g. 4",
)
MAX_TURNS = Setting(
    name="max_turns",
    variable="SUPERVISE_MAX_TURNS",
    key="max_turns",
    parse=_whole(1),
    default=_const(50),
    good="a whole number of model calls per thread, e.g. 50",
)
THREAD_TIMEOUT = Setting(
    name="thread_timeout",
    variable="SUPERVISE_THREAD_TIMEOUT",
    key="thread_timeout",
    parse=_seconds,
    default=_const(1800.0),
    good="seconds a thread may run, above 0, e.g. 1800",
)
STREAM = Setting(
    name="stream",
    variable="SUPERVISE_STREAM",
    key="stream",
    parse=_bool,
    default=_const(True),
    good="true or false (also 1/0, yes/no, on/off)",
)
RATE = Setting(
    name="rate",
    variable="SUPERVISE_RATE",
    key="rate",
    parse=_rate,
    default=_const(DEFAULT_RATE),
    good="a rate such as 10/minute (units: second, minute, hour, day)",
)
PERMISSIONS = Setting[PermissionRules | None](
    name="permissions",
    variable=None,
    key="permissions",
    parse=_permissions,
    default=_const(None),
    good='a table of rule lists: allow = ["Read"], ask = ["Edit"], deny = ["Bash(rm:*)"]',
)
SANDBOX = Setting(
    name="sandbox",
    variable=None,
    key="sandbox",
    parse=_sandbox,
    default=_const(SandboxPolicy()),
    good='off, auto or required, or a table: mode = "auto", network = false, write = [...]',
)
SANDBOX_MODE = Setting[str | None](  # the mode only: network and write stay the file's
    name="sandbox_mode",
    variable="SUPERVISE_SANDBOX",
    key=None,
    parse=_sandbox_mode,
    default=_const(None),
    good="off, auto or required",
)
DB_URL = Setting[str | None](
    name="db_url",
    variable="SUPERVISE_DB_URL",
    key="db_url",
    parse=_db_url,
    default=_const(None),  # SQLite, state.db in the state directory
    good="a database URL: sqlite:///PATH or postgresql+psycopg://USER@HOST/DB "
    "(postgresql:// means psycopg)",
)
DB_TIMEOUT = Setting(
    name="db_timeout",
    variable="SUPERVISE_DB_TIMEOUT",
    key="db_timeout",
    parse=_seconds,
    default=_const(30.0),
    good="seconds to wait for a locked database, above 0, e.g. 30",
)
MAX_LOG_BYTES = Setting(
    name="max_log_bytes",
    variable="SUPERVISE_MAX_LOG_BYTES",
    key="max_log_bytes",
    parse=_whole(0),
    default=_const(DEFAULT_MAX_LOG_BYTES),
    good="a whole number of bytes each output.log keeps on disk, 0 for no bound, e.g. 67108864",
)
AUTOSTART = Setting(
    name="autostart",
    variable="SUPERVISE_AUTOSTART",
    key="autostart",
    parse=_bool,
    default=_const(True),
    good="true or false (also 1/0): whether commands start a daemon when none runs",
)
BWRAP = Setting[str | None](
    name="bwrap",
    variable="SUPERVISE_BWRAP",
    key=None,
    parse=_bwrap,
    default=_const(None),  # bwrap on PATH
    good="the path of a bwrap program, or empty for none",
    empty_is_unset=False,
)
HOOK_SETTINGS = Setting[Path | None](
    name="hook_settings",
    variable="SUPERVISE_SETTINGS",
    key=None,
    parse=_path,
    default=_const(None),
    good="the path of a settings file of shell hooks and extensions (Claude Code's shape)",
    option="--settings",
)

NOTIFY = Setting(
    name="notify",
    variable=None,
    key="notify",
    parse=_notify,
    default=_const(NotifySettings()),
    good='a table: [notify.targets] ops = "ntfy://...", and on = ["fire"], default = "ops"',
)

SETTINGS: tuple[Setting[object], ...] = (
    HOME,
    CONFIG,
    MODEL,
    MAX_THREADS,
    MAX_TURNS,
    THREAD_TIMEOUT,
    STREAM,
    RATE,
    PERMISSIONS,
    SANDBOX,
    SANDBOX_MODE,
    DB_URL,
    DB_TIMEOUT,
    MAX_LOG_BYTES,
    AUTOSTART,
    BWRAP,
    HOOK_SETTINGS,
    NOTIFY,
)
FILE_KEYS = tuple(s.key for s in SETTINGS if s.key is not None)


# -- resolving -------------------------------------------------------------------------------


def read_settings_file(path: Path) -> SettingsFile:
    """The settings file's values, or none if it does not exist.

    Raises:
        SettingError: it cannot be read, is not TOML, or has a key no setting has.
    """
    if not path.exists():
        return SettingsFile(path, {})
    import tomllib  # only when there is a file: most commands start without one

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingError(f"{path}: cannot read settings: {exc}; fix or remove the file") from exc
    for key in data:
        if key not in FILE_KEYS:
            import difflib  # only for the message

            close = difflib.get_close_matches(key, FILE_KEYS, n=1)
            guess = f"did you mean {close[0]!r}? " if close else ""
            raise SettingError(
                f"{path}: unknown setting {key!r}; {guess}known settings: {', '.join(FILE_KEYS)}"
            )
    return SettingsFile(path, data)


def resolve(
    setting: Setting[T], env: Environ, file: SettingsFile | None = None, given: str | None = None
) -> T:
    """One setting's value: `given` (its command-line option), else its variable, else the
    file's key, else its default.

    Raises:
        SettingError: the value found first is bad; naming where it came from.
    """
    if given is not None and setting.option is not None:
        return _parse(setting, given, setting.option, f"fix {setting.option}")
    if setting.variable is not None:
        raw = env.get(setting.variable)
        if raw is not None and (raw.strip() or not setting.empty_is_unset):
            fix = f"set {setting.variable} to such a value, or unset it"
            return _parse(setting, raw, setting.variable, fix)
    if file is not None and setting.key is not None and setting.key in file.values:
        where, fix = f"{file.path}: {setting.key}", f"fix it in {file.path}, or remove it"
        return _parse(setting, file.values[setting.key], where, fix)
    return setting.default(env)


def _parse(setting: Setting[T], raw: object, where: str, fix: str) -> T:
    try:
        return setting.parse(raw)
    except BadValue as exc:
        at = f"{where}.{exc.key}" if exc.key else where
        what = exc.detail or f"must be {setting.good}, got {raw!r}"
        raise SettingError(f"{at} {what}" + ("" if ";" in what else f"; {fix}")) from None


def load_settings(
    environ: Environ | None = None,
    *,
    model: str | None = None,
    hook_settings: str | None = None,
) -> Settings:
    """Every setting, each resolved once; `model` and `hook_settings` are the command's
    `--model` and `--settings`, when it has them.

    Raises:
        SettingError: a bad value, naming the option, the variable, or the file and key.
    """
    env = os.environ if environ is None else environ
    config = resolve(CONFIG, env)
    file = read_settings_file(config)

    def get(setting: Setting[T], given: str | None = None) -> T:
        return resolve(setting, env, file, given)

    sandbox, mode = get(SANDBOX), get(SANDBOX_MODE)
    return Settings(
        home=get(HOME),
        config=config,
        model=get(MODEL, model),
        max_threads=get(MAX_THREADS),
        max_turns=get(MAX_TURNS),
        thread_timeout=get(THREAD_TIMEOUT),
        stream=get(STREAM),
        rate=get(RATE),
        permissions=get(PERMISSIONS),
        sandbox=sandbox if mode is None else replace(sandbox, mode=mode),
        store=_store(env, file),
        max_log_bytes=get(MAX_LOG_BYTES),
        autostart=get(AUTOSTART),
        bwrap=get(BWRAP),
        hook_settings=get(HOOK_SETTINGS, hook_settings),
        notify=get(NOTIFY),
    )


def _store(env: Environ, file: SettingsFile) -> StoreSettings:
    return StoreSettings(resolve(DB_URL, env, file), resolve(DB_TIMEOUT, env, file))


def store_settings(environ: Mapping[str, str] | None = None) -> StoreSettings:
    """The database settings alone (the table's db_url and db_timeout).

    Raises:
        SettingError: a bad value, naming the variable or the file and key.
    """
    env = os.environ if environ is None else environ
    return _store(env, read_settings_file(resolve(CONFIG, env)))
