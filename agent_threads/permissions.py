"""Which tool calls a thread may make: allow / ask / deny rules, strictest layer wins.

Rules: `Tool` (any call of it), `Tool(prefix:*)` (its subject starts with prefix),
`Tool(exact)` (its subject is exactly that), `*` (any tool). In a layer, deny beats ask beats
allow, and a tool no rule names asks. A profile is a stack of layers (the hook file's, and
those of the threads above it); a call gets the strictest of their decisions, so a thread can
never have more than its parent had.

Bash commands are judged on a real parse (agent_threads/shellparse): a deny or ask rule hits
if it matches any command the line runs, however quoted, wrapped or nested; an allow rule
must match every one, and a prefix rule never covers a command that writes a file, runs a
substitution, sets variables, or (for git) takes options that run programs. Read, Write and
Edit paths (`file_path`, or the older `path`) are resolved (`~`, relative to the thread's
directory, `..`, symlinks) before any rule sees them, and `$SUPERVISE_HOME` is never theirs.
Glob and Grep are reads of the directory (or file) they search, judged by Read rules as in
Claude Code (and by rules naming them); below it they leave out what Read rules deny or ask
for (`Profile.hider`). Pure but for resolving paths.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent_threads import shellparse, shellprograms
from agent_threads.shellparse import Command

Decision = Literal["allow", "ask", "deny"]
Match = Literal["yes", "maybe", "no"]
_RANK: dict[Decision, int] = {"allow": 0, "ask": 1, "deny": 2}
_RULE = re.compile(r"^\s*(\*|[A-Za-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*$", re.DOTALL)
_FORMS = "write Bash, Bash(git:*), Read(/etc/hosts) or *"
_KEYS = ("allow", "ask", "deny")
_FREE = frozenset({"UpdatePlan"})  # no effect outside the thread: allowed unless a rule says
_COMMAND_TOOLS = frozenset({"Bash", "RunProcess"})
_PATH_TOOLS = frozenset({"Read", "Write", "Edit"})
_SEARCH_TOOLS = frozenset({"Glob", "Grep"})  # a read of the directory they search
_READS = frozenset({"Read", *_SEARCH_TOOLS})
# Files whose contents later run as commands (git's config and hooks, shell start-up files):
# writing one is running code, so `Edit(/w/:*)` alone does not cover it (exact rules do).
_RUNS_LATER = re.compile(
    r"/\.git/(config|hooks/.*|info/attributes)$|/\.(gitconfig|gitmodules|gitattributes|bashrc"
    r"|bash_profile|bash_login|profile|zshrc|zprofile|zshenv)$"
)


@dataclass(frozen=True)
class Where:
    """Where a call is judged from: relative paths resolve against `cwd`; `home` is off limits."""

    cwd: Path | None = None
    home: Path | None = None  # $SUPERVISE_HOME: the supervisor's state, never a tool's
    output: Path | None = None  # the triggering process's output.log: in home, yet readable


@dataclass(frozen=True)
class Rule:
    tool: str  # "*" for any tool
    pattern: str | None = None
    prefix: bool = False

    @classmethod
    def parse(cls, text: str) -> Rule:
        """`Bash`, `Bash(git:*)`, `Read(/etc/hosts)` or `*`.

        Raises:
            ValueError: saying which forms are accepted.
        """
        m = _RULE.match(text) if isinstance(text, str) else None
        if m is None:
            raise ValueError(f"bad permission rule {text!r}; {_FORMS}")
        tool, inner = m.group(1), m.group(2)
        if inner is None:
            return cls(tool)
        if tool == "*":
            raise ValueError(f"bad permission rule {text!r}: * takes no pattern; {_FORMS}")
        prefix = inner.endswith(":*")
        pattern = inner[:-2] if prefix else inner
        if not pattern.strip():
            raise ValueError(f"bad permission rule {text!r}: empty pattern; {_FORMS}")
        return cls(tool, pattern, prefix)

    def __str__(self) -> str:
        if self.pattern is None:
            return self.tool
        return f"{self.tool}({self.pattern}{':*' if self.prefix else ''})"

    def names(self, tool: str) -> bool:
        return self.tool in ("*", tool)

    def judges(self, tool: str) -> bool:
        """Whether this rule has a say on `tool`'s calls: Read rules also judge Glob and Grep."""
        return self.names(tool) or (self.tool == "Read" and tool in _SEARCH_TOOLS)

    def words(self) -> tuple[str, ...]:
        assert self.pattern is not None
        try:
            return tuple(shlex.split(self.pattern))
        except ValueError:
            return tuple(self.pattern.split())

    def match_command(self, cmd: Command, *, by_name: bool) -> Match:
        """Whether the command's words start with (or, exact, are) the rule's words.

        `by_name` (deny and ask) also compares other spellings of the same command, so
        `Bash(rm:*)` sees `/bin/rm` and `Bash(git push:*)` sees `git -C x push`; allow never
        does (`./git` is not git).
        """
        got = _match_words(self.words(), cmd.argv, cmd.more, self.prefix)
        if not by_name:
            return got
        if cmd.dynamic:
            return "maybe"
        for other in shellprograms.aliases(cmd.argv):
            alt = _match_words(self.words(), other, cmd.more, self.prefix)
            if alt == "yes" or (alt == "maybe" and got == "no"):
                got = alt
        return got

    def match_path(self, path: str, where: Where) -> bool:
        assert self.pattern is not None
        return _covers(resolve(self.pattern, where), self.prefix, path)


def _match_words(
    words: tuple[str, ...], argv: tuple[str | None, ...], more: bool, prefix: bool
) -> Match:
    """Word by word; after a word only known at run time (it may split), nothing is sure."""
    unknown = False
    for i, want in enumerate(words):
        if i >= len(argv):
            return "maybe" if more or unknown else "no"
        got = argv[i]
        if got is None:
            unknown = True
        elif got != want and not unknown:
            return "no"
    if not prefix and (len(argv) > len(words) or more):
        return "maybe" if unknown or more else "no"
    return "maybe" if unknown or not words else "yes"


def resolve(raw: str, where: Where) -> str:
    """A path as the file tools reach it: `~` expanded, relative to cwd, `..` and symlinks gone."""
    p = Path(raw)
    with contextlib.suppress(RuntimeError):  # ~nosuchuser stays as written, as bash leaves it
        p = p.expanduser()
    if not p.is_absolute():
        p = (where.cwd or Path.cwd()) / p
    return os.path.realpath(p)


def file_argument(arguments: Mapping[str, Any]) -> str | None:
    """A file tool's path: `file_path`, or `path` as these tools were first called."""
    path = arguments.get("file_path", arguments.get("path"))
    return path if isinstance(path, str) else None


def subject(tool: str, arguments: Mapping[str, Any]) -> str | None:
    """What `Tool(...)` rules compare against: a command or a path (for Glob and Grep the
    directory searched, when given); None for other tools."""
    if tool in _COMMAND_TOOLS:
        cmd = arguments.get("command")
        if isinstance(cmd, list):
            return shlex.join(str(c) for c in cmd)
        return cmd if isinstance(cmd, str) else None
    if tool in _PATH_TOOLS:
        return file_argument(arguments)
    if tool in _SEARCH_TOOLS:
        path = arguments.get("path")
        return path if isinstance(path, str) and path else None
    return None


@dataclass(frozen=True)
class Call:
    """A tool call as rules see it: its commands (Bash, RunProcess) or its resolved path."""

    tool: str
    text: str | None = None  # the subject as written
    script: shellparse.Script | None = None
    path: str | None = None

    @classmethod
    def of(cls, tool: str, arguments: Mapping[str, Any], where: Where) -> Call:
        text = subject(tool, arguments)
        if tool in _SEARCH_TOOLS:
            searched = "." if text is None else text  # the working directory by default
            if "\0" in searched:
                return cls(tool, text)
            return cls(tool, text, path=resolve(searched, where))
        if text is None:
            return cls(tool)
        if tool in _PATH_TOOLS:
            if "\0" in text:
                return cls(tool, text)
            return cls(tool, text, path=resolve(text, where))
        cmd = arguments.get("command")
        if isinstance(cmd, list):
            return cls(tool, text, shellparse.from_argv([str(c) for c in cmd]))
        return cls(tool, text, shellparse.parse(text))

    def fallback(self) -> list[Command]:
        """When the parse failed: every command-like piece, for deny and ask only."""
        pieces = re.split(r"\$\(|<\(|>\(|[`;&|\n(){}]", self.text or "")
        out = []
        for piece in pieces:
            try:
                words = shlex.split(piece)
            except ValueError:
                words = piece.replace("'", " ").replace('"', " ").split()
            if words:
                out.append(Command(tuple(w.replace("\\", "") for w in words), piece.strip()))
        return out


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    rule: str | None
    reason: str


@dataclass(frozen=True)
class Layer:
    allow: tuple[Rule, ...] = ()
    ask: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> Layer:
        """`{allow: [...], ask: [...], deny: [...]}`.

        Raises:
            ValueError: naming the bad key or rule and how to fix it.
        """
        if not isinstance(m, Mapping):
            raise ValueError("permissions must be a mapping with allow, ask and deny lists")
        for key in m:
            if key not in _KEYS:
                raise ValueError(f"unknown key {key!r} under permissions; use allow, ask or deny")
        lists: dict[str, tuple[Rule, ...]] = {}
        for key in _KEYS:
            raw = m.get(key) or []
            if isinstance(raw, str) or not isinstance(raw, Sequence):
                raise ValueError(f"permissions.{key} must be a list of rules; {_FORMS}")
            lists[key] = tuple(Rule.parse(r) for r in raw)
        return cls(lists["allow"], lists["ask"], lists["deny"])

    def to_json(self) -> dict[str, list[str]]:
        return {k: [str(r) for r in getattr(self, k)] for k in _KEYS}

    def check(self, tool: str, arguments: Mapping[str, Any], where: Where | None = None) -> Verdict:
        return self.judge(Call.of(tool, arguments, where or Where()), where or Where())

    def judge(self, call: Call, where: Where) -> Verdict:
        hits = [(r, _hit(r, call, where, judging=True)) for r in self.deny]
        for rule, hit in hits:
            if hit is not None and hit[0] == "yes":
                return Verdict("deny", str(rule), f"denied by rule {rule}{_part(call, hit[1])}")
        for rule, hit in hits:
            if hit is not None and hit[0] == "maybe":
                why = f"`{_short(hit[1])}` is only known when it runs; rule {rule} may deny it"
                return Verdict("ask", str(rule), f"{why}; approval needed")
        for rule in self.ask:
            hit = _hit(rule, call, where, judging=True)
            if hit is not None and hit[0] != "no":
                why = f"rule {rule} asks for approval{_part(call, hit[1])}"
                return Verdict("ask", str(rule), why)
        return self.allowed(call, where)

    def allowed(self, call: Call, where: Where) -> Verdict:
        mine = [r for r in self.allow if r.judges(call.tool)]
        plain = next((r for r in mine if r.pattern is None), None)
        if plain is not None:
            return Verdict("allow", str(plain), f"allowed by rule {plain}")
        if call.tool in _FREE:
            return Verdict("allow", None, f"{call.tool} changes nothing outside the thread")
        if call.path is not None:
            rule = next((r for r in mine if r.match_path(call.path, where)), None)
            risky = call.tool not in _READS and _RUNS_LATER.search(call.path)
            if rule is not None and rule.prefix and risky:
                why = f"{call.path} holds commands that git or a shell runs later"
                return Verdict("ask", None, f"{why}; a prefix rule does not cover it")
            if rule is not None:
                return Verdict("allow", str(rule), f"allowed by rule {rule}")
            return Verdict(
                "ask", None, f"no rule allows {call.tool} of {call.path}; approval needed"
            )
        if call.script is None or not mine:
            return Verdict("ask", None, f"no rule allows {call.tool}; approval needed")
        if call.script.error is not None:
            return Verdict(
                "ask", None, f"{call.script.error}, so no prefix rule covers it; approval needed"
            )
        return _allowed_commands(mine, call, where)


def _allowed_commands(mine: list[Rule], call: Call, where: Where) -> Verdict:
    assert call.script is not None
    used: list[str] = []
    parts = [c for c in call.script.commands if not c.wrapper]
    for cmd in parts:
        rule = next(
            (r for r in mine if r.pattern and r.match_command(cmd, by_name=False) == "yes"), None
        )
        problems = (*cmd.problems, *_home_problem(cmd, where))
        if rule is None or problems:
            why = f": {'; '.join(dict.fromkeys(problems))}" if rule is not None else ""
            whole = (call.text or "").strip()
            inside = f" (in: `{_short(whole)}`)" if cmd.text.strip() != whole else ""
            return Verdict(
                "ask", None, f"no rule allows `{_short(cmd.text)}`{why}{inside}; approval needed"
            )
        used.append(str(rule))
    if not used:
        return Verdict(
            "ask", None, f"no rule allows {call.tool} `{_short(call.text or '')}`; approval needed"
        )
    return Verdict("allow", used[0], f"allowed by rule {', '.join(dict.fromkeys(used))}")


def _home_problem(cmd: Command, where: Where) -> list[str]:
    """A prefix rule never covers a command naming $SUPERVISE_HOME (sandbox or not)."""
    if where.home is None:
        return []
    if "SUPERVISE_HOME" in cmd.text:
        return ["it names $SUPERVISE_HOME, the supervisor's state"]
    for word in cmd.argv[1:]:
        if word and ("/" in word or word.startswith("~")) and "\0" not in word:
            target = word.split("=", 1)[-1] if word.startswith("-") else word
            if target and _off_limits(resolve(target, where), where, read=True):
                return [f"{word} is in $SUPERVISE_HOME, the supervisor's state"]
    return []


def _hit(
    rule: Rule, call: Call, where: Where, *, judging: bool = False
) -> tuple[Match, str] | None:
    """For deny and ask: None if the rule does not name the tool (`judging`: have a say on
    it), else whether it matches (any command the call runs, for Bash) and the part it
    matched."""
    if not (rule.judges(call.tool) if judging else rule.names(call.tool)):
        return None
    if rule.pattern is None:
        return "yes", ""
    if call.path is not None:
        return ("yes" if rule.match_path(call.path, where) else "no"), call.path
    if call.script is None:
        return "no", ""
    commands = list(call.script.commands)
    if call.script.error is not None:
        commands += call.fallback()
    maybe: tuple[Match, str] = ("no", "")
    for cmd in commands:
        got = rule.match_command(cmd, by_name=True)
        if got == "yes":
            return "yes", cmd.text
        if got == "maybe" and maybe[0] == "no":
            maybe = ("maybe", cmd.text)
    return maybe


def _part(call: Call, part: str) -> str:
    if not part or part.strip() == (call.text or "").strip():
        return ""
    return f": `{_short(part)}`"


def _short(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= 120 else one[:119] + "…"


@dataclass(frozen=True)
class Profile:
    layers: tuple[Layer, ...] = ()

    @classmethod
    def from_json(cls, data: Sequence[Mapping[str, Any]]) -> Profile:
        return cls(tuple(Layer.from_mapping(m) for m in data))

    def to_json(self) -> list[dict[str, list[str]]]:
        return [layer.to_json() for layer in self.layers]

    def inherit(self, child: Layer | None) -> Profile:
        """The parent's layers plus the child's own: a child can only be stricter."""
        return self if child is None else Profile((*self.layers, child))

    def check(self, tool: str, arguments: Mapping[str, Any], where: Where | None = None) -> Verdict:
        where = where or Where()
        call = Call.of(tool, arguments, where)
        if call.path is not None and _off_limits(call.path, where, read=tool in _READS):
            why = f"{call.path} is in $SUPERVISE_HOME, the supervisor's state; no tool touches it"
            return Verdict("deny", None, why)
        if not self.layers:
            return Layer().judge(call, where)
        verdicts = [layer.judge(call, where) for layer in self.layers]
        return max(verdicts, key=lambda v: _RANK[v.decision])

    def hider(self, tool: str, root: str, where: Where) -> Callable[[str], bool] | None:
        """For Glob and Grep searching `root` (a real path): which real paths below it to
        leave out, those a deny or ask rule (a Read rule, or one naming the tool) matches.

        A rule that matches `root` itself already judged the call: a deny denied it, an ask
        was answered, so it leaves nothing out. None when nothing is left out.
        """
        rules = [
            (resolve(r.pattern, where), r.prefix)
            for layer in self.layers
            for r in (*layer.deny, *layer.ask)
            if r.pattern is not None and r.judges(tool)
        ]
        below = [(p, prefix) for p, prefix in rules if not _covers(p, prefix, root)]
        if not below:
            return None
        return lambda path: any(_covers(p, prefix, path) for p, prefix in below)


def _covers(pattern: str, prefix: bool, path: str) -> bool:
    """Whether a path rule's resolved pattern matches `path` (as `Rule.match_path`)."""
    return path == pattern or (prefix and path.startswith(pattern.rstrip("/") + "/"))


def _off_limits(path: str, where: Where, *, read: bool) -> bool:
    if where.home is None or not _inside(path, where.home):
        return False
    return not (read and where.output is not None and path == os.path.realpath(where.output))


def _inside(path: str, home: Path) -> bool:
    root = os.path.realpath(home)
    return path == root or path.startswith(root.rstrip("/") + "/")


def rule_applies(
    rule: Rule, tool: str, arguments: Mapping[str, Any], where: Where | None = None
) -> bool:
    """Whether a rule (as a hook matcher) names this call: any command it runs may match."""
    where = where or Where()
    hit = _hit(rule, Call.of(tool, arguments, where), where)
    return hit is not None and hit[0] != "no"
