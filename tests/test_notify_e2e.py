"""Hook actions and notifications through the real CLI and daemon, to a real webhook server
on 127.0.0.1 (Apprise's json:// and form://)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Daemon, Env, wait_for
from webhook import Webhook, free_port, serve

PASSWORD = "hunter2-s3cret-pw"


@pytest.fixture
def hook() -> Iterator[Webhook]:
    with serve(Webhook()) as h:
        yield h


def settings(env: Env, targets: dict[str, Any], **notify: Any) -> None:
    lines = ["[notify]"]
    for key, value in notify.items():
        lines.append(f"{key} = {json.dumps(value)}")
    lines.append("[notify.targets]")
    for name, urls in targets.items():
        lines.append(f"{name} = {json.dumps(urls)}")
    path = env.work / "settings.toml"
    path.write_text("\n".join(lines) + "\n")
    env.extra["SUPERVISE_CONFIG"] = str(path)


def hooks(env: Env, *items: dict[str, Any], agent: dict[str, Any] | None = None) -> Path:
    body: dict[str, Any] = {"hooks": list(items)}
    if agent:
        body["agent"] = agent
    return env.write("hooks.yaml", yaml.safe_dump(body))


def actions(env: Env) -> list[dict[str, Any]]:
    """The outbox as `notify list --json` shows it, read here (a CLI start per poll
    would take the CPU the daemon needs)."""
    from state.outbox import list_actions
    from supervisor.notifycli import action_json

    return [action_json(a) for a in env._read(list_actions)]


def wait_actions(
    env: Env, done: Callable[[list[dict[str, Any]]], bool], what: str, timeout: float = 15.0
) -> list[dict[str, Any]]:
    return wait_for(lambda: actions(env), done, timeout=timeout, what=what)


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_fire_notifies_json_and_form_targets_with_the_matched_line(
    env: Env, start_daemon: Callable[..., Daemon], hook: Webhook
) -> None:
    secret = hook.url(auth=f"bob:{PASSWORD}@", path="/json")
    settings(env, {"ops": secret, "team": [hook.url("form", "/form")]})
    hf = hooks(
        env,
        {"name": "deadlock", "on_output_match": {"pattern": "deadlock"}, "notify": ["ops", "team"]},
    )
    d = start_daemon()
    env.run_d(
        *py("print('starting'); print('deadlock detected in worker 7', flush=True)"), hooks=hf
    )
    posts = hook.wait(2)
    by_path = {p.path: p.fields for p in posts}
    assert set(by_path) == {"/json", "/form"}
    for fields in by_path.values():
        assert "hook deadlock fired" in fields["title"]
        assert "Matched line: deadlock detected in worker 7" in fields["message"]
        assert "starting" in fields["message"]  # the last lines
    wait_actions(env, lambda rs: all(r["status"] == "done" for r in rs), "sent")
    rows = json.loads(env.cli("notify", "list", "--json", check=True).stdout)
    assert [(r["target"], r["attempts"]) for r in rows] == [("ops", 1), ("team", 1)]
    # The fire is recorded as acted on, with no thread: the hook has no instructions.
    (fire,) = env.fires()
    assert fire["spawned"] is False and fire["reason"] is None
    assert not env.seen_threads()
    # A target URL's password is shown nowhere.
    shown = env.cli("notify", "targets", check=True).stdout
    assert PASSWORD not in shown and "bob:" in shown
    assert PASSWORD not in env.cli("notify", "list", check=True).stdout
    assert PASSWORD not in d.log.read_text()


def test_a_fire_notice_names_the_thread_it_spawned(
    env: Env, start_daemon: Callable[..., Daemon], hook: Webhook
) -> None:
    settings(env, {"ops": hook.url()})
    turns = env.write("turns.yaml", yaml.safe_dump({"turns": [{"content": "Seen."}]}))
    hf = hooks(
        env,
        {"name": "crashed", "on_exit": {}, "instructions": "Find out why.", "notify": "ops"},
        agent={"model": f"scripted:{turns.name}"},
    )
    start_daemon()
    env.run_d(*py("import sys; sys.exit(3)"), hooks=hf)
    (post,) = hook.wait(1)
    message = post.fields["message"]
    assert "Thread t1 was spawned to look into it: `supervise thread show t1`." in message


def test_approval_and_finished_threads_notify_with_the_commands_and_the_answer(
    env: Env, start_daemon: Callable[..., Daemon], hook: Webhook
) -> None:
    settings(env, {"ops": hook.url()}, on=["approval", "thread_finished"], default="ops")
    turns = env.write(
        "turns.yaml",
        yaml.safe_dump(
            {
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "Write", "arguments": {"path": "fix.txt", "content": "x"}}
                        ]
                    },
                    {"content": "Diagnosis: the config file was missing; I wrote fix.txt."},
                ]
            }
        ),
    )
    hf = hooks(
        env,
        {"name": "crashed", "on_exit": {"exit_codes": [3]}, "instructions": "Find out why."},
        agent={"model": f"scripted:{turns.name}", "permissions": {"ask": ["Write"]}},
    )
    start_daemon()
    env.run_d(*py("import sys; sys.exit(3)"), hooks=hf)
    (approval,) = hook.wait(1)
    assert approval.fields["title"] == "supervise: t1 needs approval"
    message = approval.fields["message"]
    assert "Write(fix.txt)" in message
    assert "supervise approve t1" in message and "supervise deny t1" in message
    env.cli("approve", "t1", check=True)
    posts = hook.wait(2)
    assert posts[1].fields["title"] == "supervise: t1 completed"
    assert "Diagnosis: the config file was missing; I wrote fix.txt." in posts[1].fields["message"]
    rows = wait_actions(env, lambda rs: len(rs) == 2 and rs[1]["status"] == "done", "recorded")
    assert [(r["event"], r["thread_id"]) for r in rows] == [
        ("approval", "t1"),
        ("thread_finished", "t1"),
    ]


def test_a_failing_server_is_retried_and_the_notification_arrives_once(
    env: Env, start_daemon: Callable[..., Daemon]
) -> None:
    with serve(Webhook(fail_first=2)) as hook:
        settings(env, {"ops": hook.url()}, on=["fire"], default="ops")
        hf = hooks(env, {"name": "ended", "on_exit": {}, "notify": "ops"})
        start_daemon()
        env.run_d(*py("print('bye')"), hooks=hf)
        (row,) = wait_actions(env, lambda rs: bool(rs) and rs[0]["status"] == "done", "sent")
        assert hook.refused == 2
        assert len(hook.posts) == 1  # own target and default are one: sent once
        assert row["attempts"] == 3 and row["last_error"] is None


def test_a_hanging_target_does_not_delay_other_fires_or_targets(
    env: Env, start_daemon: Callable[..., Daemon], hook: Webhook
) -> None:
    with serve(Webhook(hang=True)) as stuck:
        settings(env, {"stuck": stuck.url(), "ops": hook.url()})
        hf = hooks(
            env,
            {
                "name": "first",
                "on_output_match": {"pattern": "^one$"},
                "notify": ["stuck", "ops"],
            },
            {"name": "second", "on_output_match": {"pattern": "^two$"}, "notify": "ops"},
        )
        start_daemon()
        code = "import time; print('one', flush=True); time.sleep(0.5); print('two', flush=True)"
        env.run_d(*py(code), hooks=hf)
        posts = hook.wait(2, timeout=3.0)  # within Apprise's 4 s read timeout of `stuck`
        assert ["first" in p.fields["title"] for p in posts] == [True, False]
        assert len(env.seen_fires()) == 2
        rows = actions(env)
        stuck_row = next(r for r in rows if r["target"] == "stuck")
        assert stuck_row["status"] == "pending"  # still trying, in its own task


def test_run_gets_the_facts_as_variables_and_never_executes_the_line(
    env: Env, start_daemon: Callable[..., Daemon]
) -> None:
    script = (
        'printf "%s" "$SUPERVISE_MATCHED_LINE" > line.txt; '
        "env | grep ^SUPERVISE_ | sort > facts.txt; pwd > where.txt; echo done-ok"
    )
    hf = hooks(
        env,
        {"name": "hostile", "on_output_match": {"pattern": "ERROR"}, "run": script},
        {
            "name": "exited",
            "on_exit": {},
            "run": ["sh", "-c", 'echo "$SUPERVISE_EXIT_CODE" > code.txt'],
        },
    )
    start_daemon()
    line = "ERROR $(touch pwned) `touch pwned2`; touch pwned3"
    proc = env.run_d(*py(f"import sys; print({line!r}, flush=True); sys.exit(4)"), hooks=hf)
    rows = wait_actions(
        env, lambda rs: len(rs) == 2 and all(r["status"] == "done" for r in rs), "both ran"
    )
    assert (env.work / "line.txt").read_text() == line
    assert not list(env.work.glob("pwned*"))
    facts = dict(line.split("=", 1) for line in (env.work / "facts.txt").read_text().splitlines())
    assert facts["SUPERVISE_HOOK"] == "hostile"
    assert facts["SUPERVISE_TRIGGER"] == "on_output_match"
    assert facts["SUPERVISE_PROCESS_ID"] == str(proc["id"])
    assert facts["SUPERVISE_FIRE_ID"] == str(rows[0]["fire_id"])
    assert Path(facts["SUPERVISE_OUTPUT"]).read_text().startswith("ERROR $(touch pwned)")
    assert (env.work / "where.txt").read_text().strip() == str(env.work)  # the process's cwd
    assert (env.work / "code.txt").read_text().strip() == "4"
    assert rows[0]["result"].startswith("exit 0\ndone-ok")


def test_restart_true_restarts_the_process_once(
    env: Env, start_daemon: Callable[..., Daemon]
) -> None:
    hf = hooks(env, {"name": "wedged", "on_output_match": {"pattern": "WEDGED"}, "restart": True})
    start_daemon()
    code = (
        "import os, time\n"
        "first = not os.path.exists('seen')\n"
        "open('seen', 'a').write('x')\n"
        "print('WEDGED' if first else 'fine', flush=True)\n"
        "time.sleep(60)\n"
    )
    first = env.run_d(*py(code), hooks=hf)["id"]

    def runs() -> list[Any]:
        return [p for p in env.seen_processes() if p.first_id == first]

    chain = wait_for(
        runs, lambda rs: len(rs) == 2 and rs[1].state == "running", what="run 2 running"
    )
    assert chain[0].state != "running"
    (row,) = wait_actions(env, lambda rs: bool(rs) and rs[0]["status"] == "done", "restarted")
    assert row["action"] == "restart"
    time.sleep(0.5)  # a second restart would have been recorded by now
    assert len(runs()) == 2
    assert (env.work / "seen").read_text() == "xx"
    # A hook restarted it, not a person; counted as an automatic restart.
    ended, second = sorted(runs(), key=lambda p: p.run_no)
    assert (ended.stop_request, second.cause) == ("hook", "restart")
    assert "restarted by a hook" in env.cli("ps", "--all", check=True).stdout


def test_a_hook_that_restarts_every_run_ends_in_a_crash_loop(
    env: Env, start_daemon: Callable[..., Daemon]
) -> None:
    # on_exit + restart: true on a process that always fails: without a bound it would
    # restart forever. It counts as the restart policy's restarts do (max_restarts 2 here).
    hf = env.write(
        "loop.json",
        json.dumps(
            {
                "hooks": [{"name": "again", "on_exit": {}, "restart": True}],
                "restart": {"policy": "no", "max_restarts": 2, "within": "1h"},
            }
        ),
    )
    start_daemon()
    first = env.run_d("sh", "-c", "exit 1", hooks=hf)["id"]
    rows = wait_actions(
        env,
        lambda rs: len(rs) == 3 and all(r["status"] == "done" for r in rs),
        "three restart actions settled",
    )
    assert [r["result"].split(" (")[0] for r in rows][-1].startswith("not restarted: crash loop")
    time.sleep(0.5)  # a fourth run would have been recorded by now
    chain = sorted((p for p in env.seen_processes() if p.first_id == first), key=lambda p: p.run_no)
    assert [p.cause for p in chain] == ["run", "restart", "restart"]


def test_undone_actions_are_done_once_after_a_daemon_sigkill(
    env: Env, start_daemon: Callable[..., Daemon]
) -> None:
    port = free_port()  # nothing listens yet: the send fails, the row stays pending
    url = f"json://127.0.0.1:{port}/hook"
    settings(env, {"ops": url}, attempts=50)
    started = env.work / "started.txt"
    hf = hooks(
        env,
        {"name": "ended", "on_exit": {}, "notify": "ops"},
        {
            "name": "slow",
            "on_output_match": {"pattern": "go"},
            "run": f"echo start >> {started}; sleep 30; echo end >> {started}",
        },
    )
    d = start_daemon()
    env.run_d(*py("print('go', flush=True)"), hooks=hf)
    wait_actions(
        env,
        lambda rs: len(rs) == 2 and all(r["attempts"] >= 1 for r in rs),
        "the send tried and the command started",
    )
    d.kill()  # SIGKILL: the notification is pending, the command runs
    with serve(Webhook(port=port)) as hook:
        start_daemon()
        hook.wait(1)
        rows = wait_actions(
            env, lambda rs: all(r["status"] in ("done", "failed") for r in rs), "settled"
        )
        time.sleep(0.3)  # a second send would have come by now
        assert len(hook.posts) == 1
    notify = next(r for r in rows if r["action"] == "notify")
    run = next(r for r in rows if r["action"] == "run")
    assert notify["status"] == "done"
    # At most once: started before the kill, never started again.
    assert run["status"] == "failed" and "not run again" in run["last_error"]
    assert started.read_text() == "start\n"


def test_a_crash_loop_notifies_the_default_target(
    env: Env, start_daemon: Callable[..., Daemon], hook: Webhook
) -> None:
    settings(env, {"ops": hook.url()}, on=["crash_loop"], default="ops")
    body = {
        "hooks": [{"name": "x", "on_exit": {"exit_codes": [0]}, "run": "true"}],
        "restart": {"policy": "always", "delay": "0s", "max_restarts": 1, "within": "1m"},
    }
    hf = env.write("hooks.yaml", yaml.safe_dump(body))
    start_daemon()
    first = env.run_d(*py("import sys; sys.exit(2)"), hooks=hf)["id"]
    (post,) = hook.wait(1)
    assert post.fields["title"].endswith("is in a crash loop")
    assert "it is no longer restarted" in post.fields["message"]
    assert "supervise restart" in post.fields["message"]
    assert env.wait_state(first, "crash-loop", "exited", "failed")


def test_over_the_rate_the_rest_goes_as_one_message(
    env: Env, start_daemon: Callable[..., Daemon], hook: Webhook
) -> None:
    settings(env, {"ops": hook.url()}, rate="2/minute")
    hf = hooks(
        env,
        {"name": "err", "on_output_match": {"pattern": "^err"}, "notify": "ops", "max_spawns": 9},
    )
    # The daemon comes after the output: its first read finds the four lines at once.
    env.extra["SUPERVISE_AUTOSTART"] = "0"
    first = env.run_d(*py("print('err 1\\nerr 2\\nerr 3\\nerr 4', flush=True)"), hooks=hf)
    output = env.home / "runs" / str(first["id"]) / "output.log"
    wait_for(lambda: output.read_text(), lambda text: "err 4" in text, what="the output")
    start_daemon()
    rows = wait_actions(
        env, lambda rs: len(rs) == 4 and all(r["status"] == "done" for r in rs), "all done"
    )
    posts = hook.wait(2)
    time.sleep(0.3)  # a third message would have come by now
    assert len(hook.posts) == 2  # the rate: two messages a minute, every event in them
    assert "err 1" in posts[0].fields["message"]
    assert posts[1].fields["title"].endswith("(and 2 more events)")
    assert "err 2" in posts[1].fields["message"]
    assert "err 3" in posts[1].fields["message"] and "err 4" in posts[1].fields["message"]
    carried = [r for r in rows if r["batch"] is not None]
    assert len(carried) == 2 and {r["batch"] for r in carried} == {rows[1]["id"]}
