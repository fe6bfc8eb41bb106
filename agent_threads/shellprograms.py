"""What well-known programs do with their arguments, for permission rules on Bash commands.

Three kinds of knowledge, all pure: wrappers that run another command (`env`, `timeout`,
`xargs`, `find -exec`, ...), shells and builtins that run a string as code (`bash -c`,
`eval`, `trap`), and options that make an otherwise harmless program run commands or write
files (git's `-c`, `--output`, aliases; find's `-delete`). A word that is only known when the
command runs is None.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

Argv = tuple[str | None, ...]


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


@dataclass(frozen=True)
class Inner:
    """What a command runs besides itself."""

    argvs: list[tuple[Argv, bool]] = field(default_factory=list)  # (argv, more args at run time)
    code: list[str | None] = field(default_factory=list)  # shell code strings; None: unknown
    transparent: bool = False  # the wrapper adds nothing of its own: only what it runs counts
    problems: list[str] = field(default_factory=list)  # for the commands it runs


# Wrappers: {name: (options that take a value, positional words before the command)}.
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "nohup": (frozenset(), 0),
    "time": (frozenset({"-f", "--format", "-o", "--output"}), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "setsid": (frozenset(), 0),
    "ionice": (frozenset({"-c", "-n", "--class", "--classdata"}), 0),
    "coproc": (frozenset(), 0),
    "busybox": (frozenset(), 0),
    "env": (frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}), 0),
    "sudo": (_set("-u -g -C -D -h -p -r -t -U -T -R") | {"--user", "--group"}, 0),
    "doas": (frozenset({"-u", "-C"}), 0),
    "xargs": (
        _set("-a -d -E -I -L -n -P -s")
        | _set(
            "--arg-file --delimiter --eof --replace --max-lines --max-args --max-procs "
            "--max-chars --process-slot-var"
        ),
        0,
    ),
}
# Wrappers that change who runs the command or feed it arguments: they need a rule themselves.
_OPAQUE_WRAPPERS = frozenset({"sudo", "doas", "xargs"})
_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "rbash"})
_OTHER_SHELLS = frozenset({"fish", "csh", "tcsh"})  # their code is not bash: unknown
_SHELL_VALUE_OPTS = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def program(argv: Argv) -> str | None:
    """The program's name as a deny rule sees it: `/bin/rm` is `rm`."""
    if not argv or argv[0] is None:
        return None
    return os.path.basename(argv[0]) or argv[0]


def inner(argv: Argv) -> Inner:
    """The commands and code `argv` runs (nothing for a plain program)."""
    prog = program(argv)
    if prog is None:
        return Inner()
    if prog in _SHELLS:
        return _shell(argv)
    if prog in _OTHER_SHELLS and any(a is not None and a.startswith("-c") for a in argv[1:]):
        return Inner(code=[None])
    if prog == "eval":
        words = argv[1:]
        code = None if None in words else " ".join(w for w in words if w is not None)
        return Inner(code=[code], transparent=True)
    if prog == "trap":
        return _trap(argv)
    if prog == "find":
        return _find(argv)
    if prog in _WRAPPERS:
        return _wrapper(prog, argv)
    return Inner()


def _wrapper(prog: str, argv: Argv) -> Inner:
    values, positional = _WRAPPERS[prog]
    i, problems, code = 1, [], []
    while i < len(argv):
        a = argv[i]
        if a is None:
            return Inner(argvs=[((None,), False)])  # an option or program only known later
        if a == "--":
            i += 1
            break
        if prog in ("env", "sudo") and _ASSIGN.match(a):
            problems.append(f"sets {a.split('=', 1)[0]} for the command")
        elif prog == "command" and a in ("-v", "-V"):
            return Inner()  # only prints what the name is
        elif a.startswith("-") and len(a) > 1:
            name = a.split("=", 1)[0]
            if prog == "env" and name in ("-S", "--split-string"):
                code.append(a.split("=", 1)[1] if "=" in a else _at(argv, i + 1))
            if name in values and "=" not in a:
                i += 1  # its value is the next word
        else:
            break
        i += 1
    i += positional
    rest = argv[i:]
    if not rest and not code:
        return Inner()  # alone it runs nothing (`env` prints, `nice` tells)
    more = prog == "xargs"
    argvs = [(tuple(rest), more)] if rest else []
    return Inner(argvs, code, prog not in _OPAQUE_WRAPPERS, problems)


def _at(argv: Argv, i: int) -> str | None:
    return argv[i] if i < len(argv) else ""


def _shell(argv: Argv) -> Inner:
    """`bash -c CODE`, `sh -ec CODE`: the code; `bash` with no file reads code from stdin."""
    i, with_c = 1, False
    while i < len(argv):
        a = argv[i]
        if a is None:
            return Inner(code=[None])
        if a in _SHELL_VALUE_OPTS:
            i += 2
            continue
        if a == "--":
            i += 1
            break
        if not a.startswith(("-", "+")) or a in ("-", "+"):
            break
        with_c = with_c or (not a.startswith("--") and "c" in a[1:])
        i += 1
    if with_c:
        return Inner(code=[argv[i] if i < len(argv) else ""], transparent=True)
    if i >= len(argv):
        return Inner(code=[None])  # reads its code from standard input
    return Inner()  # runs a script file: that is the file's business, like `python x.py`


def _trap(argv: Argv) -> Inner:
    args = [a for a in argv[1:] if a != "--"]
    if len(args) < 2 or args[0] in ("-", "-l", "-p"):
        return Inner(transparent=True)
    return Inner(code=[args[0]], transparent=True)


_FIND_RUN = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_FIND_WRITE = frozenset({"-delete", "-fprint", "-fprint0", "-fprintf", "-fls"})


def _find(argv: Argv) -> Inner:
    out = Inner()
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in _FIND_WRITE:
            out.problems.append(f"find {a} deletes or writes files")
        if a in _FIND_RUN:
            j = i + 1
            while j < len(argv) and argv[j] not in (";", "+"):
                j += 1
            out.argvs.append((tuple(argv[i + 1 : j]), False))
            i = j
        i += 1
    return out


# -- git -----------------------------------------------------------------------------------

# Global options that change nothing but output or locking; any other one can point git at
# other config, hooks or programs (`-c`, `--config-env`, `--exec-path`, `-C`, `--git-dir`, ...).
_GIT_SAFE_GLOBAL = _set(
    "--no-pager -P --no-optional-locks --literal-pathspecs --glob-pathspecs "
    "--noglob-pathspecs --icase-pathspecs --no-replace-objects --no-lazy-fetch --no-advice "
    "--version --help -h --html-path --man-path --info-path"
)
_GIT_COMMANDS = _set(
    "add am annotate apply archive bisect blame branch bundle cat-file check-attr check-ignore "
    "check-mailmap check-ref-format checkout checkout-index cherry cherry-pick clean clone "
    "column commit commit-graph commit-tree config count-objects describe diff diff-files "
    "diff-index diff-tree difftool fetch fmt-merge-msg for-each-ref format-patch fsck gc grep "
    "hash-object help init interpret-trailers log ls-files ls-remote ls-tree maintenance merge "
    "merge-base merge-file merge-tree mergetool mktag mktree mv name-rev notes pack-refs prune "
    "pull push range-diff read-tree rebase reflog remote repack replace rerere reset restore "
    "revert rev-list rev-parse rm shortlog show show-branch show-ref sparse-checkout stash "
    "status stripspace submodule switch symbolic-ref tag update-index update-ref var "
    "verify-commit verify-tag version whatchanged worktree write-tree"
)
# Subcommands whose job is running commands or programs the config names.
_GIT_RUNS = _set(
    "difftool mergetool filter-branch send-email instaweb daemon credential hook "
    "upload-pack receive-pack upload-archive web--browse"
)
# Long options that run a command or write a file; git takes any unique prefix of them.
_GIT_LONG = (
    "output",
    "output-directory",
    "ext-diff",
    "textconv",
    "exec",
    "upload-pack",
    "receive-pack",
    "extcmd",
    "open-files-in-pager",
    "tool",
    "config",
    "template",
    "web",
    "remote",
)
_GIT_LONG_OK = frozenset({"text", "to"})  # real options that prefix a risky one
_GIT_SHORT = {
    "archive": ("-o",),
    "format-patch": ("-o",),
    "rebase": ("-x",),
    "grep": ("-O",),
    "clone": ("-u", "-c"),
    "ls-remote": ("-u",),
    "help": ("-w", "-i", "-m"),
}
_GIT_CONFIG_READS = frozenset({"--get", "--get-all", "--get-regexp", "--list", "-l", "get", "list"})
_GIT_CONFIG_WRITES = _set(
    "--add --unset --unset-all --replace-all --rename-section --remove-section -e --edit "
    "set unset edit rename-section remove-section"
)


_GIT_VALUE_GLOBAL = _set("-C -c --git-dir --work-tree --namespace --config-env --super-prefix")


def aliases(argv: Argv) -> list[Argv]:
    """Other spellings of the same command, for deny rules: the program without its
    directory, and git without its global options (`git -C x push` is `git push`)."""
    prog = program(argv)
    if prog is None:
        return []
    out: list[Argv] = [(prog, *argv[1:])]
    if prog == "git":
        i = 1
        while i < len(argv) and argv[i] is not None and str(argv[i]).startswith("-"):
            i += 2 if argv[i] in _GIT_VALUE_GLOBAL else 1
        out.append((prog, *argv[i:]))
    return out


def git_problems(argv: Argv, *, globbed: bool, more: bool) -> list[str]:
    """Why a `Bash(git:*)` rule may not cover this git command (empty: it may)."""
    i = 1
    while i < len(argv) and (argv[i] is None or str(argv[i]).startswith("-")):
        a = argv[i]
        if a not in _GIT_SAFE_GLOBAL:
            shown = "`$...`" if a is None else a
            return [f"git option {shown} can change the config, hooks or programs git runs"]
        i += 1
    if i == len(argv):
        return []
    sub = argv[i]
    if sub is None or sub not in _GIT_COMMANDS:
        name = "`$...`" if sub is None else sub
        return [f"git {name} is not a git command: an alias can run any command"]
    return _git_args(sub, argv[i + 1 :], globbed=globbed, more=more)


def _git_args(sub: str, args: Sequence[str | None], *, globbed: bool, more: bool) -> list[str]:
    if sub in _GIT_RUNS or (sub in ("bisect", "submodule") and {"run", "foreach"} & set(args)):
        return [f"git {sub} runs commands"]
    if sub == "config" and not (
        _GIT_CONFIG_READS & set(args) and not _GIT_CONFIG_WRITES & set(args)
    ):
        return ["git config can set programs git runs; only --get and --list are covered"]
    if None in args or more:
        return ["a git argument only known when it runs may be an option that runs commands"]
    if globbed:
        return ["a glob in a git command may expand to an option"]
    for a in args:
        assert a is not None
        if a == "--":
            break
        if "ext::" in a:
            return ["the ext:: transport runs a command"]
        if a.startswith("--") and _git_long_hit(a[2:].split("=", 1)[0]):
            return [f"git option {a} runs a command or writes a file"]
        if not a.startswith("--") and any(a.startswith(s) for s in _GIT_SHORT.get(sub, ())):
            return [f"git {sub} {a} runs a command or writes a file"]
    return []


def _git_long_hit(name: str) -> bool:
    if not name or name in _GIT_LONG_OK:
        return False
    return any(opt.startswith(name) for opt in _GIT_LONG)
