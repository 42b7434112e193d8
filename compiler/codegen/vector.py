"""Map, Reduce and Move -> Program rows on the vector unit: the output cut into chunks along one axis.

Invariant: a chunk axis is one every operand either slices the same way or does not depend on (a
BatchNorm's per-channel parameters are never cut along channels; a Reduce is never cut along a reduced
axis), so each chunk computes from its own slices alone; unsliced operands load once and are reused.
"""
from __future__ import annotations

import math

import numpy as np

from compiler.codegen.assemble import OUTPUT, Stream, assemble
from compiler.codegen.nest import Nest
from compiler.ir import IROp, Kind, Move, Reduce, Role
from compiler.mapping import LevelTile, Mapping
from compiler.target import op_home, role_path

MIN_CHUNKS = 4      # enough to overlap loading chunk i+1 with computing chunk i and storing chunk i-1
# Frontend ops lowered to a Map that is a recurrence, not element-wise (an ONNX Scan steps through time):
# no axis of theirs is safe to cut without knowing the scan axis, so they run as one chunk.
RECURRENT = frozenset({"Scan"})


def output_axis_to_input(op: IROp, axis: int) -> int | None:
    """The axis of inputs[0] a chunk along output `axis` cuts (Reduce drops axes unless keepdims)."""
    if not isinstance(op, Reduce):
        return axis
    x = op.inputs[0].shape
    kept = [a for a in range(len(x)) if a not in op.axes]
    a = axis if len(op.output.shape) == len(x) else kept[axis] if axis < len(kept) else None
    return a if a is not None and a not in op.axes and x[a] == op.output.shape[axis] else None


def sliced(op: IROp, axis: int) -> list[bool] | None:
    """Per input: sliced along the chunk axis (True) or whole (False); None if `axis` cannot be cut."""
    if isinstance(op, Move):
        return [True] * len(op.inputs)   # bytes only: a copy's tiles are byte ranges
    if op.op in RECURRENT:
        return None
    a = output_axis_to_input(op, axis)
    if a is None or not op.inputs:
        return None
    ref = op.inputs[0].shape if isinstance(op, Reduce) else op.output.shape
    extent = ref[a]
    result = []
    for x in op.inputs:
        if len(x.shape) == len(ref):
            if x.shape[a] not in (extent, 1):
                return None
            result.append(x.shape[a] == extent)
        elif extent in x.shape:
            return None      # a lower-rank operand may index this axis (BatchNorm's channels)
        else:
            result.append(False)
    return result


def chunk_plan(op: IROp, arch, capacity: int) -> tuple[int, int, list[bool]]:
    """(axis, chunk extent, sliced per input); a single chunk when no axis can be cut."""
    shape = op.output.shape
    best = None
    for axis in range(len(shape)):
        cut = sliced(op, axis)
        if cut is not None and shape[axis] > 1 and (best is None or shape[axis] > shape[best[0]]):
            best = (axis, cut)
    if best is None:
        return 0, shape[0] if shape else 1, [False] * len(op.inputs)
    axis, cut = best
    want = max(MIN_CHUNKS, math.ceil(2 * op.nbytes / max(capacity, 1)))
    chunks = min(shape[axis], want)
    return axis, math.ceil(shape[axis] / chunks), cut


def vector_rows(op: IROp, arch, op_index: int, unit: int):
    """(rows, compute rows, dims, chunk start and extent per output axis: shape (chunks, axes), mapping,
    which inputs are cut along the chunk axis)."""
    home = op_home(arch, op)
    move = isinstance(op, Move)
    roles = [Role.input if move else o.role for o in op.inputs]
    paths = [role_path(arch, r, home) for r in roles] + [role_path(arch, Role.output, home)]
    inner = max((p[-1] for p in paths if p), default=0)
    axis, chunk, cut = chunk_plan(op, arch, arch.memory[inner].capacity_total)
    shape = op.output.shape or (1,)
    dims = tuple(f"a{i}" for i in range(len(shape)))
    full = tuple(zip(dims, shape))
    tile = tuple((d, chunk if i == axis else e) for i, (d, e) in enumerate(full))
    mapping = Mapping(op=op.name, signature="vector", unit=arch.compute[unit].name, loops=full,
                      levels=(LevelTile(arch.memory[0].name, full, ()), LevelTile(arch.memory[inner].name, tile,
                                                                                  (dims[axis],))))
    nest = Nest(mapping)
    steps = np.arange(nest.steps, dtype=np.int64)
    start, extent = nest.tile(1, steps)
    share = extent[axis] / shape[axis]           # the fraction of the op each chunk is
    streams = []
    out_elements = np.prod(extent, axis=0)
    for i, (operand, path) in enumerate(zip(op.inputs, paths)):
        # a copy reads what it writes (compiler.ir.Move), shared among its inputs by size
        total = -(-op.output.nbytes * operand.nbytes // max(1, sum(o.nbytes for o in op.inputs))) if move \
            else operand.nbytes
        runs = nest.runs({dims[axis]} if cut[i] else set(), 1)
        if cut[i] and not move:       # sliced like the output: exact elements per chunk
            moved = (operand.elements // shape[axis] * extent[axis][runs.starts] * operand.dtype.bits + 7) // 8
        else:
            moved = np.ceil(total * share[runs.starts]).astype(np.int64) if cut[i] else np.array([total], np.int64)
        streams += [Stream(i, level, j, runs, moved, moved, True) for j, level in enumerate(path)]
    runs = nest.runs({dims[axis]}, 1)
    out_bytes = (out_elements * op.output.dtype.bits + 7) // 8
    streams += [Stream(OUTPUT, level, j, runs, out_bytes, out_bytes, True) for j, level in enumerate(paths[-1])]
    per = getattr(op, "ops_per_element", 0)
    if op.kind == Kind.map:
        work = out_elements * per
    elif op.kind == Kind.reduce:
        work = op.inputs[0].elements // shape[axis] * extent[axis] * per
    else:
        work = np.zeros(nest.steps, np.int64)
    compute = {"m": out_elements, "n": np.ones(nest.steps, np.int64),
               "k": np.ones(nest.steps, np.int64), "work": work, "useful": work}
    rows, compute_rows = assemble(streams, nest.steps, compute, op_index, unit)
    return rows, compute_rows, dims, start.T.copy(), extent.T.copy(), mapping, tuple(cut)
