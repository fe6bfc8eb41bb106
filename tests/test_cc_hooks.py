"""Claude Code's hook protocol at run time: real hook scripts, the real loop, in process.

Each hook here is a script that behaves as the public ones do (python3 or bash with jq
reading stdin): it reads the JSON Claude Code sends, writes what it saw to a file, and answers with
an exit code and JSON. The loop, the Bash tool and the hooks' subprocesses are real; only the
model is a table and the journal a list.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakes import MemoryJournal, TableModel

from agent_threads.hooks.base import HookSet
from agent_threads.hooks.shell import ShellHooks, ShellSite
from agent_threads.hooks.shellspec import ShellHook
from agent_threads.loop import LoopConfig, LoopEnd, run_loop
from agent_threads.messages import Reply, ToolCall, Usage
from agent_threads.permissions import Profile
from agent_threads.tools.base import ToolContext
from agent_threads.tools.bash import BashTool
from agent_threads.transcript import (
    Approval,
    HookContext,
    HookRan,
    Note,
    ToolOutput,
    UserText,
)
from supervise.errors import ModelAuthError


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def bash(command: str, call_id: str = "toolu_1") -> Reply:
    return Reply("", (ToolCall(call_id, "Bash", {"command": command}),), Usage(3, 1))


def answer(text: str) -> Reply:
    return Reply(text, (), Usage(3, 1))


def script(tmp: Path, name: str, body: str) -> str:
    path = tmp / "hooks" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def cc(event: str, command: str, matcher: str | None = None, **kw: Any) -> ShellHook:
    """A handler in Claude Code's shape."""
    return ShellHook(event, command, matcher, 10_000, claude=True, **kw)


# Saves its stdin as seen-<event>.json (appending one line per run) and its CLAUDE_*
# variables, then answers as told by the environment variable ANSWER_<event>: "CODE [JSON]".
RECORDER = """#!/usr/bin/env python3
import json, os, sys
raw = sys.stdin.read()
event = json.loads(raw)["hook_event_name"]
root = os.environ["CLAUDE_PROJECT_DIR"]
with open(os.path.join(root, f"seen-{event}.json"), "a") as f:
    f.write(raw + "\\n")
with open(os.path.join(root, f"env-{event}.txt"), "w") as f:
    f.writelines(f"{k}={v}\\n" for k, v in sorted(os.environ.items()) if k.startswith("CLAUDE_"))
code, _, text = os.environ.get(f"ANSWER_{event}", "0").partition(" ")
print(text, end="")
if code != "0":
    print(f"said {code}", file=sys.stderr)
sys.exit(int(code))
"""


@dataclass
class Run:
    journal: MemoryJournal
    model: TableModel
    cfg: LoopConfig
    work: Path

    async def go(self) -> LoopEnd:
        return await run_loop(self.journal, self.cfg, list(self.journal.saved), 0)

    def seen(self, event: str) -> list[dict[str, Any]]:
        path = self.work / f"seen-{event}.json"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def ran(self) -> list[str]:
        return (
            (self.work / "ran.txt").read_text().split() if (self.work / "ran.txt").exists() else []
        )


def setup(
    tmp: Path,
    replies: Sequence[Reply],
    hooks: Sequence[ShellHook],
    *,
    profile: Profile | None = None,
    answers: dict[str, str] | None = None,
    agent_type: str | None = None,
) -> Run:
    work = tmp / "my project"  # a space: exec form must pass it as one argument
    work.mkdir(parents=True)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp),
        **{f"ANSWER_{k}": v for k, v in (answers or {}).items()},
    }
    thread_dir = tmp / "state" / "threads" / "t7"
    env_file = thread_dir / "env.sh"
    site = ShellSite(
        work,
        env,
        "test-hook",
        transcript_path=thread_dir / "transcript.jsonl",
        env_file=env_file,
        model="table:cc",
        agent_type=agent_type,
    )
    journal = MemoryJournal(7)
    journal.append(UserText("look at it"))
    model = TableModel(replies, name="table:cc")
    ctx = ToolContext(thread_id=7, cwd=work, env={**env, "BASH_ENV": str(env_file)})
    cfg = LoopConfig(
        model=model,
        tools={"Bash": BashTool()},
        profile=profile or Profile.from_json([{"allow": ["Bash"], "deny": ["Bash(rm:*)"]}]),
        ctx=ctx,
        system="sys",
        hooks=HookSet([ShellHooks(hooks, site)]),
        retry_attempts=1,
    )
    return Run(journal, model, cfg, work)


def record(tmp: Path) -> str:
    return script(tmp, "record.sh", RECORDER)


# -- PreToolUse -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_pre_tool_use_gets_claude_codes_fields_and_a_current_transcript(
    tmp_path: Path,
) -> None:
    rec = record(tmp_path)
    r = setup(tmp_path, [bash("echo hi >> ran.txt"), answer("done")], [cc("PreToolUse", rec)])
    assert (await r.go()).status == "completed"
    (seen,) = r.seen("PreToolUse")
    assert seen["session_id"] == "t7" and seen["hook_event_name"] == "PreToolUse"
    assert seen["cwd"] == str(r.work) and seen["permission_mode"] == "default"
    assert seen["tool_name"] == "Bash" and seen["tool_use_id"] == "toolu_1"
    assert seen["tool_input"] == {"command": "echo hi >> ran.txt"}
    lines = [json.loads(x) for x in Path(seen["transcript_path"]).read_text().splitlines()]
    # Current when the hook ran: the prompt and the reply that asked for the call.
    assert [x["type"] for x in lines] == ["user", "assistant"]
    assert lines[1]["message"]["content"][0] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "Bash",
        "input": {"command": "echo hi >> ran.txt"},
    }
    env = (r.work / "env-PreToolUse.txt").read_text()
    assert f"CLAUDE_PROJECT_DIR={r.work}\n" in env
    assert r.ran() == ["hi"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("answer_", "reason"),
    [
        (
            '0 {"hookSpecificOutput": {"hookEventName": "PreToolUse", '
            '"permissionDecision": "deny", "permissionDecisionReason": "no shell"}}',
            "no shell",
        ),
        ("2", "said 2"),  # exit 2: stderr is the reason
        # JSON is read on every exit code: a deny printed with exit 1 still denies.
        ('1 {"hookSpecificOutput": {"permissionDecision": "deny"}}', ""),
        ('0 {"decision": "block", "reason": "legacy"}', "legacy"),  # deprecated spelling
    ],
)
async def test_pre_tool_use_denies(tmp_path: Path, answer_: str, reason: str) -> None:
    r = setup(
        tmp_path,
        [bash("echo x >> ran.txt"), answer("ok")],
        [cc("PreToolUse", record(tmp_path), "Bash")],
        answers={"PreToolUse": answer_},
    )
    assert (await r.go()).status == "completed"
    assert r.ran() == []
    (out,) = r.journal.of(ToolOutput)
    assert out.status == "denied" and f"Blocked by a PreToolUse hook: {reason}" in out.output


@pytest.mark.anyio
async def test_a_failing_hook_without_json_does_not_block(tmp_path: Path) -> None:
    r = setup(
        tmp_path,
        [bash("echo x >> ran.txt"), answer("ok")],
        [cc("PreToolUse", record(tmp_path))],
        answers={"PreToolUse": "1"},
    )
    await r.go()
    assert r.ran() == ["x"]
    (ran,) = r.journal.of(HookRan)
    assert ran.decision is None and "non-blocking status code 1: said 1" in ran.reason


@pytest.mark.anyio
async def test_a_rewrite_is_judged_by_the_rules_again(tmp_path: Path) -> None:
    rewrite = (
        '0 {"hookSpecificOutput": {"permissionDecision": "allow", '
        '"updatedInput": {"command": "rm -rf ran.txt"}}}'
    )
    r = setup(
        tmp_path,
        [bash("echo safe >> ran.txt"), answer("ok")],
        [cc("PreToolUse", record(tmp_path))],
        answers={"PreToolUse": rewrite},
    )
    (r.work / "ran.txt").write_text("kept\n")
    await r.go()
    assert r.ran() == ["kept"]  # neither the rewrite nor the original ran
    (out,) = r.journal.of(ToolOutput)
    assert out.status == "denied" and "Permission denied" in out.output


@pytest.mark.anyio
async def test_a_rewrite_the_rules_allow_runs_instead(tmp_path: Path) -> None:
    rewrite = '0 {"hookSpecificOutput": {"updatedInput": {"command": "echo rewritten >> ran.txt"}}}'
    r = setup(
        tmp_path,
        [bash("echo original >> ran.txt"), answer("ok")],
        [cc("PreToolUse", record(tmp_path))],
        answers={"PreToolUse": rewrite},
    )
    await r.go()
    assert r.ran() == ["rewritten"]


ASKS = Profile.from_json([{"ask": ["Bash(deploy:*)"]}])  # no allow: every call asks by default


@pytest.mark.anyio
async def test_allow_skips_the_default_approval_but_not_an_ask_rule(tmp_path: Path) -> None:
    allow = '0 {"hookSpecificOutput": {"permissionDecision": "allow"}}'
    hooks = [cc("PreToolUse", record(tmp_path))]
    r = setup(
        tmp_path,
        [bash("echo a >> ran.txt"), answer("ok")],
        hooks,
        profile=ASKS,
        answers={"PreToolUse": allow},
    )
    assert (await r.go()).status == "completed" and r.ran() == ["a"]
    r2 = setup(
        tmp_path / "2",
        [bash("deploy now"), answer("ok")],
        hooks,
        profile=ASKS,
        answers={"PreToolUse": allow},
    )
    assert (await r2.go()).status == "waiting_approval"


# -- PermissionRequest and Notification -------------------------------------------------------


@pytest.mark.anyio
async def test_permission_request_answers_the_approval(tmp_path: Path) -> None:
    allow = (
        '0 {"hookSpecificOutput": {"hookEventName": "PermissionRequest", '
        '"decision": {"behavior": "allow"}}}'
    )
    rec = record(tmp_path)
    r = setup(
        tmp_path,
        [bash("echo approved >> ran.txt"), answer("ok")],
        [cc("PermissionRequest", rec), cc("Notification", rec)],
        profile=ASKS,
        answers={"PermissionRequest": allow},
    )
    assert (await r.go()).status == "completed" and r.ran() == ["approved"]
    (seen,) = r.seen("PermissionRequest")
    assert seen["tool_input"] == {"command": "echo approved >> ran.txt"}
    assert [a.decision for a in r.journal.of(Approval)] == ["approved"]
    assert r.journal.of(Approval)[0].by == "hook"
    # The thread ended: agent_completed; it never waited: no permission_prompt.
    assert [s["notification_type"] for s in r.seen("Notification")] == ["agent_completed"]


@pytest.mark.anyio
async def test_permission_request_deny_and_a_notification_when_nobody_answers(
    tmp_path: Path,
) -> None:
    deny = '0 {"hookSpecificOutput": {"decision": {"behavior": "deny", "message": "not today"}}}'
    rec = record(tmp_path)
    r = setup(
        tmp_path,
        [bash("echo a >> ran.txt"), answer("ok")],
        [cc("PermissionRequest", rec)],
        profile=ASKS,
        answers={"PermissionRequest": deny},
    )
    await r.go()
    (out,) = r.journal.of(ToolOutput)
    assert out.status == "denied" and "not today" in out.output
    r2 = setup(
        tmp_path / "b",
        [bash("echo b >> ran.txt"), answer("ok")],
        [cc("PermissionRequest", rec), cc("Notification", rec, "permission_prompt")],
        profile=ASKS,
        answers={"PermissionRequest": "2"},  # exit 2 is not honoured here: the person decides
    )
    assert (await r2.go()).status == "waiting_approval"
    (note,) = r2.seen("Notification")
    assert note["notification_type"] == "permission_prompt" and "approve t7" in note["message"]


# -- after a tool ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_post_tool_use_and_failure(tmp_path: Path) -> None:
    rec = record(tmp_path)
    r = setup(
        tmp_path,
        [bash("echo fine", "toolu_a"), bash("echo broken; exit 3", "toolu_b"), answer("ok")],
        [cc("PostToolUse", rec, "Bash"), cc("PostToolUseFailure", rec, "Bash")],
        answers={"PostToolUse": '0 {"decision": "block", "reason": "lint failed"}'},
    )
    await r.go()
    (ok,) = r.seen("PostToolUse")
    assert ok["tool_use_id"] == "toolu_a" and isinstance(ok["tool_response"], dict | str)
    assert isinstance(ok["duration_ms"], int)
    (bad,) = r.seen("PostToolUseFailure")
    assert bad["tool_use_id"] == "toolu_b" and "broken" in bad["error"]
    assert bad["is_interrupt"] is False
    # A block after a tool: the model reads the reason next to the result.
    assert [c.text for c in r.journal.of(HookContext)] == ["lint failed"]
    second_call = r.model.sent[1]
    assert any("lint failed" in str(getattr(m, "content", "")) for m in second_call)


# -- Stop ---------------------------------------------------------------------------------------

STOP_ONCE = """#!/usr/bin/env python3
import json, sys
data = json.load(sys.stdin)
if not data["stop_hook_active"] and "tests pass" not in data["last_assistant_message"]:
    print(json.dumps({"decision": "block", "reason": "run the tests first"}))
"""


@pytest.mark.anyio
async def test_a_stop_hook_sends_the_model_back_to_work(tmp_path: Path) -> None:
    stop = script(tmp_path, "stop.py", STOP_ONCE)
    r = setup(tmp_path, [answer("done"), answer("done, and tests pass")], [cc("Stop", stop)])
    end = await r.go()
    assert end.status == "completed"
    assert r.model.sent[1][-1].content is not None  # type: ignore[union-attr]
    assert "run the tests first" in str(r.model.sent[1][-1].content)  # type: ignore[union-attr]
    assert len(r.model.sent) == 2


@pytest.mark.anyio
async def test_a_stop_hook_that_always_blocks_is_let_through_after_eight(tmp_path: Path) -> None:
    r = setup(
        tmp_path,
        [answer(f"try {n}") for n in range(20)],
        [cc("Stop", "echo keep going >&2; exit 2")],
    )
    end = await r.go()
    assert end.status == "completed" and len(r.model.sent) == 9
    assert "blocked 8 times in a row" in r.journal.of(Note)[-1].text


@pytest.mark.anyio
async def test_subagent_stop_for_a_thread_started_by_a_thread(tmp_path: Path) -> None:
    rec = record(tmp_path)
    r = setup(
        tmp_path,
        [answer("child done")],
        [cc("Stop", rec), cc("SubagentStop", rec, "fix-it")],
        agent_type="fix-it",
    )
    await r.go()
    assert r.seen("Stop") == []
    (seen,) = r.seen("SubagentStop")
    assert seen["agent_type"] == "fix-it" and seen["last_assistant_message"] == "child done"


# -- session ------------------------------------------------------------------------------------

ENV_HOOK = """#!/bin/bash
echo 'export GREETING="hello from SessionStart"' >> "$CLAUDE_ENV_FILE"
echo "branch: main"
"""


@pytest.mark.anyio
async def test_session_start_context_source_and_env_file(tmp_path: Path) -> None:
    rec = record(tmp_path)
    r = setup(
        tmp_path,
        [bash('echo "$GREETING" >> ran.txt'), answer("ok")],
        [
            cc("SessionStart", script(tmp_path, "env.sh", ENV_HOOK), "startup"),
            cc("SessionStart", rec),
            cc("SessionStart", rec),  # the same handler twice runs once, as in Claude Code
            cc("SessionStart", script(tmp_path, "record2.sh", RECORDER), "resume"),
        ],
    )
    await r.go()
    assert (r.work / "ran.txt").read_text() == "hello from SessionStart\n"
    assert [s["source"] for s in r.seen("SessionStart")] == ["startup"]
    assert r.seen("SessionStart")[0]["model"] == "table:cc"
    assert [c.text for c in r.journal.of(HookContext)] == ["branch: main"]
    assert "CLAUDE_ENV_FILE=" in (r.work / "env-SessionStart.txt").read_text()
    await r.go()  # a later run of the same thread (after an approval, a restart)
    assert [s["source"] for s in r.seen("SessionStart")] == ["startup", "resume", "resume"]


@pytest.mark.anyio
async def test_stop_failure_and_session_end(tmp_path: Path) -> None:
    rec = record(tmp_path)
    r = setup(tmp_path, [], [cc("StopFailure", rec), cc("SessionEnd", rec)])
    r.model.fail = ModelAuthError("401 invalid x-api-key")
    assert (await r.go()).status == "failed"
    (failure,) = r.seen("StopFailure")
    assert failure["error"] == "authentication_failed"
    assert "invalid x-api-key" in failure["last_assistant_message"]
    assert r.seen("SessionEnd")[0]["reason"] == "other"


# -- handlers -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_exec_form_substitutes_placeholders_as_plain_strings(tmp_path: Path) -> None:
    plugin = tmp_path / "plug in"
    (plugin / "scripts").mkdir(parents=True)
    say = script(tmp_path, "say.py", "#!/usr/bin/env python3\nimport sys\nprint(sys.argv[1:])\n")
    (plugin / "scripts" / "say.py").write_text(Path(say).read_text())
    hook = cc(
        "SessionStart",
        "python3",
        args=("${CLAUDE_PLUGIN_ROOT}/scripts/say.py", "${CLAUDE_PROJECT_DIR}", "$(no shell)"),
        plugin_root=str(plugin),
        plugin_name="plug",
    )
    r = setup(tmp_path, [answer("ok")], [hook])
    await r.go()
    (ctx,) = r.journal.of(HookContext)
    assert ctx.text == str([str(r.work), "$(no shell)"])


@pytest.mark.anyio
async def test_system_message_is_kept_for_the_person_not_the_model(tmp_path: Path) -> None:
    r = setup(
        tmp_path,
        [bash("echo a"), answer("ok")],
        [cc("PreToolUse", record(tmp_path))],
        answers={"PreToolUse": '0 {"systemMessage": "heads up: prod"}'},
    )
    await r.go()
    assert r.journal.of(HookRan)[0].system_message == "heads up: prod"
    assert not any("heads up" in str(m) for m in r.model.sent[-1])


@pytest.mark.anyio
async def test_an_async_hook_cannot_block_and_speaks_at_the_next_model_call(
    tmp_path: Path,
) -> None:
    context = '{"hookSpecificOutput": {"additionalContext": "tests passed in the background"}}'
    r = setup(
        tmp_path,
        [bash("echo a >> ran.txt", "t1"), bash("sleep 1", "t2"), answer("ok")],
        [
            cc("PreToolUse", "echo no >&2; exit 2", run_async=True),
            cc("PostToolUse", f"sleep 0.3; echo '{context}'", "Bash", run_async=True),
        ],
    )
    await r.go()
    assert r.ran() == ["a"]
    # The first call's hook finished while the second call ran: the third model call reads it.
    assert not any("tests passed" in str(m) for m in r.model.sent[1])
    assert any("tests passed in the background" in str(m) for m in r.model.sent[2])


@pytest.mark.anyio
async def test_an_async_rewake_hook_that_exits_2_sends_the_model_back(tmp_path: Path) -> None:
    r = setup(
        tmp_path,
        [bash("echo a", "t1"), answer("all good"), answer("fixed it")],
        [
            cc(
                "PostToolUse",
                "sleep 0.3; echo 'build broke' >&2; exit 2",
                run_async=True,
                async_rewake=True,
            )
        ],
    )
    assert (await r.go()).status == "completed"
    assert len(r.model.sent) == 3
    assert any("build broke" in str(m) for m in r.model.sent[2])


@pytest.mark.anyio
async def test_an_async_hook_still_running_at_the_end_is_killed(tmp_path: Path) -> None:
    r = setup(
        tmp_path,
        [answer("ok")],
        [cc("SessionStart", "sleep 30; touch late", run_async=True)],
    )
    with anyio.fail_after(10):
        assert (await r.go()).status == "completed"
    assert any("still running; killed" in n.text for n in r.journal.of(Note))
    assert not (r.work / "late").exists()


# -- hooks as the public collections write them -------------------------------------------------

needs_jq = pytest.mark.skipif(shutil.which("jq") is None, reason="jq missing: apt-get install jq")

BLOCK_RM = """#!/bin/bash
# The shape of the hooks reference's block-rm.sh: jq, then a deny decision as JSON.
COMMAND=$(jq -r '.tool_input.command')
if echo "$COMMAND" | grep -q 'rm -rf'; then
  jq -n '{hookSpecificOutput: {hookEventName: "PreToolUse", permissionDecision: "deny",
          permissionDecisionReason: "Destructive command blocked by hook"}}'
else
  exit 0
fi
"""


@needs_jq
@pytest.mark.anyio
async def test_the_references_block_rm_hook_runs_unchanged(tmp_path: Path) -> None:
    guard = script(tmp_path, "block-rm.sh", BLOCK_RM)
    hook = cc("PreToolUse", '"$CLAUDE_PROJECT_DIR"/../hooks/block-rm.sh', "Bash")
    assert Path(guard).exists()
    r = setup(
        tmp_path,
        [bash("echo ok >> ran.txt", "t1"), bash("rm -rf ran.txt", "t2"), answer("done")],
        [hook],
        profile=Profile.from_json([{"allow": ["Bash"]}]),
    )
    await r.go()
    assert r.ran() == ["ok"]
    denied = [o for o in r.journal.of(ToolOutput) if o.status == "denied"]
    assert len(denied) == 1 and "Destructive command blocked by hook" in denied[0].output
