"""Claude Code settings files read as they are (supervisor/ccfiles.py, agent_threads/hooks/
shellspec.py): what runs, and a warning at FILE:LINE for each thing that will not be used.
Errors stay errors, `FILE:LINE: what; how to fix it`, exit 2. `hooks check` and `hooks test`
agree on what is valid (through the real CLI; no daemon).

The fixtures are written here after the shapes real projects and hook collections use
(`.claude/settings.json` with permissions, env, statusLine; `"matcher": ""`; every event of
the hooks reference), not copied from them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Env

from agent_threads.hooks.ccevents import EVENT_TABLE, FIRING, HANDLER_FIELDS_IGNORED
from agent_threads.hooks.ifrule import if_applies
from agent_threads.hooks.shellspec import (
    ShellHook,
    ShellHookError,
    cc_matcher_matches,
    read_shell_hooks,
)
from supervise.errors import HookFileError
from supervisor.ccfiles import is_settings, load_settings_file
from supervisor.hookfile import parse_hook_text


def cmd(command: str, **fields: Any) -> dict[str, Any]:
    return {"type": "command", "command": command, **fields}


def write(tmp: Path, data: Any, name: str = "settings.json") -> Path:
    path = tmp / name
    path.write_text(json.dumps(data, indent=2))
    return path


def line_of(path: Path, text: str, after: int = 0) -> int:
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if i > after and text in line)


# A project's .claude/settings.json: Claude Code's other settings beside its hooks.
PROJECT: dict[str, Any] = {
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "permissions": {"allow": ["Bash(npm run lint)", "Bash(git diff:*)"], "deny": ["WebFetch"]},
    "env": {"NODE_ENV": "test"},
    "model": "sonnet",
    "includeCoAuthoredBy": False,
    "statusLine": {"type": "command", "command": "~/.claude/statusline.sh", "padding": 0},
    "enabledPlugins": {"formatter@team": True},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [cmd(".claude/hooks/guard.py")]}],
        "PostToolUse": [
            {"matcher": "Edit|MultiEdit|Write", "hooks": [cmd("npx prettier --write", timeout=30)]}
        ],
        "Notification": [{"matcher": "", "hooks": [cmd("notify-send Claude 'needs you'")]}],
        "Stop": [{"hooks": [cmd(".claude/hooks/stop.sh")]}],
        "SubagentStop": [{"matcher": "", "hooks": [cmd(".claude/hooks/subagent.sh")]}],
        "PreCompact": [{"matcher": "auto", "hooks": [cmd(".claude/hooks/precompact.sh")]}],
        "SessionStart": [{"matcher": "startup|resume", "hooks": [cmd("git status --short")]}],
    },
}


def test_a_project_settings_file_is_accepted_whole(tmp_path: Path) -> None:
    path = write(tmp_path, PROJECT)
    got = load_settings_file(path)
    assert [(h.event, h.matcher, h.command) for h in got.shell] == [
        ("PreToolUse", "Bash", ".claude/hooks/guard.py"),
        ("PostToolUse", "Edit|MultiEdit|Write", "npx prettier --write"),
        ("Notification", None, "notify-send Claude 'needs you'"),
        ("Stop", None, ".claude/hooks/stop.sh"),
        ("SubagentStop", None, ".claude/hooks/subagent.sh"),
        ("SessionStart", "startup|resume", "git status --short"),
    ]
    assert all(h.claude and h.source == str(path) for h in got.shell)
    assert got.shell[1].timeout_ms == 30_000  # seconds in Claude Code's shape
    shown = {w.warning.path: (w.line, w.warning.kind, str(w)) for w in got.warnings}
    for key in ("$schema", "permissions", "env", "model", "statusLine", "enabledPlugins"):
        line, kind, text = shown[(key,)]
        assert (line, kind) == (line_of(path, f'"{key}"'), "key"), text
        assert text.startswith(f"{path}:{line}: warning: {key}: ")
    assert (
        "not applied: threads take their rules from the hook file's agent.permissions"
        in (shown[("permissions",)][2])
    )
    assert "supervise reads only hooks" in shown[("includeCoAuthoredBy",)][2]
    line, kind, text = shown[("hooks", "PreCompact")]
    assert (line, kind) == (line_of(path, '"PreCompact"'), "event")
    assert text.endswith(
        "hooks.PreCompact: never runs: PreCompact never fires here "
        "(threads never compact their context)"
    )
    assert [w.line for w in got.warnings] == sorted(w.line or 0 for w in got.warnings)


def test_every_event_of_the_reference_is_accepted(tmp_path: Path) -> None:
    """A hook collection with a hook on every event: those that fire here run, each other
    one is a warning that says why it never fires."""
    data = {"hooks": {e.name: [{"hooks": [cmd(f"echo {e.name}")]}] for e in EVENT_TABLE}}
    got = load_settings_file(write(tmp_path, data))
    assert tuple(h.event for h in got.shell) == FIRING
    never = [e for e in EVENT_TABLE if not e.fires]
    assert [w.warning.path for w in got.warnings] == [("hooks", e.name) for e in never]
    for e, w in zip(never, got.warnings, strict=True):
        assert w.warning.message == f"never runs: {e.name} never fires here ({e.note})"


HANDLERS: list[tuple[dict[str, Any], dict[str, Any] | None, list[tuple[str, str]]]] = [
    # (the handler, what the hook is (None: none runs), warnings (key, kind))
    (cmd("./check.sh"), {"timeout_ms": 600_000, "args": None}, []),
    (
        cmd("node", args=["${CLAUDE_PLUGIN_ROOT}/fmt.js", "--fix"], timeout=5),
        {"args": ("${CLAUDE_PLUGIN_ROOT}/fmt.js", "--fix"), "timeout_ms": 5000},
        [],
    ),
    (cmd("./x", timeout=0.5), {"timeout_ms": 500}, []),
    (cmd("./x", timeout=3600), {"timeout_ms": 600_000}, []),  # at most 10 minutes
    (cmd("./x", **{"if": "Bash(git *)"}), {"if_rule": "Bash(git *)"}, []),
    (cmd("./x", **{"async": True}), {"run_async": True, "async_rewake": False}, []),
    (cmd("./x", asyncRewake=True), {"run_async": True, "async_rewake": True}, []),
    (cmd("./x", fail_mode="closed"), {"fail_mode": "closed"}, []),
    *[
        (cmd("./x", **{field: value}), {}, [(field, "field")])
        for field, value in (("statusMessage", "Checking"), ("once", True), ("shell", "bash"))
    ],
    (cmd("./x", retries=3), {}, [("retries", "field")]),
    ({"command": "./x"}, {}, [("", "field")]),  # no type: read as a command, said so
    (
        cmd("node fmt.js", args=["--fix"]),
        {"args": ("--fix",)},
        [("command", "field")],  # exec form with words in command: no such program
    ),
    ({"type": "http", "url": "http://localhost:8080/h", "timeout": 30}, None, [("type", "type")]),
    ({"type": "prompt", "prompt": "Is it done? $ARGUMENTS"}, None, [("type", "type")]),
    ({"type": "agent", "prompt": "Verify the tests pass"}, None, [("type", "type")]),
    ({"type": "mcp_tool", "server": "s", "tool": "scan"}, None, [("type", "type")]),
]


@pytest.mark.parametrize(("handler", "want", "warned"), HANDLERS)
def test_handler_fields(
    handler: dict[str, Any], want: dict[str, Any] | None, warned: list[tuple[str, str]]
) -> None:
    got = read_shell_hooks({"PreToolUse": [{"matcher": "Bash", "hooks": [handler]}]}, "s.json")
    if want is None:
        assert got.hooks == ()
    else:
        (hook,) = got.hooks
        assert hook.claude and hook.command == handler["command"]
        for field, value in want.items():
            assert getattr(hook, field) == value, field
    at = ("PreToolUse", 0, "hooks", 0)
    assert [
        (w.path[len(at)] if len(w.path) > len(at) else "", w.kind) for w in got.warnings
    ] == warned
    for w in got.warnings:
        assert w.path[: len(at)] == at
        if w.kind == "type":
            assert w.message.startswith(f"{handler['type']} hooks never run: ")
        if w.path[-1] in HANDLER_FIELDS_IGNORED:
            assert w.message == f"not used: {HANDLER_FIELDS_IGNORED[str(w.path[-1])]}"


def test_defaults_follow_the_reference() -> None:
    got = read_shell_hooks(
        {"UserPromptSubmit": [{"hooks": [cmd("a")]}], "Stop": [{"hooks": [cmd("b")]}]}
    )
    assert [h.timeout_ms for h in got.hooks] == [30_000, 600_000]


def test_if_on_an_event_that_never_evaluates_it_never_runs() -> None:
    got = read_shell_hooks({"SessionStart": [{"hooks": [cmd("./x", **{"if": "Bash(git *)"})]}]})
    assert got.hooks == ()
    (w,) = got.warnings
    assert (w.path, w.kind) == (("SessionStart", 0, "hooks", 0, "if"), "if")
    assert "never runs: if is evaluated on tool events only" in w.message


def test_matchers_that_are_ignored_or_never_match_are_said() -> None:
    got = read_shell_hooks(
        {
            "Stop": [{"matcher": "anything", "hooks": [cmd("a")]}],
            "PreToolUse": [
                {"matcher": "Bash(git:*)", "hooks": [cmd("b")]},
                {"matcher": "Edit(", "hooks": [cmd("c")]},
            ],
        }
    )
    assert [h.matcher for h in got.hooks] == [None, "Bash(git:*)", "Edit("]
    said = {w.path: w.message for w in got.warnings}
    assert said[("Stop", 0, "matcher")] == "ignored: Stop takes no matcher (as in Claude Code)"
    assert 'write if: "Bash(git *)"' in said[("PreToolUse", 0, "matcher")]
    assert said[("PreToolUse", 1, "matcher")].startswith("never matches: 'Edit(' is no regular")


@pytest.mark.parametrize(
    ("data", "key", "kind", "message", "runs"),
    [
        (
            {"hooks": {"PreToolUSE": [{"hooks": [cmd("a")]}]}},
            ("hooks", "PreToolUSE"),
            "event",
            "never runs: no such hook event; did you mean 'PreToolUse'? (skipped, as in Claude "
            "Code)",
            0,
        ),
        (
            {"PreToolUse": [{"hooks": [cmd("a")]}]},
            ("PreToolUse",),
            "key",
            'not read: hooks go under a "hooks" key',
            0,
        ),
        (
            {"hooks": {"Stop": [{"matcher": "", "hooks": [cmd("a")], "comment": "x"}]}},
            ("hooks", "Stop", 0, "comment"),
            "field",
            "not read: a matcher group has matcher and hooks",
            1,  # the group's hooks run
        ),
        (
            {"disableAllHooks": True, "hooks": {"Stop": [{"hooks": [cmd("a")]}]}},
            ("disableAllHooks",),
            "disabled",
            "none of this file's 1 hooks run",
            0,
        ),
    ],
)
def test_what_claude_code_skips_is_skipped_with_a_warning(
    tmp_path: Path, data: dict[str, Any], key: tuple[Any, ...], kind: str, message: str, runs: int
) -> None:
    got = load_settings_file(write(tmp_path, data))
    assert len(got.shell) == runs
    (w,) = got.warnings
    assert (w.warning.path, w.warning.kind) == (key, kind)
    assert message in w.warning.message


BAD: list[tuple[Any, str, str]] = [
    # (the file, the line's text, the message)
    (["not", "an", "object"], "[", "must be a JSON object, got list; write"),
    ({"hooks": ["a"]}, '"hooks"', "hooks: hooks must be a mapping of event name"),
    ({"hooks": {"Stop": {"hooks": []}}}, '"Stop"', "hooks.Stop: Stop must be a list"),
    ({"hooks": {"Stop": ["./stop.sh"]}}, '"./stop.sh"', "hooks.Stop[0]: must be a mapping"),
    (
        {"hooks": {"Stop": [{"hooks": "./stop.sh"}]}},
        '"hooks": "./stop.sh"',
        "hooks.Stop[0].hooks: hooks must be a list of handlers",
    ),
    (
        {"hooks": {"Stop": [{"hooks": ["./stop.sh"]}]}},
        '"./stop.sh"',
        "hooks.Stop[0].hooks[0]: must be a mapping with type and command",
    ),
    (
        {"hooks": {"Stop": [{"hooks": [cmd(42)]}]}},  # type: ignore[arg-type]
        '"command": 42',
        "hooks.Stop[0].hooks[0].command: command must be non-empty text, got 42",
    ),
    (
        '{"hooks": {"Stop": [\n  {"hooks": [\n    {"type": "command"}\n  ]}\n]}}',
        '{"type": "command"}',
        "hooks.Stop[0].hooks[0]: a command hook needs a command",
    ),
    (
        {"hooks": {"Stop": [{"hooks": [cmd("x", timeout="5s")]}]}},
        '"timeout"',
        "timeout must be a number of seconds above 0, got '5s'",
    ),
    (
        {"hooks": {"Stop": [{"hooks": [{"type": "script", "command": "x"}]}]}},
        '"type"',
        "type must be command, http, mcp_tool, prompt, agent, got 'script'",
    ),
    (
        {"hooks": {"Stop": [{"matcher": 3, "hooks": []}]}},
        '"matcher"',
        "matcher must be text, got 3",
    ),
    ({"disableAllHooks": "yes"}, '"disableAllHooks"', "disableAllHooks must be true or false"),
    ({"extensions": "stack.py"}, '"extensions"', "extensions must be a list of paths"),
]


@pytest.mark.parametrize(("data", "text", "message"), BAD)
def test_errors_stay_errors_at_file_and_line(
    tmp_path: Path, data: Any, text: str, message: str
) -> None:
    path = tmp_path / "settings.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    with pytest.raises(HookFileError) as info:
        load_settings_file(path)
    (problem,) = info.value.problems
    assert problem.startswith(f"{path}:{line_of(path, text)}: "), problem
    assert message in problem and "; " in problem, problem


def test_broken_json_and_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{\n  "hooks": {\n    "Stop": [,]\n  }\n}\n')
    with pytest.raises(HookFileError, match=r"settings\.json:3: invalid JSON: .*; fix the syntax"):
        load_settings_file(path)
    with pytest.raises(HookFileError, match=r"nope\.json: cannot read settings file: No such"):
        load_settings_file(tmp_path / "nope.json")


# -- matchers and `if`, at run time -----------------------------------------------------------

MATCHERS = [
    # Claude Code's matcher rules (hooks reference, "Matcher patterns").
    ("*", "Bash", True),
    ("", "Bash", True),
    (None, "Bash", True),
    ("Bash", "Bash", True),
    ("Bash", "BashOutput", False),  # exact, not a prefix
    ("Edit|Write", "Write", True),
    ("Edit|Write", "NotebookEdit", False),
    ("Edit, Write", "Write", True),
    (" Edit , Write ", "Edit", True),
    ("^Notebook", "NotebookEdit", True),  # a regular expression, unanchored
    ("Edit.*", "NotebookEdit", True),
    ("^Edit$", "NotebookEdit", False),
    ("mcp__memory__.*", "mcp__memory__create_entities", True),
    ("mcp__.*__write.*", "mcp__fs__read_file", False),
    ("code-reviewer", "senior-code-reviewer", False),
    ("[unclosed", "[unclosed", False),
]


@pytest.mark.parametrize(("matcher", "tool", "want"), MATCHERS)
def test_claude_code_matchers(matcher: str | None, tool: str, want: bool) -> None:
    assert cc_matcher_matches(matcher, tool) is want
    hook = ShellHook("PreToolUse", "x", matcher, claude=True)
    assert hook.applies({"tool_name": tool, "tool_input": {}}) is want


def test_narrow_matchers_of_stop_failure_and_other_events() -> None:
    # StopFailure's exact set has no hyphen, comma or space: "rate_limit, x" is a regex.
    assert cc_matcher_matches("rate_limit|overloaded", "overloaded", "StopFailure")
    assert not cc_matcher_matches("rate_limit, overloaded", "overloaded", "StopFailure")
    start = ShellHook("SessionStart", "x", "startup|resume", claude=True)
    assert start.applies({"source": "resume"}) and not start.applies({"source": "clear"})
    # An event without matcher support fires whatever matcher was written.
    assert ShellHook("Stop", "x", "anything", claude=True).applies({})


IFS = [
    # The `if` field: the hooks reference's table for Bash, and file paths.
    ("Bash(git *)", "Bash", {"command": "FOO=bar git push"}, True),
    ("Bash(git *)", "Bash", {"command": "npm test && git push"}, True),
    ("Bash(rm *)", "Bash", {"command": "echo $(rm -rf /)"}, True),
    ("Bash(rm *)", "Bash", {"command": "echo $(date)"}, False),
    ("Bash(git push *)", "Bash", {"command": "echo $(date)"}, True),
    ("Bash(ls *)", "Bash", {"command": "lsof"}, False),
    ("Bash(ls *)", "Bash", {"command": "ls"}, True),
    ("Bash(git:*)", "Bash", {"command": "git log"}, True),
    ("Bash(git * main)", "Bash", {"command": "git push origin main"}, True),
    ("Bash(npm run build)", "Bash", {"command": "npm run build --watch"}, False),
    ("Bash(git *)", "Bash", {"command": "echo 'unclosed"}, True),  # fails open
    ("Bash", "Edit", {"file_path": "/w/a.py"}, False),
    ("Edit(*.ts)", "Edit", {"file_path": "/w/a.ts"}, True),
    ("Edit(*.ts)", "Edit", {"file_path": "/w/src/a.ts"}, False),
    ("Edit(src/**)", "Edit", {"file_path": "/w/src/x/y.py"}, True),
    ("Edit(src/**)", "Edit", {"file_path": "/w/lib/src/y.py"}, False),
    ("Edit(**/src/**)", "Write", {"file_path": "/w/lib/src/y.py"}, False),  # another tool
    ("Read(//etc/**)", "Read", {"path": "/etc/hosts"}, True),
    ("mcp__github__*", "mcp__github__create_issue", {}, True),
    ("Agent(model:opus)", "Agent", {"model": "haiku"}, False),
]


@pytest.mark.parametrize(("rule", "tool", "tool_input", "want"), IFS)
def test_the_if_field(rule: str, tool: str, tool_input: dict[str, Any], want: bool) -> None:
    assert if_applies(rule, tool, tool_input, "/w") is want
    hook = ShellHook("PreToolUse", "x", None, claude=True, if_rule=rule)
    assert hook.applies({"tool_name": tool, "tool_input": tool_input, "cwd": "/w"}) is want


def test_if_outside_tool_events_never_runs_even_if_built_by_hand() -> None:
    hook = ShellHook("Stop", "x", claude=True, if_rule="Bash")
    assert not hook.applies({"hook_event_name": "Stop"})


# -- hook files: agent.hooks in Claude Code's shape ------------------------------------------


def test_a_hook_files_agent_hooks_warn_at_their_line() -> None:
    text = (
        "agent:\n"
        "  hooks:\n"
        "    Stop:\n"
        "      - command: ./stop.sh\n"  # our shape, on an event it did not take before
        "    PreCompact:\n"
        "      - hooks: [{type: command, command: ./c.sh}]\n"
        "    PostToolUse:\n"
        "      - matcher: Write\n"
        "        hooks:\n"
        "          - {type: command, command: ./fmt.sh, statusMessage: Formatting}\n"
    )
    hf = parse_hook_text(text, "h.yaml")
    assert hf.agent.hooks is not None
    assert [(h.event, h.claude) for h in hf.agent.hooks] == [
        ("Stop", False),
        ("PostToolUse", True),
    ]
    assert [str(w) for w in hf.warnings] == [
        "h.yaml:5: warning: agent.hooks.PreCompact: never runs: PreCompact never fires here "
        "(threads never compact their context)",
        "h.yaml:10: warning: agent.hooks.PostToolUse[0].hooks[0].statusMessage: not used: "
        "nothing is displayed while a hook runs",
    ]
    # A typo in a hook file's event is still an error there (it is in Claude Code's files
    # that an unknown event is skipped with a warning, as Claude Code skips it).
    with pytest.raises(HookFileError, match=r"h\.yaml:3: .*unknown hook event 'Stp'; did you"):
        parse_hook_text("agent:\n  hooks:\n    Stp: []\n", "h.yaml")


def test_is_settings_tells_the_shapes_apart() -> None:
    assert is_settings({"hooks": {}})
    assert is_settings({"permissions": {"allow": []}})
    assert is_settings({"PreToolUse": []})
    assert not is_settings({"hooks": []})
    assert not is_settings({"purpose": "x", "agent": {}})
    assert not is_settings({"hook": []})  # a hook file's typo stays the hook file's error


def test_shellhookerror_has_the_path() -> None:
    with pytest.raises(ShellHookError) as info:
        read_shell_hooks({"Stop": [{"hooks": [cmd("x", args=[1])]}]})
    assert info.value.path == ("Stop", 0, "hooks", 0, "args")


# -- through the real CLI ----------------------------------------------------------------------


def test_hooks_check_says_what_runs_and_what_does_not(env: Env) -> None:
    path = env.work / "settings.json"
    path.write_text(json.dumps(PROJECT, indent=2))
    r = env.cli("hooks", "check", str(path))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    out = r.stdout.splitlines()
    assert out[0] == f"{path}: OK: Claude Code settings file: 6 shell hooks run"
    assert out[1] == "  runs: PreToolUse [Bash] .claude/hooks/guard.py (timeout 600s)"
    assert "  runs: PostToolUse [Edit|MultiEdit|Write] npx prettier --write (timeout 30s)" in out
    warned = [line for line in out if ": warning: " in line]
    assert len(warned) == 8 and all(re.match(rf"{re.escape(str(path))}:\d+: ", w) for w in warned)
    assert any("hooks.PreCompact: never runs" in w for w in warned)


def test_hooks_check_and_hooks_test_agree(env: Env) -> None:
    good = env.write("good.json", json.dumps(PROJECT))
    bad = env.write("bad.json", json.dumps({"hooks": {"Stop": [{"hooks": [cmd(7)]}]}}))  # type: ignore[arg-type]
    hook_file = env.write(
        "h.yaml",
        yaml.safe_dump({"agent": {"hooks": {"Stop": [{"hooks": [cmd("echo stopped")]}]}}}),
    )
    for path, ok in ((good, True), (bad, False), (hook_file, True)):
        check = env.cli("hooks", "check", str(path))
        test = env.cli("hooks", "test", str(path), "--event", "Stop")
        assert (check.returncode == 0, test.returncode == 0) == (ok, ok), (check, test)
        assert "Traceback" not in check.stderr + test.stderr
        if not ok:
            assert check.stderr == test.stderr
            assert check.stderr.startswith(f"{bad}:1: hooks.Stop[0].hooks[0].command: ")
    r = env.cli("hooks", "test", str(hook_file), "--event", "Stop")
    assert "exit 0" in r.stdout and "stopped" in r.stdout
    r = env.cli("hooks", "test", str(good), "--event", "PreCompact")
    assert r.returncode == 2
    assert "--event PreCompact never fires in a thread (threads never compact" in r.stderr


def test_run_refuses_a_broken_settings_file_before_starting_anything(env: Env) -> None:
    bad = env.write("bad.json", '{"hooks": {"Stop": [{"hooks": [{"type": "command"}]}]}}')
    r = env.cli("run", "-d", "--settings", str(bad), "--", "true")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"{bad}:1: hooks.Stop[0].hooks[0]: a command hook needs a command")
    r = env.cli("run", "-d", "--plugin", "nowhere", "--", "true")
    assert r.returncode == 2 and r.stderr.startswith("--plugin nowhere: no plugin directory")
    assert not (env.home / "supervise.db").exists() or env.ps()["processes"] == []
