"""Sending one message to a named target through Apprise (blocking: call it from a worker
thread), and showing target URLs with their secrets masked.

Apprise speaks ntfy, Slack, Discord, email, Matrix, Telegram, plain JSON/form webhooks and
a hundred more by URL (https://github.com/caronc/apprise/wiki). Each request has Apprise's
own socket timeouts (4 s connect, 4 s read; `?cto=`/`?rto=` in a URL change them).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from supervisor.redaction import redact_text

_USERINFO = re.compile(r"^[^/@\s]*@")


def mask_url(url: str) -> str:
    """A target URL as it may be shown: Apprise's privacy form (tokens and passwords cut
    to their first and last characters), without its query; if Apprise cannot read it,
    its scheme and host only."""
    import apprise

    plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    if plugin:
        shown = str(plugin.url(privacy=True))  # type: ignore[no-untyped-call]
        return shown.split("?", 1)[0]
    scheme, _, rest = url.partition("://")
    host = _USERINFO.sub("***@", rest).split("/", 1)[0]
    return f"{scheme}://{host}/..." if rest else f"{scheme}://..."


def mask_text(text: str, urls: Sequence[str]) -> str:
    """`text` (an error Apprise logged) with each URL, and any credential, masked."""
    for url in sorted(urls, key=len, reverse=True):
        text = text.replace(url, mask_url(url))
    return redact_text(text)


@dataclass(frozen=True)
class Sent:
    ok: bool
    error: str | None = None  # what went wrong, masked


def send(urls: Sequence[str], title: str, body: str) -> Sent:
    """Send `title` and `body` to every URL of one target; ok only if each took it."""
    import apprise

    box = apprise.Apprise()
    bad = [u for u in urls if not box.add(u)]
    if bad:
        masked = ", ".join(mask_url(u) for u in bad)
        return Sent(False, f"Apprise cannot use {masked}; check the URL's form")
    with apprise.LogCapture(level=logging.WARNING) as captured:  # type: ignore[no-untyped-call]
        ok = bool(box.notify(title=title, body=body))
        said = captured.getvalue() if not ok else ""
    if ok:
        return Sent(True)
    lines = [line.split(" - ", 2)[-1] for line in str(said).splitlines() if line.strip()]
    why = "; ".join(lines[-3:]) or "Apprise reported a failed send"
    return Sent(False, mask_text(why, urls)[:500])
