"""accelsim: simulate AI models on accelerators described in YAML.

    import accelsim
    result = accelsim.run("resnet50", arch="tpu_v1")
    print(result.table()); result.to_json()
    step = accelsim.train("gpt2", arch="h100", batch=8, seq=1024, optimizer="adamw")   # a training step
    values = accelsim.evaluate_step("gpt2", layers=1, seq=8, optimizer="adamw")   # one step's loss, gradients, updates
    accelsim.collective("allreduce", "dgx_h100", devices=8, size="1 GiB").busbw     # bytes per second

The pipeline is accelsim.sim.build; docs/architecture.md says which package owns what. The names below are imported
on first use (PEP 562), so that `accelsim models` or `--help` does not pay for the compiler and the engine.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# name -> the module that defines it
_API = {"collective": "accelsim.comm", "Result": "accelsim.results.result", "compare": "accelsim.sim.api",
        "evaluate": "accelsim.sim.api", "run": "accelsim.sim.api", "build": "accelsim.sim.build",
        "simulate": "accelsim.sim.build", "evaluate_step": "accelsim.sim.eval_train",
        "load_arch": "accelsim.sim.model", "load_model": "accelsim.sim.model", "train": "accelsim.sim.train"}

if TYPE_CHECKING:
    from accelsim.comm import collective
    from accelsim.results.result import Result
    from accelsim.sim.api import compare, evaluate, run
    from accelsim.sim.build import build, simulate
    from accelsim.sim.eval_train import evaluate_step
    from accelsim.sim.model import load_arch, load_model
    from accelsim.sim.train import train

__all__ = ["run", "evaluate", "evaluate_step", "compare", "train", "collective", "build", "simulate", "load_arch",
           "load_model", "Result"]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'accelsim' has no attribute {name!r}")
    value = getattr(importlib.import_module(_API[name]), name)
    globals()[name] = value      # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
