"""Frontend ops, one module per op (or per family of ops that share one shape rule), and the three walks over a
Graph that dispatch on them: shapes (inference and folding), lower (Graph -> IR) and interpret (the numpy
reference). They live together because a control-flow op (Scan) runs all three on its body.

Importing this package registers every op module's ops in `REGISTRY`; adding an op is adding a file.
"""
import importlib
import pkgutil

from compiler.ops.base import REGISTRY, OpDef

WALKS = {"base", "shapes", "lower", "interpret"}   # not ops: the registry and the walks over a Graph

for _module in pkgutil.iter_modules(__path__):
    if _module.name not in WALKS:
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["REGISTRY", "OpDef"]
