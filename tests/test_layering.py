"""The import rules, checked on the source: only `state/` talks to the database, and imports
run one way (supervisor -> agent_threads -> state -> supervise.errors)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DB_MODULES = ("sqlalchemy", "sqlmodel", "sqlite3", "psycopg")


def imports(path: Path) -> list[tuple[int, str]]:
    """Every module a file imports (also inside functions), with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def offending(package: str, banned: tuple[str, ...]) -> list[str]:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no modules under {package}/"
    return [
        f"{path.relative_to(ROOT)}:{line}: imports {name}"
        for path in files
        for line, name in imports(path)
        if name.split(".")[0] in banned
    ]


@pytest.mark.parametrize("package", ["supervisor", "agent_threads"])
def test_only_state_talks_to_the_database(package: str) -> None:
    assert offending(package, DB_MODULES) == []


def test_state_never_imports_upward() -> None:
    assert offending("state", ("supervisor", "agent_threads")) == []


def test_agent_threads_never_imports_the_supervisor() -> None:
    assert offending("agent_threads", ("supervisor",)) == []


def test_the_check_sees_a_nested_import(tmp_path: Path) -> None:
    # A lazy import inside a function counts too: that is where the CLI hides its imports.
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from sqlalchemy import select\n    import sqlite3\n")
    assert imports(src) == [(2, "sqlalchemy"), (3, "sqlite3")]
