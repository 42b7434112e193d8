"""The Python API behind the CLI: `run` simulates a model on an arch, `evaluate` runs its numerics."""
from __future__ import annotations

import os

import numpy as np

from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.graph import Graph
from compiler.interpret import run_graph
from compiler.lower import folded_nodes
from compiler.pipeline import Options, compile_graph
from accelsim.arch import Arch
from accelsim.sim.model import load_arch
from accelsim.sim.model import load_model
from accelsim.out.result import Result

FIDELITIES = ("tile", "roofline")   # tile: map, codegen and the numba engine; roofline: the bound


def run(model: str | os.PathLike | Graph = "resnet50", arch: str | os.PathLike | Arch = "tpu_v1",
        batch: int | None = None, dtype: str | DType | None = None, fidelity: str = "tile",
        compat: str | None = None, trace: bool = False, **model_options) -> Result:
    """Simulate `model` (zoo name, .onnx path or Graph) on `arch` (preset name, YAML path or Arch).
    `trace` keeps the whole timeline (Result.timeline, for accelsim.out.trace) at the cost of memory.

    `dtype` is the dtype the hardware computes in; by default the arch's native one (int8 on TPU v1).
    `compat="scalesim"` prices each Einsum's compute cycles as SCALE-Sim v3 does (accelsim.importers.scalesim).
    """
    if fidelity not in FIDELITIES:
        raise UserError(f"fidelity {fidelity!r} is not available; choose from {', '.join(FIDELITIES)}")
    if compat not in (None, "scalesim"):   # checked before the tile engine hands it to a compute model
        raise UserError(f"unknown compat {compat!r}; known: scalesim (SCALE-Sim v3's compute cycles)")
    hw = arch if isinstance(arch, Arch) else load_arch(arch)
    target = DType.parse(dtype) if isinstance(dtype, str) else dtype or hw.native_dtype
    graph = load_model(model, batch=batch, **model_options)
    ir = compile_graph(graph, Options(dtype=target))
    timeline = None
    if fidelity == "tile" and trace:
        from accelsim.sim.tile import simulate

        ops, timeline = simulate(ir, hw, compat=compat)
    elif fidelity == "tile":
        from accelsim.sim.tile import simulate_ops

        ops = simulate_ops(ir, hw, compat=compat)
    else:
        from accelsim.price.roofline import estimate

        ops = estimate(ir, hw)
    notes = []
    folded = folded_nodes(graph)
    if folded:
        notes.append(f"{len(folded)} nodes folded at import (constants and shape arithmetic) run on no unit")
    widened = sorted({(op.dtype, op.rate_dtype, op.unit) for op in ops if op.dtype != op.rate_dtype})
    notes += [f"{d} ops run at the {r} rate of {u} (it has no {d} path)" for d, r, u in widened]
    if compat is not None:
        from accelsim.importers.scalesim import apply_compat

        ops = apply_compat(ops, ir, hw, compat)
        notes.append(f"compute_cycles of matrix ops as {compat} counts them (whole layers, no overlap)")
    return Result(model=_model_info(graph, batch, target), arch=_arch_info(hw, target), fidelity=fidelity, ops=ops,
                  notes=notes, timeline=timeline)


def scalesim_layers(model: str | os.PathLike | Graph, arch: str | os.PathLike | Arch) -> list[dict]:
    """Per layer (Einsum) of `model`: its GEMM view and SCALE-Sim v3's compute cycles on `arch` (e.g. a
    topology .csv on a .cfg), i.e. SCALE-Sim's "Total Cycles" - "Stall Cycles" for that layer."""
    from accelsim.importers.scalesim import layer_cycles

    hw = arch if isinstance(arch, Arch) else load_arch(arch)
    return layer_cycles(compile_graph(load_model(model), Options(dtype=hw.native_dtype)), hw)


def evaluate(model: str | os.PathLike | Graph, inputs: dict[str, np.ndarray] | None = None, seed: int = 0,
             batch: int | None = None, **model_options) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run the numpy reference. Returns (inputs used, outputs); random inputs (seeded) where none given."""
    graph = load_model(model, batch=batch, weights=True, **model_options)
    feeds = dict(inputs) if inputs is not None else random_inputs(graph, seed)
    return feeds, run_graph(graph, feeds)


def random_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Standard-normal floats; integer inputs (token ids) uniform in [0, 100) so any vocabulary fits."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name in graph.inputs:
        tensor = graph.tensor(name)
        if tensor.dtype.is_float:
            feeds[name] = rng.standard_normal(tensor.shape).astype(tensor.dtype.numpy)
        elif tensor.dtype == DType.bool:
            feeds[name] = np.ones(tensor.shape, dtype=bool)
        else:
            feeds[name] = rng.integers(0, 100, size=tensor.shape).astype(tensor.dtype.numpy)
    return feeds


def _model_info(graph: Graph, batch: int | None, dtype: DType) -> dict:
    first = graph.tensors[graph.inputs[0]].shape if graph.inputs else ()
    return {"name": graph.name, "source": graph.source, "batch": batch or (first[0] if first else 1),
            "dtype": dtype.value, "parameters": int(sum(graph.tensors[w].elements for w in graph.weights)),
            "nodes": len(graph.nodes)}


def _arch_info(arch: Arch, dtype: DType) -> dict:
    rate = dtype if any(u.supports(dtype) for u in arch.matrix_units) else arch.native_dtype
    return {"name": arch.name, "kind": arch.kind.value, "file": str(arch.source_file), "clock_hz": arch.clock_hz,
            "peak_macs_per_second": arch.matrix_for(rate).peak_per_second(rate),
            "native_dtype": arch.native_dtype.value, "memory_levels": [lv.name for lv in arch.memory],
            "tdp_w": arch.power.tdp_w}
