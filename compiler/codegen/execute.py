"""Run a Program's compute rows numerically, tile by tile, in numpy: the check that tiling keeps the numbers.

Invariant: each Einsum tile evaluates only its own slice of the loop space (operand indices shifted by the
tile's start) and the tiles add up into the output; each vector chunk computes from its own operand slices.
A Move only places elements: its map from output to source elements is traced once (the copy run on
element numbers), and each chunk then gathers just the source elements it needs.
"""
from __future__ import annotations

import numpy as np

from compiler.codegen import Tiles
from compiler.ir import Axis, Einsum, IROp, Move, Operand, unblocked
from compiler.targeting import output_axis_to_input


def einsum_tiled(op: Einsum, tiles: Tiles, args: list[np.ndarray]) -> np.ndarray:
    out = np.zeros(op.output.shape, np.float64 if op.acc.is_float else np.int64)
    # A grouped conv indexes weight rows by g*K/G + k: two output dims on one axis, which the reference
    # only evaluates whole. Such a dim (the one with the stride) is walked one value at a time.
    split = {d for axes in op.in_axes for a in axes if sum(t in op.out_dims for t, _ in a.terms) > 1
             for d, c in a.terms if d in op.out_dims and c != 1}
    for start, extent in zip(tiles.start, tiles.extent):
        for at, size in _pieces(tiles.dims, start, extent, split):
            result, where = _tile(op, args, at, size)
            out[where] += result
    return out.astype(op.acc.numpy)


def _pieces(dims: tuple[str, ...], start: np.ndarray, extent: np.ndarray, split: set[str]
            ) -> list[tuple[dict[str, int], dict[str, int]]]:
    pieces = [({d: int(s) for d, s in zip(dims, start)}, {d: int(e) for d, e in zip(dims, extent)})]
    for d in split:
        pieces = [({**at, d: at[d] + i}, {**size, d: 1}) for at, size in pieces for i in range(size[d])]
    return [(at, size) for at, size in pieces if all(size.values())]


def _tile(op: Einsum, args: list[np.ndarray], at: dict[str, int], size: dict[str, int]
          ) -> tuple[np.ndarray, tuple[slice, ...]]:
    """The tile as the same Einsum over a smaller loop space, operand indices shifted by its start. A dim of
    extent 1 in a sum of terms becomes a constant; an operand it thereby leaves keeps it as a new unit axis."""
    inputs, arrays, in_axes = [], [], []
    for operand, array, axes in zip(op.inputs, args, op.in_axes):
        array, axes = unblocked(array, axes)     # a scale read per block: as the plain operand it stands for
        # (a term of extent 1 left in a sum would make p + r look like a mixed-radix index that the
        # reference reads unpadded)
        new = [Axis(tuple((d, c) for d, c in a.terms if size[d] > 1 or len(a.terms) == 1),
                    a.offset + sum(c * at[d] for d, c in a.terms)) for a in axes]
        # Pad the operand where the tile reads outside it (a conv's zero padding), so that every index the
        # reference computes is in range whatever form (plain, mixed-radix, window) it takes.
        pads = []
        for i, a in enumerate(new):
            lo = a.offset + sum(min(0, c * (size[d] - 1)) for d, c in a.terms)
            hi = a.offset + sum(max(0, c * (size[d] - 1)) for d, c in a.terms)
            pads.append((max(0, -lo), max(0, hi - (array.shape[i] - 1))))
            new[i] = Axis(a.terms, a.offset + pads[-1][0])
        array = np.pad(array, pads) if any(p != (0, 0) for p in pads) else array
        used = {d for a in axes for d, _ in a.terms}
        kept = {d for a in new for d, _ in a.terms}
        lost = sorted(used - kept)
        for d in lost:
            array = np.expand_dims(array, 0)
            new.insert(0, Axis.of(d))
        inputs.append(Operand(operand.tensor, tuple(array.shape), operand.dtype, operand.role))
        arrays.append(array)
        in_axes.append(tuple(new))
    shape = tuple(size[d] for d in op.out_dims)
    tile = Einsum(name=op.name, node=op.node, op=op.op, inputs=tuple(inputs),
                  output=Operand(op.output.tensor, shape, op.output.dtype, op.output.role),
                  loops=tuple((d, size[d]) for d, _ in op.loops), in_axes=tuple(in_axes), out_dims=op.out_dims,
                  acc=op.acc)
    return tile.reference(arrays), tuple(slice(at[d], at[d] + size[d]) for d in op.out_dims)


def vector_tiled(op: IROp, tiles: Tiles, args: list[np.ndarray]) -> np.ndarray:
    out = np.zeros(op.output.shape, op.output.dtype.numpy)
    source = _element_map(op, args) if isinstance(op, Move) else None
    for start, extent in zip(tiles.start, tiles.extent):
        lo, n = int(start[tiles.axis]), int(extent[tiles.axis])
        where = tuple(slice(int(s), int(s + e)) for s, e in zip(start, extent))[:len(op.output.shape)]
        if source is not None:
            numbers, data = source
            out[where] = data[numbers[where]]     # this chunk's own source elements, nothing else
            continue
        axis = output_axis_to_input(op, tiles.axis)
        parts = [np.take(a, range(lo, lo + n), axis=axis) if cut else a for a, cut in zip(args, tiles.inputs_sliced)]
        out[where] = op.reference(parts)
    return out


def _element_map(op: Move, args: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(for each output element, the number of the source element it copies; all data elements, flat).

    Data inputs (what a copy moves: floats, bools, int8/int16 activations) are replaced by their element
    numbers, offset so that every input has its own range, and the copy run on those; 32- and 64-bit
    integer inputs keep their values, since a Gather or a Slice reads them as positions (ONNX indices and
    shapes are int64; quantized data is int8).
    """
    traced, data, offset = [], [], 0
    for a in args:
        a = np.asarray(a)
        if a.dtype.kind in "fb" or (a.dtype.kind in "iu" and a.dtype.itemsize < 4):
            traced.append(np.arange(offset, offset + a.size, dtype=np.int64).reshape(a.shape))
            data.append(a.reshape(-1))
            offset += a.size
        else:
            traced.append(a)
    numbers = np.asarray(op.reference(traced))
    flat = np.concatenate(data) if data else np.zeros(0)
    return numbers, flat
