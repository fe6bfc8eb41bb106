"""A hook file's `restart:` key into a `RestartSpec`, every problem at its key path.

`restart: always` (or `on-failure`, `no`) is the short form; the mapping form names any of
`policy`, `delay`, `max_delay`, `factor`, `reset_after`, `max_restarts`, `within`,
`after_thread`, each left out taking its default (supervisor/restarts.py says which and why).
The hook file loader turns each key path into FILE:LINE.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_threads.problems import MAX_SECONDS, KeyPath, Problems, is_number
from supervisor.restarts import POLICIES, RestartSpec, format_duration, parse_duration

KEYS = (
    "policy",
    "delay",
    "max_delay",
    "factor",
    "reset_after",
    "max_restarts",
    "within",
    "after_thread",
)
_POLICIES = ", ".join(POLICIES)
_EXAMPLE = "restart: {policy: on-failure, delay: 1s, max_restarts: 10, within: 10m}"
MAX_FACTOR = 100.0


def check_restart(value: Any, r: Problems, path: KeyPath = ("restart",)) -> RestartSpec | None:
    """The restart policy `value` spells; None when absent or bad (bad: reported in `r`)."""
    if value is None:
        return None
    if value is False:  # YAML reads a bare `no` as false
        return RestartSpec("no")
    if isinstance(value, str):
        short = _policy(value, path, r)
        return None if short is None else RestartSpec(short)  # type: ignore[arg-type]
    if not isinstance(value, Mapping):
        r.bad(path, f"must be a policy ({_POLICIES}) or a mapping", value, f"write {_EXAMPLE}")
        return None
    before = len(r.found)
    r.unknown_keys(value, path, KEYS)
    raw = value.get("policy")
    policy: str | None
    if raw is None:
        r.add(path, f"restart has no policy; add policy: on-failure (or {_POLICIES})")
        policy = None
    elif raw is False:
        policy = "no"
    elif isinstance(raw, str):
        policy = _policy(raw, (*path, "policy"), r)
    else:
        r.bad((*path, "policy"), f"must be one of {_POLICIES}", raw, "write policy: on-failure")
        policy = None
    d = RestartSpec()
    delay = check_duration(value, path, "delay", r, d.delay)
    max_delay = check_duration(value, path, "max_delay", r, d.max_delay)
    reset_after = check_duration(value, path, "reset_after", r, d.reset_after)
    within = check_duration(value, path, "within", r, d.within, positive=True)
    factor = _factor(value, path, r)
    max_restarts = r.count(value, (*path, "max_restarts"), low=1, eg=10)
    after = value.get("after_thread", False)
    if not isinstance(after, bool):
        r.bad((*path, "after_thread"), "must be true or false", after, "write after_thread: true")
    if delay is not None and max_delay is not None and "max_delay" not in value:
        max_delay = max(max_delay, delay)  # a long delay alone: it is the cap too
    if delay is not None and max_delay is not None and max_delay < delay:
        r.add(
            (*path, "max_delay"),
            f"restart.max_delay ({format_duration(max_delay)}) is below restart.delay "
            f"({format_duration(delay)}); raise max_delay or lower delay",
        )
    if len(r.found) > before or policy is None:
        return None
    assert delay is not None and max_delay is not None and reset_after is not None
    assert within is not None and factor is not None
    return RestartSpec(
        policy,  # type: ignore[arg-type]  # _policy checked it
        delay=delay,
        max_delay=max_delay,
        factor=factor,
        reset_after=reset_after,
        max_restarts=d.max_restarts if max_restarts is None else max_restarts,
        within=within,
        after_thread=bool(after),
    )


def _policy(text: str, path: KeyPath, r: Problems) -> str | None:
    if text in POLICIES:
        return text
    guess = {"on_failure": "on-failure", "onfailure": "on-failure", "unless-stopped": "always"}
    fix = f"write {guess[text]}" if text in guess else f"write one of {_POLICIES}"
    r.bad(path, f"must be one of {_POLICIES}", text, fix)
    return None


def check_duration(
    data: Mapping[str, Any],
    path: KeyPath,
    key: str,
    r: Problems,
    default: float | None,
    *,
    positive: bool = False,
    example: float | None = None,
) -> float | None:
    """`data[key]` as seconds (`30s`, `5m`, a number), `default` when absent; None with the
    problem added to `r` (its fix writes `example`, else the default)."""
    value = data.get(key)
    if value is None:
        return default
    shown = example if example is not None else default
    fix = f"write {key}: {format_duration(shown if shown is not None else 60.0)}"
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        r.bad((*path, key), f"must be {exc}", value, fix)
        return None
    if seconds > MAX_SECONDS or (positive and seconds <= 0):
        low = "above 0" if positive else "from 0"
        r.bad((*path, key), f"must be a duration {low} up to 10 years", value, fix)
        return None
    return seconds


def _factor(data: Mapping[str, Any], path: KeyPath, r: Problems) -> float | None:
    value = data.get("factor")
    if value is None:
        return RestartSpec().factor
    if is_number(value) and 1 <= value <= MAX_FACTOR:
        return float(value)
    what = f"must be a number from 1 (a fixed delay) to {MAX_FACTOR:g}"
    r.bad((*path, "factor"), what, value, "write factor: 2")
    return None
