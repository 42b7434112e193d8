"""The seams of the code, counted: what a new arch kind, estimator or collective has to touch.

- untyped arch: function parameters named `arch` with no annotation (the compiler cannot see the hardware type);
- private imports: `from <project module> import _name` in another module;
- memo sites: in-process caches (functools.cache/lru_cache decorators, module-level dicts named *cache* or *memo*);
- kind tests: files that name one arch kind in code (an enum member or a literal compared with a kind), the files
  a new kind would have to be added to.

Rerun: .venv/bin/python benchmarks/seams.py [--list]
"""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("accelsim", "compiler")
KINDS = ("simd", "simt", "systolic", "ternary")


def names_a_kind(tree: ast.AST) -> bool:
    """Code that names one arch kind: `Kind.simt` / `ArchKind.simt`, or the string "simt" outside a docstring."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in KINDS and getattr(node.value, "id", "").endswith("Kind"):
            return True
        if isinstance(node, ast.Constant) and node.value in KINDS and id(node) not in docstrings:
            return True
    return False


def sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def untyped_arch(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for arg in args.posonlyargs + args.args + args.kwonlyargs:
                if arg.arg == "arch" and arg.annotation is None:
                    lines.append(node.lineno)
    return lines


def private_imports(tree: ast.AST) -> list[int]:
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES
            and any(alias.name.startswith("_") and not alias.name.startswith("__") for alias in node.names)]


def memo_sites(tree: ast.Module) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name in ("cache", "lru_cache", "cached_property") or name.startswith("memo"):
                    lines.append(node.lineno)
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, ast.AnnAssign) else [])
        value = getattr(node, "value", None)
        for target in targets:
            name = getattr(target, "id", "").lower()
            if ("cache" in name or "memo" in name) and isinstance(value, (ast.Dict, ast.Call)):
                lines.append(node.lineno)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print each site, not only the counts")
    listing = parser.parse_args().list
    counts = {"untyped arch parameters": [], "private imports": [], "memo sites": [], "files naming an arch kind": []}
    for path in sources():
        text = path.read_text()
        tree = ast.parse(text)
        rel = path.relative_to(ROOT)
        counts["untyped arch parameters"] += [f"{rel}:{line}" for line in untyped_arch(tree)]
        counts["private imports"] += [f"{rel}:{line}" for line in private_imports(tree)]
        counts["memo sites"] += [f"{rel}:{line}" for line in memo_sites(tree)]
        if names_a_kind(tree):
            counts["files naming an arch kind"].append(str(rel))
    for what, sites in counts.items():
        print(f"{what:28} {len(sites):5}")
        if listing:
            for site in sites:
                print(f"    {site}")


if __name__ == "__main__":
    main()
