"""What an op's operands occupy on a target: the levels each crosses, and the bytes a tile of each holds.

Invariant: a tile's footprint counts a conv window's halo and clips to the tensor; partial sums are held in
the accumulator dtype, and an output tile accumulates in place (never double-buffered).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from compiler.ir import Axis, Einsum, IROp, OpKind, Operand, Role
from compiler.targeting.placement import op_home, operand_path
from compiler.targeting.spread import per_instance
from compiler.hardware import Arch


@dataclass(frozen=True)
class Overflow:
    """Why a candidate is illegal: `tensor` needs `needed` bytes of `level`, which has `available`."""

    tensor: str
    level: str
    needed: int
    available: int


def operands(op: IROp) -> tuple[Operand, ...]:
    """Inputs then the output: the index order footprints and paths use."""
    return (*op.inputs, op.output)


def operand_paths(op: IROp, arch: Arch) -> list[list[int]]:
    """Per operand (inputs, then output), the arch level indices it crosses, its source first."""
    home = op_home(arch, op)
    if getattr(op, "view", False):
        return [[] for _ in operands(op)]
    return [operand_path(arch, op, i, home) for i in range(len(op.inputs) + 1)]


def op_levels(paths: list[list[int]]) -> list[int]:
    return sorted({i for path in paths for i in path})


def relevant_dims(op: IROp, index: int) -> tuple[str, ...]:
    """Loop dims an operand's index depends on (a change in any of them means a new tile)."""
    if not isinstance(op, Einsum):
        return ("e",)
    if index == len(op.inputs):
        return op.out_dims
    used = {d for axis in op.in_axes[index] for d, _ in axis.terms}
    return tuple(d for d, _ in op.loops if d in used)


def separable(axis: Axis, size: int, extents: dict[str, int]) -> tuple[tuple[Axis, int], ...]:
    """An operand axis of `size` as independent (axis, size) parts whose boxes multiply. An axis that flattens
    loop dims as a reshape does (a grouped conv's channel g*C + c with c < C) is a box over each dim: 2 groups of
    3 channels are 6 channels, not the 131 the flat index spans when C is 128. Any other axis stays whole: a
    window's h + r overlaps, a stride's 2p + r leaves gaps a DMA burst reads anyway, a blocked one reads per block."""
    terms = sorted(axis.terms, key=lambda t: t[1])
    if axis.offset or axis.block > 1 or len(terms) < 2 or terms[0][1] < 1:
        return ((axis, size),)
    parts: list[tuple[Axis, int]] = []
    group: list[tuple[str, int]] = []
    radix, span = 1, 1      # span: of the flat index the terms in `group` reach
    for d, c in terms:
        if group and c == radix * span and size % c == 0:     # d steps over whole copies of the terms below
            parts.append((Axis(tuple(group)), span))
            group, radix, span = [], c, 1
        if c % radix:
            return ((axis, size),)
        group.append((d, c // radix))
        span += c // radix * (extents[d] - 1)
    return tuple(parts) + ((Axis(tuple(group)), size // radix),)


def vector_extent(op: IROp) -> int:
    """Elements a vector op walks: the output for Map/Move, the reduced input for Reduce."""
    return op.inputs[0].elements if op.kind == OpKind.reduce else op.output.elements


class Footprints:
    """Tile sizes of one op's operands on one arch, precomputed: the search asks thousands of times."""

    def __init__(self, op: IROp, arch: Arch):
        self.op, self.arch = op, arch
        self.operands = operands(op)
        self.paths = operand_paths(op, arch)
        self.total = vector_extent(op) if not isinstance(op, Einsum) else 0
        # per operand: ((((dim, |coeff|), ...), size, block), ...) for an Einsum
        self.axes: list[tuple[tuple[tuple[tuple[str, int], ...], int, int], ...] | None] = []
        extents = dict(op.loops) if isinstance(op, Einsum) else {}
        for i, operand in enumerate(self.operands):
            if not isinstance(op, Einsum):
                self.axes.append(None)
            elif i == len(op.inputs):
                self.axes.append(tuple((((d, 1),), e, 1) for d, e in zip(op.out_dims, operand.shape)))
            else:
                self.axes.append(tuple((tuple((d, abs(c)) for d, c in part.terms), part_size, part.block)
                                       for axis, size in zip(op.in_axes[i], operand.shape)
                                       for part, part_size in separable(axis, size, extents)))
        acc = op.acc if isinstance(op, Einsum) else op.output.dtype
        self.bits = [o.dtype.bits for o in self.operands]
        self.partial_bits = self.bits[:-1] + [acc.bits]
        # per arch level: (operand index, served from here) for the operands it holds; a fused output is only
        # ever a tile where it accumulates, never whole
        self.held = {lv: [(i, path[0] == lv and not self.operands[i].fused) for i, path in enumerate(self.paths)
                          if lv in path]
                     for lv in range(len(arch.memory))}

    def elements(self, index: int, tile: dict[str, int]) -> int:
        """Elements of operand `index` one tile touches (a conv input tile includes its halo)."""
        axes = self.axes[index]
        operand = self.operands[index]
        if axes is None:
            # A broadcast input is smaller than the output; a slice or gather reads no more than it writes.
            share = min(1.0, operand.elements / self.total) if self.total else 0.0
            return min(operand.elements, math.ceil(tile["e"] * share))
        count = 1
        for terms, size, block in axes:
            span = 1
            for d, c in terms:
                span += c * (tile[d] - 1)
            span = -(-span // block)        # a scale's blocks: tiles start on a block (k steps of 128)
            count *= span if span < size else size
        return count

    def bytes(self, index: int, tile: dict[str, int], partial: bool) -> int:
        """Bytes of one tile; `partial` outputs are partial sums, held in the accumulator dtype."""
        bits = self.partial_bits[index] if partial else self.bits[index]
        return (self.elements(index, tile) * bits + 7) // 8

    def need(self, level: int, tile: dict[str, int], double: bool) -> list[tuple[str, int]]:
        """(tensor, bytes) each operand occupies in arch level `level`: whole where it is served from,
        else its tile, twice when double-buffered. An output tile accumulates in place and leaves once,
        complete (a GPU's C tile in registers, a systolic array's accumulators): never doubled."""
        return [(self.operands[i].tensor, self.operands[i].nbytes if source else
                 self.bytes(i, tile, partial=True) * (2 if double and self.operands[i].role != Role.output else 1))
                for i, source in self.held[level]]

    def overflow(self, level: int, tile: dict[str, int], double: bool, spread: dict[str, int]) -> Overflow | None:
        lv = self.arch.memory[level]
        if lv.instances > 1 and spread:
            tile = per_instance(tile, spread)
        need = self.need(level, tile, double)
        total = sum(n for _, n in need)
        if total <= lv.capacity_bytes:
            return None
        return Overflow(max(need, key=lambda t: t[1])[0], lv.name, total, lv.capacity_bytes)

    def buffered(self, level: int) -> bool:
        """Whether tiles move into this level during the op (only then is double buffering meaningful)."""
        return any(not source for _, source in self.held[level])
