"""What `supervise up` and `down` do, given a program file and the live processes. Pure.

A program runs as an ordinary supervised process named after it, whose launch record names
its program file and the fingerprint of its definition (runspec.ProgramRef). `up` starts a
program not running, leaves alone one running with the same fingerprint, restarts one whose
definition changed, and stops one removed from the file (only when no names are given: `up
web` touches web alone). `down` stops the file's programs. Only processes started from this
same file are touched; a live process of another file (or of `supervise run`) with a
program's name is an error naming both, since `stop NAME` could then not tell them apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from supervise.errors import UserError
from supervisor.programfile import Program


@dataclass(frozen=True)
class Live:
    """A live process (running, starting, or a restart pending): its chain's newest run."""

    name: str
    chain: int
    file: str | None  # the program file it came from; None: not started by `up`
    fingerprint: str | None
    pid: int | None = None


@dataclass(frozen=True)
class Start:
    program: Program


@dataclass(frozen=True)
class Keep:
    program: Program
    chain: int
    pid: int | None = None


@dataclass(frozen=True)
class Replace:
    """Its definition changed: stop the running one, start the new definition."""

    program: Program
    chain: int


@dataclass(frozen=True)
class Stop:
    name: str
    chain: int
    why: Literal["removed from the file", "down"]


UpAction = Start | Keep | Replace | Stop


def _check_names(only: Sequence[str], known: Sequence[str], file: str) -> None:
    missing = [n for n in only if n not in known]
    if missing:
        raise UserError(
            f"no program {missing[0]!r} in {file}; its programs: {', '.join(known) or 'none'}"
        )


def _clashes(programs: Sequence[Program], file: str, live: Sequence[Live]) -> None:
    names = {p.name for p in programs}
    for other in live:
        if other.name in names and other.file != file:
            whose = f"from program file {other.file}" if other.file else "started by supervise run"
            raise UserError(
                f"program {other.name!r} of {file} clashes with live process {other.chain} "
                f"of the same name, {whose}; stop that one (supervise stop {other.chain}) "
                "or rename the program"
            )


def plan_up(
    programs: Sequence[Program], file: str, live: Sequence[Live], only: Sequence[str] = ()
) -> list[UpAction]:
    """What `up` does, stops first (a replaced program's old run ends before its new one
    starts), then in the file's order.

    Args:
        programs: the file's programs.
        file: the file's absolute path, as the launch records name it.
        live: every live process.
        only: the names given (`up web worker`); none: all, and removed ones are stopped.

    Raises:
        UserError: a name given is not in the file, or a program's name is taken by a live
            process of another file or of `supervise run`.
    """
    _check_names(only, [p.name for p in programs], file)
    chosen = [p for p in programs if not only or p.name in only]
    _clashes(chosen, file, live)
    ours = [x for x in live if x.file == file]
    actions: list[UpAction] = []
    if not only:
        names = {p.name for p in programs}
        actions += [
            Stop(x.name, x.chain, "removed from the file") for x in ours if x.name not in names
        ]
    for p in chosen:
        mine = [x for x in ours if x.name == p.name]
        # Two live chains of one program (two `up`s at once): keep the newest, stop the rest.
        for extra in mine[:-1]:
            actions.insert(0, Stop(extra.name, extra.chain, "removed from the file"))
        if not mine:
            actions.append(Start(p))
        elif mine[-1].fingerprint == p.fingerprint:
            actions.append(Keep(p, mine[-1].chain, mine[-1].pid))
        else:
            actions.append(Replace(p, mine[-1].chain))
    return actions


def plan_down(
    file: str, known: Sequence[str], live: Sequence[Live], only: Sequence[str] = ()
) -> list[Stop]:
    """What `down` stops: the live processes started from `file` (those named, if any).

    Args:
        known: the names the file defines now (or [] when it cannot be read any more); a
            name given must be one of these or of a live program of the file.

    Raises:
        UserError: a name given is neither.
    """
    ours = [x for x in live if x.file == file]
    if only:
        _check_names(only, list(dict.fromkeys([*known, *(x.name for x in ours)])), file)
    return [Stop(x.name, x.chain, "down") for x in ours if not only or x.name in only]
