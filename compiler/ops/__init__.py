"""Frontend ops, one module per op (or per family of ops that share one shape rule).

Importing this package registers every module's ops in `REGISTRY`; adding an op is adding a file.
"""
import importlib
import pkgutil

from compiler.ops.base import REGISTRY, OpDef

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["REGISTRY", "OpDef"]
