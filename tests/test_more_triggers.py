"""on_silence, on_schedule, on_resource: a real daemon, the real CLI, real children.

on_schedule runs the daemon under libfaketime with its wall clock started just before a
cron time (`FAKETIME=@...`, the monotonic and boot clocks left real): the cron time comes in
a second or two, and each daemon start picks the moment the scenario needs.
"""

from __future__ import annotations

import calendar
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon, Env, wait_for, wait_until
from fakes_supervisor import FakeClock

from supervisor import resources, schedule, silence
from supervisor.clocks import Instant
from supervisor.hookspec import Hook, HookFile, OnResource, OnSchedule, OnSilence

FAKETIME = next(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"), Path("/no/libfaketime.so.1"))


def _hooks(env: Env, hooks: list[dict[str, Any]], name: str = "hooks.json") -> Path:
    body = {"hooks": hooks, "agent": {"model": "scripted:turns.yaml"}}
    env.write("turns.yaml", 'turns:\n  - content: "Diagnosis: seen."\n')
    return env.write(name, json.dumps(body))


def _t(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


def _first_message(env: Env, tid: str) -> str:
    data = json.loads(env.cli("thread", "show", tid, "--json", check=True).stdout)
    text: str = data["entries"][0]["text"]
    return text


# -- on_silence ----------------------------------------------------------------------------

# Prints for ~1.5 s (a line every 0.2 s: never 1 s apart), then waits, silent, for `go`;
# then prints once more and stays silent.
FLOW_THEN_SILENT = """
import os, sys, time
for i in range(8):
    print(f"tick {i} {time.time()}", flush=True)
    time.sleep(0.2)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
print(f"again {time.time()}", flush=True)
time.sleep(120)
"""


def test_on_silence_fires_after_the_quiet_period_once_per_silent_stretch(
    env: Env, daemon: Daemon
) -> None:
    hooks = _hooks(
        env,
        [
            {
                "name": "stuck",
                "on_silence": {"seconds": 1},
                "instructions": "Why stuck?",
                "max_spawns": 5,
            },
            # A marker: when it fires, `stuck` had 2 s more to fire twice for one stretch.
            {"name": "marker", "on_silence": {"seconds": 3}, "instructions": "x", "max_spawns": 5},
        ],
    )
    go = env.work / "go"
    pid = env.run_d(sys.executable, "-c", FLOW_THEN_SILENT, str(go), hooks=hooks)["id"]
    first = env.wait_fires(1, what="the first silence")[0]
    out = env.cli("logs", str(pid), check=True).stdout.split()
    last_tick = float(out[-1])  # the flow's last line
    assert (first["hook"], first["trigger"], first["spawned"]) == ("stuck", "on_silence", True)
    # Not while output flowed: only a second after the last line.
    assert _t(first["at"]) >= last_tick + 1.0 - 0.05
    assert "Trigger: on_silence (printed nothing for 1 s)" in _first_message(env, "t1")
    fired = env.wait_fires(2, what="the marker")
    assert [f["hook"] for f in fired] == ["stuck", "marker"]  # once per stretch
    go.write_text("")  # new output: a new stretch
    fired = env.wait_fires(4, what="the second stretch's fires")
    assert [f["hook"] for f in fired] == ["stuck", "marker", "stuck", "marker"]
    again = float(env.cli("logs", str(pid), check=True).stdout.split()[-1])
    assert _t(fired[2]["at"]) >= again + 1.0 - 0.05


def test_on_silence_fires_once_across_daemon_kills(env: Env, daemon: Daemon) -> None:
    hooks = _hooks(
        env,
        [
            {"name": "stuck", "on_silence": {"seconds": 2}, "instructions": "x"},
            {"name": "marker", "on_silence": {"seconds": 4}, "instructions": "x"},
        ],
    )
    code = "import time; print('hello', flush=True); time.sleep(120)"
    pid = env.run_d(sys.executable, "-c", code, hooks=hooks)["id"]
    env.wait_state(pid, "running")
    daemon.kill(signal.SIGKILL)  # during the silence, before it fired
    daemon.start()  # the last output's time comes from output.log's mtime
    (fire,) = env.wait_fires(1, what="the silence after a restart")
    started = _t(env.process(pid)["started_at"])
    assert fire["hook"] == "stuck" and _t(fire["at"]) < started + 3.5
    daemon.kill(signal.SIGKILL)  # after it fired, during the same silence
    daemon.start()
    fired = env.wait_fires(2, what="the marker")
    assert [f["hook"] for f in fired] == ["stuck", "marker"]  # `stuck` never twice


# -- on_schedule ---------------------------------------------------------------------------


def _epoch(text: str) -> float:
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M:%S")))


def _fake_daemon(env: Env, start_daemon: Callable[[], Daemon], at: str) -> Daemon:
    """A daemon whose wall clock starts at `at` (UTC) and runs on in real time."""
    env.extra = {
        "LD_PRELOAD": str(FAKETIME),
        "FAKETIME": f"@{at}",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "TZ": "UTC",
    }
    try:
        return start_daemon()
    finally:
        env.extra = {}


NIGHTLY = {
    "name": "nightly",
    "on_schedule": {"cron": "0 3 * * *", "timezone": "UTC"},
    "instructions": "Look at the log.",
}


@pytest.fixture
def faketime() -> None:
    if not FAKETIME.exists():
        pytest.skip("needs libfaketime (apt-get install faketime) to set the daemon's clock")


@pytest.mark.usefixtures("faketime")
def test_on_schedule_fires_at_each_cron_time_and_never_twice(
    env: Env, start_daemon: Callable[[], Daemon]
) -> None:
    hooks = _hooks(env, [NIGHTLY])
    first = _fake_daemon(env, start_daemon, "2030-01-01 02:59:58")
    code = "import time; print('serving', flush=True); time.sleep(300)"
    pid = env.run_d(sys.executable, "-c", code, hooks=hooks)["id"]
    (fire,) = env.wait_fires(1, what="the 03:00 fire")
    assert _t(fire["at"]) == _epoch("2030-01-01 03:00:00")  # at the cron time
    assert (fire["trigger"], fire["process_id"], fire["spawned"]) == ("on_schedule", pid, True)
    said = "Trigger: on_schedule (scheduled run at 2030-01-01 03:00 UTC (cron 0 3 * * *))"
    assert said in _first_message(env, "t1")
    first.kill(signal.SIGKILL)
    # Back within the same minute: 03:00 is found due again, and not fired twice. (Recovery's
    # first step decides the schedule before the daemon says it is ready.)
    _fake_daemon(env, start_daemon, "2030-01-01 03:00:20").kill(signal.SIGKILL)
    assert len(env.fires()) == 1
    # The next night: fires again, at its time.
    _fake_daemon(env, start_daemon, "2030-01-02 02:59:58")
    fired = env.wait_fires(2, what="the next night's fire")
    assert _t(fired[1]["at"]) == _epoch("2030-01-02 03:00:00")


@pytest.mark.usefixtures("faketime")
def test_on_schedule_a_time_missed_while_down_fires_once_if_recent(
    env: Env, start_daemon: Callable[[], Daemon]
) -> None:
    hooks = _hooks(env, [NIGHTLY])
    first = _fake_daemon(env, start_daemon, "2030-01-01 12:00:00")
    code = "import time; print('serving', flush=True); time.sleep(300)"
    env.run_d(sys.executable, "-c", code, hooks=hooks)
    first.kill(signal.SIGKILL)
    # Down at 03:00, back at 03:20: it fires once, at recovery (decided before the daemon
    # says it is ready), stamped with its scheduled time; back again at 03:25, not again.
    _fake_daemon(env, start_daemon, "2030-01-02 03:20:00").kill(signal.SIGKILL)
    assert [_t(f["at"]) for f in env.fires()] == [_epoch("2030-01-02 03:00:00")]
    _fake_daemon(env, start_daemon, "2030-01-02 03:25:00").kill(signal.SIGKILL)
    # Down for longer than the grace (an hour): the missed time is stale and does not fire.
    _fake_daemon(env, start_daemon, "2030-01-03 05:00:00").kill(signal.SIGKILL)
    assert len(env.fires()) == 1


@pytest.mark.usefixtures("faketime")
def test_on_schedule_is_armed_again_for_a_restarted_run(
    env: Env, start_daemon: Callable[[], Daemon]
) -> None:
    hooks = _hooks(env, [NIGHTLY])
    # The restart well before 03:00 (a restart racing the cron time on a busy machine made
    # the test flaky), then a daemon whose clock reaches 03:00 at once.
    first = _fake_daemon(env, start_daemon, "2030-01-01 02:00:00")
    code = "import time; print('serving', flush=True); time.sleep(300)"
    pid = env.run_d(sys.executable, "-c", code, hooks=hooks, name="web")["id"]
    env.cli("restart", "web", check=True)  # a new run: its own schedule, from its start
    # The daemon starts the next run when the first one's end is recorded: wait for it.
    (second,) = wait_for(
        lambda: [p.id for p in env.seen_processes() if p.state == "running" and p.id != pid],
        bool,
        what="the second run running",
    )
    assert second != pid
    first.kill(signal.SIGKILL)
    _fake_daemon(env, start_daemon, "2030-01-01 02:59:58")
    (fire,) = env.wait_fires(1, what="the 03:00 fire of the second run")
    assert (fire["process_id"], _t(fire["at"])) == (second, _epoch("2030-01-01 03:00:00"))


# -- on_resource ---------------------------------------------------------------------------

# The tree's RSS grows in a grandchild: the sampler measures the child's whole tree.
HOLD = """
import subprocess, sys
code = "import time; b = b'x' * (160 << 20); print('holding', time.time(), flush=True)"
subprocess.run([sys.executable, "-c", code + "; time.sleep(120)"])
"""
SPIKE = """
import time
b = b'x' * (160 << 20)
time.sleep(0.2)
del b
print('freed', flush=True)
time.sleep(120)
"""


def test_on_resource_fires_for_a_tree_over_rss_for_long_enough_and_not_for_a_spike(
    env: Env, daemon: Daemon
) -> None:
    hooks = _hooks(
        env,
        [
            {
                "name": "fat",
                "on_resource": {"rss_mb": 100, "for_seconds": 2},
                "instructions": "Why so big?",
            }
        ],
    )
    spike = env.run_d(sys.executable, "-c", SPIKE, hooks=hooks)["id"]
    wait_until(lambda: "freed" in env.cli("logs", str(spike)).stdout, what="the spike")
    hold = env.run_d(sys.executable, "-c", HOLD, hooks=hooks)["id"]
    (fire,) = env.wait_fires(1, what="the RSS fire")
    held = float(env.cli("logs", str(hold), check=True).stdout.split()[-1])
    assert (fire["hook"], fire["process_id"], fire["trigger"]) == ("fat", hold, "on_resource")
    assert _t(fire["at"]) >= held + 2.0 - 0.1  # held for for_seconds (sampled every second)
    message = _first_message(env, "t1")
    assert "Trigger: on_resource (RSS " in message
    assert "over 100 MB for 2 s (2 processes)" in message
    assert [f["process_id"] for f in env.fires()] == [hold]  # the spike never fired


# -- hooks check and bad values --------------------------------------------------------------


def test_hooks_check_shows_the_new_triggers_and_bad_values_are_file_line_errors(env: Env) -> None:
    ok = env.write(
        "ok.yaml",
        "hooks:\n"
        "  - name: stuck\n    on_silence: {seconds: 300}\n    instructions: x\n"
        "  - name: nightly\n    on_schedule: {cron: '0 3 * * *', timezone: UTC}\n"
        "    instructions: x\n"
        "  - name: fat\n    on_resource: {rss_mb: 500, for_seconds: 30}\n    instructions: x\n",
    )
    out = env.cli("hooks", "check", str(ok), check=True).stdout
    assert "stuck (on_silence: nothing printed for 300s)" in out
    assert "nightly (on_schedule: cron 0 3 * * * UTC; next " in out
    assert "fat (on_resource: RSS over 500 MB for 30s)" in out
    bad = env.write(
        "bad.yaml",
        "hooks:\n"
        "  - name: nightly\n    on_schedule: {cron: '0 25 * * *'}\n    instructions: x\n"
        "  - name: fat\n    on_resource: {for_seconds: 30}\n    instructions: x\n"
        "  - name: stuck\n    on_silence: {seconds: 0}\n    instructions: x\n",
    )
    proc = env.cli("hooks", "check", str(bad))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{bad}:3: hooks[0].on_schedule.cron: cron '0 25 * * *': its hour field '25'" in (
        proc.stderr
    )
    assert f"{bad}:6: hooks[1].on_resource has no threshold" in proc.stderr
    assert f"{bad}:9: hooks[2].on_silence.seconds must be a number of seconds above 0" in (
        proc.stderr
    )
    run = env.cli("run", "--hook", str(bad), "--", "true")
    assert run.returncode == 2 and f"{bad}:3:" in run.stderr


# -- the pure decisions ----------------------------------------------------------------------


def test_schedule_decides_the_latest_recent_time_and_the_wait() -> None:
    cron, start = "*/10 * * * *", _epoch("2030-01-01 02:00:00")
    d = schedule.decide(cron, "UTC", since=start, fired=None, now=_epoch("2030-01-01 02:05:00"))
    assert (d.due, d.wait) == (None, 300.0)
    # Three times passed while down: the latest fires, two are skipped.
    d = schedule.decide(cron, "UTC", since=start, fired=None, now=_epoch("2030-01-01 02:31:00"))
    assert (d.due, d.wait, d.skipped) == (_epoch("2030-01-01 02:30:00"), 540.0, 2)
    # Fired already: not due again. A timer a hair early counts as on time.
    again = schedule.decide(
        cron, "UTC", since=start, fired=d.due, now=_epoch("2030-01-01 02:31:00")
    )
    assert again.due is None
    early = schedule.decide(
        cron, "UTC", since=start, fired=d.due, now=_epoch("2030-01-01 02:40:00") - 0.01
    )
    assert early.due == _epoch("2030-01-01 02:40:00")
    # Within the grace, only the latest of many; older than it: stale. Before the run
    # started: not this run's.
    recent = schedule.decide(cron, "UTC", since=start, fired=None, now=start + 7200 + 60)
    assert recent.due == start + 7200
    late = schedule.decide("0 3 * * *", "UTC", since=start, fired=None, now=start + 3 * 3600)
    assert late.due is None  # 03:00 was 2 h ago: past the hour of grace
    assert schedule.decide(cron, "UTC", since=start + 1, fired=None, now=start + 1).due is None


def test_resource_stretch_fires_once_and_is_armed_again_under_the_threshold() -> None:
    t = OnResource(rss_mb=100, for_seconds=2)
    big, small = resources.Usage(200 << 20, None), resources.Usage(10 << 20, 5.0)
    s = resources.initial(fired_before=False)
    fired = []
    for mono, usage in enumerate([big, big, big, big, small, big, big, big]):
        step = resources.step(t, s, usage, float(mono), 1000.0 + mono)
        s = step.stretch
        fired.append(step.fire)
    assert fired == [False, False, True, False, False, False, False, True]
    # After a restart, a hook that fired before waits for the usage to go under first.
    s = resources.initial(fired_before=True)
    for mono in range(5):
        assert not resources.step(t, s, big, float(mono), 0.0).fire
    cpu = OnResource(cpu_percent=50, for_seconds=0)
    assert resources.step(cpu, resources.Stretch(), resources.Usage(0, 80.0), 0.0, 0.0).fire
    assert not resources.over(cpu, resources.Usage(0, None))  # no CPU figure at first


def test_silence_starts_at_the_last_write_as_a_new_daemon_knows_it() -> None:
    start = Instant(1000.0, 50.0, "b")
    now = Instant(1100.0, 150.0, "b")
    assert silence.last_output(start, 0, 0.0, now) == start  # printed nothing
    at = silence.last_output(start, 10, 1090.0, now)
    assert (at.wall, at.boot) == (1090.0, 140.0)
    assert silence.last_output(start, 10, 500.0, now) == start  # an mtime from before a step
    assert silence.check(5.0, at, now).fire and not silence.check(30.0, at, now).fire


def test_the_sampler_measures_a_whole_tree_and_its_cpu() -> None:
    import subprocess

    from supervisor.sampler import Sampler

    # A shell whose children are a busy loop and a sleeper holding 80 MB.
    busy = f"{sys.executable} -c 'while True: pass'"
    fat = f"{sys.executable} -c 'import time; b = bytes(80 << 20) + b\"x\"; time.sleep(60)'"
    tree = subprocess.Popen(["sh", "-c", f"{busy} & {fat} & wait"], start_new_session=True)
    quiet = subprocess.Popen(["sleep", "60"])
    try:
        sampler = Sampler()
        roots = {1: tree.pid, 2: quiet.pid}
        first = wait_until(
            lambda: (u := sampler.sample(roots))[1].rss_bytes > 80 << 20 and u,
            what="the tree's 80 MB",
        )
        assert first[1].processes == 3 and first[2].processes == 1
        # A kernel without children lists: one pass over every process's parent finds it too.
        assert Sampler(children_lists=False).sample(roots)[1].processes == 3
        time.sleep(0.5)
        later = sampler.sample(roots)
        cpu, idle = later[1].cpu_percent, later[2].cpu_percent
        assert cpu is not None and cpu > 20  # one busy loop (on a loaded machine: a share)
        assert idle is not None and idle < 5
        quiet.kill()
        quiet.wait()
        assert 2 not in sampler.sample(roots)  # gone: no figure
    finally:
        os.killpg(tree.pid, signal.SIGKILL)
        tree.wait()
        quiet.kill()


# -- the tracker on fake clocks: a real state file and run dir, no daemon --------------------


@pytest.fixture
def tracked(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    from fakes_supervisor import Supervised

    from state.db import open_state_store
    from state.paths import StatePaths
    from state.settings import store_settings

    paths = StatePaths(tmp_path / "home").ensure()
    store = open_state_store(paths.db, store_settings({}))
    made: list[Supervised] = []

    def make(hook: Hook, clock: FakeClock) -> Supervised:
        made.append(Supervised(store, paths, HookFile(hooks=(hook,)), clock))
        return made[-1]

    yield make
    for sup in made:
        sup.close()
    store.close()


def test_the_tracker_measures_silence_on_the_boot_clock_once_per_stretch(
    tracked: Callable[..., Any],
) -> None:
    clock = FakeClock()
    sup = tracked(Hook("stuck", OnSilence(10.0), "x", 5), clock)

    def say(data: bytes) -> None:
        sup.write(data)
        os.utime(sup.run.output, (clock.wall, clock.wall))  # written now, on the fake clock

    say(b"hello\n")
    t = sup.tracker()
    assert [(h, round(s, 6)) for h, s in t.step(check_liveness=False).silences] == [("stuck", 10.0)]
    clock.advance(6.0)
    clock.wall -= 3600.0  # the wall clock steps back an hour: the boot clock says 6 s
    early = t.step(check_liveness=False, silences_due=["stuck"])
    assert [(h, round(s, 6)) for h, s in early.silences] == [("stuck", 4.0)] and not sup.fires()
    clock.advance(4.0)
    t.step(check_liveness=False, silences_due=["stuck"])
    assert sup.fires() == [("stuck", f"{sup.id}:stuck:silence@6", "spawned")]
    # A daemon started anew during the same silence (the wall clock set right again): the
    # last output is the file's mtime, the stretch the same, and its fire a duplicate.
    clock.wall += 3600.0
    clock.advance(30.0)
    again = sup.tracker()
    again.step(check_liveness=False)
    again.step(check_liveness=False, silences_due=["stuck"])
    assert len(sup.fires()) == 1
    say(b"more\n")  # new output: a new stretch, armed again
    res = again.read_output()
    assert [h for h, _ in res.silences] == ["stuck"]
    clock.advance(10.0)
    again.step(check_liveness=False, silences_due=["stuck"])
    assert [k for _, k, _ in sup.fires()] == [f"{sup.id}:stuck:silence@{n}" for n in (6, 11)]


def test_the_tracker_fires_each_scheduled_time_once(tracked: Callable[..., Any]) -> None:
    clock = FakeClock(wall=_epoch("2030-01-01 02:59:00"))
    sup = tracked(Hook("nightly", OnSchedule("0 3 * * *", "UTC"), "x", 100), clock)
    t = sup.tracker()
    assert [(h, round(s)) for h, s in t.step(check_liveness=False).schedules] == [("nightly", 60)]
    clock.advance(60.0)
    res = t.step(check_liveness=False, schedules_due=["nightly"])
    three = int(_epoch("2030-01-01 03:00:00"))
    assert sup.fires() == [("nightly", f"{sup.id}:nightly:cron@{three}", "spawned")]
    assert [(h, round(s)) for h, s in res.schedules] == [("nightly", 86400)]
    # A daemon SIGKILLed and started again 30 s later finds 03:00 due again: a duplicate.
    clock.advance(30.0)
    sup.tracker().step(check_liveness=False)
    assert len(sup.fires()) == 1
