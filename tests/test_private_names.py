"""A module's private names (`_name`) stay its own: no module of accelsim/ or compiler/ imports another's
(`from accelsim.x import _name`) or reaches into one it imported (`x._name`). What two modules share gets a public
name, a docstring and types in the module that owns it.

tests/ keeps the same rule, but for the few names in ALLOWED: a process cache a test empties or counts, or a seam a
test stubs, which no caller but a test should touch.
"""
import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("accelsim", "compiler")

# (module, private name): why a test may reach it. Each is a process cache a test empties or counts, or a seam a
# test stubs, that no caller but a test should touch; everything else a test needs has a public name.
ALLOWED = {
    ("accelsim.parallel.train", "_STAGES"): "the stage programs kept per process, counted",
    ("accelsim.parallel.train", "_BUILDS"): "the roofline builds kept for their tile pricing, counted",
    ("accelsim.parallel.search", "_simulate"): "the planner's per-plan simulation, stubbed to see the plans tried",
    ("accelsim.price.roofline", "_KNOWN"): "the ops already warned about, emptied to see a warning again",
    ("accelsim.sim.tile", "_SIMULATED"): "the simulated ops kept per arch and pricing, under test",
    ("accelsim.rtl.runner", "_runner"): "the simulator lookup, pointed at a stub",
    ("accelsim.rtl.cosim", "_gather"): "the RTL run cosim reads its waveforms from, stubbed",
    ("compiler.map.space", "_tiled"): "the mapper's grid tiling rule and its memo, under test",
    ("compiler.map.space", "_TILED"): "the mapper's grid tiling memo, under test",
    ("compiler.targeting.identity", "_KEYS"): "the per-object key memo, under test",
}


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


@functools.cache
def reaches(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) for each private name of another project module that `path` imports or reads as an
    attribute of a module it imported (`import accelsim.x as x` or `from accelsim import x`, then `x._name`)."""
    tree = ast.parse(path.read_text(), str(path))
    own = module_name(path)
    modules: dict[str, str] = {}            # local name -> the project module it is bound to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update({a.asname: a.name for a in node.names if a.asname and a.name.split(".")[0] in PACKAGES})
        elif isinstance(node, ast.ImportFrom) and node.module:
            source = node.module
            if node.level:                  # relative: from the package the file is in
                package = own.split(".") if path.name == "__init__.py" else own.split(".")[:-1]
                source = ".".join(package[:len(package) - node.level + 1] + [node.module])
            if source.split(".")[0] not in PACKAGES or source == own:
                continue
            for alias in node.names:
                if private(alias.name):
                    found.append((node.lineno, source, alias.name))
                elif is_module(f"{source}.{alias.name}"):
                    modules[alias.asname or alias.name] = f"{source}.{alias.name}"
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and private(node.attr) and isinstance(node.value, ast.Name)
                and modules.get(node.value.id, own) != own):
            found.append((node.lineno, modules[node.value.id], node.attr))
    return sorted(found)          # cached: each file is parsed once for all the tests here


def crossings(*folders: str) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{line}: {module}.{name}" for folder in folders
            for path in sorted((ROOT / folder).rglob("*.py")) for line, module, name in reaches(path)
            if folder != "tests" or (module, name) not in ALLOWED]


def test_no_module_uses_another_modules_private_names():
    assert crossings(*PACKAGES) == [], "give the shared name a public name where it is defined"


def test_tests_use_public_names_but_the_allowed_few():
    assert crossings("tests") == [], "test the public name, or add the case to ALLOWED with its reason"


def test_every_allowed_private_name_is_still_used():
    used = {(m, n) for p in (ROOT / "tests").rglob("*.py") for _, m, n in reaches(p)}
    assert set(ALLOWED) <= used, f"stale: {sorted(set(ALLOWED) - used)}"


def test_the_check_sees_both_forms(tmp_path, monkeypatch):
    """A second source: a file written here with one crossing of each form, and a module's own private name."""
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    package = tmp_path / "accelsim"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("_x = 1\n")
    (package / "b.py").write_text("from accelsim.a import _x\nfrom accelsim import a\n_own = a._x\n"
                                  "from accelsim.b import _own\nprint(a.__name__)\n")
    assert reaches(package / "b.py") == [(1, "accelsim.a", "_x"), (3, "accelsim.a", "_x")]
