"""configs/examples/settings.toml, the README's example settings file, read as supervise reads
it: every key it knows is shown there, and every value parses."""

from __future__ import annotations

import tomllib

from conftest import ROOT

from agent_threads.permissions import Layer
from state.settings import FILE_KEYS, load_settings
from supervisor.hookspec import Rate

EXAMPLE = ROOT / "configs" / "examples" / "settings.toml"


def test_the_example_shows_every_setting() -> None:
    keys = set(tomllib.loads(EXAMPLE.read_text()))
    # db_url is shown commented out: unset, the default SQLite file is used.
    assert keys | {"db_url"} == set(FILE_KEYS)


def test_the_example_parses() -> None:
    s = load_settings({"SUPERVISE_CONFIG": str(EXAMPLE)})
    assert s.config == EXAMPLE
    assert (s.model, s.max_threads, s.max_turns, s.thread_timeout, s.stream) == (
        "openai:gpt-4.1-mini",
        4,
        50,
        1800.0,
        True,
    )
    assert s.rate == Rate(10, 60.0)
    assert s.permissions is not None
    layer = Layer.from_mapping(s.permissions.as_mapping())
    assert layer.check("Bash", {"command": "git log -1"}).decision == "allow"
    assert layer.check("Bash", {"command": "rm -rf build"}).decision == "deny"
    assert layer.check("Edit", {"file_path": "a.py"}).decision == "ask"
    assert (s.sandbox.mode, s.sandbox.network, s.sandbox.write) == ("auto", True, ("~/.cache/pip",))


def test_a_variable_still_wins_over_the_example() -> None:
    s = load_settings({"SUPERVISE_CONFIG": str(EXAMPLE), "SUPERVISE_MAX_THREADS": "2"})
    assert s.max_threads == 2 and s.max_turns == 50


def test_the_example_notify_targets_parse() -> None:
    s = load_settings({"SUPERVISE_CONFIG": str(EXAMPLE)})
    assert set(s.notify.targets) == {"ops", "team"}
    assert s.notify.default == ("ops",)
    assert s.notify.rate == Rate(10, 60.0)
