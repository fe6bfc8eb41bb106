"""`supervise completion bash|zsh|fish`: each script, printed by the real CLI, completes in
its real shell (bash always; zsh and fish where installed: `apt-get install zsh fish`)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.cli import _parser
from supervisor.completion import SHELLS


def cli(*args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if home is not None:
        env["SUPERVISE_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("completion")
    found = {}
    for shell in SHELLS:
        r = cli("completion", shell, home=out / "home")
        assert r.returncode == 0, r.stderr
        assert r.stderr == ""
        found[shell] = out / f"supervise.{shell}"
        found[shell].write_text(r.stdout)
    assert not (out / "home").exists()  # no state directory made, so no database opened
    return found


def commands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, ...]]:
    """Every subcommand path of PARSER, nested ones included: ("thread", "show"), ..."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (name,)
                yield from ((name, *rest) for rest in commands(sub))


def test_every_subcommand_is_in_every_script(scripts: dict[str, Path]) -> None:
    paths = list(commands(_parser()))
    assert {("thread", "show"), ("hooks", "check"), ("completion",)} <= set(paths)
    for shell, path in scripts.items():
        text = path.read_text()
        for cmd in paths:
            assert cmd[-1] in text, (shell, cmd)
    # The nested ones, as the bash script names them: the parser's, not a list of ours.
    bash = scripts["bash"].read_text()
    assert "_shtab_supervise_thread_subparsers=(show retry)" in bash
    assert "_shtab_supervise_hooks_subparsers=(check test)" in bash


def test_a_bad_shell_is_exit_2_with_the_choices() -> None:
    r = cli("completion", "tcsh")
    assert r.returncode == 2
    assert "invalid choice: 'tcsh' (choose from 'bash', 'zsh', 'fish')" in r.stderr
    assert r.stdout == ""
    assert cli("completion").returncode == 2


def test_printing_a_script_loads_no_database_code() -> None:
    code = (
        "import sys\nfrom supervisor.cli import main\n"
        "try:\n    main(['completion', 'fish'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "bad = [m for m in ('sqlalchemy', 'sqlmodel', 'state.db') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


# -- bash: the completion function called as bash calls it on TAB -----------------------------


def bash_complete(script: Path, words: list[str], cwd: Path) -> list[str]:
    line = " ".join(f"'{w}'" for w in words)
    prog = (
        f"source '{script}'\nCOMP_WORDS=({line})\nCOMP_CWORD={len(words) - 1}\n"
        'COMP_LINE="${COMP_WORDS[*]}"\nCOMP_POINT=${#COMP_LINE}\n'
        '_shtab_supervise supervise "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    r = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", prog],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=30,
    )
    assert r.returncode == 0, r.stderr
    return [w.strip() for w in r.stdout.splitlines() if w.strip()]


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["supervise", "th"], ["thread"]),
        (["supervise", "thread", "s"], ["show"]),
        (["supervise", "hooks", "ch"], ["check"]),
        (["supervise", "daemon", ""], ["stop"]),
        (["supervise", "completion", ""], ["bash", "fish", "zsh"]),
        (["supervise", "run", "--ho"], ["--hook"]),
        (["supervise", "run", "--restart", ""], ["always", "no", "on-failure"]),
        (["supervise", "run", "--hook", "ho"], ["hooks.yaml"]),
        (["supervise", "run", "--env-file", ".e"], [".env"]),
        (["supervise", "run", "--plugin", "p"], ["plugin"]),  # not pfile.txt
        (["supervise", "hooks", "check", "ho"], ["hooks.yaml"]),
    ],
)
def test_bash_completes(
    scripts: dict[str, Path], tmp_path: Path, words: list[str], expected: list[str]
) -> None:
    (tmp_path / "hooks.yaml").write_text("")
    (tmp_path / ".env").write_text("")
    (tmp_path / "plugin").mkdir()
    (tmp_path / "pfile.txt").write_text("")
    assert sorted(bash_complete(scripts["bash"], words, tmp_path)) == expected


# -- zsh: a real interactive zsh in a pty, the completion listed with ^D ------------------------

ZSH_DRIVER = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PS1='Z''P> '; fpath=($1 \$fpath); autoload -Uz compinit; compinit -u -D; bindkey -e"
zpty -r -m z out '*ZP> *'
zpty -w -n z "supervise $2"$'\C-d'
zpty -r -m z out "*$3*" && print -r -- FOUND
zpty -d z
"""


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh not installed (apt-get install zsh)")
@pytest.mark.parametrize(
    ("typed", "listed"),
    [
        ("th", "thread  -- inspect and retry threads"),
        ("run --ho", "--hook  -- hook file"),
        ("thread ", "show"),
    ],
)
def test_zsh_completes(scripts: dict[str, Path], tmp_path: Path, typed: str, listed: str) -> None:
    (tmp_path / "_supervise").write_text(scripts["zsh"].read_text())
    try:  # the driver waits for the listing: a wrong one never comes
        r = subprocess.run(
            ["zsh", "-f", "-c", ZSH_DRIVER, "zsh", str(tmp_path), typed, listed],
            capture_output=True,
            text=True,
            timeout=20,
            env={**os.environ, "HOME": str(tmp_path)},
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"zsh never listed {listed!r} for `supervise {typed}`: {exc.stdout!r}")
    assert "FOUND" in r.stdout, r.stdout + r.stderr


# -- fish: `complete -C` asks fish what a TAB would offer --------------------------------------


@pytest.mark.skipif(
    shutil.which("fish") is None, reason="fish not installed (apt-get install fish)"
)
def test_fish_completes(scripts: dict[str, Path], tmp_path: Path) -> None:
    assert (
        subprocess.run(["fish", "--no-execute", str(scripts["fish"])], timeout=30).returncode == 0
    )
    (tmp_path / "hooks.yaml").write_text("")

    def offered(line: str) -> list[str]:
        prog = f"source '{scripts['fish']}'; complete -C '{line}'"
        r = subprocess.run(
            ["fish", "--no-config", "-c", prog],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=30,
            env={**os.environ, "HOME": str(tmp_path)},
        )
        assert r.returncode == 0, r.stderr
        return [row.split("\t")[0] for row in r.stdout.splitlines()]

    assert offered("supervise th") == ["thread"]
    assert offered("supervise thread ") == ["retry", "show"]
    assert "--hook" in offered("supervise run --ho")
    assert offered("supervise run --hook ho") == ["hooks.yaml"]
    assert offered("supervise daemon ") == ["stop"]
