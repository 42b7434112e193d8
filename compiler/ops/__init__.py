"""Frontend ops, one module per op (or per family of ops that share one shape rule), and the three walks over a
Graph that dispatch on them: shapes (inference and folding), lower (Graph -> IR) and interpret (the numpy
reference). They live together because a control-flow op (Scan) runs all three on its body.

Importing this package registers every op module's ops in `REGISTRY`; adding an op is adding a file. The ops a
training step adds (gradients, optimizer updates; not ONNX ops) live in `train/`, registered in `TRAINING`; the
collectives a parallel plan inserts live in `comm.py`, registered in `COMM`.
"""
import importlib
import pkgutil

from compiler.ops.base import COMM, COMM_DOMAIN, REGISTRY, TRAINING, TRAINING_DOMAIN, OpDef

WALKS = {"base", "shapes", "lower", "interpret"}   # not ops: the registry and the walks over a Graph

for _package, _prefix in ((__path__, __name__), ([f"{__path__[0]}/train"], f"{__name__}.train")):
    for _module in pkgutil.iter_modules(_package):
        if _module.name not in WALKS and not _module.ispkg:
            importlib.import_module(f"{_prefix}.{_module.name}")

__all__ = ["COMM", "COMM_DOMAIN", "REGISTRY", "TRAINING", "TRAINING_DOMAIN", "OpDef"]
