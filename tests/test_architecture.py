"""The layout's rules hold by test: the import contracts in pyproject.toml (import-linter), the engine's imports,
file sizes, and that every package says what it owns (docs/architecture.md lists the parts)."""
import ast
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 500
PACKAGES = ("accelsim", "compiler")


def sources(*folders: str) -> list[Path]:
    tracked = subprocess.run(["git", "ls-files", *folders], cwd=ROOT, capture_output=True, text=True).stdout.split()
    return [ROOT / f for f in tracked if f.endswith((".py", ".v"))] if tracked else \
        [p for folder in folders for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".v")]


def test_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout and "Contracts: 10 kept" in done.stdout


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph(*PACKAGES, include_external_packages=True, cache_dir=None)


def test_the_engine_imports_only_numpy_and_numba(graph):
    engine = {m for m in graph.modules if m == "accelsim.engine" or m.startswith("accelsim.engine.")}
    outside = {(m, i) for m in engine for i in graph.find_modules_directly_imported_by(m)
               if i not in engine and i.split(".")[0] not in ("numpy", "numba")}
    assert not outside


def test_there_is_no_import_cycle_between_modules(graph):
    import networkx as nx

    ours = {m for m in graph.modules if m.split(".")[0] in PACKAGES}
    edges = nx.DiGraph((m, i) for m in ours for i in graph.find_modules_directly_imported_by(m) if i in ours)
    # a package's __init__ re-exporting its own modules is not a cycle: drop edges into a module's ancestors
    edges.remove_edges_from([(a, b) for a, b in list(edges.edges) if a.startswith(b + ".")])
    assert list(nx.simple_cycles(edges)) == []


def test_every_source_file_stays_small():
    big = {str(p.relative_to(ROOT)): n for p in sources("accelsim", "compiler", "rtl", "tests", "benchmarks")
           if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not big, f"split these along a seam a reader would see (at most {MAX_LINES} lines): {big}"


@pytest.mark.parametrize("init", sorted(str(p.relative_to(ROOT)) for name in PACKAGES
                                        for p in (ROOT / name).rglob("__init__.py")))
def test_every_package_says_what_it_owns(init):
    doc = ast.get_docstring(ast.parse((ROOT / init).read_text()))
    assert doc and len(doc.split()) >= 6, f"{init} opens with no sentence on what the package owns"


def test_the_parts_are_written_down():
    text = (ROOT / "docs" / "architecture.md").read_text()
    parts = {p.parent.relative_to(ROOT).as_posix() for name in PACKAGES for p in (ROOT / name).glob("*/__init__.py")}
    parts |= {p.relative_to(ROOT).with_suffix("").as_posix() for name in PACKAGES for p in (ROOT / name).glob("*.py")
              if p.name != "__init__.py"}
    missing = sorted(part for part in parts if f"`{part}" not in text)
    assert not missing, f"docs/architecture.md does not name {missing}"


def test_user_docs_stay_inside_the_repository():
    for doc in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        assert "../shared" not in doc.read_text(), doc.name
