"""Design-space sweeps: a spec (base arch, axes by key path, models, objectives, strategy) evaluated on a
process pool or a Dask cluster into a resumable SQLite store, and the Pareto front of what it holds.

For the report side: sweep_rows(db_path) gives every stored row as a dict, pareto(rows, objectives) the
rows no other row of the same model beats on all objectives at once. The runner and the spec (which import the
arch loader and the engine) are imported on first use (PEP 562), so that `accelsim --help` does not pay for them.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from accelsim.sweep.pareto import pareto
from accelsim.sweep.store import sweep_rows

_LATER = {"Summary": "accelsim.sweep.runner", "run_sweep": "accelsim.sweep.runner",
          "OBJECTIVES": "accelsim.sweep.spec", "Spec": "accelsim.sweep.spec", "SpecError": "accelsim.sweep.spec",
          "load_spec": "accelsim.sweep.spec"}

if TYPE_CHECKING:
    from accelsim.sweep.runner import Summary, run_sweep
    from accelsim.sweep.spec import OBJECTIVES, Spec, SpecError, load_spec

__all__ = ["OBJECTIVES", "Spec", "SpecError", "Summary", "load_spec", "pareto", "run_sweep", "sweep_rows"]


def __getattr__(name: str):
    if name not in _LATER:
        raise AttributeError(f"module 'accelsim.sweep' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LATER[name]), name)
    globals()[name] = value
    return value
