"""The pipeline, written once: `build` compiles a model for an arch, `simulate` runs what it built.

Every caller (the API, the CLI, reports, cosim, sweeps, validation) goes through these two functions, and a
Result carries the mappings it was simulated with, so nothing runs the pipeline again to draw them.
The stages, top to bottom:

    model -> Graph         accelsim.sim.model.load_model      zoo name, ONNX file, topology CSV or a Graph
    Graph -> IR -> IR'     compiler.compile.compile_graph    lower, then the passes in compiler.compile
    IR -> mappings         compiler.map.map_ir                a budgeted search, costed by accelsim.price.cost
    mappings -> Program    compiler.codegen.generate          tile rows: counts of bytes and work
    Program -> Result      accelsim.sim.tile                  accelsim.price prices, accelsim.engine schedules
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, replace

from accelsim.arch import Arch
from accelsim.results.result import Result
from accelsim.price.compat import NATIVE, Pricing, pricing
from accelsim.price.cost import reporter
from accelsim.price.roofline import estimate
from accelsim.sim import FIDELITIES, tile
from accelsim.sim.memory import footprint, note
from accelsim.sim.model import load_arch, load_model
from compiler.codegen import Code, generate
from compiler.dtypes import DType
from compiler.errors import CapacityWarning, UserError
from compiler.frozen import but
from compiler.graph import Graph
from compiler.ir import IR
from compiler.ops.lower import folded_nodes
from compiler.map import DEFAULT_BUDGET, map_ir
from compiler.mapping import Mapping
from compiler.compile import Options, compile_graph



@dataclass(frozen=True)
class Compiled:
    """A model compiled for an arch: every stage's output up to the mappings, and what it was built with."""

    graph: Graph
    ir: IR
    arch: Arch
    dtype: DType                      # the dtype the hardware computes in
    pricing: Pricing
    mappings: dict[str, Mapping]      # every op's (Einsums' loop nests, vector ops' chunk plans); {} unmapped
    batch: int | None = None

    def program(self) -> Code:
        """The whole model's Program, every op at once (accelsim.sim.tile makes it op by op to save memory)."""
        return generate(self.ir, self.arch, self.mappings)


def build(model: str | os.PathLike | Graph, arch: str | os.PathLike | Arch, *, batch: int | None = None,
          dtype: str | DType | None = None, compat: str | Pricing | None = None, budget: int | None = None,
          mapped: bool = True, fuse: str = "runtime", launch: str | None = None, caches: str = "warm",
          **model_options) -> Compiled:
    """Compile `model` for `arch`: Graph, IR and (unless `mapped` is False: a roofline needs none) a mapping
    per op. `dtype` defaults to the arch's native one; `compat` names how compute cycles are priced; `fuse`
    says how kernels form (runtime: as the target's inference runtimes fuse; chains; none); `launch` is "eager"
    (a launch per kernel) or "graph" (one for the captured graph), by default `default_launch`'s; `caches` is
    "warm" (the model's inputs and outputs where activations live, as on a repeated call) or "cold" (in DRAM)."""
    how = pricing(compat)
    hw = load_arch(arch)
    target = DType.parse(dtype) if isinstance(dtype, str) else dtype or hw.native_dtype
    graph = load_model(model, batch=batch, **model_options)
    ir = compile_graph(graph, Options(dtype=target, arch=hw, fuse=fuse, launch=launch or default_launch(model_options),
                                      caches=caches))
    return place(graph, ir, hw, target, how, batch=batch, budget=budget, mapped=mapped)


def default_launch(model_options: dict) -> str:
    """"graph" for a decode step (serving runtimes capture it as one CUDA graph, collectives included), else
    "eager"."""
    return "graph" if model_options.get("mode") == "decode" else "eager"


def place(graph: Graph, ir: IR, arch: Arch, dtype: DType, how: Pricing = NATIVE, *, batch: int | None = None,
          budget: int | None = None, mapped: bool = True) -> Compiled:
    """The mapping stage: a compiled IR laid onto `arch` (a sweep places one IR on every point's arch)."""
    mappings = mappings_for(ir, arch, how, budget) if mapped else {}
    return Compiled(graph, ir, arch, dtype, how, mappings, batch)


def narrow(compiled: Compiled, ops: list, budget: int | None = None) -> Compiled:
    """The same build cut down to `ops` (IR ops of it), each mapped: what one layer's co-simulation runs."""
    ir = replace(compiled.ir, ops=list(ops))
    return replace(compiled, ir=ir, mappings=mappings_for(ir, compiled.arch, compiled.pricing, budget))


def mappings_for(ir: IR, arch: Arch, how: Pricing = NATIVE, budget: int | None = None) -> dict[str, Mapping]:
    """The mapping stage alone: every op of `ir` mapped on `arch`, costed by the mapper's cost model."""
    return map_ir(ir, arch, reporter(arch, ir, how), budget or DEFAULT_BUDGET)


def simulate(compiled: Compiled, fidelity: str = "tile", trace: bool = False, memory: bool = True,
             warn_fit: bool = False) -> Result:
    """Run what `build` made: the tile engine (`trace` keeps the whole timeline, for accelsim.results.trace, at the
    cost of memory) or the roofline bound. `memory`: the Result holds what the model holds on the device as it runs
    (accelsim.sim.memory), and a note if that does not fit; a training step counts its own (compiler.train.step).
    `warn_fit`: a run that does not fit says so (a CapacityWarning) before it is mapped and simulated, from liveness
    over its graph alone."""
    if fidelity not in FIDELITIES:
        raise UserError(f"fidelity {fidelity!r} is not available; choose from {', '.join(FIDELITIES)}")
    ir, hw = compiled.ir, compiled.arch
    held = footprint(compiled.graph, ir, hw) if memory else {}
    if warn_fit and memory:
        for line in note(held, hw.name):
            warnings.warn(CapacityWarning(f"{line}; the run is simulated as if it did"), stacklevel=2)
    if fidelity == "tile" and len(compiled.mappings) < len(ir.ops):     # built unmapped: map it now
        compiled = replace(compiled, mappings=mappings_for(ir, hw, compiled.pricing))
    timeline = None
    if fidelity == "roofline":
        ops = estimate(ir, hw)
    elif trace:
        ops, timeline = tile.run_tiles(ir, hw, compiled.mappings, compiled.pricing)
    else:
        ops = tile.simulate_ops(ir, hw, compiled.mappings, compiled.pricing)
    ops = [but(result, kernel=op.kernel) if result.kernel != op.kernel else result for result, op in zip(ops, ir.ops)]
    notes = []
    folded = folded_nodes(compiled.graph)
    if folded:
        notes.append(f"{len(folded)} nodes folded at import (constants and shape arithmetic) run on no unit")
    widened = sorted({(op.dtype, op.rate_dtype, op.unit) for op in ops if op.dtype != op.rate_dtype})
    notes += [f"{d} ops run at the {r} rate of {u} (it has no {d} path)" for d, r, u in widened]
    ops, more = compiled.pricing.finish(ops, ir, hw)
    return Result(model=_model_info(compiled), arch=_arch_info(hw, compiled.dtype), fidelity=fidelity, ops=ops,
                  notes=notes + more + (note(held, hw.name) if memory else []), memory=held, timeline=timeline,
                  mappings=compiled.mappings if fidelity == "tile" else {})


def _model_info(compiled: Compiled) -> dict:
    graph = compiled.graph
    first = graph.tensors[graph.inputs[0]].shape if graph.inputs else ()
    out = graph.tensors[graph.outputs[0]].shape if graph.outputs else ()
    return {"name": graph.name, "source": graph.source, "batch": compiled.batch or (first[0] if first else 1),
            "dtype": compiled.dtype.value, "parameters": int(sum(graph.tensors[w].elements for w in graph.weights)),
            "nodes": len(graph.nodes),
            # a language model's output is [batch, tokens, vocab]: a decode step's 1, a prefill's seq
            "tokens_per_sample": int(out[1]) if len(out) == 3 else None}


def _arch_info(arch: Arch, dtype: DType) -> dict:
    rate = dtype if any(u.supports(dtype) for u in arch.matrix_units) else arch.native_dtype
    return {"name": arch.name, "kind": arch.kind.value, "file": str(arch.source_file), "clock_hz": arch.clock_hz,
            "peak_macs_per_second": arch.matrix_for(rate).peak_per_second(rate),
            "native_dtype": arch.native_dtype.value, "memory_levels": [lv.name for lv in arch.memory],
            "tdp_w": arch.power.tdp_w,
            # what a roofline needs of the machine (accelsim.results.roof): MACs or ops per second per unit and dtype,
            # bytes per second per level over all its instances
            "peaks": {f"{u.name}:{d.value}": u.peak_per_second(d) for u in arch.compute for d in u.dtypes},
            "bandwidths": {lv.name: lv.bandwidth_total for lv in arch.memory}}
