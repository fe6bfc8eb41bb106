"""Hook files: YAML and JSON into HookFile values, and every problem at FILE:LINE with a fix."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_threads.config import AgentConfig
from agent_threads.permissions import Layer
from supervise.errors import HookFileError
from supervisor import hookfile
from supervisor.hookfile import load_hook_file, load_hook_mapping, parse_hook_text
from supervisor.hookspec import (
    DEFAULT_RATE,
    Hook,
    HookFile,
    Limits,
    OnExit,
    OnOutputMatch,
    OnTimeout,
    Rate,
)
from supervisor.matching import compile_pattern

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "configs" / "examples"
SCHEMA = ROOT / "configs" / "hooks.schema.json"


NO_ACTION = "; or give the hook an action instead: notify: TARGET, run: COMMAND or restart: true"


def problems(text: str, filename: str = "h.yaml") -> list[str]:
    with pytest.raises(HookFileError) as info:
        parse_hook_text(text, filename)
    assert str(info.value) == "\n".join(info.value.problems)
    return info.value.problems


def one_problem(text: str, filename: str = "h.yaml") -> str:
    found = problems(text, filename)
    assert len(found) == 1, found
    return found[0]


# Valid files


def test_yaml_example_loads_into_the_expected_values() -> None:
    path = EXAMPLES / "migrate.yaml"
    hf = load_hook_file(path)
    assert hf == HookFile(
        hooks=(
            Hook(
                "migration-failed",
                OnExit((1,)),
                "Read the migration error log, diagnose the issue, and fix the migration file.",
            ),
            Hook(
                "deadlock",
                OnOutputMatch("deadlock detected"),
                "Find which transactions deadlock.",
                max_spawns=3,
            ),
            Hook(
                "too-slow",
                OnTimeout(7200.0),
                "Find out why the migration is slow; do not kill it.",
            ),
        ),
        purpose="Running database migration for auth module refactor",
        context={
            "related_files": ["migrations/0042_auth_refactor.py", "tests/test_auth.py"],
            "original_thread_summary": "User asked to refactor auth to use JWT tokens.",
        },
        limits=Limits(3, Rate(10, 60.0)),
        agent=AgentConfig(
            # A relative script is anchored to the hook file's folder.
            model=f"scripted:{EXAMPLES.resolve() / 'migrate-turns.yaml'}",
            permissions=Layer.from_mapping(
                {
                    "allow": ["Read", "UpdatePlan", "Bash(tail:*)", "Bash(grep:*)"],
                    "ask": ["Edit", "Write"],
                    "deny": ["Bash(rm:*)"],
                }
            ),
            max_turns=20,
            timeout=600.0,
        ),
        sources=(str(path),),
    )


def test_json_example_loads_and_round_trips() -> None:
    path = EXAMPLES / "hooks.json"
    hf = load_hook_file(str(path))
    assert [(h.name, h.kind, h.max_spawns) for h in hf.hooks] == [
        ("tests-failed", "on_exit", 1),
        ("flaky-timeout", "on_output_match", 2),
        ("suite-too-slow", "on_timeout", 1),
    ]
    assert hf.hooks[0].trigger == OnExit((1, 2))
    assert hf.hooks[1].trigger == OnOutputMatch(r"TimeoutError|timed out after \d+s")
    assert hf.limits == Limits(2, Rate(5, 60.0))
    assert hf.sources == (str(path),)
    assert HookFile.from_json(json.loads(json.dumps(hf.to_json()))) == hf


def test_defaults_for_everything_left_out() -> None:
    text = (
        "hooks:\n  - on_exit:\n    instructions: x\n"
        "  - on_timeout: {seconds: 1.5}\n    instructions: y\n"
    )
    hf = parse_hook_text(text, "h.yml")
    assert hf == HookFile(
        hooks=(Hook("on_exit-1", OnExit(None), "x", 1), Hook("on_timeout-2", OnTimeout(1.5), "y")),
        sources=("h.yml",),
    )
    assert hf.limits == Limits(3, DEFAULT_RATE) and hf.purpose is None


@pytest.mark.parametrize("body", ["on_exit:", "on_exit: {}", "on_exit: {exit_codes: null}"])
def test_on_exit_without_codes_means_any(body: str) -> None:
    hf = parse_hook_text(f"hooks:\n  - {body}\n    instructions: x\n", "h.yaml")
    assert hf.hooks[0].trigger == OnExit(None) and hf.hooks[0].trigger.accepts(137)


def test_on_exit_stopped_by_user_is_kept_and_round_trips() -> None:
    text = "hooks:\n  - on_exit: {exit_codes: [1], stopped_by_user: false}\n    instructions: x\n"
    hook = parse_hook_text(text, "h.yaml").hooks[0]
    assert hook.trigger == OnExit((1,), stopped_by_user=False)
    assert hook.to_json()["on_exit"] == {"exit_codes": [1], "stopped_by_user": False}
    assert Hook.from_json(hook.to_json()) == hook
    default = parse_hook_text(
        "hooks:\n  - on_exit: {stopped_by_user: null}\n    instructions: x\n", "h.yaml"
    )
    assert (
        default.hooks[0].trigger == OnExit()
        and "stopped_by_user" not in default.to_json()["hooks"][0]["on_exit"]
    )
    bad = "hooks:\n  - name: h\n    on_exit:\n      stopped_by_user: 'no'\n    instructions: x\n"
    assert one_problem(bad) == (
        'h.yaml:4: hooks[0].on_exit.stopped_by_user must be true or false, got "no"; '
        "write stopped_by_user: false to skip exits `supervise stop` or `restart` caused"
    )


def test_env_file_is_read_relative_to_the_hook_file(tmp_path: Path) -> None:
    (tmp_path / "a.env").write_text("export A=1\nB='x y'\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.env").write_text("C=3\n")
    hook = tmp_path / "h.yaml"
    hook.write_text("env_file: [a.env, sub/b.env]\nhooks: []\n")
    hf = load_hook_file(hook)
    assert hf.env_files == (str(tmp_path / "a.env"), str(tmp_path / "sub" / "b.env"))
    assert HookFile.from_json(hf.to_json()).env_files == hf.env_files  # paths, never values
    assert "x y" not in json.dumps(hf.to_json())
    hook.write_text("env_file: a.env\n")
    assert load_hook_file(hook).env_files == (str(tmp_path / "a.env"),)


def test_a_bad_env_file_is_a_problem_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "bad.env").write_text("A=1\nNOT A LINE\n")
    hook = tmp_path / "h.yaml"
    hook.write_text("purpose: p\nenv_file:\n  - bad.env\n  - gone.env\n")
    with pytest.raises(HookFileError) as info:
        load_hook_file(hook)
    bad, gone = tmp_path / "bad.env", tmp_path / "gone.env"
    assert info.value.problems == [
        f"{hook}:3: env_file: {bad}:2: cannot parse this line as dotenv; write KEY=VALUE, "
        'quoting a value with spaces or #: KEY="a b # c"',
        f"{hook}:4: env_file: {gone}: cannot read env file: No such file or directory; "
        "check the path",
    ]
    assert one_problem("env_file: []\n").startswith("h.yaml:1: env_file must be a file name or")
    assert one_problem("env_file: [a.env, 3]\n").startswith("h.yaml:1: env_file[1] must be a file")


@pytest.mark.parametrize(
    "text", ["hooks: []\n", "hooks:\n", "purpose: nothing to hook yet\n", "{}"]
)
def test_no_hooks_is_valid(text: str) -> None:
    assert parse_hook_text(text, "h.json" if text == "{}" else "h.yaml").hooks == ()


def test_key_spelling_and_scalar_types_are_kept_as_written() -> None:
    text = (
        "context: {when: 2024-05-01, yes: no, blob: !!binary aGk=}\n"
        "hooks: [{on_exit: {exit_codes: [0]}, instructions: x}]\n"
    )
    hf = parse_hook_text(text, "h.yaml")
    # Dates and bytes stay text, since a run snapshots its hooks as JSON.
    assert hf.context == {"when": "2024-05-01", "yes": False, "blob": "aGk="}
    json.dumps(hf.to_json())


def test_json_numbers_come_from_json_and_tabs_keep_lines() -> None:
    text = (
        '{\n\t"hooks": [{"on_timeout": {"seconds": 1e3},\n\t"instructions": "x", "max_spawns": 0}]}'
    )
    assert one_problem(text, "h.json").startswith("h.json:3: hooks[0].max_spawns must be a whole")
    text = '{"hooks": [{"on_timeout": {"seconds": 1e3}, "instructions": "x"}]}'
    assert parse_hook_text(text, "h.json").hooks[0].trigger == OnTimeout(1000.0)


def test_mapping_form_for_inline_hooks() -> None:
    data: dict[str, Any] = {
        "hooks": [{"on_output_match": {"pattern": "ERROR"}, "instructions": "look"}]
    }
    hf = load_hook_mapping(data, "RunProcess.hooks")
    assert hf.hooks == (Hook("on_output_match-1", OnOutputMatch("ERROR"), "look"),)
    assert hf.sources == ("RunProcess.hooks",)
    bad: dict[str, Any] = {"hooks": [{"on_exit": {"exit_codes": [True]}}], "limits": []}
    with pytest.raises(HookFileError) as info:
        load_hook_mapping(bad, "RunProcess.hooks")
    assert info.value.problems == [
        "RunProcess.hooks: limits must be a mapping, got []; write limits: {rate: 10/minute}",
        "RunProcess.hooks: hooks[0].on_exit.exit_codes must be a list of integers, got [true]; "
        "write exit_codes: [1]",
        "RunProcess.hooks: hooks[0] has no instructions; "
        "write instructions: what the spawned thread should do" + NO_ACTION,
    ]


# One problem each: where it is and how to fix it

HOOK = "hooks:\n  - name: h\n"
BAD = [
    (
        HOOK + "    on_exit: {exit_codes: '1'}\n    instructions: x\n",
        'h.yaml:3: hooks[0].on_exit.exit_codes must be a list of integers, got "1"; '
        "write exit_codes: [1]",
    ),
    (
        HOOK + "    on_exits: {exit_codes: [1]}\n    on_exit:\n    instructions: x\n",
        "h.yaml:3: unknown key 'on_exits' in hooks[0]; did you mean 'on_exit'? (known: name, "
        "on_exit, on_output_match, on_timeout, on_crash_loop, on_silence, on_schedule, "
        "on_resource, instructions, max_spawns, dedup, agent, notify, run, restart)",
    ),
    (
        HOOK + "    on_exit:\n    instructions: x\n    max_spawns: yes\n",
        "h.yaml:5: hooks[0].max_spawns must be a whole number from 1 to 1000000, got true; "
        "write max_spawns: 1",
    ),
    (
        HOOK + "    on_exit:\n    instructions: x\n    max_spawns: 0\n",
        "h.yaml:5: hooks[0].max_spawns",
    ),
    (HOOK + "    on_exit:\n    instructions: x\n    max_spawns: '2'\n", "write max_spawns: 2"),
    (HOOK + "    on_exit:\n", "h.yaml:2: hooks[0] has no instructions; write instructions:"),
    (HOOK + "    on_exit:\n    instructions: '  '\n", "h.yaml:4: hooks[0].instructions must be"),
    (HOOK + "    instructions: x\n", "h.yaml:2: hooks[0] has no trigger; add one of on_exit,"),
    (
        HOOK + "    on_exit:\n    on_timeout: {seconds: 5}\n    instructions: x\n",
        "h.yaml:4: hooks[0] has 2 triggers (on_exit, on_timeout); keep one per hook",
    ),
    (
        HOOK + "    on_timeout: {seconds: -5}\n    instructions: x\n",
        "h.yaml:3: hooks[0].on_timeout.seconds must be a number of seconds above 0",
    ),
    (HOOK + "    on_timeout: {seconds: .inf}\n    instructions: x\n", "write seconds: 7200"),
    (HOOK + "    on_timeout: {seconds: '7200'}\n    instructions: x\n", 'got "7200"'),
    (
        HOOK + "    on_timeout: 60\n    instructions: x\n",
        "h.yaml:3: hooks[0].on_timeout must be a mapping, got 60; write on_timeout: {seconds: 60}",
    ),
    (
        HOOK + "    on_output_match: ERROR\n    instructions: x\n",
        'write on_output_match: {pattern: "ERROR"}',
    ),
    (
        HOOK + "    on_output_match: {}\n    instructions: x\n",
        "h.yaml:3: hooks[0].on_output_match.pattern must be a non-empty regular expression, "
        "got nothing; write pattern:",
    ),
    (
        HOOK + "    on_output_match: {pattern: '(?<!no )error'}\n    instructions: x\n",
        "h.yaml:3: hooks[0].on_output_match.pattern: pattern '(?<!no )error' does not compile "
        "with RE2 (invalid perl operator: (?<!); RE2 has no lookaround",
    ),
    (
        HOOK + "    on_exit: {exit_codes: [1, 256]}\n    instructions: x\n",
        "h.yaml:3: hooks[0].on_exit.exit_codes must hold exit codes from 0 to 255, got [1, 256]",
    ),
    (
        HOOK + "    on_exit: {exit_codes: []}\n    instructions: x\n",
        "must not be empty (the hook would never fire), got []; omit it for any code",
    ),
    (
        HOOK + "    on_exit: [1, 2]\n    instructions: x\n",
        "h.yaml:3: hooks[0].on_exit must be a mapping, got [1, 2]; write on_exit: "
        "{exit_codes: [1, 2]}, or on_exit: {} for any code",
    ),
    (
        "hooks:\n  - {on_exit: , instructions: x}\n"
        "  - {on_exit: , instructions: y, name: on_exit-1}",
        "h.yaml:3: hook name 'on_exit-1' is already used by hooks[0]; give each hook its own name",
    ),
    ("hooks:\n  - just text\n", "h.yaml:2: hooks[0] must be a mapping with a trigger and instr"),
    ("hooks: {on_exit: }\n", "h.yaml:1: hooks must be a list, got {"),
    (
        "limits:\n  rate: 10 per minute\n",
        "h.yaml:2: limits.rate must look like 10/minute (units: second, minute, hour, day), got "
        "'10 per minute'; write rate: 10/minute",
    ),
    ("limits: {rate: 0/hour}\n", "h.yaml:1: limits.rate must allow at least 1 thread"),
    ("limits: {rate: 10}\n", "limits.rate must be text like 10/minute, got 10; write rate:"),
    ("limits: {max_depth: -1}\n", "limits.max_depth must be a whole number from 0 to"),
    ("limits: {max_dept: 2}\n", "unknown key 'max_dept' in limits; did you mean 'max_depth'?"),
    ("purpose: 42\n", "h.yaml:1: purpose must be non-empty text, got 42; write purpose:"),
    ("context: [a, b]\n", 'h.yaml:1: context must be a mapping, got ["a", "b"]; write context:'),
    ("agent: {model: 4}\n", "h.yaml:1: agent.model must be provider:name, got 4; write model:"),
    (
        "agent: {model: gpt-4}\n",
        'h.yaml:1: agent.model must be provider:name, got "gpt-4"; write model: openai:',
    ),
    ("agent: {modle: x}\n", "h.yaml:1: unknown key 'modle' in agent; did you mean 'model'?"),
    (
        "agent:\n  permissions: {allow: ['Bash(']}\n",
        "h.yaml:2: agent.permissions.allow[0]: bad permission rule 'Bash('",
    ),
    (
        "agent:\n  permissions: {alow: [Read]}\n",
        "h.yaml:2: unknown key 'alow' in agent.permissions; did you mean 'allow'?",
    ),
    ("agent: {max_turns: 0}\n", "h.yaml:1: agent.max_turns must be a whole number from 1"),
    ("agent: {timeout: -5}\n", "h.yaml:1: agent.timeout must be seconds above 0, got -5"),
    ("agent: openai\n", 'h.yaml:1: agent must be a mapping, got "openai"; write agent:'),
    ("\n\nhook: []\n", "h.yaml:3: unknown key 'hook' in the top level; did you mean 'hooks'?"),
    ("color: red\n", "unknown key 'color' in the top level; remove it (known: purpose,"),
    ("- a\n- b\n", 'h.yaml:1: hook file must be a mapping, got ["a", "b"]; see migrate.yaml'),
    ("", "h.yaml:1: hook file is empty; see migrate.yaml from `supervise examples DIR`"),
    ("# only a comment\n", "h.yaml:1: hook file is empty; see migrate.yaml from `supervise"),
    ("~\n", "h.yaml:1: hook file is empty"),
    ("hooks: []\nhooks: []\n", "h.yaml:2: duplicate key 'hooks' in the top level; keep only one"),
    ("a: !!python/name:os.system x\n", "h.yaml:1: cannot read 'x' (could not determine"),
    ("a: &a [*a]\n", "h.yaml:1: an alias refers to a collection containing it; remove it"),
    ("a: 1\n---\nb: 2\n", "h.yaml:2: invalid YAML: expected a single document in the stream"),
    ("hooks:\n\t- x\n", "h.yaml:2: invalid YAML: while scanning for the next token, found"),
    (
        "a: b\x07\n",
        "h.yaml:1: invalid YAML: unacceptable character #x0007: special characters are not "
        "allowed; remove that character",
    ),
]


@pytest.mark.parametrize(("text", "expected"), BAD)
def test_each_problem_names_its_line_and_a_fix(text: str, expected: str) -> None:
    found = problems(text)
    assert any(expected in p for p in found), found
    assert all(re.match(r"h\.yaml:\d+: .+; .+", p) for p in found), found


def test_every_problem_in_a_file_is_reported_in_line_order() -> None:
    text = (
        "purpose: [1]\n"  # 1
        "hooks:\n"  # 2
        "  - name: a\n"  # 3
        "    on_exit: {exit_codes: [x]}\n"  # 4
        "    instructions: do it\n"  # 5
        "  - on_output_match: {pattern: '('}\n"  # 6
        "    instructions: y\n"  # 7
        "    max_spawn: 2\n"  # 8
        "limits: {max_depth: 1.5}\n"  # 9
    )
    lines = [int(p.split(":")[1]) for p in problems(text)]
    assert lines == [1, 4, 6, 8, 9]


def test_yaml_syntax_error_line_and_column() -> None:
    text = "purpose: x\nhooks:\n  - name: a\n    instructions: 'unclosed\n"
    found = one_problem(text)
    assert found.startswith("h.yaml:5: invalid YAML: while scanning a quoted scalar, found ")
    assert found.endswith("; fix the syntax near column 1")
    found = one_problem("hooks:\n  - name: a\n   bad: [\n", "h.yml")
    assert re.match(r"h\.yml:\d: invalid YAML: .+; fix the syntax near column \d+$", found)


def test_json_syntax_error_line() -> None:
    text = '{\n  "hooks": [\n    {"on_exit": {}, "instructions": "x",}\n  ]\n}'
    assert one_problem(text, "h.json") == (
        "h.json:3: invalid JSON: Expecting property name enclosed in double quotes; "
        "fix the syntax near column 41"
    )
    assert one_problem("", "h.json") == "h.json:1: hook file is empty; see " + hookfile.EXAMPLE


def test_json_problems_and_duplicates_have_lines() -> None:
    text = '{\n  "purpose": "a",\n  "purpose": "b",\n  "hooks": [\n    {"on_exit": 1}\n  ]\n}'
    assert problems(text, "h.json") == [
        "h.json:3: duplicate key 'purpose' in the top level; keep only one",
        "h.json:5: hooks[0].on_exit must be a mapping, got 1; "
        "write on_exit: {exit_codes: [1]}, or on_exit: {} for any code",
        "h.json:5: hooks[0] has no instructions; "
        "write instructions: what the spawned thread should do" + NO_ACTION,
    ]


def test_json_that_yaml_cannot_read_still_gets_line_one() -> None:
    # DEL is fine in a JSON string but YAML refuses it: no lines, yet every problem.
    text = '{"purpose": "a\x7f", "purpose": "b", "hooks": 3}'
    assert problems(text, "h.json") == [
        "h.json:1: duplicate key 'purpose'; keep only one",
        "h.json:1: hooks must be a list, got 3; start each hook with '- ' "
        "(see migrate.yaml from `supervise examples DIR`)",
    ]


def test_json_line_breaks_yaml_would_count_do_not_shift_lines() -> None:
    text = '{"purpose": "a\u0085b\u2028c",\n "hooks": 3}'
    assert one_problem(text, "h.json").startswith("h.json:2: hooks must be a list")


def test_lone_surrogates_are_refused_and_shown_escaped() -> None:
    text = '{"context": {"k\\ud800": 1}, "hooks": [{"on_exit": {}, "instructions": "\\udfff"}]}'
    assert problems(text, "h.json") == [
        "h.json:1: context holds a lone surrogate escape; write the character itself",
        "h.json:1: hooks[0].instructions holds a lone surrogate escape; write the character itself",
    ]


def test_alias_bombs_are_refused() -> None:
    rows = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    rows += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 7)]
    assert "values (aliases?)" in one_problem("\n".join(rows) + "\n")


def test_too_deep_nesting_is_a_hook_file_error() -> None:
    assert "nested too deeply" in one_problem("context: " + "[" * 1500 + "]" * 1500 + "\n")
    assert "nested too deeply" in one_problem("[" * 1500 + "]" * 1500, "h.json")


# Files and extensions


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(HookFileError) as info:
        load_hook_file(path)
    assert info.value.problems == [
        f"{path}: cannot read hook file: No such file or directory; check the path"
    ]


def test_directory_and_non_utf8_files(tmp_path: Path) -> None:
    folder = tmp_path / "dir.yaml"
    folder.mkdir()
    with pytest.raises(HookFileError, match=r"dir\.yaml: cannot read hook file: .*check the path"):
        load_hook_file(folder)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"purpose: ok\ncontext: {city: M\xfcnchen}\n")
    with pytest.raises(HookFileError, match=r"latin\.yaml:2: .*not UTF-8.*save it as UTF-8"):
        load_hook_file(latin)


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b'\xef\xbb\xbf{"purpose": "x"}')
    assert load_hook_file(path).purpose == "x"


@pytest.mark.parametrize("name", ["hooks.toml", "hooks", "hooks.YAML.bak"])
def test_unknown_extension(name: str, tmp_path: Path) -> None:
    with pytest.raises(HookFileError, match=r"must end in \.yaml, \.yml or \.json; rename it"):
        load_hook_file(tmp_path / name)
    with pytest.raises(HookFileError, match=r"must end in \.yaml"):
        parse_hook_text("hooks: []", name)


# Patterns


def test_nested_quantifier_compiles_and_runs_in_linear_time() -> None:
    compiled: Any = compile_pattern("(a+)+$")
    start = time.monotonic()
    assert compiled.search("a" * 50_000 + "b") is None
    assert time.monotonic() - start < 1.0


@pytest.mark.parametrize(
    ("pattern", "hint"),
    [
        ("(?=x)y", "no lookaround or backreferences"),
        (r"(a)\1", "no lookaround or backreferences"),
        ("(unclosed", "missing ): (unclosed"),
        ("[z-a]", "RE2 syntax: https://github.com/google/re2/wiki/Syntax"),
        ("\ud800", "lone surrogate"),
    ],
)
def test_bad_patterns_say_why_and_how(pattern: str, hint: str) -> None:
    with pytest.raises(ValueError, match="does not compile with RE2") as info:
        compile_pattern(pattern)
    assert hint in str(info.value)


# The JSON Schema agrees with the loader


def _schema_errors(value: Any, schema: dict[str, Any], root: dict[str, Any], at: str) -> list[str]:
    """A small structural check: type, required, properties, items, oneOf-of-required, $ref."""
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    kinds: dict[str, type | tuple[type, ...]] = {
        "object": dict,
        "array": list,
        "string": str,
        "integer": int,
        "number": (int, float),
    }
    allowed = schema.get("type", [])
    allowed = [allowed] if isinstance(allowed, str) else allowed
    if allowed and not any(
        value is None if t == "null" else isinstance(value, kinds[t]) for t in allowed
    ):
        return [f"{at}: not {allowed}"]
    errors = []
    if isinstance(value, dict):
        props = schema.get("properties", {})
        errors += [f"{at}: needs {k}" for k in schema.get("required", []) if k not in value]
        if schema.get("additionalProperties") is False:
            errors += [f"{at}: unknown {k}" for k in value if k not in props]
        choices = [o["required"][0] for o in schema.get("oneOf", [])]
        if choices and sum(c in value for c in choices) != 1:
            errors.append(f"{at}: needs exactly one of {choices}")
        for key, sub in props.items():
            if key in value:
                errors += _schema_errors(value[key], sub, root, f"{at}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += _schema_errors(item, schema["items"], root, f"{at}[{i}]")
    return errors


@pytest.mark.parametrize("name", ["migrate.yaml", "hooks.json"])
def test_examples_fit_the_schema(name: str) -> None:
    schema = json.loads(SCHEMA.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    data = yaml.safe_load((EXAMPLES / name).read_text())
    assert _schema_errors(data, schema, schema, "$") == []
    load_hook_file(EXAMPLES / name)


def test_schema_and_loader_know_the_same_keys() -> None:
    schema = json.loads(SCHEMA.read_text())
    hook = schema["$defs"]["hook"]
    assert tuple(schema["properties"]) == hookfile._TOP_KEYS
    assert tuple(hook["properties"]) == hookfile._HOOK_KEYS
    assert [o["required"] for o in hook["oneOf"]] == [[t] for t in hookfile._TRIGGERS]
    # Instructions (an agent), or an action alone.
    assert [o["required"] for o in hook["anyOf"]] == [
        ["instructions"],
        ["notify"],
        ["run"],
        ["restart"],
    ]
    bad = {"hooks": [{"on_exit": {}, "on_timeout": {"seconds": 1}, "instructions": "x"}]}
    found = _schema_errors(bad, schema, schema, "$")
    assert found == [
        "$.hooks[0]: needs exactly one of "
        "['on_exit', 'on_output_match', 'on_timeout', 'on_crash_loop', "
        "'on_silence', 'on_schedule', 'on_resource']"
    ]
    with pytest.raises(HookFileError):
        load_hook_mapping(bad, "inline")


# Anything in gives a HookFile or a HookFileError, nothing else

KEYS = st.sampled_from(
    [*hookfile._TOP_KEYS, *hookfile._HOOK_KEYS, "exit_codes", "pattern", "seconds", "rate"]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-300, 300)
    | st.floats(allow_nan=True)
    | st.text(max_size=12)
    | st.sampled_from(["(a+)+$", "(?=x)", "10/minute", "yes", "0/hour", "on_exit", "\ud800"])
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS | st.text(max_size=6), inner),
    max_leaves=25,
)


def _parses_or_explains(text: str, filename: str) -> None:
    try:
        hf = parse_hook_text(text, filename)
    except HookFileError as exc:
        assert exc.problems and all(p.startswith(f"{filename}:") for p in exc.problems)
        str(exc).encode()  # printable: no lone surrogates
    else:
        assert isinstance(hf, HookFile)
        json.dumps(hf.to_json())


@settings(max_examples=200, deadline=None)
@given(text=st.text(), ext=st.sampled_from([".yaml", ".json"]))
def test_random_text_never_crashes(text: str, ext: str) -> None:
    _parses_or_explains(text, "r" + ext)


@settings(max_examples=200, deadline=None)
@given(data=st.dictionaries(KEYS, VALUES, max_size=5) | VALUES, as_json=st.booleans())
def test_random_structures_never_crash(data: Any, as_json: bool) -> None:
    if as_json:
        _parses_or_explains(json.dumps(data, indent=1), "r.json")
    else:
        flow = data if not isinstance(data, dict) else {"hooks": [data], **data}
        _parses_or_explains(yaml.safe_dump(flow, allow_unicode=True), "r.yaml")
