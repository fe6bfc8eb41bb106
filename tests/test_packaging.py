"""What `pip install .` gives a user: the wheel's files, its declared dependencies, and the
program run from the wheel's own files; `supervise examples` and `--version`.

The wheel is built once, as an install from an index gets it (`python -m build`: an sdist,
then a wheel from the unpacked sdist), so a file the sdist leaves out is missing here too.
Installing it with its dependencies into a fresh venv and running the README's quickstart is
.ci/wheel-smoke's job (a minute: too slow for the suite).
"""

from __future__ import annotations

import ast
import email
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from conftest import ROOT, Env

from supervisor.examples import shipped_files

PACKAGES = ("supervise", "supervisor", "agent_threads", "state")
CONFIGS = ROOT / "configs"  # installed as supervisor.configs
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
# Declared for the stack the issue specifies although no module imports them (yet).
KEPT_UNIMPORTED = {"psutil", "watchfiles", "apscheduler", "sqlmodel", "anyio"}


def _source_files(top: Path, suffix: str = "") -> set[str]:
    return {
        p.relative_to(top).as_posix()
        for p in top.rglob(f"*{suffix}")
        if p.is_file() and "__pycache__" not in p.parts
    }


@dataclass(frozen=True)
class Built:
    wheel: Path
    names: frozenset[str]


def copy_checkout(dest: Path) -> Path:
    """The files git would commit (tracked or new, not ignored), as a fresh clone has them.

    Built in place, a stale supervise.egg-info/SOURCES.txt from an earlier build keeps
    files in the sdist that package-data no longer names: this test would then pass on a
    configuration that a fresh clone's `pip install .` gets wrong.
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        if (ROOT / rel).is_file():  # not a tracked file deleted in the work tree
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    return dest


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    # Built once per run, also under pytest-xdist: a worker's session is its own, so the first
    # to ask builds in the run's shared temp dir while the others wait on the lock (a build
    # is seconds of CPU).
    shared = tmp_path_factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" in os.environ:
        shared = shared.parent
    with open(shared / "wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = shared / "dist"
        if not out.is_dir():
            _build(tmp_path_factory.mktemp("checkout"), shared / "dist.tmp")
            (shared / "dist.tmp").rename(out)
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        return Built(wheel, frozenset(z.namelist()))


def _build(tree: Path, out: Path) -> None:
    copy_checkout(tree)
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(tree)],
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


# -- the wheel's files ------------------------------------------------------------------------


def test_every_module_of_the_source_is_in_the_wheel(built: Built) -> None:
    source = {f"{pkg}/{rel}" for pkg in PACKAGES for rel in _source_files(ROOT / pkg, ".py")}
    in_wheel = {
        n
        for n in built.names
        if n.endswith(".py")
        and n.split("/")[0] in PACKAGES
        and not n.startswith("supervisor/configs/")
    }
    assert in_wheel == source
    # The subpackages a hand-kept list once missed, and the shared exception tree.
    for name in ("agent_threads/hooks", "agent_threads/models", "agent_threads/tools"):
        assert f"{name}/__init__.py" in in_wheel
    assert {"agent_threads/hooks/shellrun.py", "supervise/errors.py"} <= in_wheel


def test_every_shipped_file_is_in_the_wheel(built: Built) -> None:
    configs = _source_files(CONFIGS)
    # The ones a user is told about, so an empty configs/ cannot pass.
    assert {
        "hooks.schema.json",
        "examples/migrate.yaml",
        "examples/migrate-turns.yaml",
        "examples/fake_migrate.py",
        "examples/hooks.json",
        "examples/programs.yaml",
        "extensions/stack.py",
        "systemd/supervise.service",
    } <= configs
    missing = {f"supervisor/configs/{rel}" for rel in configs} - built.names
    assert not missing, f"configs/ files left out of the wheel (package-data?): {missing}"
    typed = {f"{pkg}/py.typed" for pkg in PACKAGES}
    assert {"supervisor/shim.sh", *typed} <= built.names


def test_the_wheel_holds_nothing_else(built: Built) -> None:
    tops = {n.split("/")[0] for n in built.names}
    assert tops == {*PACKAGES, f"supervise-{VERSION}.dist-info"}
    assert not [n for n in built.names if "__pycache__" in n or n.endswith(".pyc")]


def _requirement_name(spec: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", spec)
    assert match, spec
    return re.sub(r"[-_.]+", "-", match.group()).lower()  # PEP 503's normal form


def test_the_wheel_metadata_declares_the_dependencies_and_the_command(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as z:
        meta = email.message_from_bytes(z.read(f"supervise-{VERSION}.dist-info/METADATA"))
        entry_points = z.read(f"supervise-{VERSION}.dist-info/entry_points.txt").decode()
    assert meta["Version"] == VERSION
    runtime = {
        _requirement_name(r) for r in meta.get_all("Requires-Dist") or [] if "extra ==" not in r
    }
    assert runtime == {_requirement_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert {"pydantic", "sqlalchemy"} <= runtime
    assert "supervise = supervisor.cli:main" in entry_points


# -- every import declared --------------------------------------------------------------------


def imported_tops(source: str) -> set[str]:
    """The top-level names of every absolute import in a module, also inside functions."""
    tops: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.add(node.module.split(".")[0])
    return tops


def undeclared(
    imports: Mapping[str, set[str]],
    declared: Iterable[str],
    ours: set[str],
    dists: Mapping[str, list[str]],
) -> list[str]:
    """`module (in FILE, ...)` for each third-party import no declared distribution provides.

    `imports` maps a top-level module name to the files importing it; `dists` is
    `packages_distributions()`: which installed distributions provide each module.
    """
    wanted = set(declared)
    problems = []
    for top, where in sorted(imports.items()):
        if top in sys.stdlib_module_names or top in ours:
            continue
        if not {_requirement_name(d) for d in dists.get(top, [])} & wanted:
            problems.append(f"{top} (in {', '.join(sorted(where))})")
    return problems


def _imports_of(tops: Iterable[Path]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for top in tops:
        for path in sorted(top.rglob("*.py")):
            for name in imported_tops(path.read_text()):
                found.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    return found


def test_every_import_is_a_declared_dependency() -> None:
    runtime = {_requirement_name(r) for r in PYPROJECT["project"]["dependencies"]}
    dev = {_requirement_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["dev"]}
    dists = packages_distributions()
    extras = {  # optional features: psycopg for SUPERVISE_DB_URL=postgresql+psycopg://...
        _requirement_name(r)
        for name, reqs in PYPROJECT["project"]["optional-dependencies"].items()
        if name != "dev"
        for r in reqs
    }
    product = _imports_of([*(ROOT / p for p in PACKAGES), CONFIGS])
    assert undeclared(product, runtime | extras, set(PACKAGES), dists) == []
    # The tests may use the dev extras too; their own helper modules are theirs.
    local = {p.stem for p in (ROOT / "tests").glob("*.py")}
    tests = _imports_of([ROOT / "tests"])
    assert undeclared(tests, runtime | dev, {*PACKAGES, *local}, dists) == []
    # And no dependency is declared for nothing, beyond the specified stack.
    provided = {_requirement_name(d) for top in product for d in dists.get(top, [])}
    assert runtime - provided <= KEPT_UNIMPORTED


def test_the_import_check_finds_what_is_not_declared() -> None:
    source = (
        "import os, numpy.linalg\nfrom yaml import safe_load\nfrom . import sibling\n"
        "def f():\n    import re2\n    from supervisor import cli\n"
    )
    tops = imported_tops(source)
    assert tops == {"os", "numpy", "yaml", "re2", "supervisor"}
    dists = {"yaml": ["PyYAML"], "re2": ["google-re2"], "numpy": ["numpy"]}
    imports = {t: {"m.py"} for t in tops}
    assert undeclared(imports, ["pyyaml", "google-re2"], {"supervisor"}, dists) == [
        "numpy (in m.py)"
    ]
    # The real tree without pydantic declared: agent_threads imports it directly.
    runtime = {_requirement_name(r) for r in PYPROJECT["project"]["dependencies"]} - {"pydantic"}
    runtime |= {"psycopg"}  # the postgresql extra's
    product = _imports_of([*(ROOT / p for p in PACKAGES), CONFIGS])
    found = undeclared(product, runtime, set(PACKAGES), packages_distributions())
    assert len(found) == 1 and found[0].startswith("pydantic (in agent_threads/")


# -- the program from the wheel's files -------------------------------------------------------


def _from_wheel(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUPERVISE_")}
    env["PYTHONPATH"] = str(site)  # ahead of the dev install, whose source is ROOT
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=30
    )


def test_the_wheels_own_files_find_what_they_ship(built: Built, tmp_path: Path) -> None:
    site, work = tmp_path / "site", tmp_path / "work"
    work.mkdir()
    with zipfile.ZipFile(built.wheel) as z:
        z.extractall(site)
    where = _from_wheel(
        site,
        work,
        "-c",
        "import importlib.resources as r, supervisor.cli as c; "
        "print(c.__file__); print(r.files('supervisor.configs'))",
    )
    assert where.returncode == 0, where.stderr
    assert [Path(line).is_relative_to(site) for line in where.stdout.splitlines()] == [True, True]

    made = _from_wheel(site, work, "-m", "supervisor", "examples", "ex")
    assert made.returncode == 0, made.stderr
    flat = {Path(r).name: CONFIGS / r for r in _source_files(CONFIGS) if r != "__init__.py"}
    assert sorted(p.name for p in (work / "ex").iterdir()) == sorted(flat)
    for name, source in flat.items():
        assert (work / "ex" / name).read_bytes() == source.read_bytes(), name

    check = _from_wheel(site, work / "ex", "-m", "supervisor", "hooks", "check", "migrate.yaml")
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith("migrate.yaml: OK: migration-failed (on_exit)")
    version = _from_wheel(site, work, "-m", "supervisor", "--version")
    assert (version.returncode, version.stdout) == (0, f"supervise {VERSION}\n")


# -- supervise examples, --version ------------------------------------------------------------


def test_examples_write_every_shipped_file_and_touch_no_state(env: Env) -> None:
    r = env.cli("examples", "a/b")
    assert r.returncode == 0, r.stderr
    names = sorted(Path(rel).name for rel in _source_files(CONFIGS) if rel != "__init__.py")
    assert sorted(p.name for p in (env.work / "a" / "b").iterdir()) == names
    assert r.stdout.splitlines()[: len(names)] == [f"a/b/{n}" for n in names]
    assert "cd a/b && supervise run -- python3 fake_migrate.py --hook migrate.yaml" in r.stdout
    assert not env.home.exists()  # writing examples is no reason to create a state dir


def test_examples_overwrite_nothing(env: Env) -> None:
    (env.work / "ex").mkdir()
    (env.work / "ex" / "migrate.yaml").write_text("mine\n")
    r = env.cli("examples", "ex")
    assert r.returncode == 2
    assert r.stderr == (
        "supervise: ex already has migrate.yaml: nothing written; give a new or an empty "
        "directory, or move those files away\n"
    )
    assert [p.name for p in (env.work / "ex").iterdir()] == ["migrate.yaml"]
    assert (env.work / "ex" / "migrate.yaml").read_text() == "mine\n"


def test_two_shipped_files_with_one_name_are_a_packaging_bug(tmp_path: Path) -> None:
    for sub in ("examples", "extensions"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "x.yaml").write_text(sub)
    (tmp_path / "__init__.py").write_text("")
    with pytest.raises(AssertionError, match=r"two shipped files are named x\.yaml"):
        shipped_files(tmp_path)
    (tmp_path / "extensions" / "x.yaml").rename(tmp_path / "extensions" / "y.yaml")
    assert [(s.name, s.source.read_text()) for s in shipped_files(tmp_path)] == [
        ("x.yaml", "examples"),
        ("y.yaml", "extensions"),
    ]


def test_examples_into_a_file_is_refused(env: Env) -> None:
    (env.work / "f").write_text("")
    r = env.cli("examples", "f")
    assert (r.returncode, r.stderr) == (
        2,
        "supervise: f is not a directory; give a new or an existing directory\n",
    )


def test_version_is_the_projects(env: Env) -> None:
    r = env.cli("--version")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"supervise {VERSION}\n", "")
