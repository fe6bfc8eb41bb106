"""Claude Code's `if` handler field: one permission rule deciding whether a hook runs.

As the hooks reference defines it: only evaluated on tool events; `Tool` or `Tool(pattern)`
in permission-rule syntax. For Bash, `*` is a wildcard anywhere (`git *`, `* --help`, a
trailing ` *` keeps a word boundary, `git:*` is the same as `git *`), and the hook runs if
ANY command of the line matches, those inside `$(...)` and backticks included (the same
parse as our permission rules: agent_threads/shellparse). For file tools the pattern is a
gitignore-style path: `//abs`, `~/home`, `/x` and `x` relative to the thread's directory.
Other tools take `param:value` (a top-level input field, `*` a wildcard).

Best effort, as in Claude Code: what cannot be judged (a line that does not parse, a word
only known when it runs while the pattern says more than the program) runs the hook. Pure.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from typing import Any

from agent_threads import shellparse

_RULE = re.compile(r"^\s*([^\s()]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)
_COMMAND_TOOLS = frozenset({"Bash", "RunProcess", "PowerShell"})
_PATH_KEYS = ("file_path", "notebook_path", "path")
_PARAM = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*)$", re.DOTALL)


def check_if(text: str) -> str | None:
    """Why `text` is not one permission rule (None when it is one)."""
    if _RULE.match(text) is None:
        return "must be one permission rule such as Bash(git *) or Edit(*.ts)"
    return None


def if_applies(rule: str, tool: str, tool_input: Mapping[str, Any], cwd: str | None = None) -> bool:
    """Whether a hook whose `if` is `rule` runs for a call of `tool` with `tool_input`."""
    m = _RULE.match(rule)
    if m is None:
        return True  # refused when the file was read; never silently skip a guard
    name, spec = m.group(1), m.group(2)
    if not fnmatch.fnmatchcase(tool, name):
        return False
    if spec is None or spec.strip() in ("", "*"):
        return True
    spec = spec.strip()
    if tool in _COMMAND_TOOLS:
        return _command_applies(spec, tool_input.get("command"))
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str):
            return _path_applies(spec, value, cwd or os.getcwd())
    param = _PARAM.match(spec)
    if param is not None and param.group(1) in tool_input:
        value = tool_input[param.group(1)]
        text = value if isinstance(value, str) else str(value).lower()
        return _wildcard(param.group(2).strip()).fullmatch(text) is not None
    return True  # a specifier we cannot judge: run it (Claude Code's filter fails open)


def _wildcard(pattern: str) -> re.Pattern[str]:
    """`*` matches any text (spaces too); a trailing ` *` also matches nothing after the
    word (`ls *` matches `ls` and `ls -la`, never `lsof`)."""
    tail = ""
    if pattern.endswith(" *"):
        pattern, tail = pattern[:-2], r"(?:\s.*)?"
    body = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.compile(body + tail, re.DOTALL)


def _command_applies(spec: str, command: Any) -> bool:
    if isinstance(command, list):
        script = shellparse.from_argv([str(c) for c in command])
    elif isinstance(command, str):
        script = shellparse.parse(command)
    else:
        return True
    if script.error is not None:
        return True  # cannot be parsed: Claude Code runs the hook
    if spec.endswith(":*"):
        spec = spec[:-2] + " *"
    pattern = _wildcard(spec)
    # `git push *` says more than the program; `rm *` does not.
    beyond_name = len(spec.removesuffix(" *").split()) > 1
    for cmd in script.commands:
        if cmd.wrapper or not cmd.argv:
            continue
        if cmd.dynamic or (beyond_name and any(w is None for w in cmd.argv)):
            return True  # `$VAR`, `$(...)`: the words are only known when it runs
        text = " ".join(w for w in cmd.argv if w is not None)
        if pattern.fullmatch(text) is not None:
            return True
    return False


def _path_applies(spec: str, path: str, cwd: str) -> bool:
    if spec.startswith("//"):
        anchored = spec[1:]
    elif spec.startswith("~/"):
        anchored = os.path.expanduser("~") + spec[1:]
    else:
        # `/x` is relative to the settings file's project in Claude Code: the thread's
        # directory is the nearest thing here.
        anchored = os.path.join(cwd, spec.lstrip("/").removeprefix("./"))
    file = os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))
    return _path_glob(os.path.normpath(anchored)).fullmatch(file) is not None


def _path_glob(pattern: str) -> re.Pattern[str]:
    """gitignore-style: `**` any depth, `*` and `?` within one name; a match also covers
    everything under it (a directory)."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + "(?:/.*)?", re.DOTALL)
