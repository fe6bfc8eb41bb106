"""`supervise examples DIR`: the shipped example files, copied out of the installed package.

A wheel has no configs/ folder to point at: the example hook files, the quickstart's fake
migration, the `stack.py` extension, the JSON Schema and the systemd unit install inside the
package as `supervisor.configs` (the repo's configs/, see setup.py). They are written into
DIR side by side, so the examples' relative names hold there (migrate.yaml's
`scripted:migrate-turns.yaml`, `extensions: [stack.py]`).
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from state.paths import StatePaths
from supervise.errors import SuperviseError, UserError

PACKAGE = "supervisor.configs"
_NOT_SHIPPED = ("__init__.py", "__pycache__")  # the package's own, not a user's


@dataclass(frozen=True)
class Shipped:
    """One file to write: its name in DIR and where the installed package holds it."""

    name: str
    source: Traversable


def shipped_files(root: Traversable | None = None) -> list[Shipped]:
    """Every file under `supervisor.configs`, by its name alone, sorted by name."""
    found: dict[str, Shipped] = {}
    pending = [root if root is not None else files(PACKAGE)]
    while pending:
        for item in pending.pop().iterdir():
            if item.name in _NOT_SHIPPED:
                continue
            if item.is_dir():
                pending.append(item)
            elif item.name in found:
                # Flat in DIR: two shipped files with one name would overwrite each other.
                raise AssertionError(f"two shipped files are named {item.name}")
            else:
                found[item.name] = Shipped(item.name, item)
    return [found[name] for name in sorted(found)]


def clashes(names: Iterable[str], present: Iterable[str]) -> list[str]:
    """The names that would overwrite a file already in the directory."""
    there = set(present)
    return sorted(n for n in names if n in there)


def write_examples(dest: Path) -> list[Path]:
    """Write every shipped file into `dest` (made if missing); overwrite nothing, ever."""
    if dest.exists() and not dest.is_dir():
        raise UserError(f"{dest} is not a directory; give a new or an existing directory")
    try:
        dest.mkdir(parents=True, exist_ok=True)
        present = [p.name for p in dest.iterdir()]
    except OSError as exc:
        raise UserError(
            f"cannot use {dest}: {exc.strerror or exc}; give a directory you can write"
        ) from None
    shipped = shipped_files()
    taken = clashes((s.name for s in shipped), present)
    if taken:
        raise UserError(
            f"{dest} already has {', '.join(taken)}: nothing written; "
            "give a new or an empty directory, or move those files away"
        )
    written: list[Path] = []
    for s in shipped:
        path = dest / s.name
        try:
            # "x": a file that appeared since the check above is still not overwritten.
            with open(path, "xb") as f:
                f.write(s.source.read_bytes())
        except FileExistsError:
            raise UserError(f"{path} appeared while writing: nothing more written") from None
        except OSError as exc:
            raise SuperviseError(f"cannot write {path}: {exc.strerror or exc}") from None
        written.append(path)
    return written


def cmd_examples(args: argparse.Namespace, _paths: StatePaths) -> int:
    dest = Path(args.dir)
    for path in write_examples(dest):
        print(path)
    print(
        "try the quickstart:\n"
        f"  cd {shlex.quote(str(dest))} && supervise run -- python3 fake_migrate.py "
        "--hook migrate.yaml\n"
        "programs.yaml is a program file: supervise up -f programs.yaml, supervise down -f "
        "programs.yaml\n"
        "supervise.service's comments say how to run the daemon at boot"
    )
    return 0
