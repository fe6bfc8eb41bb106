"""Shell hook configuration and how a hook's ending reads: pure logic."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest

from agent_threads.hooks.shellrun import Say, judge
from agent_threads.hooks.shellspec import (
    ShellHook,
    ShellHookError,
    matcher_matches,
    parse_shell_hooks,
)


@pytest.mark.parametrize(
    ("matcher", "tool", "args", "want"),
    [
        (None, "Read", {}, True),
        ("*", "Bash", {}, True),
        ("Bash", "Bash", {}, True),
        ("Bash", "BashX", {}, False),
        ("Edit|Write", "Write", {}, True),
        ("Edit|Write", "Read", {}, False),
        ("mcp__.*", "mcp__github", {}, True),
        ("Bash(git:*)", "Bash", {"command": "git push"}, True),
        ("Bash(git:*)", "Bash", {"command": "ls && git push"}, True),
        ("Bash(git:*)", "Bash", {"command": "ls"}, False),
        ("Bash(git:*)", "Read", {"path": "git"}, False),
        ("[unclosed", "Bash", {}, False),
    ],
)
def test_matchers(matcher: str | None, tool: str, args: dict[str, Any], want: bool) -> None:
    assert matcher_matches(matcher, tool, args) is want


def test_both_shapes_parse() -> None:
    hooks = parse_shell_hooks(
        {
            "PreToolUse": [
                {"matcher": "Bash", "command": "a", "timeout": 3000, "continueOnFailure": False},
                {"matcher": "Edit", "hooks": [{"type": "command", "command": "b", "timeout": 2}]},
            ],
            "SessionStart": [{"command": "c", "condition": "test -f x"}],
        },
        source="h.yaml",
    )
    a, b, c = hooks
    assert (a.timeout_ms, a.continue_on_failure, a.fail_mode, a.claude) == (
        3000,
        False,
        "closed",
        False,
    )
    assert (b.timeout_ms, b.matcher, b.fail_mode, b.claude) == (2000, "Edit", "open", True)
    assert (c.event, c.condition, c.timeout_ms) == ("SessionStart", "test -f x", 5000)
    assert ShellHook.from_json(a.to_json()) == a


@pytest.mark.parametrize(
    ("data", "path", "message"),
    [
        ({"PreTool": []}, ("PreTool",), "unknown hook event 'PreTool'"),
        ({"PreToolUse": {}}, ("PreToolUse",), "must be a list"),
        ({"PreToolUse": [{"matcher": "Bash"}]}, ("PreToolUse", 0), "needs a command"),
        (
            {"PreToolUse": [{"command": "x", "timeout": "5s"}]},
            ("PreToolUse", 0, "timeout"),
            "milliseconds",
        ),
        (
            {"PreToolUse": [{"command": "x", "fail_mode": "maybe"}]},
            ("PreToolUse", 0, "fail_mode"),
            "open or closed",
        ),
        (
            {"PreToolUse": [{"command": "x", "comand": 1}]},
            ("PreToolUse", 0, "comand"),
            "unknown key",
        ),
        (
            {"PreToolUse": [{"hooks": [{"type": "script", "command": "x"}]}]},
            ("PreToolUse", 0, "hooks", 0, "type"),
            "type must be command, http, mcp_tool, prompt, agent",
        ),
        (
            {"PreToolUse": [{"hooks": ["./check.sh"]}]},
            ("PreToolUse", 0, "hooks", 0),
            "must be a mapping with type and command",
        ),
        (
            {"Stop": [{"hooks": [{"type": "command", "command": ["a", "b"]}]}]},
            ("Stop", 0, "hooks", 0, "command"),
            "command must be non-empty text",
        ),
        (
            {"Stop": [{"hooks": [{"type": "command", "command": "x", "args": "a b"}]}]},
            ("Stop", 0, "hooks", 0, "args"),
            "args must be a list of text",
        ),
        (
            {"Stop": [{"hooks": [{"type": "command", "command": "x", "async": "yes"}]}]},
            ("Stop", 0, "hooks", 0, "async"),
            "async must be true or false",
        ),
        (
            {"PreToolUse": [{"hooks": [{"type": "command", "command": "x", "if": "Bash(("}]}]},
            ("PreToolUse", 0, "hooks", 0, "if"),
            "if must be one permission rule",
        ),
    ],
)
def test_bad_entries_say_where(data: Any, path: tuple[Any, ...], message: str) -> None:
    with pytest.raises(ShellHookError) as info:
        parse_shell_hooks(data)
    assert info.value.path == path and message in str(info.value)


HOOK = ShellHook("PreToolUse", "x")
CLOSED = ShellHook("PreToolUse", "x", fail_mode="closed")


@pytest.mark.parametrize(
    ("hook", "code", "out", "err", "timed_out", "want"),
    [
        (HOOK, 0, "", "", False, {}),
        (HOOK, 2, "", "nope", False, {"decision": "deny", "reason": "nope"}),
        (HOOK, 1, "", "", False, {"reason": "hook failed (exit 1); continuing"}),
        (CLOSED, 127, "", "sh: x: not found", False, {"decision": "deny"}),
        (HOOK, None, "", "", True, {"reason": "hook timed out after 5000 ms"}),
        (CLOSED, None, "", "", True, {"decision": "deny"}),
        (
            HOOK,
            0,
            '{"decision": "block", "reason": "r"}',
            "",
            False,
            {"decision": "deny", "reason": "r"},
        ),
        (
            HOOK,
            0,
            '{"continue": false, "stopReason": "s"}',
            "",
            False,
            {"decision": "stop", "reason": "s"},
        ),
        (HOOK, 0, "{broken", "", False, {}),
        (CLOSED, 0, "{broken", "", False, {"decision": "deny"}),
        (
            HOOK,
            0,
            '{"hookSpecificOutput": {"permissionDecision": "ask"}}',
            "",
            False,
            {"decision": "ask"},
        ),
        (
            HOOK,
            0,
            '{"hookSpecificOutput": {"additionalContext": "c"}}',
            "",
            False,
            {"context": "c"},
        ),
    ],
)
def test_judge(
    hook: ShellHook, code: int | None, out: str, err: str, timed_out: bool, want: dict[str, Any]
) -> None:
    got = asdict(judge(hook, code, out, err, timed_out))
    for key, value in want.items():
        assert got[key] == value or (key == "reason" and value in got[key]), got
    if "decision" not in want:
        assert got["decision"] is None


def test_plain_stdout_is_context_only_for_session_and_prompt_hooks() -> None:
    start = ShellHook("SessionStart", "x")
    assert judge(start, 0, "branch main\n", "", False) == Say(context="branch main")
    assert judge(HOOK, 0, "chatter\n", "", False) == Say()
