"""A bash command's simple commands, from a real parse (tree-sitter-bash), for permission rules.

tree-sitter-bash is the grammar Claude Code and Codex match rules on; it is MIT, ships binary
wheels, and never raises: a syntax error is an ERROR node, so what it cannot read is known.
Every simple command is found wherever it sits (pipelines, lists, subshells, groups, control
flow, `$(...)`, `<(...)`, heredocs, `bash -c` strings, `eval`), and seen through quoting,
escapes and wrappers (`env`, `timeout`, `xargs`, `find -exec`, ...: agent_threads/shellprograms).
Each command carries the reasons a prefix rule may not cover it. Pure: no I/O.
"""

from __future__ import annotations

import re
import shlex
import threading
from dataclasses import dataclass, replace
from functools import lru_cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from agent_threads import shellprograms
from agent_threads.shellprograms import Argv

MAX_DEPTH = 6  # `bash -c "bash -c ..."` nesting we follow before giving up
_WRITE_OK = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_SUBST = frozenset({"command_substitution", "process_substitution"})
_MISREADS = (
    (re.compile(r"(?<=\S)\\\n(?=\S)"), "", "a line continuation inside a word"),
    (re.compile(r"(?<!\\)\n\\"), "\n \\", "a line that starts with a backslash"),
)
_ANSI = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r"}
_ANSI |= {"t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
_ANSI_RE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|.)")


@dataclass(frozen=True)
class Command:
    """One simple command. `argv` words are None where only known when it runs ($x, {a,b})."""

    argv: Argv
    text: str
    problems: tuple[str, ...] = ()  # why no prefix rule may cover it
    more: bool = False  # more arguments are added when it runs (xargs)
    wrapper: bool = False  # only runs the commands after it, which are checked themselves

    @property
    def dynamic(self) -> bool:
        """Its program is only known when it runs: no deny rule can rule it out."""
        return bool(self.argv) and self.argv[0] is None


@dataclass(frozen=True)
class Script:
    commands: tuple[Command, ...]
    error: str | None = None  # why the parse cannot be trusted (then commands are partial)


_LOCAL = threading.local()  # a Parser is not safe to share between threads


@lru_cache(maxsize=1)
def _language() -> Language:
    return Language(tree_sitter_bash.language())


def _parser() -> Parser:
    parser: Parser | None = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = _LOCAL.parser = Parser(_language())
    return parser


def parse(text: str) -> Script:
    """The simple commands of `text`, wherever they sit."""
    walk = _read(text)
    # Where tree-sitter and bash disagree, judge both readings (the union, for deny) and let
    # no prefix rule cover the line. bash joins `r\<newline>m` into `rm`; tree-sitter does not.
    # tree-sitter reads a newline then `\rm` as one word with the line before; bash does not.
    for pattern, fix, why in _MISREADS:
        if pattern.search(text):
            other = _read(pattern.sub(fix.replace("\\", "\\\\"), text))
            if [c.argv for c in other.out] != [c.argv for c in walk.out]:
                walk.out += other.out
                walk.errors.append(why)
    return Script(tuple(walk.out), walk.errors[0] if walk.errors else None)


def _read(text: str) -> _Walk:
    walk = _Walk(0)
    try:
        walk.script(text)
    except RecursionError:  # thousands of nested ( or $(: no reading, so no prefix rule
        walk.errors.append("it nests too deeply to read")
    return walk


def from_argv(argv: list[str]) -> Script:
    """An argv run without a shell (RunProcess): the same wrappers and checks apply."""
    walk = _Walk(0)
    walk.add(Command(tuple(argv), shlex.join(argv)), globbed=False)
    return Script(tuple(walk.out), walk.errors[0] if walk.errors else None)


class _Walk:
    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.out: list[Command] = []
        self.errors: list[str] = []

    def script(self, text: str) -> None:
        if self.depth > MAX_DEPTH:
            self.errors.append(f"shell code nested over {MAX_DEPTH} deep")
            self.out.append(Command((None,), text))
            return
        root = _parser().parse(text.encode(errors="surrogatepass")).root_node
        if root.has_error:
            bad = _first_error(root)
            where = bad.text.decode(errors="replace")[:40] if bad and bad.text else ""
            self.errors.append(f"bash cannot parse it (near `{where}`)")
        self.node(root, ())

    def node(self, n: Node, extra: tuple[str, ...]) -> None:
        """A statement or anything holding statements; `extra` are problems it inherits."""
        t = n.type
        if t == "command":
            self.command(n, extra)
        elif t == "redirected_statement":
            probs = extra + tuple(
                p for r in n.children_by_field_name("redirect") for p in self.redirect(r)
            )
            body = n.child_by_field_name("body")
            if body is None:
                self.out.append(Command((), _text(n), probs or ("a redirection alone",)))
            else:
                self.node(body, probs)
        elif t in (
            "declaration_command",
            "unset_command",
            "variable_assignment",
            "variable_assignments",
        ):
            self.settles(n, extra, "sets shell variables")
        elif t == "for_statement":
            name = n.child_by_field_name("variable")
            self.out.append(
                Command((), _text(n).split("\n")[0], (f"sets shell variable {_text(name)}",))
            )
            self.children(n, extra)
        elif t == "expansion" and re.search(r"@[PE]\}$", _text(n)):
            self.out.append(Command((None,), _text(n), ("a prompt expansion can run commands",)))
        elif t in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            self.redirect(n)  # inside a compound's body; its statements still count
        elif t != "comment":
            self.children(n, extra)

    def children(self, n: Node, extra: tuple[str, ...]) -> None:
        for c in n.named_children:
            self.node(c, extra)

    def settles(self, n: Node, extra: tuple[str, ...], why: str) -> None:
        words = tuple(_word(c)[0] for c in n.children if c.type in ("word", "variable_name"))
        keyword = n.children[0].type if n.children and not n.children[0].is_named else None
        argv: Argv = (keyword, *words) if keyword else ()
        self.out.append(Command(argv, _text(n), (*extra, why)))
        self.children(n, ())

    def command(self, n: Node, extra: tuple[str, ...]) -> None:
        probs, argv, globbed = list(extra), [], False
        for i, c in enumerate(n.children):
            f = n.field_name_for_child(i)
            if c.type == "variable_assignment":
                name = c.child_by_field_name("name")
                probs.append(f"sets {_text(name)} for the command")
                self.children(c, ())
            elif f == "redirect":
                probs += self.redirect(c)
            elif f in ("name", "argument") and c.is_named:
                word = c.named_children[0] if c.type == "command_name" and c.named_children else c
                value, glob = _word(word)
                argv.append(value)
                globbed = globbed or glob
                if _has(word, _SUBST):
                    probs.append(f"`{_text(word)}` runs a command substitution")
                self.node(word, ())  # the commands inside substitutions
        self.add(Command(tuple(argv), _text(n), tuple(probs)), globbed=globbed)

    def add(self, cmd: Command, *, globbed: bool) -> None:
        """`cmd` and whatever it runs (wrappers, `bash -c`), with program-specific problems."""
        if shellprograms.program(cmd.argv) == "git":
            more = shellprograms.git_problems(cmd.argv, globbed=globbed, more=cmd.more)
            cmd = replace(cmd, problems=(*cmd.problems, *more))
        got = shellprograms.inner(cmd.argv)
        cmd = replace(cmd, wrapper=got.transparent, problems=(*cmd.problems, *got.problems))
        self.out.append(cmd)
        inherited = cmd.problems if got.transparent else tuple(got.problems)
        for argv, appended in got.argvs:
            inner = Command(argv, _join(argv), inherited, more=appended)
            self.add(inner, globbed=False)
        for code in got.code:
            if code is None:
                self.out.append(Command((None,), cmd.text, ("runs code only known when it runs",)))
                continue
            sub = _Walk(self.depth + 1)
            sub.script(code)
            self.errors += sub.errors
            self.out += [replace(c, problems=(*inherited, *c.problems)) for c in sub.out]

    def redirect(self, r: Node) -> list[str]:
        """Why a redirection keeps a prefix rule from covering the command (it writes a file)."""
        self.children(r, ())  # heredoc bodies, `cat <<EOF | sh`, substitutions
        if r.type != "file_redirect":
            return []
        op = next((c.type for c in r.children if not c.is_named), "")
        dest = r.child_by_field_name("destination")
        value = _word(dest)[0] if dest is not None else None
        if op in ("<", ">&-", "<&-", "<&") or (
            op == ">&" and value is not None and (value.isdigit() or value == "-")
        ):
            return []
        if value in _WRITE_OK:
            return []
        return [f"writes to {value if value is not None else _text(dest)}"]


def _first_error(n: Node) -> Node | None:
    if n.type == "ERROR" or n.is_missing:
        return n
    for c in n.children:
        if c.has_error or c.is_missing:
            found = _first_error(c)
            if found is not None:
                return found
    return None


def _text(n: Node | None) -> str:
    return "" if n is None or n.text is None else n.text.decode(errors="replace")


def _has(n: Node, kinds: frozenset[str]) -> bool:
    return n.type in kinds or any(_has(c, kinds) for c in n.named_children)


def _join(argv: Argv) -> str:
    return " ".join("…" if a is None else shlex.quote(a) for a in argv)


def _word(n: Node) -> tuple[str | None, bool]:
    """A word's value as bash passes it (None: only known when it runs), and if it globs."""
    t, text = n.type, _text(n)
    if t == "word":
        return re.sub(r"\\(.)", r"\1", text.replace("\\\n", ""), flags=re.DOTALL), bool(
            re.search(r"(?<!\\)[*?[]", text)
        )
    if t == "number":
        return text, False
    if t == "raw_string":
        return text[1:-1], False
    if t == "string":
        if any(c.type != "string_content" for c in n.named_children):
            return None, False
        inner = text[1:-1].replace("\\\n", "")
        return re.sub(r'\\([$`"\\])', r"\1", inner), False
    if t == "translated_string" and n.named_children:
        return _word(n.named_children[-1])
    if t == "ansi_c_string":
        return _ANSI_RE.sub(_ansi, text[2:-1]), False
    if t == "concatenation":
        return _concat(n)
    return None, False


def _concat(n: Node) -> tuple[str | None, bool]:
    parts = [_word(c) for c in n.named_children]
    texts = [_text(c) for c in n.named_children]
    if "{" in texts and "}" in texts[texts.index("{") :]:
        inside = "".join(texts[texts.index("{") + 1 : texts.index("}", texts.index("{"))])
        if "," in inside or ".." in inside:
            return None, False  # brace expansion: several words
    if any(v is None for v, _ in parts):
        return None, False
    return "".join(v for v, _ in parts if v is not None), any(g for _, g in parts)


def _ansi(m: re.Match[str]) -> str:
    esc = m.group(1)
    if esc[0] in "xuU" and len(esc) > 1:
        return chr(int(esc[1:], 16))
    if esc[0] in "01234567":
        return chr(int(esc, 8) & 0xFF)
    return _ANSI.get(esc, "\\" + esc)
