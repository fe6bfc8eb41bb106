"""The settings resolver: option > SUPERVISE_* variable > settings file > default, and every
bad value an exit 2 that names where it came from (through the real CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Env

from state.ratelimit import Rate
from state.settings import (
    FILE_KEYS,
    MAX_THREADS,
    MODEL,
    SETTINGS,
    PermissionRules,
    SettingsFile,
    StoreSettings,
    load_settings,
    read_settings_file,
    resolve,
    store_settings,
)
from supervise.errors import SettingError

# A bad value for every variable a value can be bad for, and what the message says it must be.
BAD_VARIABLES = {
    "SUPERVISE_MODEL": ("gpt-4", "must be provider:name"),
    "SUPERVISE_MAX_THREADS": ("many", "must be a whole number of threads"),
    "SUPERVISE_MAX_TURNS": ("0", "must be a whole number of model calls"),
    "SUPERVISE_THREAD_TIMEOUT": ("-5", "must be seconds a thread may run"),
    "SUPERVISE_STREAM": ("sometimes", "must be true or false"),
    "SUPERVISE_RATE": ("fast", "must be a rate such as 10/minute"),
    "SUPERVISE_SANDBOX": ("sometimes", "must be off, auto or required"),
    "SUPERVISE_DB_URL": ("mysql://db/x", "must be a database URL"),
    "SUPERVISE_DB_TIMEOUT": ("soon", "must be seconds to wait for a locked database"),
    "SUPERVISE_MAX_LOG_BYTES": ("64MB", "must be a whole number of bytes"),
    "SUPERVISE_AUTOSTART": ("maybe", "must be true or false"),
}
# Any text is a good value for these (a path; for SUPERVISE_BWRAP, also empty).
ANY_TEXT = {"SUPERVISE_HOME", "SUPERVISE_CONFIG", "SUPERVISE_BWRAP", "SUPERVISE_SETTINGS"}

BAD_FILE_VALUES = {
    "model": '"gpt-4"',
    "max_threads": '"many"',
    "max_turns": "0",
    "thread_timeout": "-5",
    "stream": '"sometimes"',
    "rate": '"fast"',
    "permissions": '"Read"',
    "sandbox": '"sometimes"',
    "db_url": '"mysql://db/x"',
    "db_timeout": "true",
    "max_log_bytes": "-1",
    "autostart": '"maybe"',
    "notify": '"ops"',
}


def test_every_setting_is_covered_here() -> None:
    variables = {s.variable for s in SETTINGS if s.variable is not None}
    assert variables == set(BAD_VARIABLES) | ANY_TEXT
    assert set(FILE_KEYS) == set(BAD_FILE_VALUES)


@pytest.mark.parametrize("variable", sorted(BAD_VARIABLES))
def test_a_bad_variable_is_exit_2_naming_it(env: Env, variable: str) -> None:
    value, must = BAD_VARIABLES[variable]
    env.extra[variable] = value
    r = env.cli("ps")
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert f"supervise: {variable} {must}" in r.stderr
    assert repr(value) in r.stderr and f"set {variable} to such a value" in r.stderr


def test_the_daemon_refuses_a_bad_setting_instead_of_a_default(env: Env) -> None:
    env.extra["SUPERVISE_MAX_LOG_BYTES"] = "64MB"  # once silently 64 MiB
    r = env.cli("daemon", timeout=15)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "SUPERVISE_MAX_LOG_BYTES must be a whole number of bytes" in r.stderr


@pytest.mark.parametrize("key", sorted(BAD_FILE_VALUES))
def test_a_bad_file_value_names_the_file_and_key(env: Env, key: str) -> None:
    cfg = env.write("settings.toml", f"{key} = {BAD_FILE_VALUES[key]}\n")
    env.extra["SUPERVISE_CONFIG"] = str(cfg)
    r = env.cli("ps")
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert f"supervise: {cfg}: {key} must be" in r.stderr


def test_the_file_names_the_sub_key_and_an_unknown_key(env: Env) -> None:
    cfg = env.write("settings.toml", '[permissions]\nalow = ["Read"]\n')
    env.extra["SUPERVISE_CONFIG"] = str(cfg)
    r = env.cli("ps")
    assert r.returncode == 2
    assert f"{cfg}: permissions.alow is not a list of rules" in r.stderr
    cfg.write_text("db_timout = 5\n")
    r = env.cli("ps")
    assert r.returncode == 2
    assert f"{cfg}: unknown setting 'db_timout'; did you mean 'db_timeout'?" in r.stderr


def test_a_bad_option_names_the_option(env: Env) -> None:
    r = env.cli("ask", "-d", "--model", "gpt-4", "hi")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "supervise: --model must be provider:name" in r.stderr


def test_precedence_option_variable_file_default(tmp_path: Path) -> None:
    cfg = tmp_path / "settings.toml"
    cfg.write_text('model = "openai:from-file"\nmax_threads = 3\n')
    file = read_settings_file(cfg)
    var = {"SUPERVISE_MODEL": "openai:from-variable", "SUPERVISE_MAX_THREADS": "2"}
    assert resolve(MODEL, var, file, given="openai:from-option") == "openai:from-option"
    assert resolve(MODEL, var, file) == "openai:from-variable"
    assert resolve(MODEL, {}, file) == "openai:from-file"
    assert resolve(MODEL, {}, SettingsFile(cfg, {})) is None
    assert resolve(MAX_THREADS, var, file) == 2
    assert resolve(MAX_THREADS, {"SUPERVISE_MAX_THREADS": ""}, file) == 3  # empty: not set
    assert resolve(MAX_THREADS, {}, SettingsFile(cfg, {})) == 4


def test_precedence_through_the_cli(env: Env) -> None:
    """The model `ask` records for its thread, from each layer in turn."""
    env.extra["SUPERVISE_AUTOSTART"] = "0"  # no daemon: only what ask records is looked at
    cfg = env.write("settings.toml", 'model = "openai:from-file"\n')
    env.extra["SUPERVISE_CONFIG"] = str(cfg)
    env.extra["SUPERVISE_MODEL"] = "openai:from-variable"
    env.cli("ask", "-d", "--model", "anthropic:from-option", "one", check=True)
    env.cli("ask", "-d", "two", check=True)
    del env.extra["SUPERVISE_MODEL"]
    env.cli("ask", "-d", "three", check=True)
    cfg.unlink()
    env.cli("ask", "-d", "four", check=True)
    models = [t["model"] for t in env.ps()["threads"]]
    assert models == ["anthropic:from-option", "openai:from-variable", "openai:from-file", None]


def test_the_settings_record_is_typed(tmp_path: Path) -> None:
    cfg = tmp_path / "settings.toml"
    cfg.write_text(
        'rate = "2/hour"\nstream = false\nmax_log_bytes = 0\nautostart = false\n'
        'db_url = "postgresql://u@h/db"\ndb_timeout = 2.5\n'
        '[permissions]\nallow = ["Read"]\ndeny = ["Bash(rm:*)"]\n'
    )
    s = load_settings({"SUPERVISE_CONFIG": str(cfg), "SUPERVISE_HOME": "rel/home"})
    assert s.rate == Rate(2, 3600.0) and s.stream is False
    assert s.max_log_bytes == 0 and s.autostart is False  # 0: no bound, not "use the default"
    assert s.permissions == PermissionRules(allow=("Read",), deny=("Bash(rm:*)",))
    # postgresql:// is the psycopg driver; the URL is what the store is given.
    assert s.store == StoreSettings("postgresql+psycopg://u@h/db", 2.5)
    # Absolute: the daemon `run` starts gets it as SUPERVISE_HOME, in another directory.
    assert s.home == Path.cwd() / "rel" / "home"
    assert s.bwrap is None and s.hook_settings is None and s.config == cfg


def test_store_settings_for_the_data_layer(tmp_path: Path) -> None:
    none = {"SUPERVISE_CONFIG": str(tmp_path / "none.toml")}
    assert store_settings(none) == StoreSettings(None, 30.0)
    assert store_settings({**none, "SUPERVISE_DB_TIMEOUT": "0.5"}).timeout == 0.5
    url = "sqlite:////tmp/x.db"
    assert store_settings({**none, "SUPERVISE_DB_URL": url}).url == url
    for bad in ("0", "-1", "nan", "inf", "x"):
        with pytest.raises(SettingError, match="SUPERVISE_DB_TIMEOUT must be seconds"):
            store_settings({**none, "SUPERVISE_DB_TIMEOUT": bad})
    for bad in ("sqlite://", "sqlite:///", "postgresql://", "mysql://h/db"):
        with pytest.raises(SettingError, match="SUPERVISE_DB_URL must be a database URL"):
            store_settings({**none, "SUPERVISE_DB_URL": bad})


def test_bwrap_empty_means_none_and_the_mode_variable_keeps_the_file_table(
    tmp_path: Path,
) -> None:
    cfg = tmp_path / "settings.toml"
    cfg.write_text('[sandbox]\nmode = "required"\nnetwork = false\n')
    env = {"SUPERVISE_CONFIG": str(cfg), "SUPERVISE_BWRAP": "", "SUPERVISE_SANDBOX": "auto"}
    s = load_settings(env)
    assert s.bwrap == ""  # no bwrap at all, rather than "look on PATH"
    assert (s.sandbox.mode, s.sandbox.network) == ("auto", False)


def test_settings_hooks_option_over_variable(env: Env) -> None:
    """`--settings` beats SUPERVISE_SETTINGS: what `ask` stores for its thread shows it."""
    env.extra["SUPERVISE_AUTOSTART"] = "0"

    def hooks_file(name: str) -> Path:
        text = {"hooks": {"SessionStart": [{"command": f"echo {name}"}]}}
        return env.write(f"{name}.json", json.dumps(text))

    env.extra["SUPERVISE_SETTINGS"] = str(hooks_file("variable"))
    env.cli("ask", "-d", "--settings", str(hooks_file("option")), "one", check=True)
    env.cli("ask", "-d", "two", check=True)
    import sqlite3

    with sqlite3.connect(env.home / "state.db") as db:
        rows = db.execute("SELECT hooks FROM thread ORDER BY id").fetchall()
    commands = [json.loads(h)["shell"][0]["command"] for (h,) in rows]
    assert commands == ["echo option", "echo variable"]
