"""Env files through the real CLI: `run --env-file` and a hook file's `env_file:` reach the
child in the documented order, a bad file starts nothing, a secret stays masked."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import Daemon, Env, match_hook, wait_until

SHOW = "import os; print(*(os.environ.get(k, '-') for k in 'ABCDEF'), sep='|')"


def test_env_files_reach_the_child_in_order(
    env: Env, daemon: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Lowest first: the CLI's environment, the hook file's env_file(s), --env-file, --env.
    monkeypatch.setenv("A", "cli")
    monkeypatch.setenv("F", "cli-only")
    env.write("one.env", "# the hook file's first\nexport A=hook1\nB=hook1\nC=hook1\n")
    env.write("two.env", "B=hook2\nD='quoted # not a comment'  # a comment\n")
    env.write("flag.env", 'C=flag\nE="spaces and # kept"\nA=${C}-then\n')
    hooks = env.write("hooks.yaml", "purpose: env\nenv_file: [one.env, two.env]\nhooks: []\n")
    r = env.cli(
        "run", "-d", "--json", "--hook", str(hooks), "--env-file", "flag.env",
        "--env", "E=flag-env", "--", sys.executable, "-c", SHOW, check=True,
    )  # fmt: skip
    pid = json.loads(r.stdout)["id"]
    env.wait_state(pid, "exited")
    out = env.cli("logs", str(pid), check=True).stdout.strip()
    assert out == "flag-then|hook2|flag|quoted # not a comment|flag-env|cli-only"
    spec = json.loads((env.home / "runs" / str(pid) / "spec.json").read_text())
    assert spec["env_keys"] == ["A", "B", "C", "D", "E"]  # names only
    assert "quoted" not in json.dumps(spec) and "flag-then" not in json.dumps(spec)
    # Later --env-file wins over an earlier one; a quoted value keeps its spaces and `#`.
    env.write("later.env", "C='a b # c'\n")
    r = env.cli(
        "run", "--env-file", "flag.env", "--env-file", "later.env", "--",
        sys.executable, "-c", SHOW, check=True,
    )  # fmt: skip
    assert r.stdout.strip().split("|")[2] == "a b # c"


def test_a_bad_env_file_is_exit_2_at_its_line_and_starts_nothing(env: Env) -> None:
    env.write("bad.env", "A=1\n# fine\nNOT A LINE=\n")
    r = env.cli("run", "-d", "--env-file", "bad.env", "--env-file", "gone.env", "--", "true")
    assert r.returncode == 2, r.stderr
    assert "bad.env:3: cannot parse this line as dotenv; write KEY=VALUE" in r.stderr
    assert "gone.env: cannot read env file: No such file or directory" in r.stderr
    assert "Traceback" not in r.stderr
    hooks = env.write("hooks.yaml", "purpose: p\nenv_file: bad.env\n")
    r = env.cli("run", "-d", "--hook", str(hooks), "--", "true")
    assert r.returncode == 2 and f"{hooks}:2: env_file: {env.work / 'bad.env'}:3:" in r.stderr
    check = env.cli("hooks", "check", str(hooks))
    assert check.returncode == 2 and f"{hooks}:2: env_file:" in check.stderr
    # Nothing was launched, not even a daemon.
    assert not (env.home / "runs").exists() or not any((env.home / "runs").iterdir())
    assert not (env.home / "daemon.pid").exists()


def test_hooks_check_counts_the_variables_never_their_values(env: Env) -> None:
    env.write("a.env", "API_TOKEN=tok-value-1234\nexport B=2\nBARE\n")
    hooks = env.write("hooks.yaml", "purpose: p\nenv_file: a.env\nhooks: []\n")
    r = env.cli("hooks", "check", str(hooks), check=True)
    assert f"  env_file: {env.work / 'a.env'}: sets 2 variables" in r.stdout
    assert "tok-value" not in r.stdout + r.stderr


def test_a_secret_from_an_env_file_is_masked_in_ps_and_fires(env: Env, daemon: Daemon) -> None:
    secret = "from-the-env-file-7d2c9a"
    env.write("secrets.env", f'DEPLOY_TOKEN="{secret}"\n')
    hooks = env.write("hooks.json", json.dumps({"hooks": [match_hook("^token", "leak")]}))
    code = "import os; print('token', os.environ['DEPLOY_TOKEN'])"
    r = env.cli(
        "run", "-d", "--json", "--hook", str(hooks), "--env-file", "secrets.env",
        "--", sys.executable, "-c", code, check=True,
    )  # fmt: skip
    pid = json.loads(r.stdout)["id"]
    env.wait_state(pid, "exited")
    fires = wait_until(env.fires, what="the leak fire")
    assert fires[0]["detail"] == "token [redacted $DEPLOY_TOKEN]"
    shown = [
        env.cli(*a, check=True).stdout for a in (("ps", "--json"), ("fires", "--json"), ("fires",))
    ]
    for text in shown:
        assert secret not in text
    assert secret in env.cli("logs", str(pid), check=True).stdout  # the output, as printed
