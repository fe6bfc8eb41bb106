"""The layering, read from the source: imports run supervisor -> agent_threads -> state ->
supervise.errors, and only state/ talks to the database."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATABASE = ("sqlalchemy", "sqlmodel", "sqlite3", "psycopg")
# Still on the old raw-sqlite3 path until DATA-T's port merges; empty at the merge of #14.
PENDING = {"agent_threads/journal.py"}


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """Every module a file imports (also inside functions and TYPE_CHECKING blocks)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def offenders(package: str, banned: tuple[str, ...]) -> list[str]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for line, module in imports(path):
            if module.split(".")[0] in banned and rel not in PENDING:
                found.append(f"{rel}:{line}: imports {module}")
    return found


def test_only_state_talks_to_the_database() -> None:
    assert offenders("supervisor", DATABASE) == []
    assert offenders("agent_threads", DATABASE) == []


def test_state_imports_no_package_above_it() -> None:
    assert offenders("state", ("supervisor", "agent_threads")) == []


def test_agent_threads_never_import_the_supervisor() -> None:
    assert offenders("agent_threads", ("supervisor",)) == []


def test_the_check_finds_an_offending_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from sqlalchemy import select\n    import sqlite3\n")
    assert list(imports(bad)) == [(2, "sqlalchemy"), (3, "sqlite3")]
