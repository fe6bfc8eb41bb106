"""One thread per failure: a hook's `dedup:`, a fire's signature, and what a repeat becomes.

Pure: values in, values out. The fire's transaction (`state.fires.commit_fires`) looks up the
latest thread of the process with the fire's dedup key and hands it to `decide`, so the choice
and what it writes commit together (exactly once across a daemon SIGKILL).

- `dedup: true` (key `signature`): the hook's name, and the exit code (on_exit) or the
  matched line with its numbers, hex ids and timestamps masked (on_output_match).
- `dedup: {key: hook}`: every fire of the hook is the same failure.
- `dedup: process` (key `process`): any open thread of the same process (any hook, any run
  of a restarted one), so an on_exit after an on_output_match joins the match's thread.

A fire whose key matches an open thread (queued, running, waiting for approval) joins it: the
fire is recorded (`deduplicated`) and the thread gets a message. Within `cooldown` after that
thread ended, the fire is recorded as `cooldown` and nothing else happens: a message would
queue the finished thread again, and a person who saw it end does not want it back for a
repeat. After the cooldown a repeat starts a new thread. Neither a join nor a cooldown uses up
`max_spawns`: only new threads do.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from agent_threads.problems import KeyPath, Problems
from supervisor.restartfile import check_duration
from supervisor.restarts import format_duration

if TYPE_CHECKING:  # a hook file's loader must not import SQLAlchemy (`hooks check`, `ps`)
    from state.repeats import SeenThread

DedupKey = Literal["signature", "hook", "process"]
DEDUP_KEYS: tuple[DedupKey, ...] = get_args(DedupKey)
KEYS = ("key", "cooldown", "window")
# A repeat within minutes of a diagnosis is the same incident (Alertmanager groups alerts by
# minutes too); long enough that a flapping failure does not start a thread per flap.
DEFAULT_COOLDOWN = 600.0
# A thread is told of at most this many repeats; later ones are recorded as fires only, so a
# line printed in a tight loop cannot flood its transcript (and the model's context).
MAX_REPEAT_MESSAGES = 20
# Matches of a dedup hook worth finding in one read of output: repeats no longer use up
# max_spawns, so this bounds what one batch records.
SCAN_BUDGET = 200
# The lookup key of `dedup: process`: any thread of the process (state.repeats.ANY_THREAD).
ANY_THREAD = ""


@dataclass(frozen=True)
class DedupSpec:
    """A hook's `dedup:`; times in seconds. `window`: a repeat joins an open thread only if
    that thread started less than this ago (None: however old)."""

    key: DedupKey = "signature"
    cooldown: float = DEFAULT_COOLDOWN
    window: float | None = None

    def text(self) -> str:
        """How `hooks check` shows it: `dedup by signature, cooldown 10m`."""
        window = f", window {format_duration(self.window)}" if self.window is not None else ""
        return f"dedup by {self.key}, cooldown {format_duration(self.cooldown)}{window}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "cooldown": self.cooldown}
        if self.window is not None:
            out["window"] = self.window
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DedupSpec:
        key = str(data.get("key", "signature"))
        if key not in DEDUP_KEYS:
            raise ValueError(f"dedup key {key!r} is not one of {', '.join(DEDUP_KEYS)}")
        window = data.get("window")
        return cls(
            key,
            float(data.get("cooldown", DEFAULT_COOLDOWN)),
            None if window is None else float(window),
        )


_EXAMPLE = "dedup: {key: signature, cooldown: 10m}"


def check_dedup(value: Any, r: Problems, path: KeyPath) -> DedupSpec | None:
    """A hook's `dedup:` as written: true/false, a key (`process`), or a mapping. None when
    absent, false or bad (bad: reported in `r` at its key path)."""
    if value is None or value is False:
        return None
    if value is True:
        return DedupSpec()
    keys = ", ".join(DEDUP_KEYS)
    if isinstance(value, str):
        if value in DEDUP_KEYS:
            return DedupSpec(value)
        r.bad(path, f"must be true, one of {keys}, or a mapping", value, "write dedup: true")
        return None
    if not isinstance(value, Mapping):
        r.bad(path, f"must be true, one of {keys}, or a mapping", value, f"write {_EXAMPLE}")
        return None
    before = len(r.found)
    r.unknown_keys(value, path, KEYS)
    key = value.get("key", "signature")
    if key not in DEDUP_KEYS:
        r.bad((*path, "key"), f"must be one of {keys}", key, "write key: signature")
    cooldown = check_duration(value, path, "cooldown", r, DEFAULT_COOLDOWN)
    window = check_duration(value, path, "window", r, None, positive=True, example=3600.0)
    if len(r.found) > before or cooldown is None:
        return None
    return DedupSpec(key, cooldown, window)


# -- the signature -----------------------------------------------------------------------------

# Most specific first: a UUID holds hex runs and digits, a timestamp holds numbers.
_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        ),
        "<uuid>",
    ),
    # ISO 8601 dates and times: 2026-11-26, 2026-11-26T14:02:07.123+01:00, 2026-11-26 14:02:07,123
    (
        re.compile(
            r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:[.,]\d+)?)?"
            r"(?:Z|[+-]\d{2}:?\d{2}\b)?"
        ),
        "<time>",
    ),
    # nginx / Apache: 26/Nov/2026:14:02:07 +0000
    (re.compile(r"\d{1,2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2}(?: [+-]\d{4})?"), "<time>"),
    # syslog: Nov 26 14:02:07 (the time is masked below; the day with it)
    (
        re.compile(
            r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} +\d{2}:\d{2}:\d{2}"
        ),
        "<time>",
    ),
    # Go's log: 2026/11/26 14:02:07
    (re.compile(r"\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?"), "<time>"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<time>"),
    (re.compile(r"0[xX][0-9a-fA-F]+"), "<hex>"),
    # A long run of hex with a letter and a digit: a commit, a request id, a hash.
    (re.compile(r"\b(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"), "<hex>"),
)
# Numbers, not digits inside a word: `line 42`, `pid=1234`, `user_17` are masked, while
# `utf8`, `x86` or `log4j` stay (they name things, not instances).
_NUMBER = re.compile(r"(?<![A-Za-z0-9])[-+]?\d+(?:\.\d+)?")
# ... but a number that says which failure it is stays: an HTTP status after the request
# (nginx: `"GET / HTTP/1.1" 502`), `status=500`, `exit code 137`, `errno 28`, SQLSTATE.
_KIND_BEFORE = re.compile(
    r"(?:\b(?:status|code|errno|sqlstate)\W{0,3}|HTTP/\d(?:\.\d)?\"\s)$", re.IGNORECASE
)
_MAX_SIGNATURE_CHARS = 1000


def mask(line: str) -> str:
    """`line` with what differs between two occurrences of one failure masked: UUIDs, hex
    ids, timestamps, numbers; surrounding whitespace dropped."""
    out = line.strip()
    for pattern, placeholder in _MASKS:
        out = pattern.sub(placeholder, out)
    return _NUMBER.sub(_number, out)


def _number(m: re.Match[str]) -> str:
    before = m.string[max(0, m.start() - 24) : m.start()]
    return m.group(0) if _KIND_BEFORE.search(before) else "<n>"


@dataclass(frozen=True)
class Occurrence:
    """What a fire's signature is made of."""

    hook: str
    trigger: str
    exit_code: int | None = None
    signal: str | None = None
    matched_line: str | None = None


def signature(spec: DedupSpec, fire: Occurrence) -> str:
    """The readable signature of a fire: equal signatures are one failure."""
    if spec.key == "hook":
        return f"hook {fire.hook}"
    if fire.trigger == "on_output_match":
        return f"hook {fire.hook} line {mask(fire.matched_line or '')[:_MAX_SIGNATURE_CHARS]}"
    if fire.trigger in ("on_exit", "on_crash_loop"):
        how = f"signal {fire.signal}" if fire.signal else f"exit {fire.exit_code}"
        return f"hook {fire.hook} {fire.trigger} {how}"
    return f"hook {fire.hook} {fire.trigger}"


def dedup_key(spec: DedupSpec, fire: Occurrence) -> str:
    """What a thread's row keeps (`thread.dedup_key`): a digest of the signature, short and
    of one size for an index on both back ends, whatever line was matched."""
    return "s" + hashlib.sha256(signature(spec, fire).encode()).hexdigest()[:40]


def lookup_key(spec: DedupSpec, fire: Occurrence) -> str:
    """The key a fire looks an open thread up by (ANY_THREAD: any thread of the process)."""
    return ANY_THREAD if spec.key == "process" else dedup_key(spec, fire)


# -- the decision ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Join:
    """Join the open thread: the fire is its `nth` (2: the first repeat)."""

    thread_id: int
    nth: int

    @property
    def tell(self) -> bool:
        """Whether the thread gets a message for this repeat (bounded: MAX_REPEAT_MESSAGES)."""
        return self.nth - 1 <= MAX_REPEAT_MESSAGES


@dataclass(frozen=True)
class Cooldown:
    """Record the fire, nothing else: `thread_id` ended less than the cooldown ago."""

    thread_id: int


@dataclass(frozen=True)
class Fresh:
    """No thread to join: the fire goes through the limits, as without dedup."""


Verdict = Join | Cooldown | Fresh


def decide(spec: DedupSpec, seen: SeenThread | None, at: float) -> Verdict:
    """What a fire at `at` becomes, given the latest thread with its key."""
    if seen is None:
        return Fresh()
    if seen.open:
        if spec.window is None or at - seen.created_at <= spec.window:
            return Join(seen.thread_id, seen.fires + 1)
        return Fresh()
    if seen.ended_at is not None and at - seen.ended_at < spec.cooldown:
        return Cooldown(seen.thread_id)
    return Fresh()


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st."""
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
