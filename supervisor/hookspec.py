"""What a hook file means, as plain values: hooks, triggers, limits.

`hookfile.py` turns a file into these; everything else (the daemon, the trigger decisions,
the run-dir snapshot) reads only these. They round-trip through JSON for `spec.json`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from agent_threads.config import AgentConfig
from agent_threads.problems import ConfigWarning, dotted
from state.ratelimit import DEFAULT_RATE as DEFAULT_RATE  # re-exported: hook files' limits
from state.ratelimit import Rate as Rate
from supervisor.dedup import DedupSpec
from supervisor.hookactions import RunCommand, actions_from_json, actions_json
from supervisor.restarts import RestartSpec

TriggerKind = Literal[
    "on_exit",
    "on_output_match",
    "on_timeout",
    "on_crash_loop",
    "on_silence",
    "on_schedule",
    "on_resource",
]


@dataclass(frozen=True)
class FileWarning:
    """A warning where it was written: `FILE:LINE: warning: key.path: what, and why`."""

    file: str
    line: int | None  # None: about the file or directory as a whole
    warning: ConfigWarning

    def __str__(self) -> str:
        at = self.file if self.line is None else f"{self.file}:{self.line}"
        key = dotted(self.warning.path)
        text = f"{at}: warning: {key + ': ' if key else ''}{self.warning.message}"
        return text.encode(errors="backslashreplace").decode()  # printable, always


@dataclass(frozen=True)
class Limits:
    """Limits on what a process's hooks may spawn."""

    max_depth: int = 3
    rate: Rate = DEFAULT_RATE

    def strictest(self, other: Limits) -> Limits:
        """The limits a child process keeps: the stricter of its own and its parent's."""
        return Limits(min(self.max_depth, other.max_depth), self.rate.stricter(other.rate))

    def to_json(self) -> dict[str, Any]:
        return {"max_depth": self.max_depth, "rate": self.rate.text}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Limits:
        return cls(int(data["max_depth"]), Rate.parse(str(data["rate"])))


@dataclass(frozen=True)
class OnExit:
    """Fires once the child has ended and all its output was scanned."""

    exit_codes: tuple[int, ...] | None = None  # None: any exit code
    # False: an exit a person caused (`supervise stop`, or `supervise restart` of a running
    # process) is refused, reason `stopped_by_user`.
    stopped_by_user: bool = True

    def accepts(self, exit_code: int | None) -> bool:
        """Whether an exit with this code fires the hook; None is an unknown code."""
        if self.exit_codes is None:
            return True
        return exit_code is not None and exit_code in self.exit_codes


@dataclass(frozen=True)
class OnOutputMatch:
    """Fires for each output line the regular expression (RE2 syntax) finds a match in."""

    pattern: str


@dataclass(frozen=True)
class OnTimeout:
    """Fires once if the process still runs `seconds` after it started."""

    seconds: float


@dataclass(frozen=True)
class OnCrashLoop:
    """Fires once when the restart policy gives up: too many restarts within its window."""


@dataclass(frozen=True)
class OnSilence:
    """Fires when the process printed nothing for `seconds` (since its start or its last
    output); once per silent stretch: new output arms it again (bounded by max_spawns)."""

    seconds: float

    def text(self) -> str:
        return f"nothing printed for {self.seconds:g}s"


@dataclass(frozen=True)
class OnSchedule:
    """Fires at each time of a crontab expression while the process runs (its `timezone`,
    an IANA name; None: the daemon's local time)."""

    cron: str
    timezone: str | None = None

    def text(self) -> str:
        return f"cron {self.cron}" + (f" {self.timezone}" if self.timezone else "")


@dataclass(frozen=True)
class OnResource:
    """Fires when the process's tree stays over a threshold (RSS in MB, or CPU in percent of
    one core; either that is given) for `for_seconds`; once per stretch over it."""

    rss_mb: float | None = None
    cpu_percent: float | None = None
    for_seconds: float = 0.0

    def text(self) -> str:
        over = []
        if self.rss_mb is not None:
            over.append(f"RSS over {self.rss_mb:g} MB")
        if self.cpu_percent is not None:
            over.append(f"CPU over {self.cpu_percent:g}%")
        return f"{' or '.join(over)} for {self.for_seconds:g}s"


Trigger = OnExit | OnOutputMatch | OnTimeout | OnCrashLoop | OnSilence | OnSchedule | OnResource


def trigger_kind(trigger: Trigger) -> TriggerKind:
    if isinstance(trigger, OnSilence):
        return "on_silence"
    if isinstance(trigger, OnSchedule):
        return "on_schedule"
    if isinstance(trigger, OnResource):
        return "on_resource"
    if isinstance(trigger, OnExit):
        return "on_exit"
    if isinstance(trigger, OnOutputMatch):
        return "on_output_match"
    if isinstance(trigger, OnCrashLoop):
        return "on_crash_loop"
    return "on_timeout"


@dataclass(frozen=True)
class Hook:
    """One process hook: a trigger, what to tell the thread, and how often it may fire."""

    name: str
    trigger: Trigger
    instructions: str  # "": no agent; the hook only acts (notify, run, restart)
    max_spawns: int = 1
    dedup: DedupSpec | None = None  # `dedup:`: repeats join the open thread (supervisor/dedup.py)
    # The hook's own `agent:`, merged over the file's (`agent_for`); None: the file's alone.
    agent: AgentConfig | None = None
    # Actions (supervisor/hookactions.py): done after the fire is committed, once each.
    notify: tuple[str, ...] = ()  # target names from the settings file's [notify.targets]
    run: RunCommand | None = None
    restart: bool = False

    @property
    def kind(self) -> TriggerKind:
        return trigger_kind(self.trigger)

    @property
    def spawns_thread(self) -> bool:
        """A hook without instructions has no agent: its fires only act."""
        return bool(self.instructions)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any]
        if isinstance(self.trigger, OnExit):
            codes = self.trigger.exit_codes
            body = {"exit_codes": list(codes) if codes is not None else None}
            if not self.trigger.stopped_by_user:  # only then: older records stay as they were
                body["stopped_by_user"] = False
        elif isinstance(self.trigger, OnOutputMatch):
            body = {"pattern": self.trigger.pattern}
        elif isinstance(self.trigger, OnCrashLoop):
            body = {}
        elif isinstance(self.trigger, OnSilence | OnSchedule | OnResource):
            body = _more_trigger_json(self.trigger)
        else:
            body = {"seconds": self.trigger.seconds}
        out: dict[str, Any] = {
            "name": self.name,
            self.kind: body,
            "instructions": self.instructions,
            "max_spawns": self.max_spawns,
        }
        if self.dedup is not None:  # only then: older records stay as they were
            out["dedup"] = self.dedup.to_json()
        if self.agent is not None:
            out["agent"] = self.agent.to_json()
        return {**out, **actions_json(self.notify, self.run, self.restart)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Hook:
        trigger: Trigger
        if "on_exit" in data:
            codes = data["on_exit"].get("exit_codes")
            trigger = OnExit(
                tuple(int(c) for c in codes) if codes is not None else None,
                stopped_by_user=bool(data["on_exit"].get("stopped_by_user", True)),
            )
        elif "on_output_match" in data:
            trigger = OnOutputMatch(str(data["on_output_match"]["pattern"]))
        elif "on_crash_loop" in data:
            trigger = OnCrashLoop()
        elif (more := _more_trigger_from_json(data)) is not None:
            trigger = more
        else:
            trigger = OnTimeout(float(data["on_timeout"]["seconds"]))
        notify, run, restart = actions_from_json(data)
        name = str(data["name"])
        return cls(
            name,
            trigger,
            str(data.get("instructions") or ""),
            int(data["max_spawns"]),
            dedup=DedupSpec.from_json(data["dedup"]) if data.get("dedup") else None,
            agent=AgentConfig.from_json(data["agent"], f"hook {name}")
            if data.get("agent") is not None
            else None,
            notify=notify,
            run=run,
            restart=restart,
        )


def _more_trigger_json(trigger: OnSilence | OnSchedule | OnResource) -> dict[str, Any]:
    if isinstance(trigger, OnSilence):
        return {"seconds": trigger.seconds}
    if isinstance(trigger, OnSchedule):
        return {"cron": trigger.cron, "timezone": trigger.timezone}
    return {
        "rss_mb": trigger.rss_mb,
        "cpu_percent": trigger.cpu_percent,
        "for_seconds": trigger.for_seconds,
    }


def _more_trigger_from_json(data: dict[str, Any]) -> Trigger | None:
    def number(value: Any) -> float | None:
        return None if value is None else float(value)

    if "on_silence" in data:
        return OnSilence(float(data["on_silence"]["seconds"]))
    if "on_schedule" in data:
        body = data["on_schedule"]
        zone = body.get("timezone")
        return OnSchedule(str(body["cron"]), None if zone is None else str(zone))
    if "on_resource" in data:
        body = data["on_resource"]
        return OnResource(
            number(body.get("rss_mb")),
            number(body.get("cpu_percent")),
            float(body.get("for_seconds", 0.0)),
        )
    return None


@dataclass(frozen=True)
class HookFile:
    """A whole hook file (or several merged): the snapshot a run keeps in its spec.json."""

    hooks: tuple[Hook, ...] = ()
    purpose: str | None = None
    context: dict[str, Any] = field(default_factory=dict)
    limits: Limits = Limits()
    agent: AgentConfig = field(default_factory=AgentConfig)
    sources: tuple[str, ...] = ()
    # The limits keys the file(s) wrote (set by the loader); the others are the defaults. Not
    # in spec.json: only merging files, and a thread's process, need it.
    limits_set: frozenset[str] = field(default=frozenset(), compare=False)
    # What the loader accepted but will not use, and why (shown by `hooks check` and `run`;
    # not in spec.json).
    warnings: tuple[FileWarning, ...] = field(default=(), compare=False)
    restart: RestartSpec | None = None  # `restart:`; None: the file says nothing (policy no)
    # `env_file:`, absolute once loaded from a file (relative to it): dotenv files whose
    # variables `run` adds to the launch environment. Paths only, never their values.
    env_files: tuple[str, ...] = ()

    def merge(self, other: HookFile) -> HookFile:
        """Combine two files given to one run: hooks add up, later keys win; a limit both
        files set takes the stricter value, a limit one file sets applies as written.

        Raises:
            ValueError: when both files define a hook with the same name.
        """
        names = {h.name for h in self.hooks}
        clash = sorted(names & {h.name for h in other.hooks})
        if clash:
            raise ValueError(
                f"hook name {clash[0]!r} is defined in more than one hook file; rename one"
            )
        return HookFile(
            hooks=self.hooks + other.hooks,
            purpose=other.purpose if other.purpose is not None else self.purpose,
            context={**self.context, **other.context},
            limits=_merge_limits(self, other),
            agent=self.agent.merge(other.agent),
            sources=self.sources + other.sources,
            limits_set=self.limits_set | other.limits_set,
            warnings=self.warnings + other.warnings,
            restart=other.restart if other.restart is not None else self.restart,
            env_files=self.env_files + other.env_files,
        )

    def agent_for(self, hook: str | None) -> AgentConfig:
        """What a thread of hook `hook` runs with: the hook's own `agent:` over the file's
        (each key the hook sets wins); the file's alone for another hook or none."""
        for h in self.hooks:
            if h.name == hook and h.agent is not None:
                return self.agent.merge(h.agent)
        return self.agent

    def under(self, parent: Limits) -> HookFile:
        """This file as a process a thread starts keeps it: each limit the file sets, made
        no looser than the parent's; the parent's where the file sets none (the defaults
        would clamp a parent's `rate: 100/minute` again)."""
        top = HookFile(limits=parent, limits_set=frozenset(("max_depth", "rate")))
        return replace(self, limits=_merge_limits(top, self), limits_set=top.limits_set)

    def limits_text(self) -> str:
        """The limits that apply, each default marked: what `hooks check` prints."""
        lim = self.limits
        parts = [("max_depth", str(lim.max_depth)), ("rate", lim.rate.text)]
        return " ".join(
            f"{k}={v}" + ("" if k in self.limits_set else " (default)") for k, v in parts
        )

    def to_json(self) -> dict[str, Any]:
        out = {
            "purpose": self.purpose,
            "context": self.context,
            "hooks": [h.to_json() for h in self.hooks],
            "limits": self.limits.to_json(),
            "agent": self.agent.to_json(),
            "sources": list(self.sources),
        }
        if self.restart is not None:  # only then: records without it stay as they were
            out["restart"] = self.restart.to_json()
        if self.env_files:  # likewise
            out["env_files"] = list(self.env_files)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HookFile:
        """Raises: AgentConfigError (the agent section), KeyError or ValueError (the rest)."""
        sources = tuple(data.get("sources", []))
        return cls(
            hooks=tuple(Hook.from_json(h) for h in data.get("hooks", [])),
            purpose=data.get("purpose"),
            context=dict(data.get("context") or {}),
            limits=Limits.from_json(data["limits"]) if "limits" in data else Limits(),
            agent=AgentConfig.from_json(data.get("agent"), ", ".join(sources) or "a launch record"),
            sources=sources,
            restart=RestartSpec.from_json(data["restart"]) if data.get("restart") else None,
            env_files=tuple(str(f) for f in data.get("env_files") or ()),
        )


def _merge_limits(a: HookFile, b: HookFile) -> Limits:
    # Strictest-wins over the defaults would clamp `rate: 100/minute` to the default
    # 10/minute: only values some file wrote take part.
    def pick(key: str) -> Any:
        mine, theirs = getattr(a.limits, key), getattr(b.limits, key)
        if key in a.limits_set and key in b.limits_set:
            return getattr(a.limits.strictest(b.limits), key)
        return theirs if key in b.limits_set else mine

    return Limits(max_depth=pick("max_depth"), rate=pick("rate"))
