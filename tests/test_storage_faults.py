"""Storage faults through the real CLI and a real daemon (issue #13, items 7, 8, 11, 12, 13):
a state directory that is not safely ours, a full disk under the shim, a read-only home,
hook-file limits, timeouts across a wall-clock step."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import Daemon, Env, _kill_supervised, wait_for, wait_until

from state.paths import StatePaths
from state.trust import Entry, judge
from supervise.errors import StateDirError

OTHER_UID = 54321  # no such user: a directory root hands to "someone else"
STATE_COMMANDS = [
    ("run", "-d", "--", "true"),
    ("daemon",),
    ("ps",),
    ("fires",),
    ("logs", "1"),
    ("stop", "1"),
    ("thread", "show", "t1"),
]


def _refused(r: subprocess.CompletedProcess[str], *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)


def _mount_tmpfs(where: Path, options: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=False)
    if r.returncode != 0:
        pytest.skip("needs root to mount a tmpfs (a real small or read-only filesystem)")


def _remount(where: Path, mode: str) -> None:
    # Busy while a killed daemon still closes its files: try again until it has.
    def remount() -> bool:
        cmd = ["mount", "-o", f"remount,{mode}", str(where)]
        return subprocess.run(cmd, capture_output=True, check=False).returncode == 0

    wait_until(remount, what=f"remount {mode} of {where}")


@pytest.fixture
def mounts(env: Env) -> Iterator[Callable[[Path, str], None]]:
    """Mount tmpfs filesystems; at the end, kill what runs from them and unmount."""
    done: list[Path] = []

    def mount(where: Path, options: str) -> None:
        _mount_tmpfs(where, options)
        done.append(where)

    yield mount
    for shim in (env.home / "runs").glob("*/shim.pid"):
        with contextlib.suppress(ProcessLookupError, ValueError, OSError):
            os.kill(int(shim.read_text()), signal.SIGKILL)
    _kill_supervised(env.home)
    for where in reversed(done):
        subprocess.run(["umount", "-l", str(where)], check=False)


def _hooks(env: Env, body: object, name: str = "hooks.json") -> Path:
    return env.write(name, json.dumps(body))


# -- item 7: a state directory is used only if it is safely ours -----------------------------


def test_a_state_dir_owned_by_someone_else_is_refused_by_every_command(env: Env) -> None:
    env.cli("run", "-d", "--", "true", check=True)  # a real state dir, then handed over
    os.chown(env.home, OTHER_UID, OTHER_UID)
    for args in STATE_COMMANDS:
        r = env.cli(*args)
        _refused(r, str(env.home), f"owned by uid {OTHER_UID}", "SUPERVISE_HOME", "chown")
    os.chown(env.home, 0, 0)
    assert env.ps()["processes"][0]["id"] == 1  # nothing recorded was lost


def test_runs_as_a_link_to_another_users_dir_is_refused(env: Env, tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    (theirs / "1").mkdir(parents=True)
    planted = {"hooks": {"agent": {"permissions": {"allow": ["*"]}}}}
    (theirs / "1" / "spec.json").write_text(json.dumps(planted))
    os.chown(theirs, OTHER_UID, OTHER_UID)
    env.home.mkdir(mode=0o700)
    (env.home / "runs").symlink_to(theirs)
    for args in (("run", "-d", "--", "true"), ("daemon",), ("ps",)):
        runs = env.home / "runs"
        _refused(env.cli(*args), f"{runs} is a symbolic link", f"rm {runs} && mkdir -m 700 {runs}")
    assert sorted(p.name for p in theirs.iterdir()) == ["1"]  # no run dir was written there
    assert not (env.home / "state.db").exists()


def test_a_state_db_link_and_group_writable_dirs_are_refused(env: Env, tmp_path: Path) -> None:
    env.cli("run", "-d", "--", "true", check=True)
    env.home.chmod(0o770)
    _refused(env.cli("ps"), f"{env.home} is writable by group or others", f"chmod 700 {env.home}")
    env.home.chmod(0o700)
    runs = env.home / "runs"
    runs.chmod(0o777)
    _refused(env.cli("run", "-d", "--", "true"), f"chmod 700 {runs}")
    runs.chmod(0o700)
    db = env.home / "state.db"
    db.rename(tmp_path / "elsewhere.db")
    db.symlink_to(tmp_path / "elsewhere.db")
    _refused(env.cli("daemon"), f"{db} is a symbolic link")
    db.unlink()
    (tmp_path / "elsewhere.db").rename(db)
    assert len(env.ps()["processes"]) == 1  # once fixed, all is there


def test_a_home_only_others_may_read_is_made_private(env: Env) -> None:
    # `mkdir` gives 0755: others cannot plant runs there, so it is made 0700, not refused.
    env.home.mkdir()
    env.home.chmod(0o755)
    env.cli("ps", check=True)
    assert env.home.stat().st_mode & 0o777 == 0o700


def test_judge_decides_from_stat_alone() -> None:
    assert judge(Entry(Path("/h"), "home", 0o040755, 1000, True, False), 1000) is None
    assert "owned by root (uid 0)" in (
        judge(Entry(Path("/h"), "home", 0o040700, 0, True, False), 1000) or ""
    )
    assert "chmod 700 /h" in (
        judge(Entry(Path("/h"), "home", 0o040775, 1000, True, False), 1000) or ""
    )
    assert "chmod 600 /h/state.db" in (
        judge(Entry(Path("/h/state.db"), "db", 0o100620, 1000, True, False), 1000) or ""
    )
    assert "read-only filesystem" in (
        judge(Entry(Path("/h"), "home", 0o040700, 1000, False, True), 1000) or ""
    )


# -- item 12: an unwritable home is a clear error, not a traceback or "move state.db aside" ---


def test_a_read_only_home_is_a_clear_error(env: Env, mounts: Callable[[Path, str], None]) -> None:
    mounts(env.home, "size=16m,mode=0700")
    env.cli("run", "-d", "--", "true", check=True)  # a good database, then the mount turns ro
    env.wait_state(1, "exited")
    _kill_supervised(env.home)  # the daemon `run` started
    _remount(env.home, "ro")
    for args, extra in [
        (("run", "-d", "--", "true"), {}),
        (("run", "-d", "--", "true"), {"SUPERVISE_AUTOSTART": "0"}),
        (("daemon",), {}),
        (("ps",), {}),
    ]:
        env.extra = extra
        r = env.cli(*args)
        _refused(r, f"{env.home} is on a read-only filesystem", "remount it read-write")
        assert "move it aside" not in r.stderr
    env.extra = {}
    _remount(env.home, "rw")
    assert env.process(1)["state"] == "exited"  # nothing recorded was lost


def test_a_read_only_state_db_is_a_clear_error(env: Env) -> None:
    env.extra = {"SUPERVISE_AUTOSTART": "0"}
    env.cli("run", "-d", "--", "true", check=True)
    db = env.home / "state.db"
    if subprocess.run(["mount", "--bind", str(db), str(db)], check=False).returncode != 0:
        pytest.skip("needs root to bind-mount the database read-only")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(db)], check=True)
        r = env.cli("run", "-d", "--", "true")
        _refused(r, f"{db} is on a read-only filesystem", "remount it read-write")
        assert "move it aside" not in r.stderr
    finally:
        subprocess.run(["umount", "-l", str(db)], check=False)
    assert [p["id"] for p in env.ps()["processes"]] == [1]


def test_an_unwritable_fresh_home_is_a_clear_error(
    env: Env, mounts: Callable[[Path, str], None]
) -> None:
    mounts(env.home, "size=1m,mode=0700,ro")  # empty and read-only: no state.db can be made
    for args in (("run", "-d", "--", "true"), ("daemon",)):
        _refused(env.cli(*args), "read-only filesystem", "SUPERVISE_HOME")


# -- item 8: a full disk under the shim loses no exit code ------------------------------------


def test_a_full_disk_keeps_the_exit_code(
    env: Env, mounts: Callable[[Path, str], None], start_daemon: Callable[[], Daemon]
) -> None:
    # Only the run dirs are on the small filesystem: the database commits, the shim cannot.
    env.home.mkdir(mode=0o700)
    runs = env.home / "runs"
    mounts(runs, "size=256k,mode=0700")
    start_daemon()
    go = env.work / "go"
    script = (
        f"import os, sys, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
        "sys.exit(7)"
    )
    pid = env.run_d(sys.executable, "-c", script)["id"]
    fill = runs / "fill"
    fd = os.open(fill, os.O_WRONLY | os.O_CREAT, 0o600)
    with contextlib.suppress(OSError):
        while True:
            os.write(fd, b"\0" * 4096)  # until ENOSPC: the disk is full
    os.close(fd)
    go.touch()  # the child exits 7 onto a full disk
    tmp = runs / str(pid) / "exit.json.tmp"
    tries: list[int] = []  # each try truncates exit.json.tmp again: a new mtime

    def shim_tries() -> list[int]:
        with contextlib.suppress(FileNotFoundError):
            if (mtime := tmp.stat().st_mtime_ns) not in tries:
                tries.append(mtime)
        return tries

    # Several tries fail (one a second); the daemon must not call the process lost.
    wait_for(shim_tries, lambda t: len(t) >= 3, what=f"three tries of the shim at {tmp}")
    assert env.process(pid)["state"] == "running"
    assert not (runs / str(pid) / "exit.json").exists()
    fill.unlink()  # space again: the next try writes the record
    p = env.wait_state(pid, "exited", "lost", timeout=20)
    assert (p["state"], p["exit_code"], p["result"]) == ("exited", 7, "exit-code")


# -- item 11: a hook file's limits apply as written -------------------------------------------


def test_hook_file_limits_apply_as_written(env: Env, daemon: Daemon) -> None:
    hooks = _hooks(
        env,
        {
            "limits": {"rate": "100/minute", "max_depth": 6},
            "hooks": [
                {"on_output_match": {"pattern": "go"}, "instructions": "x", "max_spawns": 12}
            ],
        },
    )
    check = env.cli("hooks", "check", str(hooks), check=True).stdout
    assert "limits max_depth=6 rate=100/minute" in check and "(default)" not in check
    script = "for i in range(12): print('go', i)"
    pid = env.run_d(sys.executable, "-c", script, hooks=hooks)["id"]
    env.wait_state(pid, "exited")
    env.wait_threads(lambda ts: len(ts) >= 12, what="12 threads")
    threads = env.ps()["threads"]
    assert len(threads) == 12
    # Clamped to the default 10/minute, two of the twelve would wait a minute.
    assert [t for t in threads if t["not_before"] > t["created_at"]] == []


def test_hooks_check_prints_the_limits_that_apply(env: Env) -> None:
    a = _hooks(env, {"limits": {"rate": "100/minute"}, "hooks": []}, "a.json")
    b = _hooks(env, {"limits": {"max_depth": 5, "rate": "20/minute"}}, "b.json")
    c = _hooks(
        env, {"hooks": [], "agent": {"sandbox": {"mode": "required", "network": False}}}, "c.json"
    )
    out = env.cli("hooks", "check", str(a), str(b), str(c), check=True).stdout.splitlines()
    default = (
        "sandbox mode=auto network=on write=- "
        "(default; the settings file or SUPERVISE_SANDBOX may set it)"
    )
    assert out == [
        f"{a}: OK: no hooks; limits max_depth=3 (default) rate=100/minute; {default}",
        f"{b}: OK: no hooks; limits max_depth=5 rate=20/minute; {default}",
        f"{c}: OK: no hooks; limits max_depth=3 (default) rate=10/minute (default); "
        "sandbox mode=required network=off write=-",
        "given together to one run: limits max_depth=5 rate=20/minute",
    ]


def test_limits_merge_only_what_files_set() -> None:
    from supervisor.hookspec import HookFile, Limits, Rate

    fast = HookFile(limits=Limits(6, Rate(100, 60.0)), limits_set=frozenset({"max_depth", "rate"}))
    bare = HookFile()
    assert HookFile().merge(fast).limits == Limits(6, Rate(100, 60.0))
    assert fast.merge(bare).limits == Limits(6, Rate(100, 60.0))  # a file silent on limits
    slow = HookFile(limits=Limits(3, Rate(5, 60.0)), limits_set=frozenset({"rate"}))
    assert fast.merge(slow).limits == Limits(6, Rate(5, 60.0))  # both set rate: the stricter
    # What a child thread's process keeps is still the strictest with its parent's.
    assert fast.limits.strictest(Limits()) == Limits()


def test_a_threads_process_keeps_the_parents_limits_not_the_defaults(
    env: Env, daemon: Daemon
) -> None:
    # The seam a thread's RunProcess tool uses. Its hooks set no limits: the parent's
    # max_depth 6 applies (the defaults' 3 refused a spawn at depth 4), and a child file's
    # own limit is still no looser than the parent's.
    from state.db import open_state_store
    from state.settings import store_settings
    from supervisor.hookfile import load_hook_mapping
    from supervisor.hookspec import Limits, Rate
    from supervisor.launch import LaunchRequest, launch

    paths = StatePaths(env.home)
    store = open_state_store(paths.db, store_settings())
    parent = Limits(6, Rate(100, 60.0))
    plain = load_hook_mapping({"hooks": [{"on_exit": None, "instructions": "x"}]}, "RunProcess")
    loose = load_hook_mapping({"limits": {"max_depth": 9, "rate": "1000/minute"}}, "RunProcess")
    assert loose.under(parent).limits == parent
    req = LaunchRequest(
        argv=[sys.executable, "-c", "pass"],
        cwd=env.work,
        env=env.env,
        hooks=plain,
        depth=4,
        parent_limits=parent,
    )
    row = launch(store, paths, req)
    assert row.id is not None
    env.wait_state(row.id, "exited")
    (fire,) = env.wait_fires(1, what="the on_exit fire")
    assert (fire["spawned"], fire["reason"]) == (True, None)
    assert [t["depth"] for t in env.ps()["threads"]] == [5]
    store.close()


def test_paths_ensure_refuses_through_the_api(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    os.chown(home, OTHER_UID, OTHER_UID)
    with pytest.raises(StateDirError, match="owned by uid"):
        StatePaths(home).ensure()


# -- item 13: timeouts count on the boot clock, not the wall clock -----------------------------


def test_elapsed_counts_on_the_boot_clock_within_one_boot() -> None:
    from supervisor.clocks import Instant, due_in, elapsed

    start = Instant(wall=1000.0, boot=50.0, boot_id="b1")
    # 10 s later on the boot clock, the wall clock stepped an hour back, or forward.
    assert elapsed(start, Instant(wall=1010.0 - 3600, boot=60.0, boot_id="b1")) == 10.0
    assert due_in(start, 30.0, Instant(wall=1010.0 + 3600, boot=60.0, boot_id="b1")) == 20.0
    # After a reboot the boot clock restarted: only the wall clock spans it (and says so).
    assert elapsed(start, Instant(wall=1100.0, boot=5.0, boot_id="b2")) == 100.0
    # A process recorded before its start was read on the boot clock: the wall clock.
    assert elapsed(Instant(1000.0, None, "b1"), Instant(1040.0, 60.0, "b1")) == 40.0


# Debian's `faketime` package: steps the wall clock of one process, not its boot clock.
FAKETIME = next(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"), Path("/no/libfaketime.so.1"))


@pytest.mark.parametrize("step", ["-1h", "+1h"])
def test_a_wall_clock_step_across_a_restart_moves_no_timeout(
    env: Env, start_daemon: Callable[[], Daemon], step: str
) -> None:
    # A step back made the restarted daemon wait an hour more; a step forward fired at once.
    if not FAKETIME.exists():
        pytest.skip("needs libfaketime (apt-get install faketime) to step the daemon's clock")
    hooks = _hooks(
        env,
        {
            "hooks": [
                # Due during the restart or after it, it must fire: a step back made it
                # wait an hour more. A step forward fired `later` at recovery.
                {"name": "soon", "on_timeout": {"seconds": 2}, "instructions": "x"},
                {"name": "later", "on_timeout": {"seconds": 600}, "instructions": "x"},
            ]
        },
    )
    first = start_daemon()
    pid = env.run_d(sys.executable, "-c", "import time; time.sleep(120)", hooks=hooks)["id"]
    first.kill()
    # The restarted daemon's wall clock is stepped; its monotonic and boot clocks are not.
    env.extra = {
        "LD_PRELOAD": str(FAKETIME),
        "FAKETIME": step,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    start_daemon()  # ready: recovery has run, and fired what it found due
    env.extra = {}
    fired = env.wait_fires(1, what="the 2 s timeout's fire")
    assert [(f["hook"], f["process_id"]) for f in fired] == [("soon", pid)]  # `later` waits


def test_a_wall_clock_step_while_the_daemon_runs_moves_no_timeout(
    env: Env, start_daemon: Callable[[], Daemon]
) -> None:
    if not FAKETIME.exists():
        pytest.skip("needs libfaketime (apt-get install faketime) to step the daemon's clock")
    offset = env.home.parent / "faketime"  # libfaketime reads the daemon's offset here
    offset.write_text("+0\n")
    hooks = _hooks(
        env,
        {
            "hooks": [
                {"name": "up", "on_output_match": {"pattern": "^up"}, "instructions": "x"},
                {"name": "soon", "on_timeout": {"seconds": 6}, "instructions": "x"},
            ]
        },
    )
    env.extra = {
        "LD_PRELOAD": str(FAKETIME),
        "FAKETIME_TIMESTAMP_FILE": str(offset),
        "FAKETIME_CACHE_DURATION": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    start_daemon()
    env.extra = {}
    code = "import time; print('up', flush=True); time.sleep(120)"
    pid = env.run_d(sys.executable, "-c", code, hooks=hooks)["id"]
    # The step that read `up` had armed the timeout (a process's first step arms them).
    env.wait_fires(1, what="the `up` fire")
    offset.write_text("-1h\n")  # the wall clock steps back an hour under the running daemon
    fired = env.wait_fires(2, what="the 6 s timeout's fire")
    # (Listed by their time stamps, which follow the stepped wall clock.)
    assert sorted((f["hook"], f["process_id"]) for f in fired) == [("soon", pid), ("up", pid)]


def test_the_tracker_decides_a_timeout_on_the_boot_clock(tmp_path: Path) -> None:
    # A real state file and run dir, no daemon: a timer that wakes early (or a wall clock
    # that says an hour passed) fires nothing; the tracker arms the rest.
    from state.db import open_state_store
    from state.processes import NewProcess, create_process
    from state.settings import store_settings
    from supervisor.clocks import boot_clock
    from supervisor.hookspec import Hook, HookFile, OnTimeout
    from supervisor.identity import boot_id
    from supervisor.rundir import RunDir
    from supervisor.tracker import Tracker

    paths = StatePaths(tmp_path / "home").ensure()
    store = open_state_store(paths.db, store_settings())
    hooks = HookFile(hooks=(Hook("slow", OnTimeout(100.0), "x"),))

    def tracker(wall_ago: float, boot_ago: float) -> Tracker:
        new = NewProcess(
            name="p",
            command="p",
            argv='["p"]',
            cwd=str(tmp_path),
            state="running",
            boot_id=boot_id(),
            started_at=time.time() - wall_ago,
            started_boot=boot_clock() - boot_ago,
        )
        row = create_process(
            store,
            new,
            lambda r: json.dumps(
                {
                    "id": r.id,
                    "name": "p",
                    "argv": ["p"],
                    "cwd": str(tmp_path),
                    "hooks": hooks.to_json(),
                }
            ),
        )
        run = RunDir(paths.run_dir(row.id))
        run.path.mkdir()
        # A record as the first versions wrote it (in spec.json only, no newer fields).
        record = {"id": row.id, "name": "p", "argv": ["p"], "cwd": str(tmp_path)}
        run.write_spec(json.dumps({**record, "hooks": hooks.to_json()}))
        return Tracker(store, paths, row)

    early = tracker(wall_ago=3600.0, boot_ago=10.0)  # the wall clock stepped an hour forward
    res = early.step(check_liveness=False, timeouts_due=["slow"])
    assert res.outcomes == []
    ((hook, left),) = res.timeouts
    assert hook == "slow" and 80.0 < left <= 90.0
    due = tracker(wall_ago=0.0, boot_ago=101.0)  # a step back: the boot clock says it is due
    res = due.step(check_liveness=False, timeouts_due=["slow"])
    assert [o.hook for o in res.outcomes] == ["slow"]
    store.close()
