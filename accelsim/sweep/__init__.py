"""Design-space sweeps: a spec (base arch, axes by key path, models, objectives, strategy) evaluated on a
process pool or a Dask cluster into a resumable SQLite store, and the Pareto front of what it holds.

For the report side: sweep_rows(db_path) gives every stored row as a dict, pareto(rows, objectives) the
rows no other row of the same model beats on all objectives at once.
"""
from accelsim.sweep.pareto import pareto
from accelsim.sweep.runner import Summary, run_sweep
from accelsim.sweep.spec import OBJECTIVES, Spec, SpecError, load_spec
from accelsim.sweep.store import sweep_rows

__all__ = ["OBJECTIVES", "Spec", "SpecError", "Summary", "load_spec", "pareto", "run_sweep", "sweep_rows"]
