"""Map, Reduce and Move -> Program rows on the vector unit: the output cut into the chunks the mapper planned
(compiler.map.vector), along one axis.

Invariant: each chunk computes from its own slices alone (compiler.targeting.slicing); unsliced operands load
once and are reused.
"""
from __future__ import annotations

import numpy as np

from compiler.codegen.assemble import OUTPUT, Stream, assemble
from compiler.codegen.nest import Fold, Nest
from compiler.hardware.profiles import profile
from compiler.ir import IROp, OpKind, Move
from compiler.mapping import Mapping
from compiler.targeting import sliced, vector_paths
from compiler.hardware import Arch


def chunk_axis(op: IROp, mapping: Mapping) -> tuple[int, list[bool]]:
    """(the output axis a chunk plan cuts, whether each input is cut along it): nothing is cut where the plan's
    inner level names no axis (compiler.map.vector)."""
    order = mapping.levels[1].order
    if not order:
        return 0, [False] * len(op.inputs)
    axis = [d for d, _ in mapping.loops].index(order[0])
    cut = sliced(op, axis)
    assert cut is not None, f"{op.name}: a chunk plan cuts an axis that can be cut (compiler.map.vector)"
    return axis, cut


def vector_rows(op: IROp, arch: Arch, mapping: Mapping, op_index: int, unit: int, folds: tuple[Fold, ...] = ()
                ) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], np.ndarray, np.ndarray, tuple[bool, ...]]:
    """(rows, compute rows, dims, chunk start and extent per output axis: shape (chunks, axes), which inputs are
    cut along the chunk axis) of the chunk plan `mapping` (compiler.map.vector.plan); with `folds`, the rows of the
    chunks they keep (compiler.codegen.fold)."""
    move = op if isinstance(op, Move) else None
    paths = vector_paths(arch, op)
    axis, cut = chunk_axis(op, mapping)
    shape = op.output.shape or (1,)
    dims = tuple(d for d, _ in mapping.loops)
    nest = Nest(mapping, folds)
    steps = np.arange(nest.steps, dtype=np.int64)
    start, extent = nest.tile(1, steps)
    share = extent[axis] / shape[axis]           # the fraction of the op each chunk is
    streams = []
    out_elements = np.prod(extent, axis=0)
    # a copy reads what it writes (compiler.ir.Move), shared among its inputs by size; an in-place write leaves
    # the buffer it writes into (input 0) where it lies and moves the update (input 1) alone, not its positions
    in_place = move is not None and move.in_place
    sources = [o.nbytes if not in_place or i == 1 else 0 for i, o in enumerate(op.inputs)]
    for i, (operand, path) in enumerate(zip(op.inputs, paths)):
        if in_place and i != 1:
            continue
        total = -(-move.written * sources[i] // max(1, sum(sources))) if move is not None else operand.nbytes
        runs = nest.runs({dims[axis]} if cut[i] else set(), 1)
        if cut[i] and move is None:       # sliced like the output: exact elements per chunk
            moved = (operand.elements // shape[axis] * extent[axis][runs.starts] * operand.dtype.bits + 7) // 8
        else:
            moved = np.ceil(total * share[runs.starts]).astype(np.int64) if cut[i] else np.array([total], np.int64)
        streams += [Stream(i, level, j, runs, moved, moved, True) for j, level in enumerate(path)]
    runs = nest.runs({dims[axis]}, 1)
    out_bytes = (out_elements * op.output.dtype.bits + 7) // 8
    if in_place and move is not None:
        out_bytes = np.ceil(move.written * share).astype(np.int64)
    streams += [Stream(OUTPUT, level, j, runs, out_bytes, out_bytes, True) for j, level in enumerate(paths[-1])]
    per = getattr(op, "ops_per_element", 0)
    if op.kind == OpKind.map:
        work = out_elements * per
    elif op.kind == OpKind.reduce:
        work = op.inputs[0].elements // shape[axis] * extent[axis] * per
    else:
        work = np.zeros(nest.steps, np.int64)
    compute = {"m": out_elements, "n": np.ones(nest.steps, np.int64),
               "k": np.ones(nest.steps, np.int64), "work": work, "useful": work}
    rows, compute_rows = assemble(streams, nest.steps, compute, op_index, unit,
                                  ahead=profile(arch.kind).prefetch_ahead, name=op.name)
    return rows, compute_rows, dims, start.T.copy(), extent.T.copy(), tuple(cut)
