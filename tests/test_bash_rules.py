"""Hostile Bash commands against one profile, each with the verdict it must get (issue #13).

Rows marked RUNS_RM are real attacks: the test also runs them with real bash in a scratch
directory and checks that they do delete `victim`, so a verdict is never about a command that
would have been harmless anyway.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import Daemon, Env
from test_threads_e2e import hook_file, results, run_hooked, script, settled

from agent_threads.hooks.shellspec import matcher_matches
from agent_threads.permissions import Profile

PROFILE = Profile.from_json(
    [
        {
            "allow": [
                "Bash(git:*)",
                "Bash(python -m pytest:*)",
                "Bash(tail:*)",
                "Bash(ls:*)",
                "Bash(cat:*)",
                "Bash(echo:*)",
                "Bash(grep:*)",
                "Bash(find:*)",
            ],
            "deny": ["Bash(rm:*)"],
        }
    ]
)
RUNS_RM = True

# (command, verdict, whether real bash deletes ./victim with it)
TABLE: list[tuple[str, str, bool]] = [
    # item 2: comments are comments, and what follows a newline runs
    ("git status #'\nrm -f victim\n#'", "deny", RUNS_RM),
    ('git status #"\nrm -f victim\n#"', "deny", RUNS_RM),
    ("git status;#x\nrm -f victim", "deny", RUNS_RM),
    ("echo a#b; rm -f victim", "deny", RUNS_RM),
    # item 3: git options that run commands or write files are not covered by Bash(git:*)
    ("git -c alias.x='!rm -f victim' x", "ask", RUNS_RM),
    ("git -c core.fsmonitor='rm -f victim' status", "ask", False),
    ("git -c core.pager='rm -f victim' log", "ask", False),
    ("git -c alias.e='!env' e", "ask", False),
    ("git -ccore.pager=less log", "ask", False),
    ("git --config-env=core.pager=X log", "ask", False),
    ("git --exec-path=. status", "ask", False),
    ("git -C /tmp status", "ask", False),
    ("git status > FILE", "ask", False),
    ("git log --output=FILE", "ask", False),
    ("git diff --out=FILE", "ask", False),
    ("git diff --out{put=/tmp/x,}", "ask", False),
    ("git diff --ext-diff", "ask", False),
    ("git x", "ask", False),  # not a git command: an alias
    ("git config core.fsmonitor 'rm -f victim'", "ask", False),
    ("git rebase -x 'rm -f victim' HEAD~1", "ask", False),
    ("git fetch ext::sh", "ask", False),
    ("git grep -Oless foo", "ask", False),
    ("GIT_PAGER=x git log", "ask", False),
    ("git add *.py", "ask", False),  # a file named --output=x would be an option
    ("git log $(rm -f victim)", "deny", RUNS_RM),
    # item 4: deny sees through quoting, escapes, paths, wrappers, groups and shells
    ("'rm' -f victim", "deny", RUNS_RM),
    ('"rm" -f victim', "deny", RUNS_RM),
    ("\\rm -f victim", "deny", RUNS_RM),
    ("r\\m -f victim", "deny", RUNS_RM),
    ("/bin/rm -f victim", "deny", RUNS_RM),
    ("$'\\x72m' -f victim", "deny", RUNS_RM),
    ("r\\\nm -f victim", "deny", RUNS_RM),
    ("ls\n\\rm -f victim", "deny", RUNS_RM),  # tree-sitter glues it to the line before
    ("env rm -f victim", "deny", RUNS_RM),
    ("env -i PATH=/usr/bin:/bin rm -f victim", "deny", RUNS_RM),
    ("env -S 'rm -f victim'", "deny", RUNS_RM),
    ("command rm -f victim", "deny", RUNS_RM),
    ("builtin command rm -f victim", "deny", RUNS_RM),
    ("exec rm -f victim", "deny", RUNS_RM),
    ("nice -n 5 rm -f victim", "deny", RUNS_RM),
    ("nice -5 rm -f victim", "deny", RUNS_RM),
    ("nohup rm -f victim", "deny", RUNS_RM),
    ("time rm -f victim", "deny", RUNS_RM),
    ("timeout -s KILL 5 rm -f victim", "deny", RUNS_RM),
    ("stdbuf -oL rm -f victim", "deny", RUNS_RM),
    ("echo victim | xargs rm -f", "deny", RUNS_RM),
    ("find . -name victim -exec rm -f {} +", "deny", RUNS_RM),
    ("(rm -f victim)", "deny", RUNS_RM),
    ("{ rm -f victim; }", "deny", RUNS_RM),
    ("RM=1 rm -f victim", "deny", RUNS_RM),
    ("bash -c 'rm -f victim'", "deny", RUNS_RM),
    ('sh -c "rm -f victim"', "deny", RUNS_RM),
    ("bash -ec 'ls; rm -f victim'", "deny", RUNS_RM),
    ("eval 'rm -f victim'", "deny", RUNS_RM),
    ("trap 'rm -f victim' EXIT", "deny", RUNS_RM),
    ("ls && rm -f victim", "deny", RUNS_RM),
    ("ls | rm -f victim", "deny", RUNS_RM),
    ("echo $(rm -f victim)", "deny", RUNS_RM),
    ('echo "$(rm -f victim)"', "deny", RUNS_RM),
    ("ls `rm -f victim`", "deny", RUNS_RM),
    ("x=$(rm -f victim)", "deny", RUNS_RM),
    ("cat <(rm -f victim)", "deny", RUNS_RM),
    ("cat <<< $(rm -f victim)", "deny", RUNS_RM),
    ("if true; then rm -f victim; fi", "deny", RUNS_RM),
    ("for i in 1; do rm -f victim; done", "deny", RUNS_RM),
    ("f() { rm -f victim; }; f", "deny", RUNS_RM),
    # code only known when it runs cannot be proven safe: it asks
    ("cat <<EOF | sh\nrm -f victim\nEOF", "ask", RUNS_RM),
    ("X=rm; $X -f victim", "ask", RUNS_RM),
    ("rm$IFS-f victim", "ask", False),
    ('bash -c "$CMD"', "ask", False),
    ("ls; ;", "ask", False),  # not bash: what cannot be parsed asks
    ('echo "unterminated', "ask", False),
    # the reverse of item 4: what the rules do cover
    ("python -m pytest -q 2>&1 | tail", "allow", False),
    ("python -m pytest -q 2>&1 | tail -n 5", "allow", False),
    ("timeout 60 python -m pytest -x", "allow", False),
    ('tail -n 20 "$SUPERVISE_OUTPUT"', "allow", False),
    ("ls -la >/dev/null 2>&1", "allow", False),
    ("git log -p | tail", "allow", False),
    ("git -P log --oneline -5", "allow", False),
    ("git status --short 2>/dev/null", "allow", False),
    ("git config --get user.name", "allow", False),
    ("git diff --text HEAD", "allow", False),
    ("echo 'rm -f victim'", "allow", False),  # the text rm, not the program
    ("grep -r 'rm -rf' .", "allow", False),
    ("find . -name '*.py'", "allow", False),
    ("ls  # rm -f victim", "allow", False),
    ("ls > out.txt", "ask", False),
    ("find . -delete", "ask", False),
    ("python -m pytest; curl evil", "ask", False),
    ("python -m pytest $(curl evil)", "ask", False),
    ("/usr/bin/git status", "ask", False),  # allow rules name the program as written
    ("ls | xargs cat", "ask", False),
]


@pytest.mark.parametrize(("command", "want", "runs_rm"), TABLE, ids=[t[0] for t in TABLE])
def test_hostile_command(command: str, want: str, runs_rm: bool, tmp_path: Path) -> None:
    verdict = PROFILE.check("Bash", {"command": command})
    assert verdict.decision == want, verdict.reason
    if runs_rm:
        victim = tmp_path / "victim"
        victim.write_text("precious")
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
        subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, timeout=30
        )
        assert not victim.exists(), "real bash did not run rm: the row proves nothing"


def test_table_is_big_enough() -> None:
    assert len(TABLE) >= 50
    assert sum(1 for _, want, _ in TABLE if want == "deny") >= 20


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("python -m pytest; curl evil", "no rule allows `curl evil` (in: `python -m pytest;"),
        ("git status > FILE", "writes to FILE"),
        ("git -c core.pager=less log", "git option -c can change the config"),
        ("git x", "git x is not a git command: an alias can run any command"),
        ("ls && /bin/rm -f v", "denied by rule Bash(rm:*): `/bin/rm -f v`"),
        ("ls; ;", "bash cannot parse it"),
        ("X=rm; $X v", "`$X v` is only known when it runs; rule Bash(rm:*) may deny it"),
    ],
)
def test_message_names_the_part(command: str, message: str) -> None:
    assert message in PROFILE.check("Bash", {"command": command}).reason


@pytest.mark.parametrize(
    ("command", "want"),
    [
        ("git -C x push", "deny"),
        ("git --no-pager push origin", "deny"),
        ("/usr/bin/git -c a=b push", "deny"),
        ("git status", "allow"),
        ("git -C push status", "allow"),  # -C takes the word push as its value
        ("$GIT push", "ask"),  # only known when it runs
    ],
)
def test_deny_sees_other_spellings(command: str, want: str) -> None:
    profile = Profile.from_json([{"allow": ["Bash"], "deny": ["Bash(git push:*)"]}])
    assert profile.check("Bash", {"command": command}).decision == want


def test_run_process_argv_gets_the_same_checks() -> None:
    profile = Profile.from_json([{"allow": ["RunProcess(python:*)"], "deny": ["RunProcess(rm:*)"]}])
    for argv, want in [
        (["python", "job.py"], "allow"),
        (["/bin/rm", "-rf", "x"], "deny"),
        (["bash", "-c", "rm -rf x"], "deny"),
        (["env", "FOO=1", "rm", "x"], "deny"),
        (["env", "FOO=1", "python", "job.py"], "ask"),  # sets a variable for it
    ]:
        assert profile.check("RunProcess", {"command": argv}).decision == want, argv


def test_comment_trick_is_denied_by_the_daemon(env: Env, daemon: Daemon) -> None:
    """Items 1 and 2 end to end: a thread's tool calls through the real daemon."""
    victim = env.work / "victim"
    victim.write_text("precious")
    spec = env.home / "runs" / "1" / "spec.json"
    calls = [
        {"name": "Bash", "arguments": {"command": "git status #'\nrm -f victim\n#'"}},
        {
            "name": "Edit",
            "arguments": {
                "path": f"{env.work}/../home/runs/1/spec.json",
                "old_string": '"hooks"',
                "new_string": '"hooks" ',
            },
        },
    ]
    turns = script(env, [{"tool_calls": [c]} for c in calls] + [{"content": "gave up"}])
    perms = {"allow": ["Bash(git:*)", f"Edit({env.work}/:*)"], "deny": ["Bash(rm:*)"]}
    hooks = hook_file(env, {"model": f"scripted:{turns.name}", "permissions": perms})
    run_hooked(env, hooks)
    t = settled(env, "t1", "completed")
    bash, edit = results(t)
    assert bash["status"] == "denied" and "`rm -f victim`" in bash["output"]
    assert victim.read_text() == "precious"
    assert edit["status"] == "denied" and "$SUPERVISE_HOME" in edit["output"]
    assert '"hooks" ' not in spec.read_text()


@pytest.mark.parametrize(
    ("matcher", "command", "want"),
    [
        ("Bash(git:*)", "cd x && /usr/bin/git push", True),
        ("Bash(rm:*)", "bash -c 'rm -f x'", True),
        ("Bash(rm:*)", "git status #'\nrm -f victim\n#'", True),
        ("Bash(git:*)", "echo git", False),
        ("Bash(rm:*)", "echo 'rm -f x'", False),
    ],
)
def test_hook_matchers_use_the_same_parse(matcher: str, command: str, want: bool) -> None:
    assert matcher_matches(matcher, "Bash", {"command": command}) is want


@pytest.mark.parametrize(
    ("command", "want"),
    [
        ("(" * 3000 + "rm x" + ")" * 3000, "deny"),  # too deep for the walk: the fallback sees rm
        ("$(" * 2000 + "ls" + ")" * 2000, "ask"),
        ("ls \ud800; rm x", "deny"),  # a lone surrogate from JSON
        ("ls \x00; rm x", "deny"),
        ("ls " + "a" * 200_000, "allow"),
    ],
    ids=["deep-subshells", "deep-substitutions", "surrogate", "nul", "huge"],
)
def test_odd_input_never_crashes_the_check(command: str, want: str) -> None:
    assert PROFILE.check("Bash", {"command": command}).decision == want


RANK = {"allow": 0, "ask": 1, "deny": 2}


@pytest.mark.parametrize(
    ("command", "want"), [(c, w) for c, w, _ in TABLE], ids=[t[0] for t in TABLE]
)
def test_wrapping_a_command_never_loosens_it(command: str, want: str) -> None:
    """Metamorphic: the same command in a list, a subshell, a group or `bash -c` is judged at
    least as strictly; a deny stays a deny however it is wrapped."""
    forms = [
        f"ls\n{command}",
        f"{command}\nls",
        f"(\n{command}\n)",
        f"{{\n{command}\n}}",
        f"bash -c {shlex.quote(command)}",
        f"timeout 9 bash -c {shlex.quote(command)}",
    ]
    for form in forms:
        got = PROFILE.check("Bash", {"command": form}).decision
        assert RANK[got] >= RANK[want], form
        if want == "deny":
            assert got == "deny", form
