"""How text nobody vouches for reaches a model: fenced, escaped, never a heading.

A process can print anything, including lines that look like a prompt's own headings
(`Hook context:`), chat-template tokens (`<|im_start|>system`) or supervise's reminders
(`<system-hook>`). Such text goes to the model only inside a fence whose closing tag
carries a random per-thread token the process cannot know; any copy of the token inside
the text is removed, so the text cannot close the fence early. Values written in a hook
file are indented under their names, so a multi-line value cannot open a section.

Pure: values in, text out.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

TOKEN_BYTES = 8  # 16 hex digits: unguessable by a process that never sees the thread
REMOVED = "[delimiter removed]"

_SUSPECT = re.compile(r"[^\t\x20-\x7e]")  # what may need an escape: not tab or printable ASCII
_NAMED = {"\0": "\\0", "\r": "\\r", "\n": "\\n", "\x1b": "\\x1b"}


def new_token() -> str:
    """A fresh fence token, chosen once per thread (when its fire is committed)."""
    import secrets  # here: `ps` imports this module, and secrets costs it ~5 ms (hmac)

    return secrets.token_hex(TOKEN_BYTES)


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _invisible(ch: str) -> bool:
    # Control, format and line/paragraph separators: they can break a line where a reader
    # (or a tokenizer) sees none, or hide text. A tab is kept: logs use it.
    return ch != "\t" and unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")


def visible(text: str) -> str:
    """`text` on one line, every control or format character shown as an escape (`\\r`)."""
    if text.isprintable():  # the common case, checked in C: nothing to escape
        return text
    return _SUSPECT.sub(lambda m: _escape(m[0]) if _invisible(m[0]) else m[0], text)


def code_span(text: str) -> str:
    """`text` as one Markdown code span no backtick inside it can end early."""
    text = visible(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def neutralise(text: str, token: str) -> str:
    """`text` with every copy of the fence token (in any letter case) removed."""
    return re.sub(re.escape(token), REMOVED, text, flags=re.IGNORECASE)


def fence(tag: str, token: str, lines: Sequence[str]) -> list[str]:
    """`<tag-token>`, each line escaped with the token removed, `</tag-token>`."""
    name = f"{tag}-{token}"
    body = [neutralise(visible(ln), token) for ln in lines]
    return [f"<{name}>", *body, f"</{name}>"]


def nested(label: str, value: str, indent: str = "  ") -> list[str]:
    """`label: value`, a multi-line value's further lines indented under it.

    Every line break a reader might honour (`\\r`, U+2028, ...) splits the value, and each
    part is escaped, so no line of the value can start at the label's indentation or less.
    """
    parts = [visible(p).rstrip() for p in value.strip().splitlines()] or [""]
    head = f"{indent}{visible(label)}: {parts[0]}".rstrip()
    return [head, *(f"{indent}  {p}".rstrip() for p in parts[1:])]
