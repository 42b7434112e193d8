"""The Python API behind the CLI: `run` simulates a model on an arch, `evaluate` runs its numerics (a training
step's: accelsim.sim.eval_train)."""
from __future__ import annotations

import os

import numpy as np

from accelsim.arch import Arch
from accelsim.results.result import Result
from accelsim.sim import cache
from accelsim.sim.model import load_arch, load_model
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.graph import Graph

# The pipeline (accelsim.sim.build: the compiler, the pricer, the engine) and the numpy reference are imported
# where they run: a run read back from the disk needs none of them, and `accelsim run` starts faster without them.


def run(model: str | os.PathLike | Graph = "resnet50", arch: str | os.PathLike | Arch = "tpu_v1",
        batch: int | None = None, dtype: str | DType | None = None, fidelity: str = "tile",
        compat: str | None = None, trace: bool = False, fuse: str = "runtime", launch: str | None = None,
        caches: str = "warm", **model_options) -> Result:
    """Simulate `model` (zoo name, .onnx path or Graph) on `arch` (preset name, YAML path or Arch).
    `trace` keeps the whole timeline (Result.timeline, for accelsim.results.trace) at the cost of memory.

    `dtype` is the dtype the hardware computes in; by default the arch's native one (int8 on TPU v1).
    `compat="scalesim"` prices each Einsum's compute cycles as SCALE-Sim v3 does (accelsim.price.compat).
    `fuse` says how ops form kernels (compiler.passes.fuse.FUSIONS); `launch` is "eager" or "graph".
    `caches="cold"` reads the model's inputs from DRAM and writes its outputs there, as a first call or a timing that
    flushes the caches does; "warm" (the default) keeps them where activations live, as many as fit there together,
    as a repeated call finds them (compiler.passes.boundary).
    An .onnx file's symbolic dimensions take `batch`, `seq=` and `shapes=` (input or dimension name -> sizes,
    as --shape gives them: shapes={"input_ids": (1, 128)} or {"sequence_length": (128,)}).
    An untraced run of a zoo model or a Graph is kept on disk and read back when asked for again
    (accelsim.sim.cache). Result.memory is what the model holds on the device as it runs, at `dtype`
    (accelsim.sim.memory); Result.fits says whether that fits the device (a note says why not).
    """
    hw = load_arch(arch)             # always read: its warnings and errors are the user's whether or not cached

    def compute() -> Result:
        from accelsim.sim.build import FIDELITIES, build, simulate

        if fidelity not in FIDELITIES:
            raise UserError(f"fidelity {fidelity!r} is not available; choose from {', '.join(FIDELITIES)}")
        # built unmapped: simulate says whether the model fits the device before it maps and simulates it
        compiled = build(model, hw, batch=batch, dtype=dtype, compat=compat, mapped=False, fuse=fuse,
                         launch=launch, caches=caches, **model_options)
        return simulate(compiled, fidelity, trace=trace and fidelity == "tile", warn_fit=True)

    stored = None if trace else cache.key(model, hw, batch=batch, dtype=dtype, fidelity=fidelity, compat=compat,
                                          fuse=fuse, launch=launch, caches=caches, options=model_options)
    found = cache.load(stored, hw, compute) if stored is not None else None
    if found is not None:            # stored by a run that took these arguments, fidelity included
        return found
    result = compute()
    if stored is not None:
        cache.store(stored, result)
    return result


def compare(model: str | os.PathLike | Graph, archs: list, batch: int | None = None, dtype: str | None = None,
            **model_options) -> list[Result]:
    """`run` of `model` on each arch, in order (accelsim.report.compare draws them side by side)."""
    return [run(model, arch=arch, batch=batch, dtype=dtype, **model_options) for arch in archs]


def scalesim_layers(model: str | os.PathLike | Graph, arch: str | os.PathLike | Arch) -> list[dict]:
    """Per layer (Einsum) of `model`: its GEMM view and SCALE-Sim v3's compute cycles on `arch` (e.g. a
    topology .csv on a .cfg), i.e. SCALE-Sim's "Total Cycles" - "Stall Cycles" for that layer."""
    from accelsim.price.compat import layer_cycles
    from accelsim.sim.build import build

    compiled = build(model, arch, mapped=False)
    return layer_cycles(compiled.ir, compiled.arch)


def evaluate(model: str | os.PathLike | Graph, inputs: dict[str, np.ndarray] | None = None, seed: int = 0,
             batch: int | None = None, **model_options) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run the numpy reference. Returns (inputs used, outputs); random inputs (seeded) where none given.
    Every node runs only if its outputs fit the memory budget (accelsim.sim.inputs.eval_budget).

    An .onnx file's inputs that it needs at import (a Reshape's shape, TopK's k) are bound from `inputs`, or from
    `bind=` (input name -> values, as --bind gives them). Narrow types come as ml_dtypes arrays (bfloat16, float8,
    int4), as the raw bytes an .npz keeps of them, or, for narrow floats, as float32 arrays (rounded to the type)."""
    from accelsim.sim.inputs import eval_budget
    from compiler.ops.interpret import run_graph

    budget = eval_budget()
    graph, feeds = eval_inputs(model, inputs, seed, batch, budget, **model_options)
    return (feeds if inputs is None else dict(inputs)), run_graph(graph, feeds, budget)


def eval_inputs(model: str | os.PathLike | Graph, inputs: dict[str, np.ndarray] | None, seed: int,
                batch: int | None, budget, **model_options) -> tuple[Graph, dict[str, np.ndarray]]:
    """The Graph an evaluation runs (weights drawn or read, shape inputs bound from `inputs`) and its feeds: each
    given input in the type the reference holds it in, checked against the model's, or random (seeded) ones."""
    from compiler.bind import held_input

    graph = load_model(model, batch=batch, weights=True, feeds=inputs, **model_options)
    if inputs is None:
        _refuse_random_shapes(graph)
        return graph, random_inputs(graph, seed, budget)
    feeds = {}
    for name, value in inputs.items():
        if name in graph.inputs:
            feeds[name] = held_input(value, graph.tensor(name).dtype, f"{graph.source}: input {name!r}")
            check_kind(graph, name, feeds[name])
        elif name not in graph.weights:    # not bound at import: run_graph names it
            feeds[name] = value
    return graph, feeds


def _refuse_random_shapes(graph: Graph) -> None:
    """An input that decides a shape at run time (TopK's K as a graph input) is not drawn at random."""
    from compiler.bind import runtime_inputs

    found = runtime_inputs(graph)
    if found:
        name, reader = next(iter(found.items()))
        raise UserError(f"{graph.source}: graph input {name!r} ({reader}) decides an output's shape, so a random "
                        f"value cannot stand in for it; give it with --bind {name}=V0,V1,... (Python: bind=) or in "
                        f"the --inputs file")


def check_kind(graph: Graph, name: str, value: np.ndarray) -> None:
    """An input of another kind of number is refused, as onnxruntime refuses it, never cast: float token ids
    would be truncated, complex numbers lose their imaginary part. A wider float for a float input is fine."""
    dtype = graph.tensor(name).dtype
    want, given = np.dtype(dtype.numpy), value.dtype
    same = (given.kind == want.kind == "f") or (given.kind in "iu" and want.kind in "iu") or \
        given.kind == want.kind == "b"
    if not same or not np.can_cast(given, want, "same_kind"):
        stored = f" (stored as {want})" if str(want) != dtype.value else ""
        raise UserError(f"{graph.source}: input {name!r} is {given}, the model expects {dtype.value}{stored}; "
                        f"convert it first (accelsim does not cast inputs)")


def random_inputs(graph: Graph, seed: int = 0, budget=None) -> dict[str, np.ndarray]:
    """Standard-normal floats; integer inputs (token ids) uniform in [0, 100) so any vocabulary fits. With a
    `budget` (compiler.ops.room.Budget), each is refused before it is drawn if it would not fit beside the others
    (a draw is made in 8-byte numbers, then stored at the input's dtype)."""
    from compiler.bind import held_input
    from compiler.ops import room

    rng = np.random.default_rng(seed)
    feeds, held = {}, 0
    for name in graph.inputs:
        tensor = graph.tensor(name)
        if budget is not None:
            stored = room.held_bytes(tensor.dtype, tensor.elements)
            room.check(f"{graph.source}: input {name!r} of shape {list(tensor.shape)} drawn at random needs",
                       stored + 8 * tensor.elements, budget, held)
            held += stored
        if tensor.dtype.is_float:     # a narrow float (bf16, fp8) rounded to its own precision
            feeds[name] = held_input(rng.standard_normal(tensor.shape).astype(tensor.dtype.numpy), tensor.dtype, name)
        elif tensor.dtype == DType.bool:
            feeds[name] = np.ones(tensor.shape, dtype=bool)
        else:
            feeds[name] = rng.integers(0, 100, size=tensor.shape).astype(tensor.dtype.numpy)
    return feeds
