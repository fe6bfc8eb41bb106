"""Credentials are masked in everything saved or shown, and still reach the tools."""

from __future__ import annotations

import base64
import hashlib
import sys
from collections.abc import Callable

import pytest
import yaml
from conftest import Daemon, Env
from test_threads_e2e import results, script, settled

from supervisor.redaction import is_secret_name, make_redact, redact_text, tool_env

GH_PAT = "github_pat_11ABCDEFG0" + "x7Kq" * 15
PEM_BODY = [base64.b64encode(bytes(range(i, i + 48))).decode() for i in (0, 48, 96)]
PEM = "\n".join(["-----BEGIN RSA PRIVATE KEY-----", *PEM_BODY, "-----END RSA PRIVATE KEY-----"])

# (text, what it must become): forms that are credentials whatever the variable's name.
MASKED = [
    ("postgres://app:pw@host/db", "postgres://app:***@host/db"),
    ("db: mysql://root:toor@localhost:3306/x", "db: mysql://root:***@localhost:3306/x"),
    ("redis://:hunter2@h:6379/0", "redis://:***@h:6379/0"),
    ("url=https://u:p%40ss@h/x", "url=https://u:***@h/x"),
    ("MYSQL_PWD=short", "MYSQL_PWD=***"),
    ("export API_KEY=abc123 && make", "export API_KEY=*** && make"),
    ("SENTRY_DSN=https://abc@o1.ingest.sentry.io/4", "SENTRY_DSN=***"),
    ("GH_PAT=anything", "GH_PAT=***"),
    ("HTTP_AUTHORIZATION=xyz", "HTTP_AUTHORIZATION=***"),
    ("--password=hunter2 --user=bob", "--password=*** --user=bob"),
    ('{"password": "hunter22", "user": "bob"}', '{"password": "***", "user": "bob"}'),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG", "aws_secret_access_key = ***"),
    ("Authorization: Bearer abcdefghijklmnop1234", "Authorization: Bearer ***"),
    ("-H 'Proxy-Authorization: Basic dXNlcjpwYXNz'", "-H 'Proxy-Authorization: Basic ***'"),
    ("token " + "ghp_" + "a1B2" * 9, "token [redacted GitHub token]"),
    ("x=gho_" + "a1B2" * 9 + ",", "x=[redacted GitHub token],"),
    (GH_PAT, "[redacted GitHub token]"),
    ("sk-proj-abcDEF1234567890abcdefghijkl", "[redacted OpenAI key]"),
    ("key sk-" + "Ab3d" * 12, "key [redacted OpenAI key]"),
    ("sk-ant-api03-" + "Xy9_" * 10, "[redacted Anthropic key]"),
    ("xoxb-1234567890-abcdefghij", "[redacted Slack token]"),
    ("id=AKIAIOSFODNN7EXAMPLE;", "id=[redacted AWS key];"),
    ("glpat-" + "abcd1234" * 3, "[redacted GitLab token]"),
    ("hf_" + "AbCd1234" * 4, "[redacted Hugging Face token]"),
    (f"key:\n{PEM}\nafter", "key:\n[redacted private key]\nafter"),
    (PEM.replace("\n", " "), "[redacted private key]"),  # `echo $KEY` joins its lines
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNz (cut", "[redacted private key]"),
    # An output tail that starts inside a key: its lines and footer, up to the footer.
    ("\n".join([*PEM.split("\n")[2:], "done"]), "[redacted private key]\ndone"),
]

# Ordinary output that must come out unchanged.
PLAIN = [
    "commit 3f2a9c0d1e4b5a6978877665544332211aabbccd",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "PATH=/usr/bin:/bin PWD=/work OLDPWD=/tmp",
    "Author: Alice <alice@example.com>",
    "GIT_AUTHOR_NAME=Alice",
    "Unexpected token: '}'",
    "key: build-cache-v1",
    "max_tokens=100 tokens: 4096",
    "https://registry.npmjs.org:443/@scope/pkg",
    "https://user@example.com/repo.git",
    "sk-spinner-double-bounce",
    "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
    "passed: 12, failed: 0",
    "ssh -o PasswordAuthentication=no host",
    "",
    "x",
]


@pytest.mark.parametrize(("text", "want"), MASKED)
def test_credentials_are_masked_by_their_form(text: str, want: str) -> None:
    assert redact_text(text) == want
    assert make_redact({})(text) == want


@pytest.mark.parametrize("text", PLAIN)
def test_ordinary_output_is_left_alone(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        *[(n, True) for n in ("MYSQL_PWD", "SENTRY_DSN", "GH_PAT", "DB_PASS", "PGPASSWORD")],
        *[(n, True) for n in ("BASIC_AUTH", "OAUTH_TOKEN", "HTTP_AUTHORIZATION", "AUTHKEY")],
        *[(n, True) for n in ("SSH_PRIVATE", "AWS_SECRET_ACCESS_KEY", "DOCKER_CREDENTIALS")],
        *[(n, True) for n in ("api-key", "db.password", "--password")],
        *[(n, False) for n in ("PATH", "PYTHONPATH", "PWD", "OLDPWD", "GIT_AUTHOR_NAME")],
        *[(n, False) for n in ("AUTHOR", "CERT_AUTHORITY", "SSH_AUTH_SOCK", "PATTERN", "HOME")],
        *[(n, False) for n in ("GOOGLE_APPLICATION_CREDENTIALS_FILE", "API_KEY_PATH")],
        *[(n, False) for n in ("GIT_ASKPASS", "SSH_ASKPASS")],  # a program, not a password
    ],
)
def test_which_names_hold_credentials(name: str, secret: bool) -> None:
    # AUTH is a credential (BASIC_AUTH) but AUTHOR is not; PAT is a word (GH_PAT), not PATH.
    assert is_secret_name(name) is secret


def test_known_values_are_masked_wherever_they_appear() -> None:
    env = {
        "MYSQL_PWD": "s3cr3t-mysql-pw",
        "DATABASE_URL": "postgres://app:dbpass-1234@db.local/app",
        "SHORT_TOKEN": "abc",  # too short to mask in free text
        "PWD": "/work/dir",
        "HOME": "/root",
    }
    redact = make_redact(env)
    assert redact("pw s3cr3t-mysql-pw.") == "pw [redacted $MYSQL_PWD]."
    # The password of a URL any variable holds, also printed alone (urlparse(...).password).
    assert redact("got dbpass-1234") == "got ***"
    assert redact(env["DATABASE_URL"]) == "postgres://app:***@db.local/app"
    assert redact("abc in /work/dir and /root") == "abc in /work/dir and /root"


def test_tools_get_credentials_but_not_the_model_keys() -> None:
    env = {"MYSQL_PWD": "x" * 10, "GH_PAT": GH_PAT, "OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}
    assert tool_env(env) == {"MYSQL_PWD": "x" * 10, "GH_PAT": GH_PAT}


def test_a_large_output_is_masked_in_one_pass() -> None:
    # A secret at the start, in the middle and at the end of 1 MB of ordinary lines.
    line = "2026-11-24 INFO worker[7] job id=3f2a9c0d status: ok path=/var/lib/x.json\n"
    bulk = line * (1_000_000 // len(line))
    text = f"MYSQL_PWD=abc\n{bulk}{PEM}\n{bulk}postgres://a:b@h/d"
    out = redact_text(text)
    assert out == f"MYSQL_PWD=***\n{bulk}[redacted private key]\n{bulk}postgres://a:***@h/d"


SECRETS = {
    "MYSQL_PWD": "my-sql-pw-7f3a9c",
    "DATABASE_URL": "postgres://app:db-pw-5e1d2b@db.internal:5432/app",
    "SENTRY_DSN": "https://0a1b2c3d4e5f60718293a4b5c6d7e8f9@o12.ingest.sentry.io/345",
    "GH_PAT": GH_PAT,
    "SIGNING_PEM": PEM,  # a name that says nothing: masked by its form
}
# What must never be saved or shown: each value, and each part a leak would show.
NEEDLES = [*SECRETS.values(), "my-sql-pw-7f3a9c", "db-pw-5e1d2b", "0a1b2c3d4e5f6071", *PEM_BODY]


# Kept as they are: the process's own output as it printed it, and the environment it was
# launched with (mode 0600, checked against the DB's hash: tools get it after a restart).
UNMASKED = ("output.log", "env.json")


def test_credentials_reach_the_tool_and_nothing_saved_or_shown(
    env: Env, start_daemon: Callable[[], Daemon]
) -> None:
    # Given both ways: `run --env` (the process's environment, which tools get once the
    # process's environment reaches them) and the daemon's own environment (which tools get
    # today): either way every value must be masked in what is saved.
    env.extra.update(SECRETS)
    daemon = start_daemon()
    for name in SECRETS:
        del env.extra[name]  # the CLI below knows none of them: nothing masks at display
    names = " ".join(f'"${n}"' for n in SECRETS)
    command = (
        f"echo {names}; echo $SIGNING_PEM; env; "
        f'printf %s "{"".join(f"${{{n}}}" for n in SECRETS)}" | sha256sum > seen.txt'
    )
    turns = script(
        env,
        [
            {"tool_calls": [{"name": "Bash", "arguments": {"command": command}}]},
            {"content": f"The password is {SECRETS['MYSQL_PWD']}, url {SECRETS['DATABASE_URL']}"},
        ],
    )
    body = {
        "purpose": "secrets",
        "hooks": [{"name": "db", "on_output_match": {"pattern": "^DB "}, "instructions": "x"}],
        "agent": {"model": f"scripted:{turns.name}", "permissions": {"allow": ["Bash"]}},
    }
    hooks = env.write("hooks.yaml", yaml.safe_dump(body))
    # The matched line and the output before it (a key's lines) go into the fire and the prompt.
    code = (
        "import os; print(os.environ['SIGNING_PEM']); "
        "print('DB', os.environ['DATABASE_URL'], 'GH_PAT=' + os.environ['GH_PAT'])"
    )
    flags = [f"--env={k}={v}" for k, v in SECRETS.items()]
    env.cli("run", "-d", "--hook", str(hooks), *flags, "--", sys.executable, "-c", code, check=True)
    t = settled(env, "t1", timeout=60)
    assert t["status"] == "completed", t

    # The tool saw every value, whole.
    expected = hashlib.sha256("".join(SECRETS.values()).encode()).hexdigest()
    assert (env.work / "seen.txt").read_text().split()[0] == expected
    # It was asked to print them, and did: masked.
    output = results(t)[0]["output"]
    assert "[redacted $MYSQL_PWD]" in output and "postgres://app:***@db.internal" in output
    assert "[redacted private key]" in output

    shown = [
        env.cli(*args, check=True).stdout
        for args in (
            ("ps",),
            ("ps", "--json"),
            ("fires",),
            ("fires", "--json"),
            ("thread", "show", "t1"),
            ("thread", "show", "t1", "--json"),
        )
    ]
    daemon.kill()
    saved = {p: p.read_bytes() for p in env.home.rglob("*") if p.is_file()}
    assert any(p.name == "state.db" for p in saved) and daemon.log in saved
    for needle in NEEDLES:
        for text in shown:
            assert needle not in text, (needle, text)
        for path, data in saved.items():
            if path.name not in UNMASKED:
                assert needle.encode() not in data, (needle, path)


def test_masking_does_not_go_quadratic() -> None:
    # Not a timing test (the machine is shared): a bound only a quadratic pass would break.
    import time

    line = "ts=2026-11-24 level=info msg='job done' id=3f2a9c0d path=/var/x.json key=v\n"
    text = line * 13_000  # ~1 MB
    t0 = time.process_time()
    redact_text(text)
    assert time.process_time() - t0 < 20, "masking 1 MB took over 20 s of CPU"


def test_a_value_only_the_process_has_is_masked_in_its_threads(env: Env, daemon: Daemon) -> None:
    # The daemon does not know it: the thread's own environment masks what its tools print.
    secret = "only-the-process-knows-9c1e"
    command = 'echo "got $DEPLOY_TOKEN"; printf %s "$DEPLOY_TOKEN" > seen.txt'
    turns = script(
        env,
        [{"tool_calls": [{"name": "Bash", "arguments": {"command": command}}]}, {"content": "ok"}],
    )
    body = {
        "purpose": "secrets",
        "hooks": [{"name": "done", "on_exit": {}, "instructions": "x"}],
        "agent": {"model": f"scripted:{turns.name}", "permissions": {"allow": ["Bash"]}},
    }
    hooks = env.write("hooks.yaml", yaml.safe_dump(body))
    flags = ["--hook", str(hooks), f"--env=DEPLOY_TOKEN={secret}"]
    env.cli("run", "-d", *flags, "--", sys.executable, "-c", "print('hi')", check=True)
    t = settled(env, "t1", timeout=60)
    assert t["status"] == "completed", t
    assert (env.work / "seen.txt").read_text() == secret  # the tool got the process's value
    assert results(t)[0]["output"].strip() == "got [redacted $DEPLOY_TOKEN]"
    daemon.kill()
    for path in env.home.rglob("*"):
        if path.is_file() and path.name not in UNMASKED:
            assert secret.encode() not in path.read_bytes(), path
