"""Claude Code plugins: a directory with hooks/hooks.json and an optional
.claude-plugin/plugin.json, loaded from `--plugin DIR` or a hook file's `agent.plugins`;
each hook gets the plugin's root (CLAUDE_PLUGIN_ROOT) and name. Through the real CLI and
daemon: a plugin's hook and a settings file with Claude Code's other keys run in a thread.

The fixtures are written here, after the shapes real plugins use (anthropics/claude-code's
plugins: `{"description", "hooks": {...}}`, `${CLAUDE_PLUGIN_ROOT}` in commands, manifests
that name the default hooks file again), not copied from them.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Daemon, Env
from test_threads_e2e import script, settled

from agent_threads.config import AgentConfig
from agent_threads.hooks.shellspec import ShellHook
from supervise.errors import HookFileError, UserError
from supervisor.ccfiles import load_plugin, load_plugins
from supervisor.hookfile import load_hook_file
from supervisor.hookspec import HookFile
from supervisor.runspec import RunSpec
from supervisor.threadhost import _hooks


def plugin(
    root: Path,
    hooks: dict[str, Any] | None,
    manifest: dict[str, Any] | None = None,
    scripts: dict[str, str] | None = None,
) -> Path:
    """A plugin directory: hooks/hooks.json, .claude-plugin/plugin.json, scripts/*."""
    root.mkdir(parents=True, exist_ok=True)
    if hooks is not None:
        (root / "hooks").mkdir(exist_ok=True)
        (root / "hooks" / "hooks.json").write_text(json.dumps(hooks, indent=2))
    if manifest is not None:
        (root / ".claude-plugin").mkdir(exist_ok=True)
        (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest, indent=2))
    for name, text in (scripts or {}).items():
        path = root / "scripts" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return root


def line_of(path: Path, key: str) -> int:
    """The line of the first `"key":` in a JSON file."""
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if f'"{key}":' in line)


def group(command: str, matcher: str | None = None, **fields: Any) -> dict[str, Any]:
    g: dict[str, Any] = {"hooks": [{"type": "command", "command": command, **fields}]}
    if matcher is not None:
        g["matcher"] = matcher
    return g


FORMAT_HOOKS = {
    "description": "Format files after edits",
    "hooks": {"PostToolUse": [group('"${CLAUDE_PLUGIN_ROOT}/scripts/fmt.sh"', "Write|Edit")]},
}


# -- loading -----------------------------------------------------------------------------------


def test_a_plugin_without_a_manifest_is_named_after_its_directory(tmp_path: Path) -> None:
    root = plugin(tmp_path / "fmt-tools", FORMAT_HOOKS)
    loaded = load_plugin(root)
    assert loaded.name == "fmt-tools" and loaded.root == root.resolve()
    (h,) = loaded.hooks.shell
    assert (h.event, h.matcher, h.claude) == ("PostToolUse", "Write|Edit", True)
    assert (h.plugin_root, h.plugin_name) == (str(root.resolve()), "fmt-tools")
    assert h.source == str(root.resolve() / "hooks" / "hooks.json")
    # The description is Claude Code's /hooks menu text: accepted, said not to be used.
    (w,) = loaded.hooks.warnings
    assert str(w) == (
        f"{root.resolve()}/hooks/hooks.json:2: warning: description: not used: Claude Code "
        "shows it in its /hooks menu"
    )


def test_the_manifest_names_the_plugin_and_more_hooks_files(tmp_path: Path) -> None:
    security = {"hooks": {"PreToolUse": [group("${CLAUDE_PLUGIN_ROOT}/scripts/scan.sh", "Bash")]}}
    root = plugin(
        tmp_path / "p",
        FORMAT_HOOKS,
        {
            "name": "acme-guard",
            "version": "1.2.0",
            "author": {"name": "A"},
            # Real manifests often name the default file again: Claude Code loads it once
            # (and reports a duplicate); so do we, with a warning.
            "hooks": ["./hooks/hooks.json", "./hooks/security.json"],
            "skills": "./skills/",
        },
    )
    (root / "hooks" / "security.json").write_text(json.dumps(security))
    (root / "commands").mkdir()
    loaded = load_plugin(root)
    assert loaded.name == "acme-guard"
    assert [(h.event, h.plugin_name) for h in loaded.hooks.shell] == [
        ("PostToolUse", "acme-guard"),
        ("PreToolUse", "acme-guard"),
    ]
    text = [str(w) for w in loaded.hooks.warnings]
    man = root.resolve() / ".claude-plugin" / "plugin.json"
    first = line_of(man, "hooks") + 1  # the list's first item
    assert f"{man}:{first}: warning: hooks[0]: ./hooks/hooks.json is read once" in text[0]
    assert text[1] == (
        f"{man}:{line_of(man, 'skills')}: warning: skills: not loaded: supervise loads a "
        "plugin's hooks only"
    )
    assert text[-1] == (
        f"{root.resolve()}: warning: not loaded: commands (supervise loads a plugin's hooks only)"
    )


def test_hooks_inline_in_the_manifest(tmp_path: Path) -> None:
    inline = {"SessionStart": [group("echo hi", "startup")], "PreCompact": [group("true")]}
    root = plugin(tmp_path / "p", None, {"name": "inline", "hooks": inline})
    loaded = load_plugin(root)
    assert [(h.event, h.matcher, h.plugin_name) for h in loaded.hooks.shell] == [
        ("SessionStart", "startup", "inline")
    ]
    (w,) = loaded.hooks.warnings
    man = root / ".claude-plugin" / "plugin.json"
    assert w.line == line_of(man, "PreCompact") and w.warning.path == ("hooks", "PreCompact")
    assert "never fires here (threads never compact their context)" in str(w)


MANIFEST = ".claude-plugin/plugin.json"
HOOKS = "hooks/hooks.json"


@pytest.mark.parametrize(
    ("hooks", "manifest", "where", "message"),
    [
        (None, {"version": "1.0"}, (MANIFEST, "{"), "name must be the plugin's"),
        (
            None,
            {"name": "x", "hooks": "../elsewhere.json"},
            (MANIFEST, '"hooks":'),
            "is outside the plugin; write a path that starts with ./",
        ),
        (
            None,
            {"name": "x", "hooks": "./hooks/extra.json"},
            (MANIFEST, '"hooks":'),
            "no hooks file ./hooks/extra.json",
        ),
        (
            None,
            {"name": "x", "hooks": 3},
            (MANIFEST, '"hooks":'),
            "hooks must be a path such as ./config/hooks.json",
        ),
        (
            {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": 7}]}]}},
            None,
            (HOOKS, '"command": 7'),
            "hooks.Stop[0].hooks[0].command: command must be non-empty text, got 7",
        ),
        (
            {"hooks": {"Stop": ["./stop.sh"]}},
            None,
            (HOOKS, '"./stop.sh"'),
            "hooks.Stop[0]: must be a mapping",
        ),
        ({"hooks": ["x"]}, None, (HOOKS, '"hooks":'), "hooks must be a mapping of event name"),
        (["x"], None, (HOOKS, "["), "must be a JSON object"),
    ],
)
def test_a_broken_plugin_names_the_file_and_line(
    tmp_path: Path, hooks: Any, manifest: Any, where: tuple[str, str], message: str
) -> None:
    root = plugin(tmp_path / "p", hooks, manifest)
    with pytest.raises(HookFileError) as info:
        load_plugin(root)
    (problem,) = info.value.problems
    file = root.resolve() / where[0]
    line = next(i for i, t in enumerate(file.read_text().splitlines(), 1) if where[1] in t)
    assert problem.startswith(f"{file}:{line}: ") and message in problem, problem
    assert "; " in problem  # what, then how to fix it


def test_broken_json_and_a_missing_directory(tmp_path: Path) -> None:
    root = plugin(tmp_path / "p", None)
    (root / "hooks").mkdir()
    (root / "hooks" / "hooks.json").write_text('{\n  "hooks": {,}\n}\n')
    with pytest.raises(HookFileError, match=r"p/hooks/hooks\.json:2: invalid JSON"):
        load_plugin(root)
    with pytest.raises(HookFileError) as info:
        load_plugins(["nope", str(root)], tmp_path)
    assert info.value.problems[0].startswith(f"--plugin nope: no plugin directory {tmp_path}/nope")
    assert len(info.value.problems) == 2  # every plugin's problem at once


# -- agent.plugins in a hook file ----------------------------------------------------------------


def test_agent_plugins_are_relative_to_the_hook_file_and_kept_in_the_launch_record(
    tmp_path: Path,
) -> None:
    plugin(tmp_path / "plugins" / "fmt", FORMAT_HOOKS, {"name": "fmt"})
    hook_file = tmp_path / "conf" / "hooks.yaml"
    hook_file.parent.mkdir()
    hook_file.write_text("agent:\n  plugins: [../plugins/fmt]\n")
    hf = load_hook_file(hook_file)
    root = str((tmp_path / "plugins" / "fmt").resolve())
    assert hf.agent.plugins == (root,)
    assert hf.agent.plugin_hooks is not None
    (h,) = hf.agent.plugin_hooks
    assert (h.plugin_root, h.plugin_name) == (root, "fmt")
    assert [w.warning.path for w in hf.warnings] == [("description",)]
    # What the daemon reads back: the hooks as loaded when the run started.
    record = json.loads(json.dumps(hf.to_json()))
    assert HookFile.from_json(record).agent == hf.agent
    spec = RunSpec(1, "x", ("true",), tmp_path, (), 0, None, 0.0, hf, True)
    assert RunSpec.from_text(spec.text(), "t").hooks.agent.plugin_hooks == (h,)


def test_a_missing_agent_plugin_is_the_hook_files_line(tmp_path: Path) -> None:
    hook_file = tmp_path / "hooks.yaml"
    hook_file.write_text("purpose: x\nagent:\n  plugins:\n    - ./gone\n")
    with pytest.raises(HookFileError) as info:
        load_hook_file(hook_file)
    assert info.value.problems == [
        f"{hook_file}:4: agent.plugins[0]: no plugin directory {tmp_path}/gone; give the "
        "directory that holds hooks/hooks.json (and .claude-plugin/plugin.json)"
    ]
    hook_file.write_text("agent:\n  plugins: ./gone\n")
    with pytest.raises(HookFileError, match=r"hooks\.yaml:2: agent\.plugins must be a list"):
        load_hook_file(hook_file)


def test_a_thread_cannot_add_plugins(tmp_path: Path) -> None:
    plugin(tmp_path / "p", FORMAT_HOOKS)
    (tmp_path / "h.yaml").write_text("agent:\n  plugins: [./p]\n")
    with pytest.raises(UserError, match="a thread cannot add plugins"):
        _hooks("h.yaml", tmp_path)
    assert AgentConfig().plugin_hooks is None


# -- through the real CLI: a plugin's hook and a settings file's, in a real thread ---------------

# Records what the hook saw (its CLAUDE_* variables and its stdin's event) in a marker file.
RECORD = f"""#!{sys.executable}
import json, os, sys
event = json.load(sys.stdin)
name = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("MARK", "plugin")
seen = {{k: v for k, v in os.environ.items() if k.startswith("CLAUDE_")}}
seen["event"] = event["hook_event_name"]
seen["tool"] = event.get("tool_name")
with open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], f"marker-{{name}}.json"), "w") as f:
    json.dump(seen, f)
"""


def test_plugins_and_a_real_settings_file_run_in_a_thread(env: Env, daemon: Daemon) -> None:
    # A plugin given with --plugin (shell form, the ${CLAUDE_PLUGIN_ROOT} real plugins use).
    fmt = plugin(
        env.work / "fmt-plugin",
        {
            "description": "Record each Bash call",
            "hooks": {
                "PreToolUse": [group('"${CLAUDE_PLUGIN_ROOT}/scripts/record.py" fmt', "Bash")],
                "SubagentStart": [group("true")],  # never fires here: a warning
            },
        },
        {"name": "fmt", "version": "0.1.0", "hooks": "./hooks/hooks.json"},
        {"record.py": RECORD},
    )
    # A plugin named in the hook file (exec form: command and args, no shell).
    guard = plugin(
        env.work / "plugins" / "guard",
        {
            "hooks": {
                "PostToolUse": [
                    group(
                        "${CLAUDE_PLUGIN_ROOT}/scripts/record.py",
                        "Edit, Bash",
                        args=["guard"],
                        statusMessage="Checking",
                    )
                ]
            }
        },
        None,
        {"record.py": RECORD},
    )
    # A project's settings file as Claude Code writes it: permissions, env, statusLine...
    settings = env.write(
        "settings.json",
        json.dumps(
            {
                "$schema": "https://json.schemastore.org/claude-code-settings.json",
                "permissions": {"allow": ["Bash(npm run test:*)"], "deny": ["Read(./.env)"]},
                "env": {"CLAUDE_CODE_ENABLE_TELEMETRY": "1"},
                "statusLine": {"type": "command", "command": "echo status"},
                "hooks": {
                    "SessionStart": [
                        group(f"MARK=settings {fmt}/scripts/record.py", "startup"),
                    ],
                    "PreCompact": [group("echo compacting")],
                },
            },
            indent=2,
        ),
    )
    call = {"tool_calls": [{"name": "Bash", "arguments": {"command": "echo hi"}}]}
    turns = script(env, [call, {"content": "done"}])
    hook_file = env.write(
        "hooks.yaml",
        yaml.safe_dump(
            {
                "hooks": [{"name": "done", "on_exit": {}, "instructions": "Look."}],
                "agent": {
                    "model": f"scripted:{turns.name}",
                    "permissions": {"allow": ["Bash"]},
                    "plugins": ["plugins/guard"],
                },
            }
        ),
    )
    r = env.cli(
        "run",
        "-d",
        "--json",
        "--hook",
        str(hook_file),
        "--settings",
        str(settings),
        "--plugin",
        "fmt-plugin",
        "--",
        sys.executable,
        "-c",
        "print('job')",
    )
    assert r.returncode == 0, r.stderr
    # Every warning once, at its file and line; nothing refused.
    warnings = r.stderr.splitlines()
    assert len(warnings) == len(set(warnings)) and "Traceback" not in r.stderr
    guard_json, fmt_json = guard.resolve() / "hooks/hooks.json", fmt.resolve() / "hooks/hooks.json"
    expected = [
        f"{guard_json}:{line_of(guard_json, 'statusMessage')}: warning: hooks.PostToolUse[0]."
        "hooks[0].statusMessage: not used: nothing is displayed while a hook runs",
        f"{settings}:{line_of(settings, 'permissions')}: warning: permissions: not applied:",
        f"{settings}:{line_of(settings, 'env')}: warning: env: not applied:",
        f"{settings}:{line_of(settings, 'PreCompact')}: warning: hooks.PreCompact: never runs: "
        "PreCompact never fires here",
        f"{fmt_json}:{line_of(fmt_json, 'SubagentStart')}: warning: hooks.SubagentStart: never",
    ]
    for want in expected:
        assert any(line.startswith(want) for line in warnings), (want, warnings)
    assert not any(line.startswith(str(hook_file)) for line in warnings)

    t = settled(env, "t1", "completed")
    assert t["status"] == "completed"
    root = env.work
    seen = {n: json.loads((root / f"marker-{n}.json").read_text()) for n in ("fmt", "guard")}
    assert seen["fmt"]["CLAUDE_PLUGIN_ROOT"] == str(fmt.resolve())
    assert (seen["fmt"]["event"], seen["fmt"]["tool"]) == ("PreToolUse", "Bash")
    assert seen["guard"]["CLAUDE_PLUGIN_ROOT"] == str(guard.resolve())
    assert seen["guard"]["event"] == "PostToolUse"
    data = Path(seen["guard"]["CLAUDE_PLUGIN_DATA"])
    assert data.is_dir() and data.name == "guard"
    started = json.loads((root / "marker-settings.json").read_text())
    assert started["event"] == "SessionStart" and "CLAUDE_PLUGIN_ROOT" not in started
    # The settings file's env was not applied to the hooks either.
    assert "CLAUDE_CODE_ENABLE_TELEMETRY" not in started
    ran = [e for e in t["entries"] if e["kind"] == "hook"]
    assert {e["event"] for e in ran} == {"SessionStart", "PreToolUse", "PostToolUse"}


def test_shell_hook_plugin_fields_round_trip() -> None:
    h = ShellHook("PreToolUse", "x", claude=True, plugin_root="/p", plugin_name="n", args=("a",))
    assert ShellHook.from_json(json.loads(json.dumps(h.to_json()))) == h


def test_run_and_ask_take_a_settings_file_and_plugins_together(tmp_path: Path) -> None:
    from supervisor.running import settings_hooks

    root = plugin(tmp_path / "fmt", FORMAT_HOOKS)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"env": {}, "hooks": {"Stop": [group("./stop.sh")]}}))
    given, warned = settings_hooks(settings, [str(root)])
    assert [(h.event, h.plugin_name) for h in given.shell] == [
        ("Stop", None),
        ("PostToolUse", "fmt"),
    ]
    assert warned == [
        f"{settings}:1: warning: env: not applied: a thread's tools get the environment its "
        "process was started with",
        f"{root.resolve()}/hooks/hooks.json:2: warning: description: not used: Claude Code "
        "shows it in its /hooks menu",
    ]
    assert settings_hooks(None, []) == (settings_hooks(None)[0], [])
