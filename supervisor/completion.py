"""`supervise completion bash|zsh|fish`: a shell completion script made from the real parser.

The script is static (shtab writes it from `cli._parser()`): a TAB runs only the shell, never
Python, so it costs nothing and cannot start a daemon or open the database. A new subcommand
or flag is in the next script printed, as nothing here lists them.

Where an argument names a file or a directory is read off the parser too, by its metavar
(FILE, DIR) or, for the one that has none, its name (`run --cwd`).

The script is printed while parsing (like --version): no settings are read and the state
directory is not made, so it works where the rest of the CLI would fail.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from typing import Any

SHELLS = ("bash", "zsh", "fish")
_DIRS = {"cwd"}  # dests of path arguments without a FILE/DIR metavar


class PrintScript(argparse.Action):
    """The `shell` argument of `completion`: prints that shell's script and exits 0."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        print(script(str(values)), end="")
        parser.exit()


def script(shell: str) -> str:
    """The completion script of `supervise` for SHELL (one of SHELLS)."""
    import shtab  # only here: no other command pays for it

    from supervisor.cli import _parser

    parser = _parser()
    for action in _actions(parser):
        kind = _path_kind(action)
        if kind is not None:
            action.complete = getattr(shtab, kind)  # type: ignore[attr-defined]
    text = shtab.complete(parser, shell=shell)
    return text if text.endswith("\n") else text + "\n"


def _actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """Every argument of PARSER and of its subcommands, nested ones included."""
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # an alias is the same parser
                yield from _actions(sub)


def _path_kind(action: argparse.Action) -> str | None:
    """ "FILE" or "DIRECTORY" (shtab's names) for an argument that is a path, else None."""
    if action.metavar == "FILE":
        return "FILE"
    if action.metavar == "DIR" or action.dest in _DIRS:
        return "DIRECTORY"
    return None
