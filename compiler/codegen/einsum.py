"""An Einsum and its Mapping -> Program rows: a compute per innermost tile, loads and stores at every level.

Invariant: each operand crosses exactly the levels of its role path (compiler.targeting.placement, as the roofline
counts them); the load reading level p carries the tile the next level on the path holds (the compute step
for the innermost), so bytes per level >= the operand's bytes, with halos and partial-sum spills on top.
"""
from __future__ import annotations

import numpy as np

from compiler.codegen.assemble import OUTPUT, Stream, assemble
from compiler.codegen.nest import Fold, Nest
from compiler.hardware.profiles import profile
from compiler.ir import Axis, Einsum
from compiler.mapping import Mapping, gemm_view
from compiler.targeting import k_split, op_home, operand_path, separable
from compiler.hardware import Arch


def footprint(axes: tuple[Axis, ...], shape: tuple[int, ...], dims: tuple[str, ...], start: np.ndarray,
              extent: np.ndarray) -> np.ndarray:
    """Elements of the box of an operand a tile reads: per axis (or part of one: compiler.targeting.separable splits a
    grouped conv's channels) the index range (a conv window's halo included) run to the end of its last stride,
    clipped to the array (zero padding is generated, not loaded). Running to the stride's end makes the boxes of
    consecutive tiles abut: a 1x1 stride-2 conv's tiles cover every input row, as the DMA fetches the skipped rows
    with the burst, so the bytes never fall below the operand's size. A blocked axis (a scale's k // 128) counts
    the blocks the range touches."""
    pos = {d: i for i, d in enumerate(dims)}
    count = np.ones(start.shape[1], np.int64)
    for axis, size in zip(axes, shape):
        if not axis.terms:
            continue
        lo = np.full_like(count, axis.offset)
        hi = lo + max(abs(c) for _, c in axis.terms) - 1
        for d, c in axis.terms:
            a, b = c * start[pos[d]], c * (start[pos[d]] + extent[pos[d]] - 1)
            lo += np.minimum(a, b)
            hi += np.maximum(a, b)
        lo, hi = lo // axis.block, hi // axis.block      # a scale's blocks (k // 128)
        count *= np.maximum(0, np.minimum(hi, size - 1) - np.maximum(lo, 0) + 1)
    return count


def nbytes(elements: np.ndarray, bits: int) -> np.ndarray:
    return (elements * bits + 7) // 8


def destination(nest: Nest, arch: Arch, path: list[int], j: int) -> int:
    """Mapping level whose tile the transfer at path[j] carries: the one holding the next level on the path,
    or the compute step's tile after the innermost. A level the mapping skips streams the next inner tile."""
    last = len(nest.tiles) - 1
    if j + 1 >= len(path):
        return last
    index = {lv.name: i for i, lv in enumerate(arch.memory)}
    target = path[j + 1]
    inner = [i for i, name in enumerate(nest.names) if index.get(name, -1) >= target]
    return nest.level_of(arch.memory[target].name, inner[0] if inner else last)


def einsum_streams(op: Einsum, mapping: Mapping, arch: Arch, nest: Nest) -> list[Stream]:
    home = op_home(arch, op)
    extents = dict(op.loops)
    streams = []
    for i, (operand, axes) in enumerate(zip(op.inputs, op.in_axes)):
        relevant = {d for axis in axes for d, _ in axis.terms}
        parts = [part for axis, size in zip(axes, operand.shape) for part in separable(axis, size, extents)]
        part_axes, part_sizes = tuple(a for a, _ in parts), tuple(n for _, n in parts)
        path = operand_path(arch, op, i, home)
        for j, level in enumerate(path):
            dest = destination(nest, arch, path, j)
            runs = nest.runs(relevant, dest)
            start, extent = nest.tile(dest, runs.starts)
            moved = nbytes(footprint(part_axes, part_sizes, nest.dims, start, extent), operand.dtype.bits)
            streams.append(Stream(i, level, j, runs, moved, moved, nest.double_buffered[dest], i not in op.factors))
    out_axes = tuple(Axis.of(d) for d in op.out_dims)
    path = operand_path(arch, op, len(op.inputs), home)
    copies = k_split(mapping)
    for j, level in enumerate(path):
        dest = destination(nest, arch, path, j)
        runs = nest.runs(set(op.out_dims), dest)
        start, extent = nest.tile(dest, runs.starts)
        elements = footprint(out_axes, op.output.shape, nest.dims, start, extent)
        final, partial = nbytes(elements, op.output.dtype.bits), nbytes(elements, op.acc.bits)
        if copies > 1 and dest == len(nest.tiles) - 1:   # split-K: every instance stores its partial sums
            final = partial = copies * partial
        streams.append(Stream(OUTPUT, level, j, runs, final, partial, nest.double_buffered[dest]))
    return streams


def einsum_rows(op: Einsum, mapping: Mapping, arch: Arch, op_index: int, unit: int, folds: tuple[Fold, ...] = ()
                ) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], np.ndarray, np.ndarray]:
    """(rows, compute row indices within them, step tile start and extent per dim: shape (steps, dims)); with
    `folds`, the rows of the iterations they keep (compiler.codegen.fold)."""
    nest = Nest(mapping, folds)
    steps = np.arange(nest.steps, dtype=np.int64)
    start, extent = nest.tile(len(nest.tiles) - 1, steps)
    view = gemm_view(op)
    pos = {d: i for i, d in enumerate(nest.dims)}

    def size(dims: tuple[str, ...]) -> np.ndarray:
        return np.prod(extent[[pos[d] for d in dims]], axis=0) if dims else np.ones(nest.steps, np.int64)

    padded = int(np.prod(np.minimum(nest.tiles[-1], nest.extents)))
    compute = {"m": size(view.b + view.m), "n": size(view.n), "k": size(view.k),
               "work": np.full(nest.steps, padded, np.int64), "useful": np.prod(extent, axis=0)}
    rows, compute_rows = assemble(einsum_streams(op, mapping, arch, nest), nest.steps, compute, op_index, unit,
                                  ahead=profile(arch.kind).prefetch_ahead, name=op.name)
    return rows, compute_rows, nest.dims, start.T.copy(), extent.T.copy()
