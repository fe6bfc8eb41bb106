"""Program files and the pure decisions of `up`, `down` and the boot: what the file says
(every problem at FILE:LINE), what `up` does given the live processes, what follows a run a
reboot ended."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from state.runs import RunHistory, RunRow
from supervise.errors import HookFileError, UserError
from supervisor.firing import plan_restart
from supervisor.programfile import Program, find_program_file, load_program_file
from supervisor.programs import Keep, Live, Replace, Start, Stop, plan_down, plan_up
from supervisor.restarts import NoRestart, Restart, RestartSpec, after_reboot


def write(tmp_path: Path, text: str, name: str = "supervise.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(HookFileError) as e:
        load_program_file(path)
    return e.value.problems


# -- the file --------------------------------------------------------------------------------


def test_a_program_file_resolves_commands_paths_env_files_and_hooks(tmp_path: Path) -> None:
    (tmp_path / "site").mkdir()
    write(tmp_path, "A=1\nB=from-file\n", ".env")
    write(tmp_path, "B=web\n", "web.env")
    write(tmp_path, "hooks:\n  - name: boom\n    on_exit: {}\n    instructions: x\n", "h.yaml")
    path = write(
        tmp_path,
        "env_file: .env\n"
        "hooks: h.yaml\n"
        "programs:\n"
        "  web:\n"
        "    command: python -m http.server 'port 8000'\n"
        "    cwd: site\n"
        "    env: {PORT: 8000}\n"
        "    env_file: [web.env]\n"
        "    restart: always\n"
        "  worker:\n"
        "    command: [./w.sh, 3]\n"
        "    autostart: false\n"
        "    hooks:\n"
        "      hooks:\n"
        "        - {name: hi, on_output_match: {pattern: hi}, instructions: x}\n",
    )
    pf = load_program_file(path)
    web, worker = pf.programs
    assert web.argv == ("python", "-m", "http.server", "port 8000")
    assert web.cwd == tmp_path / "site" and worker.cwd == tmp_path
    assert dict(web.env) == {"A": "1", "B": "web", "PORT": "8000"}
    assert dict(worker.env) == {"A": "1", "B": "from-file"}
    assert web.hooks.restart == RestartSpec("always") and worker.hooks.restart is None
    assert [h.name for h in web.hooks.hooks] == ["boom"]
    assert [h.name for h in worker.hooks.hooks] == ["boom", "hi"]  # shared, then its own
    assert (web.autostart, worker.autostart) == (True, False)
    assert worker.argv == ("./w.sh", "3") and web.line == 4


def test_the_fingerprint_is_stable_and_follows_every_part_of_the_definition(
    tmp_path: Path,
) -> None:
    write(tmp_path, "A=1\n", ".env")
    text = "programs:\n  web:\n    command: ./serve\n    env_file: .env\n"
    path = write(tmp_path, text)
    first = load_program_file(path).programs[0].fingerprint
    assert load_program_file(path).programs[0].fingerprint == first
    write(tmp_path, "A=2\n", ".env")  # the env file's values count, not only its name
    changed = load_program_file(path).programs[0].fingerprint
    assert changed != first
    for edit in ("    env: {X: y}\n", "    restart: always\n", "    autostart: false\n",
                 "    hooks: {hooks: [{name: a, on_exit: {}, instructions: x}]}\n"):  # fmt: skip
        write(tmp_path, text + edit)
        assert load_program_file(path).programs[0].fingerprint not in (first, changed)
    # Only the program's own definition: another program's change leaves it alone.
    write(tmp_path, text + "  other:\n    command: ./x\n")
    assert load_program_file(path).programs[0].fingerprint == changed


def test_every_problem_is_at_its_file_line_with_a_fix(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "programs:\n"  # 1
        "  web:\n"  # 2
        "    comand: ./serve\n"  # 3
        "    cwd: nowhere\n"  # 4
        "    env: {PORT: yes, 1X: a}\n"  # 5
        "    env_file: missing.env\n"  # 6
        "    restart: {policy: sometimes}\n"  # 7
        "    hooks:\n"  # 8
        "      hooks:\n"  # 9
        "        - name: x\n"  # 10
        "          on_exi: {}\n"  # 11
        "  '12':\n"  # 12
        "    command: 'unclosed \"quote'\n"  # 13
        "env_files: [.env]\n",  # 14
    )
    found = problems(path)
    at = {int(p.split(":")[1]) for p in found}
    assert {2, 3, 4, 5, 6, 7, 11, 12, 13, 14} <= at
    text = "\n".join(found)
    assert f"{path}:3: unknown key 'comand' in programs.web; did you mean 'command'?" in text
    assert f"{path}:2: programs.web has no command" in text
    assert "cwd 'nowhere' is not a directory" in text
    assert "programs.web.env.PORT must be text or a number, got true; quote it" in text
    assert "env name '1X' must be letters" in text
    assert "env_file 'missing.env' does not exist" in text
    assert "programs.web.restart.policy must be one of no, on-failure, always" in text
    assert f"{path}:11: unknown key 'on_exi' in hooks[0]; did you mean 'on_exit'?" in text
    assert "program name '12' must be letters" in text
    assert "cannot be split as a shell would" in text
    assert f"{path}:14: unknown key 'env_files' in the top level; did you mean 'env_file'?" in text


def test_files_that_cannot_be_programs(tmp_path: Path) -> None:
    assert "program file is empty" in problems(write(tmp_path, "# nothing\n"))[0]
    assert "programs must be a mapping" in problems(write(tmp_path, "programs: [a]\n"))[0]
    assert ":2: invalid JSON" in problems(write(tmp_path, '{"programs":\n ,}', "p.json"))[0]
    assert "must end in .yaml" in problems(write(tmp_path, "x", "p.txt"))[0]
    # A hook file by path: its own FILE:LINE.
    write(tmp_path, "hooks:\n  - name: x\n    on_exit: {}\n    instructionz: x\n", "h.yaml")
    found = problems(write(tmp_path, "programs:\n  a:\n    command: x\n    hooks: h.yaml\n"))
    assert any(p.startswith(f"{tmp_path / 'h.yaml'}:4: unknown key 'instructionz'") for p in found)


def test_the_default_file_is_looked_for_in_the_directory(tmp_path: Path) -> None:
    with pytest.raises(HookFileError, match=r"no program file: none of supervise\.yaml"):
        find_program_file(None, tmp_path)
    write(tmp_path, json.dumps({"programs": {}}), "supervise.json")
    assert find_program_file(None, tmp_path) == tmp_path / "supervise.json"
    write(tmp_path, "programs: {}\n", "supervise.yml")
    assert find_program_file(None, tmp_path) == tmp_path / "supervise.yml"
    assert find_program_file("x/p.yaml", tmp_path) == tmp_path / "x" / "p.yaml"


# -- up and down -----------------------------------------------------------------------------

FILE = "/srv/supervise.yaml"


def prog(name: str, fingerprint: str = "f1") -> Program:
    from supervisor.hookspec import HookFile

    return Program(name, ("x",), Path("/srv"), (), HookFile(), True, 1, fingerprint)


def live(name: str, chain: int, fingerprint: str | None = "f1", file: str | None = FILE) -> Live:
    return Live(name, chain, file, fingerprint, 100 + chain)


def test_up_starts_the_missing_keeps_the_same_restarts_the_changed_stops_the_removed() -> None:
    programs = [prog("web"), prog("worker", "f2"), prog("cron")]
    running = [live("web", 1), live("worker", 2), live("old", 3), live("other", 4, file="/b.yaml")]
    assert plan_up(programs, FILE, running) == [
        Stop("old", 3, "removed from the file"),
        Keep(programs[0], 1, 101),
        Replace(programs[1], 2),
        Start(programs[2]),
    ]
    # Nothing changed: nothing to do but keep.
    assert all(isinstance(a, Keep) for a in plan_up(programs[:1], FILE, running[:1]))


def test_up_with_names_touches_only_those() -> None:
    programs = [prog("web"), prog("worker", "f2")]
    running = [live("web", 1, "old"), live("gone", 3)]
    assert plan_up(programs, FILE, running, ["worker"]) == [Start(programs[1])]
    with pytest.raises(UserError, match=r"no program 'nope' in /srv/supervise\.yaml; its programs"):
        plan_up(programs, FILE, running, ["nope"])


def test_a_name_taken_by_another_file_or_a_run_is_an_error_naming_both() -> None:
    with pytest.raises(UserError, match=r"from program file /b\.yaml"):
        plan_up([prog("web")], FILE, [live("web", 7, file="/b.yaml")])
    with pytest.raises(UserError, match="live process 8 of the same name, started by supervise"):
        plan_up([prog("web")], FILE, [live("web", 8, None, None)])
    # Not asked about: no clash.
    assert plan_up([prog("web"), prog("b")], FILE, [live("web", 8, None, None)], ["b"])


def test_two_live_chains_of_one_program_keep_the_newest() -> None:
    p = prog("web")
    assert plan_up([p], FILE, [live("web", 1), live("web", 5)]) == [
        Stop("web", 1, "removed from the file"),
        Keep(p, 5, 105),
    ]


def test_down_stops_this_files_programs_only() -> None:
    running = [live("web", 1), live("worker", 2), live("web", 3, file="/b.yaml")]
    assert plan_down(FILE, ["web", "worker"], running) == [
        Stop("web", 1, "down"),
        Stop("worker", 2, "down"),
    ]
    assert plan_down(FILE, [], running, ["worker"]) == [Stop("worker", 2, "down")]
    with pytest.raises(UserError, match="no program 'x'"):
        plan_down(FILE, ["web"], running, ["x"])


# -- after a reboot --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "autostart", "stop", "starts"),
    [
        ("always", None, None, True),
        ("on-failure", None, None, False),  # a reboot is no failure of the process
        ("no", None, None, False),
        ("no", True, None, True),  # a program with autostart
        ("always", False, None, False),  # autostart: false wins over always
        ("always", None, "stop", False),  # a person's stop holds
        ("always", True, "stop", False),
        ("no", None, "restart", True),  # a restart asked before the reboot
    ],
)
def test_after_a_reboot(
    policy: str, autostart: bool | None, stop: str | None, starts: bool
) -> None:
    got = after_reboot(RestartSpec(policy), autostart=autostart, stop=stop)  # type: ignore[arg-type]
    assert isinstance(got, Restart) == starts
    if isinstance(got, Restart):
        assert got.cause == "boot"
    else:
        assert isinstance(got, NoRestart) and got.reason


def row(run_no: int, cause: str, result: str, reason: str | None = None) -> RunRow:
    return RunRow(run_no, run_no, "lost", cause, 100.0 * run_no, 100.0 * run_no + 5, result, reason)


def test_a_run_a_reboot_ended_is_started_at_once_and_counts_as_a_new_series() -> None:
    history = RunHistory([row(1, "run", "lost", "ended without an exit record")], None)
    spec = RestartSpec("always", delay=60)
    decision, plan = plan_restart(spec, history, rebooted=True)
    assert isinstance(decision, Restart)
    assert plan.next_run is not None and plan.next_run.cause == "boot"
    assert plan.next_run.due_at == 105.0  # when it ended: already past, no backoff
    # The same end in the same boot: the policy's backoff.
    decision, plan = plan_restart(spec, history)
    assert plan.next_run is not None and plan.next_run.cause == "restart"
    assert plan.next_run.due_at == 165.0
    # on-failure: a crash's restart as before, none after a reboot.
    _, plan = plan_restart(RestartSpec("on-failure"), history, rebooted=True)
    assert plan.next_run is None
    # A boot start begins a new series: the crash-loop count starts over.
    from supervisor.firing import run_fact
    from supervisor.restarts import series

    runs = [run_fact(row(1, "restart", "failure")), run_fact(row(2, "boot", "failure"))]
    assert series(spec, runs) == runs[1:]


def test_the_shipped_example_reads() -> None:
    examples = Path(__file__).resolve().parent.parent / "configs" / "examples"
    pf = load_program_file(examples / "programs.yaml")
    assert pf.names() == ["web", "migrate"]
    web, migrate = pf.programs
    assert web.hooks.restart is not None and web.hooks.restart.policy == "always"
    assert [h.name for h in migrate.hooks.hooks] == ["migration-failed", "deadlock", "too-slow"]
    assert migrate.cwd == examples and not migrate.autostart


def test_the_systemd_unit_runs_the_daemon_with_the_keys_and_no_autostart() -> None:
    unit = Path(__file__).resolve().parent.parent / "configs" / "systemd" / "supervise.service"
    lines = [ln.strip() for ln in unit.read_text().splitlines() if not ln.startswith("#")]
    service = lines[lines.index("[Service]") + 1 : lines.index("[Install]")]
    settings = [tuple(ln.split("=", 1)) for ln in service if "=" in ln]
    assert ("ExecStart", "%h/.local/bin/supervise daemon") in settings
    assert ("Environment", "SUPERVISE_AUTOSTART=0") in settings
    assert ("EnvironmentFile", "-%h/.config/supervise/env") in settings
    assert ("KillMode", "process") in settings  # the processes outlive the daemon's stop
