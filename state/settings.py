"""Settings of the state layer, each resolved in one place: variable, then default."""

from __future__ import annotations

import os


def busy_timeout(environ: dict[str, str] | None = None) -> float:
    """How long to wait for another writer: `SUPERVISE_DB_TIMEOUT` seconds, else 30."""
    env = os.environ if environ is None else environ
    try:
        return max(0.1, float(env.get("SUPERVISE_DB_TIMEOUT", "30")))
    except ValueError:
        return 30.0
