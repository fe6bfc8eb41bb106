"""Hook actions (notify, run, restart) in hook files and launch records; the pure parts of
notifications (who, what, when to send, when to retry); the outbox on a real database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_threads.loop import LoopEnd
from agent_threads.transcript import AssistantReply, Entry, UserText
from state.db import Store
from state.outbox import (
    ActionWrite,
    add_actions,
    due_actions,
    interrupted,
    list_actions,
    next_due,
    sent_since,
    settle,
    start_once,
)
from state.ratelimit import Rate
from state.settings import load_settings
from state.threads import ThreadRecord
from supervise.errors import HookFileError, SettingError
from supervisor.delivery import coalesced, plan_sends, retry_delay
from supervisor.hookactions import FireFactsEnv, RunCommand, run_env
from supervisor.hookfile import load_hook_file, parse_hook_text
from supervisor.hookspec import Hook, HookFile, OnExit
from supervisor.notices import Route, final_answer, thread_actions
from supervisor.notifysend import mask_url


def problems(text: str) -> list[str]:
    with pytest.raises(HookFileError) as err:
        parse_hook_text(text, "h.yaml")
    return err.value.problems


ACTIONS = """\
hooks:
  - name: told
    on_exit: {}
    notify: ops
  - name: many
    on_output_match: {pattern: boom}
    notify: [ops, team]
    run: [notify-send, boom]
    restart: true
    instructions: Look.
  - name: timed
    on_exit: {}
    run: {command: "echo $SUPERVISE_HOOK", timeout: 5}
"""


def test_actions_parse_and_a_hook_without_instructions_has_no_agent() -> None:
    told, many, timed = parse_hook_text(ACTIONS, "h.yaml").hooks
    assert (told.notify, told.instructions, told.spawns_thread) == (("ops",), "", False)
    assert many.notify == ("ops", "team") and many.restart and many.spawns_thread
    assert many.run == RunCommand(argv=("notify-send", "boom"))
    assert timed.run == RunCommand(shell="echo $SUPERVISE_HOOK", timeout=5.0)
    assert timed.run.args() == ["/bin/sh", "-c", "echo $SUPERVISE_HOOK"]


def test_actions_round_trip_and_old_records_still_read() -> None:
    hf = parse_hook_text(ACTIONS, "h.yaml")
    again = HookFile.from_json(json.loads(json.dumps(hf.to_json())))
    assert again.hooks == hf.hooks
    old = {"name": "x", "on_exit": {"exit_codes": None}, "instructions": "Look.", "max_spawns": 1}
    hook = Hook.from_json(old)
    assert hook == Hook("x", OnExit(), "Look.")
    assert hook.to_json() == old  # a hook with no actions writes what it always wrote


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("notify: 3", "h.yaml:4: hooks[0].notify must be a target name or a non-empty list"),
        ("notify: [ops, 'json://x']", "h.yaml:4: hooks[0].notify[1] must be a target name"),
        ("run: ''", "h.yaml:4: hooks[0].run must be a non-empty command"),
        ("run: {command: x, timeout: 0}", "h.yaml:4: hooks[0].run.timeout must be a number"),
        ("run: {cmd: x}", "h.yaml:4: unknown key 'cmd' in hooks[0].run"),
        ("restart: 'yes'", "h.yaml:4: hooks[0].restart must be true or false"),
        ("restart: false", "h.yaml:2: hooks[0] has no instructions;"),
    ],
)
def test_bad_actions_are_errors_at_their_line(body: str, message: str) -> None:
    text = f"hooks:\n  - name: a\n    on_exit: {{}}\n    {body}\n"
    found = problems(text)
    assert any(p.startswith(message) for p in found), found


def test_a_hook_with_neither_actions_nor_instructions_says_how_to_fix_it() -> None:
    (p,) = problems("hooks:\n  - on_exit: {}\n")
    assert p.startswith("h.yaml:2: hooks[0] has no instructions;")
    assert p.endswith(
        "or give the hook an action instead: notify: TARGET, run: COMMAND or restart: true"
    )


def test_notify_must_name_a_target_of_the_settings(tmp_path: Path) -> None:
    f = tmp_path / "h.yaml"
    f.write_text(ACTIONS)
    assert load_hook_file(f, notify_targets=["ops", "team"]).hooks[0].notify == ("ops",)
    with pytest.raises(HookFileError) as err:
        load_hook_file(f, notify_targets=["ops"])
    (p,) = err.value.problems
    assert p.startswith(f"{f}:7: hooks[1].notify: no target 'team' in the settings file's")


def test_run_env_carries_the_facts_as_variables_only() -> None:
    facts = FireFactsEnv("h", "on_output_match", 3, "job", 9, "/r/3/output.log", None, "$(rm x)")
    env = run_env({"PATH": "/bin", "SUPERVISE_EXIT_CODE": "stale"}, facts)
    assert env["SUPERVISE_MATCHED_LINE"] == "$(rm x)"
    assert "SUPERVISE_EXIT_CODE" not in env  # no exit: not a stale value from outside
    assert (env["SUPERVISE_PROCESS_ID"], env["SUPERVISE_FIRE_ID"], env["PATH"]) == (
        "3",
        "9",
        "/bin",
    )
    assert RunCommand(argv=("echo", "hi")).args() == ["echo", "hi"]


def test_plan_sends_keeps_the_rate_and_coalesces_the_rest() -> None:
    rate = Rate(3, 60.0)
    assert plan_sends([1, 2], [], rate, 100.0).alone == (1, 2)
    # One message left in the window: it carries all four.
    plan = plan_sends([1, 2, 3, 4], [50.0, 60.0], rate, 100.0)
    assert (plan.alone, plan.together) == ((), (1, 2, 3, 4))
    plan = plan_sends([1, 2, 3, 4], [], rate, 100.0)
    assert (plan.alone, plan.together) == ((1, 2), (3, 4))
    # The window is full: wait until its oldest message is a window old.
    assert plan_sends([1], [50.0, 60.0, 70.0], rate, 100.0).wait_until == 110.0
    assert plan_sends([1], [10.0, 60.0, 70.0], rate, 100.0).alone == (1,)  # 10.0 is out of it
    title, body = coalesced(["A", "B", "C"], ["body A", "body B", "body C"])
    assert title == "A (and 2 more events)"
    assert body.startswith("body A") and "- body B\n- body C" in body


def test_retries_back_off_and_are_capped() -> None:
    assert [retry_delay(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert retry_delay(40) == 300.0


def test_a_target_url_is_shown_with_its_secrets_masked() -> None:
    shown = mask_url("json://bob:hunter2-secret@127.0.0.1:8080/path")
    assert "hunter2-secret" not in shown and "127.0.0.1:8080" in shown
    slack = mask_url("slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ")
    assert "TIiajkdnlazkcOXrIdevi7FQ" not in slack and slack.startswith("slack://")
    odd = mask_url("nosuchservice://user:pw12345@host/tok")
    assert "pw12345" not in odd and "tok" not in odd


def thread(status: str = "running") -> ThreadRecord:
    return ThreadRecord(
        id=4,
        process_id=2,
        hook="crashed",
        trigger="on_exit",
        depth=1,
        status=status,  # type: ignore[arg-type]
        created_at=1.0,
        not_before=1.0,
        prompt="p",
        fire_id=1,
        model=None,
        cwd=None,
        permissions=None,
        error=None,
        waiting=None,
        turns=1,
        segment_started_at=None,
        ended_at=None,
        parent_thread_id=None,
        hooks=None,
    )


def test_thread_notices_name_the_commands_and_carry_the_final_answer() -> None:
    route = Route(frozenset({"approval", "thread_finished"}), ("ops",))
    entries = [
        Entry(1, 1.0, UserText("go")),
        Entry(2, 2.0, AssistantReply("The disk is full: /var/log grew to 40 GB.")),
    ]
    (wait,) = thread_actions(
        thread(), LoopEnd("waiting_approval", waiting="Bash(rm x)"), [], route, ()
    )
    assert wait.event == "approval" and "Bash(rm x)" in wait.body
    assert "supervise approve t4" in wait.body and "supervise deny t4" in wait.body
    (done,) = thread_actions(thread(), LoopEnd("completed"), entries, route, ("ops",))
    assert done.title == "supervise: t4 completed" and done.target == "ops"
    assert "The disk is full: /var/log grew to 40 GB." in done.body
    assert final_answer(entries[:1]) is None
    # Not in `on`, and the hook names no target: nothing to tell.
    assert thread_actions(thread(), LoopEnd("completed"), entries, Route(), ()) == ()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[notify]\nbogus = 1\n", "notify.bogus is not a notify setting"),
        ('[notify.targets]\nops = "no-scheme"\n', "notify.targets.ops must be an Apprise URL"),
        ('[notify]\non = ["fire"]\ndefault = "ops"\n', "notify.default names no target 'ops'"),
        ('[notify]\non = ["fires"]\n', "notify.on names no event 'fires'"),
        ('[notify]\nrate = "often"\n', "notify.rate must be a rate"),
        ("[notify]\nattempts = 0\n", "notify.attempts must be a whole number"),
    ],
)
def test_bad_notify_settings_name_the_key(tmp_path: Path, text: str, says: str) -> None:
    cfg = tmp_path / "settings.toml"
    cfg.write_text(text)
    with pytest.raises(SettingError) as err:
        load_settings({"SUPERVISE_CONFIG": str(cfg)})
    assert f"{cfg}: {says}" in str(err.value)
    # Never the value: a URL holds its token.
    cfg.write_text('[notify.targets]\nops = ["ntfy://x/secrettopic", 5]\n')
    with pytest.raises(SettingError) as err:
        load_settings({"SUPERVISE_CONFIG": str(cfg)})
    assert "secrettopic" not in str(err.value)


def test_the_outbox_on_a_real_database(store: Store) -> None:
    add_actions(
        store,
        [
            ActionWrite("fire", "notify", "ops", "t1", "b1", process_id=1),
            ActionWrite("fire", "run", None, "run", data="{}", process_id=1),
            ActionWrite("fire", "notify", "ops", "t2", "b2", process_id=1),
        ],
        100.0,
    )
    n1, run, n2 = due_actions(store, 100.0)
    assert due_actions(store, 99.0) == []
    assert [a.id for a in due_actions(store, 100.0, skip=[run.id])] == [n1.id, n2.id]
    # run: started once, committed; a second start is refused.
    assert start_once(store, run.id) and not start_once(store, run.id)
    # A send failed: pending again later, the attempt counted.
    settle(store, n1.id, "pending", 101.0, error="HTTP 500", next_at=105.0)
    assert next_due(store) == 100.0 and next_due(store, skip=[n2.id]) == 105.0
    # One message carried n1 and n2: both done, one message counted by the rate.
    settle(store, n1.id, "done", 106.0, result="sent", batch=[n2.id])
    assert sent_since(store, "ops", 0.0) == [106.0]
    # The daemon died while the command ran: failed, never run again.
    (gone,) = interrupted(store, 200.0)
    assert gone.id == run.id
    rows = {a.id: a for a in list_actions(store)}
    assert (rows[n1.id].status, rows[n1.id].attempts, rows[n1.id].last_error) == ("done", 2, None)
    assert (rows[n2.id].status, rows[n2.id].batch) == ("done", n1.id)
    assert rows[run.id].status == "failed" and "not run again" in (rows[run.id].last_error or "")
    assert [a.id for a in list_actions(store, 1)] == [n2.id]
