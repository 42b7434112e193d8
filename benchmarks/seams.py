"""The seams of the code, counted: what a new arch kind, estimator or collective has to touch.

- untyped arch: function parameters named `arch` with no annotation (the compiler cannot see the hardware type);
- private imports: `from <project module> import _name` in another module;
- memo sites: hand-rolled in-process caches (functools.cache/lru_cache decorators, module-level dicts named *cache* or
  *memo* or that a function looks up and stores into); memos: caches kept by the one helper, compiler.memo;
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


DICTS = ("dict", "OrderedDict", "WeakKeyDictionary", "WeakValueDictionary", "defaultdict")
HELPER = "Memo"                      # compiler.memo.Memo; a class deriving from it (the mapper's Cache) counts too


def _decorator_name(deco: ast.expr) -> str:
    target = deco.func if isinstance(deco, ast.Call) else deco
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def _module_names(tree: ast.Module) -> dict[str, tuple[int, ast.expr | None]]:
    """Module-level names assigned once: name -> (line, value)."""
    names = {}
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, ast.AnnAssign) else [])
        for target in targets:
            if isinstance(target, ast.Name):
                names[target.id] = (node.lineno, getattr(node, "value", None))
    return names


def _called(value: ast.expr | None) -> str:
    return _decorator_name(value) if isinstance(value, ast.Call) else ""


def _memo_like(tree: ast.Module, name: str) -> bool:
    """Whether one function both reads a value out of `name` (`.get`, `[key]`) and stores into it (`[key] = `,
    `.setdefault`): a memo. A registry's `register` only stores (a duplicate found with `in` is an error)."""
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        read = stored = False
        for node in ast.walk(function):
            if isinstance(node, ast.Attribute) and getattr(node.value, "id", None) == name:
                read = read or node.attr in ("get", "setdefault", "pop")
                stored = stored or node.attr == "setdefault"
            elif isinstance(node, ast.Subscript) and getattr(node.value, "id", None) == name:
                read = read or isinstance(node.ctx, ast.Load)
                stored = stored or isinstance(node.ctx, ast.Store)
        if read and stored:
            return True
    return False


def helpers(trees: list[ast.Module]) -> set[str]:
    """Memo and the classes that derive from it, in any of `trees`."""
    found, more = {HELPER}, True
    while more:
        more = False
        for tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name not in found and any(
                        _decorator_name(base.value if isinstance(base, ast.Subscript) else base) in found
                        for base in node.bases):
                    found.add(node.name)
                    more = True
    return found


def memo_sites(tree: ast.Module, kept_by: set[str]) -> list[int]:
    """Hand-rolled in-process caches: functools.cache/lru_cache/cached_property; module-level dicts (of any kind)
    named *cache* or *memo*, or that a function looks up and stores into; other objects named so, not `kept_by` the
    helper."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines += [node.lineno for deco in node.decorator_list
                      if _decorator_name(deco) in ("cache", "lru_cache", "cached_property")]
    for name, (line, value) in _module_names(tree).items():
        named = "cache" in name.lower() or "memo" in name.lower()
        if isinstance(value, ast.Dict) or _called(value) in DICTS:
            if named or _memo_like(tree, name):
                lines.append(line)
        elif named and isinstance(value, ast.Call) and _called(value) not in kept_by:
            lines.append(line)
    return sorted(lines)


def memo_uses(tree: ast.Module, kept_by: set[str]) -> list[int]:
    """Caches kept by the one helper, compiler.memo: functions decorated @memo(...), module-level Memos (and Caches)."""
    lines = [node.lineno for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
             and any(_decorator_name(deco) == "memo" for deco in node.decorator_list)]
    lines += [line for line, value in _module_names(tree).values() if _called(value) in kept_by]
    return sorted(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print each site, not only the counts")
    listing = parser.parse_args().list
    counts: dict[str, list[str]] = {"untyped arch parameters": [], "private imports": [], "memo sites": [],
                                    "memos (compiler.memo)": [], "files naming an arch kind": []}
    trees = {path.relative_to(ROOT): ast.parse(path.read_text()) for path in sources()}
    kept_by = helpers(list(trees.values()))
    for rel, tree in trees.items():
        counts["untyped arch parameters"] += [f"{rel}:{line}" for line in untyped_arch(tree)]
        counts["private imports"] += [f"{rel}:{line}" for line in private_imports(tree)]
        counts["memo sites"] += [f"{rel}:{line}" for line in memo_sites(tree, kept_by)]
        counts["memos (compiler.memo)"] += [f"{rel}:{line}" for line in memo_uses(tree, kept_by)]
        if names_a_kind(tree):
            counts["files naming an arch kind"].append(str(rel))
    for what, sites in counts.items():
        print(f"{what:28} {len(sites):5}")
        if listing:
            for site in sites:
                print(f"    {site}")


if __name__ == "__main__":
    main()
