"""How big, how tangled: the code metrics ARCHITECTURE.md and the review ask for.

`python bench/code_metrics.py [ROOT]` (ROOT: a checkout, default this one) prints, for the
packages `supervise`, `state`, `agent_threads` and `supervisor`:

- lines per module (the 15 longest files);
- the 10 longest functions (by lines, from the AST: methods and nested functions too);
- the import graph between the packages, with every import that runs upward (a lower package
  importing a higher one, function-level imports included): the direction must be
  supervisor -> agent_threads -> state -> supervise;
- how often `dict[str, Any]` is written (an untyped record, where a dataclass would say more);
- radon's cyclomatic-complexity count of blocks rated C or worse (complexity 11 and up), as
  `radon cc -n C` lists them: functions, methods and classes.

Exit code 1 when an import runs upward, so CI could run it; a measurement, not a test.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

# Lower rank = lower layer; a package may import only packages of lower rank.
RANK = {"supervise": 0, "state": 1, "agent_threads": 2, "supervisor": 3}
UNTYPED = re.compile(r"dict\[str,\s*Any\]")


@dataclass(frozen=True)
class Module:
    path: Path  # relative to the root
    package: str
    text: str
    tree: ast.Module


@dataclass(frozen=True)
class Function:
    where: str  # path:line
    name: str  # Class.method, outer.<locals>.inner
    lines: int


@dataclass(frozen=True)
class Import:
    where: str  # path:line
    source: str  # the importing package
    target: str  # the imported package
    name: str  # the module named in the import


def modules(root: Path) -> list[Module]:
    found = []
    for package in RANK:
        base = root / package
        if not base.is_dir():
            continue  # e.g. `supervise/` did not exist before the exception tree moved there
        for path in sorted(base.rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            tree = ast.parse(text, filename=str(path))
            found.append(Module(path.relative_to(root), package, text, tree))
    return found


def line_count(m: Module) -> int:
    return len(m.text.splitlines())


def functions(m: Module) -> list[Function]:
    out: list[Function] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                assert child.end_lineno is not None
                # From the first decorator: it is part of what a reader has to take in.
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                out.append(Function(f"{m.path}:{child.lineno}", name, child.end_lineno - first + 1))
                visit(child, f"{name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(m.tree, "")
    return out


def imports(m: Module) -> list[Import]:
    """Every import of another of the packages, wherever it sits (a function-level import
    runs upward as surely as a top-level one)."""
    out = []
    for node in ast.walk(m.tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            if top in RANK and top != m.package:
                out.append(Import(f"{m.path}:{node.lineno}", m.package, top, name))
    return out


def upward(found: list[Import]) -> list[Import]:
    return [i for i in found if RANK[i.target] > RANK[i.source]]


def radon_c_or_worse(m: Module) -> list[tuple[str, str, int]]:
    """(name, rank, complexity) of each block radon rates C or worse, as `radon cc` lists."""
    from radon.complexity import cc_rank, cc_visit  # dev extra; imported only when measuring

    out = []
    for b in cc_visit(m.text):  # functions, classes and methods, as `radon cc` lists them
        rank = cc_rank(b.complexity)
        if rank >= "C":
            out.append((f"{m.path}:{b.lineno} {b.fullname}", rank, b.complexity))
    return out


def report(root: Path) -> tuple[str, bool]:
    mods = modules(root)
    if not mods:
        raise SystemExit(f"{root}: none of the packages {', '.join(RANK)} is there")
    out: list[str] = [f"code metrics of {root}", ""]

    total = sum(line_count(m) for m in mods)
    out.append(f"## Lines per module (15 longest of {len(mods)}; {total} lines in all)")
    for m in sorted(mods, key=lambda m: -line_count(m))[:15]:
        out.append(f"{line_count(m):6d}  {m.path}")
    out.append("")

    funcs = [f for m in mods for f in functions(m)]
    out.append(f"## Longest functions (10 of {len(funcs)})")
    for f in sorted(funcs, key=lambda f: (-f.lines, f.where))[:10]:
        out.append(f"{f.lines:6d}  {f.name}  ({f.where})")
    out.append("")

    found = [i for m in mods for i in imports(m)]
    edges = Counter((i.source, i.target) for i in found)
    out.append("## Imports between the packages (importing -> imported: import statements)")
    for (src, dst), n in sorted(edges.items(), key=lambda e: (-RANK[e[0][0]], -RANK[e[0][1]])):
        out.append(f"  {src} -> {dst}: {n}")
    bad = upward(found)
    if bad:
        out.append(f"UPWARD imports ({len(bad)}): the layering is broken")
        out += [f"  {i.where}: {i.source} imports {i.name}" for i in bad]
    else:
        out.append("one way: supervisor -> agent_threads -> state -> supervise, no upward import")
    out.append("")

    per_pkg = Counter({p: 0 for p in RANK})
    for m in mods:
        per_pkg[m.package] += len(UNTYPED.findall(m.text))
    out.append(
        f"## `dict[str, Any]` written: {sum(per_pkg.values())} ("
        + ", ".join(f"{p} {per_pkg[p]}" for p in RANK)
        + ")"
    )
    out.append("")

    by_pkg: dict[str, list[tuple[str, str, int]]] = {p: [] for p in RANK}
    for m in mods:
        by_pkg[m.package] += radon_c_or_worse(m)
    worst = sorted((r for rs in by_pkg.values() for r in rs), key=lambda r: -r[2])
    out.append(
        f"## radon: blocks rated C or worse: {len(worst)} ("
        + ", ".join(f"{p} {len(by_pkg[p])}" for p in RANK)
        + "); the 5 most complex:"
    )
    out += [f"  {c:3d} {rank}  {name}" for name, rank, c in worst[:5]]
    return "\n".join(out), not bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parent.parent))
    args = parser.parse_args(argv)
    text, one_way = report(Path(args.root).resolve())
    print(text)
    return 0 if one_way else 1


if __name__ == "__main__":
    sys.exit(main())
