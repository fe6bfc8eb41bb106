"""Keeping credentials out of what supervise shows and saves.

Tools get credentials (they need them); transcripts, the DB, `ps`, `fires` and daemon.log get
them masked. What is masked (known values by substring search, then one regex pass):

- the values of credential-like variables of an environment (`[redacted $NAME]`), and the
  password of any URL a variable holds;
- `NAME=value` and `name: value` where NAME looks like a credential (see `is_secret_name`);
- URL userinfo passwords (`postgres://app:***@host/db`), `Authorization:` and Bearer values;
- well-known token formats whatever the variable (GitHub, GitLab, OpenAI, Anthropic, Slack,
  AWS, Stripe, Google, Hugging Face, npm, PyPI, JWT) and PEM private key blocks, whole.

The token table follows Yelp/detect-secrets 1.5.0's plugin regexes (Apache-2.0: github_token,
gitlab_token, openai, slack, aws, stripe, npm, pypi_token, jwt, basic_auth, private_key), with
formats it lacks (github_pat_, sk-proj-, sk-ant-, hf_, AIza) after gitleaks' rules. Not the
library itself: its per-line plugin loop and global settings are slow and not thread-safe, it
masks only a PEM header, and `ps` must start fast (stdlib only here).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Mapping

# Substrings that make a variable name a credential (KEY also covers APIKEY, MONKEY: a value
# masked by mistake hides text, a value missed leaks it).
_SECRET_WORD = re.compile(r"KEY|TOKEN|SECRET|PASS|CREDENTIAL|PRIVATE")
# Whole `_`-separated parts: PAT is a part (GH_PAT), not PATH; PWD/DSN end a part (MYSQL_PWD,
# SENTRY_DSN); AUTH starts or ends one but AUTHOR/AUTHORITY (GIT_AUTHOR_NAME) are not secrets.
_SECRET_PART = re.compile(
    r"PAT|[A-Z0-9]*(?:PWD|DSN)|[A-Z0-9]*AUTH(?:ORIZATION|[A-NP-Z0-9][A-Z0-9]*)?"
)
# The shell's own directories, and names whose value says where a secret is, not what.
_NOT_SECRET = frozenset({"PWD", "OLDPWD"})
_NOT_SECRET_LAST = frozenset(
    {"FILE", "PATH", "DIR", "SOCK", "HOST", "PORT", "USER", "USERNAME", "ASKPASS"}
)

# The model providers' keys: the daemon's own, never a tool's (models/openai.py, anthropic.py).
PROVIDER_KEYS = frozenset({"OPENAI_API_KEY", "ANTHROPIC_API_KEY"})

_URL_PW = " password"  # secret_values' name for the password of a URL a variable holds
_MIN_VALUE = 8  # shorter values are too common as plain text to mask wherever they appear

# (label, regex): formats that are secrets wherever they appear. Each starts with a literal
# character and holds no group, so the regex engine rejects a branch on its first character.
_TOKENS: tuple[tuple[str, str], ...] = (
    ("GitHub token", r"gh[pousr]_[A-Za-z0-9]{30,}"),
    ("GitHub token", r"github_pat_[A-Za-z0-9_]{22,}"),
    ("GitLab token", r"glpat-[A-Za-z0-9_-]{20,}"),
    ("Anthropic key", r"sk-ant-[A-Za-z0-9_-]{20,}"),
    # sk- then at least one digit: `sk-spinner-double-bounce` is a CSS class, not a key.
    ("OpenAI key", r"sk-(?=[A-Za-z0-9_-]{0,200}[0-9])[A-Za-z0-9_-]{20,}"),
    ("Stripe key", r"sk_(?:live|test)_[A-Za-z0-9]{20,}"),
    ("Stripe key", r"rk_(?:live|test)_[A-Za-z0-9]{20,}"),
    ("Slack token", r"xox[abposr]-[A-Za-z0-9-]{10,}"),
    ("Slack webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]{20,}"),
    ("AWS key", r"A(?:3T[A-Z0-9]|KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ("Google API key", r"AIza[A-Za-z0-9_-]{35}"),
    ("Hugging Face token", r"hf_[A-Za-z0-9]{30,}"),
    ("npm token", r"npm_[A-Za-z0-9]{36}"),
    ("PyPI token", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"),
    ("JWT", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
)
# An empty group at the END of a branch names it (`lastgroup`) and keeps the first-character test.
_TOKEN_ALTERNATIVES = "|".join(f"{rx}(?P<t{i}>)" for i, (_, rx) in enumerate(_TOKENS))

# How credential names end (API_KEY, MYSQL_PWD, "password"): fixed-width look-behinds at the
# separator keep ordinary `word=value` and `word: value` out of the Python callback.
_NAME_ENDS = [
    *("key", "keys", "pwd", "dsn", "pat", "pass", "auth", "token", "creds", "secret"),
    *("passwd", "apikey", "secrets", "password", "credential", "passphrase", "credentials"),
    "authorization",
]
_NAME_END = "|".join(
    f"(?<=(?i:{'|'.join(w for w in _NAME_ENDS if len(w) == n)})[=:\"' \t])"
    for n in sorted({len(w) for w in _NAME_ENDS})
)

# Every match starts with the non-word character before it (`pre`, kept): a leading class lets
# the engine skip the inside of words in C, several times faster than trying every position.
_PATTERN_TEXT = (
    r"(?P<pre>[^\w])(?:"
    # A PEM private key, header to footer; a block cut short is masked to the end of the text.
    r"-----BEGIN[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----"
    r"(?s:.*?-----END[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----|.*)(?P<pem>)"
    # scheme://user:PASSWORD@host (`443/` before an `@` in a path is a port, not a password).
    r"|//(?<=://)(?P<urluser>[^\s:/?#@'\"<>]*):(?P<urlpw>(?![0-9]+/)[^\s@'\"<>]+)(?=@)"
    r"|" + _TOKEN_ALTERNATIVES + "|"
    # Authorization: Bearer X / Basic X / X (Proxy-Authorization too), and a bare `Bearer X`.
    r"[Aa](?i:uthorization)[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?i:(?:bearer|basic|token|digest|bot)[ \t]+)?(?P<azval>[^\s\"',;]+)"
    r"|[Bb](?i:earer)[ \t]+(?P<brval>[A-Za-z0-9._~+/=-]{16,})"
    # NAME=value, --name=value, "name": "value", key = value, matched from the separator where
    # a credential's name ends just before it; `_name_before` reads that name whole.
    r"|(?:(?<=[=:])|(?<=[\"' \t])(?=[ \t]*[=:]))(?:" + _NAME_END + r")"
    r"(?P<kvsep>(?<=[=:])|[ \t]*[=:])(?!//)(?P<kvgap>[ \t]*[\"']?)"
    r"(?P<kvval>(?!-----BEGIN)[^\s\"',;]+))"
)


@functools.cache
def _pattern() -> re.Pattern[str]:
    # Compiled at first use (a few ms): `supervise run` and `logs` never mask anything.
    return re.compile(_PATTERN_TEXT)


# The end of a PEM key whose header is not in the text: its base64 lines and footer.
_PEM_TAIL = re.compile(
    r"(?:^[A-Za-z0-9+/=]{16,}[ \t]*\r?\n)*-----END[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----",
    re.MULTILINE,
)
_TRIVIAL = re.compile(r"[0-9]+|true|false|null|none|yes|no|\*+|\[redacted.*|\$.*", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@]*:([^\s@]+)@")


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a variable (or option, or config key) named so holds a credential."""
    upper = name.upper().strip("-").replace("-", "_").replace(".", "_")
    parts = [p for p in upper.split("_") if p]
    if upper in _NOT_SECRET or not parts or parts[-1] in _NOT_SECRET_LAST:
        return False
    return bool(_SECRET_WORD.search(upper)) or any(_SECRET_PART.fullmatch(p) for p in parts)


def secret_values(env: Mapping[str, str]) -> dict[str, str]:
    """Values to mask wherever they appear, by the name of what they are, longest first.

    The values of credential-like variables, and the password of a URL any variable holds
    (DATABASE_URL's password is a secret even if its name says nothing).
    """
    found: dict[str, str] = {}
    for name, value in env.items():
        if is_secret_name(name) and len(value) >= _MIN_VALUE:
            found.setdefault(value, name)
        for pw in _URL_PASSWORD.findall(value):
            if len(pw) >= _MIN_VALUE:
                found.setdefault(pw, f"{name}{_URL_PW}")
    ordered = sorted(found.items(), key=lambda kv: -len(kv[0]))
    return {name: value for value, name in ordered}


class Redactor:
    """Masks credentials in text (see the module's docstring): build once, call per text.

    Known values first (a C substring search each), then one regex pass for the forms.
    """

    def __init__(self, *envs: Mapping[str, str]) -> None:
        # Several environments (the daemon's and a process's) in one pass: the form regex
        # runs once per text, not once per environment.
        # A URL's password most often appears in that URL: `postgres://app:***@host` as if
        # the URL were masked by its form.
        found: dict[str, str] = {}
        for env in envs:
            for name, value in secret_values(env).items():
                found.setdefault(value, "***" if name.endswith(_URL_PW) else f"[redacted ${name}]")
        # Longest first: a value containing another is masked whole.
        self.values = sorted(found.items(), key=lambda kv: -len(kv[0]))

    def __call__(self, text: str) -> str:
        for value, mask in self.values:
            if value in text:
                text = text.replace(value, mask)
        return redact_text(text)


def _mask(m: re.Match[str]) -> str:
    kind, pre = m.lastgroup, m.group("pre")
    if kind == "pem":
        return f"{pre}[redacted private key]"
    if kind == "urlpw":
        return f"{pre}//{m.group('urluser')}:***"
    if kind in ("azval", "brval"):  # keep `Authorization: Bearer `, mask what follows
        return f"{m.string[m.start() : m.start(kind)]}***"
    if kind == "kvval":
        key = _name_before(m.string, m.start())
        sep, value = pre + m.group("kvsep") + m.group("kvgap"), m.group("kvval")
        if _masks_value(key, sep, value):
            return f"{sep}***"
        if len(value) >= _MIN_VALUE:  # not a credential's name; its value may hold one (a URL)
            value = redact_text(value)
        return f"{sep}{value}"
    assert kind is not None and kind[0] == "t"
    return f"{pre}[redacted {_TOKENS[int(kind[1:])][0]}]"


def _name_before(text: str, end: int) -> str:
    """The name (`API_KEY`, `--password`, `db.password`) that ends at `end`, maybe quoted."""
    if end > 0 and text[end - 1] in "\"'":  # "password": ... (the separator's `pre` is the quote)
        end -= 1
    start = end
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_.-"):
        start -= 1
    return text[start:end]


def _masks_value(key: str, sep: str, value: str) -> bool:
    if not is_secret_name(key) or _TRIVIAL.fullmatch(value):
        return False
    if "=" in sep:
        return True
    # `name: value` is prose as often as config ("Unexpected token: '}'", "key: build-v1"):
    # only a qualified name (api_key, access_token) and a value long enough to be a secret.
    return key.upper().strip("-\"'") not in {"KEY", "TOKEN", "TOKENS"} and len(value) >= 6


def redact_text(text: str) -> str:
    """Masks what is a credential by its form alone (no environment known here)."""
    # A leading newline gives a match at the very start its non-word `pre` character.
    text = _pattern().sub(_mask, "\n" + text)[1:]
    if "-----END" in text:  # a key's footer left: its header was cut off (an output tail)
        text = _PEM_TAIL.sub("[redacted private key]", text)
    return text


def make_redact(*envs: Mapping[str, str]) -> Callable[[str], str]:
    """A redactor for text that may hold the credentials of `envs`; build once, call per text."""
    return Redactor(*envs)


def tool_env(env: Mapping[str, str]) -> dict[str, str]:
    """A tool's environment: all of it but the model providers' keys (the daemon's own).

    Tools need the process's credentials (a migration needs DATABASE_URL); what they print is
    masked before it is saved.
    """
    return {k: v for k, v in env.items() if k not in PROVIDER_KEYS}


class RedactingFilter(logging.Filter):
    """Scrubs credentials from every record a handler writes: a model's error may echo a key."""

    def __init__(self, redact: Callable[[str], str]) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = self.redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            # The formatter uses exc_text when set: the traceback is scrubbed too.
            record.exc_text = self.redact(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True
