"""The agent section: parsed once into an AgentConfig (problems at FILE:LINE through the real
CLI), kept in the run's launch record (RunSpec JSON) and read back the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Env

from agent_threads.config import AgentConfig, AgentConfigError
from agent_threads.hooks.shellspec import ShellHook
from agent_threads.hooks.system import SystemHookConfig
from agent_threads.permissions import Layer, Profile
from state.sandboxpolicy import SandboxPolicy
from supervise.errors import StateError
from supervisor.hookfile import load_hook_mapping, parse_hook_text
from supervisor.hookspec import HookFile
from supervisor.runspec import Inherited, RunSpec, SettingsHooks

FULL = """\
purpose: everything the agent section can say
agent:
  model: openai:gpt-4.1-mini
  permissions: {allow: [Read, "Bash(git:*)"], ask: [Edit], deny: ["Bash(rm:*)"]}
  max_turns: 7
  timeout: 90
  hooks:
    PreToolUse:
      - matcher: Bash
        command: ./check.sh
        timeout: 2000
        fail_mode: closed
    PostToolUse:
      - matcher: Edit|Write
        hooks: [{type: command, command: ./fmt.sh, timeout: 3}]
  system_hooks:
    tests_not_run: false
    many_files: {threshold: 9, message: commit now}
    context_usage: {enabled: false, window: 1000}
    plan_completion: {docs: [NOTES.md]}
  extensions: [stack_ext]
  sandbox: {mode: required, network: false, write: [/srv/out]}
"""


def spec_with(hooks: HookFile, **kw: object) -> RunSpec:
    return RunSpec(
        id=3,
        name="job",
        argv=("./job.sh", "--fast"),
        cwd=Path("/srv/work"),
        env_keys=("TOKEN",),
        depth=1,
        parent_thread_id=2,
        started_at=1700000000.5,
        hooks=hooks,
        unbuffered=True,
        **kw,  # type: ignore[arg-type]
    )


def test_the_agent_section_is_typed() -> None:
    agent = parse_hook_text(FULL, "h.yaml").agent
    assert agent.model == "openai:gpt-4.1-mini" and agent.max_turns == 7
    assert agent.timeout == 90.0 and agent.extensions == ("stack_ext",)
    assert agent.permissions == Layer.from_mapping(
        {"allow": ["Read", "Bash(git:*)"], "ask": ["Edit"], "deny": ["Bash(rm:*)"]}
    )
    assert agent.sandbox == SandboxPolicy("required", False, ("/srv/out",))
    assert agent.hooks is not None
    assert [(h.event, h.command, h.timeout_ms, h.claude) for h in agent.hooks] == [
        ("PreToolUse", "./check.sh", 2000, False),
        ("PostToolUse", "./fmt.sh", 3000, True),
    ]
    assert {h.source for h in agent.hooks} == {"h.yaml"}
    cfg = agent.system_hooks
    assert cfg is not None
    assert cfg.off == {"tests_not_run", "context_usage"}
    assert (cfg.many_files, cfg.window, cfg.docs) == (9, 1000, ("NOTES.md",))
    assert cfg.messages == {"many_files": "commit now"}


def test_agent_config_round_trips_through_the_run_spec_json() -> None:
    hooks = parse_hook_text(FULL, "h.yaml")
    inherited = Inherited(
        Profile((Layer.from_mapping({"deny": ["Write"]}),)),
        (ShellHook("SessionStart", "echo parent", source="parent.yaml"),),
        ("/srv/ext.py#sha256=00",),
        SandboxPolicy("auto", False, ()),
    )
    settings = SettingsHooks((ShellHook("SessionEnd", "echo bye", claude=True),), ("x.py",))
    spec = spec_with(
        hooks, model_default="scripted:/t.yaml", settings_hooks=settings, inherited=inherited
    )
    text = spec.text()
    back = RunSpec.from_text(text, "test")
    assert back == spec
    assert back.hooks.agent == hooks.agent
    assert back.text() == text  # byte for byte: the DB's record and spec.json compare equal


def test_every_field_left_unsaid_stays_unsaid() -> None:
    spec = spec_with(HookFile())
    back = RunSpec.from_text(spec.text(), "test")
    assert back.hooks.agent == AgentConfig()
    assert json.loads(spec.text())["hooks"]["agent"] == {}
    assert back.inherited is None and back.settings_hooks == SettingsHooks()


@pytest.mark.parametrize(
    "section",
    [
        {"tests_not_run": False},
        {"context_usage": {"enabled": False, "ratio": 0.5}},
        {"sensitive_file": {"globs": ["*.env"], "message": "careful"}},
        {"many_files": True, "output_truncated": None},
    ],
)
def test_system_hooks_round_trip(section: dict[str, object]) -> None:
    cfg = SystemHookConfig.from_mapping(section)
    assert SystemHookConfig.from_mapping(cfg.to_json()) == cfg


def test_a_record_from_an_older_version_is_read() -> None:
    """Before RunSpec, the record kept the agent section as the hook file wrote it, and had
    none of the fields added later."""
    old = {
        "id": 5,
        "name": "job",
        "argv": ["./job.sh"],
        "cwd": "/srv/work",
        "env_keys": [],
        "depth": 0,
        "parent_thread_id": None,
        "started_at": 1.0,
        "hooks": {
            "purpose": None,
            "context": {},
            "hooks": [],
            "limits": {"max_depth": 3, "rate": "10/minute"},
            "agent": {
                "model": "openai:m",
                "permissions": {"allow": ["Read"]},
                "hooks": {"PreToolUse": [{"command": "./check.sh"}]},
                "sandbox": "off",
            },
            "sources": ["h.yaml"],
        },
        "settings_hooks": [{"event": "SessionEnd", "command": "echo bye"}],
        "parent_permissions": [{"allow": ["Read"], "ask": [], "deny": []}],
        "parent_shell_hooks": [],
        "parent_extensions": [],
    }
    spec = RunSpec.from_text(json.dumps(old), "old")
    agent = spec.hooks.agent
    assert agent.model == "openai:m" and agent.sandbox == SandboxPolicy("off")
    assert agent.permissions == Layer.from_mapping({"allow": ["Read"]})
    assert agent.hooks == (ShellHook("PreToolUse", "./check.sh", source="h.yaml"),)
    assert spec.unbuffered is False and spec.model_default is None
    assert spec.settings_hooks.shell == (ShellHook("SessionEnd", "echo bye"),)
    assert spec.inherited is not None and spec.inherited.sandbox is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("not json", "the launch record cannot be read"),
        ("[1, 2]", "a JSON object was expected"),
        ('{"id": 1, "cwd": "/"}', "no 'argv'"),
        (
            '{"id": 1, "argv": ["x"], "cwd": "/", "hooks": {"agent": {"max_turns": -1}}}',
            "agent.max_turns must be a whole number",
        ),
    ],
)
def test_an_unreadable_record_is_a_clear_error(text: str, reason: str) -> None:
    with pytest.raises(StateError) as err:
        RunSpec.from_text(text, "process 1's launch record")
    assert str(err.value).startswith("process 1's launch record: ")
    assert reason in str(err.value) and "start it again with `supervise run`" in str(err.value)


def test_parse_reports_every_problem_with_its_key_path() -> None:
    data = {"model": "gpt-4", "max_turns": 0, "modle": "x", "permissions": {"allow": ["Bash("]}}
    with pytest.raises(AgentConfigError) as err:
        AgentConfig.parse(data, "RunProcess hooks")
    paths = [p for p, _ in err.value.problems]
    assert paths == [
        ("agent", "modle"),
        ("agent", "model"),
        ("agent", "max_turns"),
        ("agent", "permissions", "allow", 0),
    ]
    assert str(err.value).startswith("RunProcess hooks: unknown key 'modle' in agent")


def test_later_files_win_key_by_key() -> None:
    a = load_hook_mapping({"agent": {"model": "openai:a", "max_turns": 5}}, "a")
    b = load_hook_mapping({"agent": {"model": "openai:b", "sandbox": "off"}}, "b")
    agent = a.merge(b).agent
    assert (agent.model, agent.max_turns, agent.sandbox) == ("openai:b", 5, SandboxPolicy("off"))


def test_hooks_check_names_the_line_of_each_agent_problem(env: Env) -> None:
    path = env.write(
        "h.yaml",
        "purpose: x\n"
        "agent:\n"
        "  model: gpt-4\n"
        "  max_turns: lots\n"
        "  sandbox: {mode: auto, netwrk: false}\n"
        "  hooks:\n"
        "    PreToolUse:\n"
        "      - matcher: Bash\n"
        "        comand: ./check.sh\n"
        "  system_hooks: {many_files: {threshold: 0}}\n",
    )
    r = env.cli("hooks", "check", str(path))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith(f'{path}:3: agent.model must be provider:name, got "gpt-4"')
    assert lines[1].startswith(f"{path}:4: agent.max_turns must be a whole number from 1")
    assert lines[2].startswith(f"{path}:5: agent.sandbox.netwrk is not a sandbox setting")
    assert lines[3].startswith(f"{path}:9: agent.hooks.PreToolUse.0.comand: unknown key")
    assert lines[4].startswith(f"{path}:10: agent.system_hooks: many_files.threshold must be")
    assert len(lines) == 5
