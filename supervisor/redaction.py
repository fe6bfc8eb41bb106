"""Keeping credentials out of what supervise shows and saves.

Variables named like *KEY*, *TOKEN*, *SECRET*, *PASSWORD*: their values never reach a tool's
environment, and are scrubbed from transcripts, errors and `ps`. Stdlib only: `ps` imports it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


def secret_values(env: Mapping[str, str]) -> dict[str, str]:
    """Values of variables that look like credentials, longest first (for redaction)."""
    found = {k: v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= 8}
    return dict(sorted(found.items(), key=lambda kv: -len(kv[1])))


def make_redact(env: Mapping[str, str]) -> Callable[[str], str]:
    secrets = secret_values(env)

    def redact(text: str) -> str:
        for name, value in secrets.items():
            if value in text:
                text = text.replace(value, f"[redacted ${name}]")
        return text

    return redact


def tool_env(env: Mapping[str, str]) -> dict[str, str]:
    """The daemon's environment without credentials: a tool's output lands in the transcript."""
    return {k: v for k, v in env.items() if not _SECRET_NAME.search(k)}


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
