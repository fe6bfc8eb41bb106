"""Env files (dotenv): `supervise run --env-file FILE` and a hook file's `env_file:`.

python-dotenv reads them (quotes, `export`, comments, `${VAR}` from earlier lines or the
environment), so a file means here what it means to every other dotenv user. It only logs a
warning for a line it cannot parse and goes on: here such a line refuses the whole run, since
a variable silently missing is found much later, by the process that needed it.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from supervise.errors import HookFileError
from supervisor.hooktext import read_utf8

FIX = 'write KEY=VALUE, quoting a value with spaces or #: KEY="a b # c"'


def read_env_file(path: Path, shown: str | None = None) -> dict[str, str]:
    """The variables `path` sets, in file order. A bare `KEY` (no `=`) sets nothing, as
    with python-dotenv's `load_dotenv`.

    Args:
        path: the file.
        shown: how messages name it (default: `path`).

    Raises:
        HookFileError: the file cannot be read, or a line cannot be parsed:
            `FILE:LINE: what; how to fix it`.
    """
    from dotenv import dotenv_values
    from dotenv.parser import parse_stream

    name = shown or str(path)
    text = read_utf8(path, name, "env file")
    problems = [
        # The line is not quoted: it may hold a secret, and messages are shown and logged.
        f"{name}:{b.original.line}: cannot parse this line as dotenv; {FIX}"
        for b in parse_stream(io.StringIO(text))
        if b.error
    ]
    if problems:
        raise HookFileError(problems)
    values = dotenv_values(stream=io.StringIO(text), interpolate=True)
    return {k: v for k, v in values.items() if v is not None}


def read_env_files(paths: Sequence[tuple[Path, str]]) -> dict[str, str]:
    """The variables of several files, a later file's winning; every file's problems at once.

    Raises:
        HookFileError: as `read_env_file`, for every file.
    """
    merged: dict[str, str] = {}
    problems: list[str] = []
    for path, shown in paths:
        try:
            merged.update(read_env_file(path, shown))
        except HookFileError as exc:
            problems += exc.problems
    if problems:
        raise HookFileError(problems)
    return merged
