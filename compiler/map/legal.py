"""What a mapping may do: the unit and dtype an op runs in, operand footprints, capacity checks.

Invariant: a legal Mapping runs on a unit that computes its dtype (widened as the hardware would), in a
dataflow the unit lists, and every level holds its tiles (twice where double-buffered). `arch` is duck-typed."""
from __future__ import annotations

import math
from dataclasses import dataclass

from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.ir import Einsum, IROp, Kind, Operand, Role
from compiler.mapping import Mapping, gemm_view
from compiler.placement import op_home, role_path


class MappingError(UserError):
    """No mapping of an op fits the target: names the operand, the level and the bytes."""


@dataclass(frozen=True)
class Overflow:
    """Why a candidate is illegal: `tensor` needs `needed` bytes of `level`, which has `available`."""

    tensor: str
    level: str
    needed: int
    available: int


def compute_dtype(op: IROp) -> DType:
    """The dtype an op's arithmetic runs in: ternary if any operand is, else its widest data input."""
    dtypes = [o.dtype for o in op.inputs if o.dtype not in (DType.int64, DType.bool)] or [op.output.dtype]
    if DType.ternary in dtypes:
        return DType.ternary
    return max(dtypes, key=lambda d: (d.bits, d.is_float))


def widen(unit, dtype: DType) -> DType:
    """The dtype whose rate a vector unit applies to `dtype`: itself if listed, else the narrowest listed
    dtype at least as wide (int16 on {fp32, fp16} runs as fp16), else the narrowest listed at all."""
    if unit.supports(dtype):
        return dtype
    wider = [d for d in unit.dtypes if d.bits >= dtype.bits] or list(unit.dtypes)
    return min(wider, key=lambda d: d.bits)


def pick_unit(op: IROp, arch):
    """(unit, rate dtype): the unit an op runs on and the dtype whose rate applies; the roofline, the
    mapper and the engine all use this one rule.

    Einsums take the fastest matrix unit for their dtype (H100 fp32 runs on CUDA cores, bf16 on tensor
    cores). A dtype no unit has is widened, as the hardware would (ternary weights run on an int8 path,
    fp16 on a GTX 580's fp32 cores): to the wider supported dtype with the highest peak, integers
    preferring integers. Vector ops run on
    the vector unit, widened by `widen`.
    """
    dtype = compute_dtype(op)
    if op.kind != Kind.einsum:
        return arch.vector, widen(arch.vector, dtype)
    units = [u for u in arch.matrix_units if u.supports(dtype)]
    if units:
        return max(units, key=lambda u: u.peak_per_second(dtype)), dtype
    wider = [d for d in arch.dtypes if d.bits >= dtype.bits and d.bits > 2]
    if not wider:
        supported = ", ".join(d.value for d in arch.dtypes)
        raise MappingError(f"{arch.source_file}: no matrix unit computes {dtype.value} (op {op.name!r}, "
                           f"{op.op}); {arch.name} supports {supported}: run with --dtype "
                           f"{arch.native_dtype.value}")
    # highest peak; among equals the same kind of number (ternary -> int8, not fp8), then the narrowest
    best = max(wider, key=lambda d: (arch.matrix_for(d).peak_per_second(d), d.is_float == dtype.is_float, -d.bits))
    return arch.matrix_for(best), best


def operands(op: IROp) -> tuple[Operand, ...]:
    """Inputs then the output: the index order footprints and paths use."""
    return (*op.inputs, op.output)


def operand_paths(op: IROp, arch) -> list[list[int]]:
    """Per operand (inputs, then output), the arch level indices it crosses, its source first."""
    home = op_home(arch, op)
    if getattr(op, "view", False):
        return [[] for _ in operands(op)]
    return [role_path(arch, o.role, home) for o in operands(op)]


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


def vector_extent(op: IROp) -> int:
    """Elements a vector op walks: the output for Map/Move, the reduced input for Reduce."""
    return op.inputs[0].elements if op.kind == Kind.reduce else op.output.elements


def per_instance(tile: dict[str, int], spread: dict[str, int]) -> dict[str, int]:
    """The share of a tile one instance holds when the step is split over units along `spread` dims."""
    return {d: -(-t // spread[d]) if d in spread else t for d, t in tile.items()}


class Footprints:
    """Tile sizes of one op's operands on one arch, precomputed: the search asks thousands of times."""

    def __init__(self, op: IROp, arch):
        self.op, self.arch = op, arch
        self.operands = operands(op)
        self.paths = operand_paths(op, arch)
        self.total = vector_extent(op) if not isinstance(op, Einsum) else 0
        self.axes = []      # per operand: ((((dim, |coeff|), ...), size), ...) for an Einsum
        for i, operand in enumerate(self.operands):
            if not isinstance(op, Einsum):
                self.axes.append(None)
            elif i == len(op.inputs):
                self.axes.append(tuple((((d, 1),), e) for d, e in zip(op.out_dims, operand.shape)))
            else:
                self.axes.append(tuple((tuple((d, abs(c)) for d, c in axis.terms), size)
                                       for axis, size in zip(op.in_axes[i], operand.shape)))
        acc = op.acc if isinstance(op, Einsum) else op.output.dtype
        self.bits = [o.dtype.bits for o in self.operands]
        self.partial_bits = self.bits[:-1] + [acc.bits]
        # per arch level: (operand index, served from here) for the operands it holds
        self.held = {lv: [(i, path[0] == lv) for i, path in enumerate(self.paths) if lv in path]
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
        for terms, size in axes:
            span = 1
            for d, c in terms:
                span += c * (tile[d] - 1)
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


def units_spread(mapping: Mapping) -> dict[str, int]:
    spread: dict[str, int] = {}
    for s in mapping.spatial:
        if s.axis == "units":
            spread[s.dim] = spread.get(s.dim, 1) * s.factor
    return spread


def check(mapping: Mapping, op: IROp, arch) -> Overflow | str | None:
    """None if legal; else an Overflow or a sentence saying what the unit cannot do."""
    unit = next((u for u in arch.compute if u.name == mapping.unit), None)
    if unit is None:
        return f"{arch.name} has no compute unit {mapping.unit!r}"
    if mapping.dtype and not unit.supports(DType(mapping.dtype)):
        return f"{unit.name} does not compute {mapping.dtype}"
    flows = [d.value for d in unit.dataflows]
    if flows and mapping.dataflow not in flows:
        return f"{unit.name} supports dataflows {', '.join(flows)}, not {mapping.dataflow}"
    sizes = Footprints(op, arch)
    index = {lv.name: i for i, lv in enumerate(arch.memory)}
    spread = units_spread(mapping)
    depth = unit.array.accumulator_rows if unit.array is not None and mapping.dataflow == "ws" else 0
    if depth and isinstance(op, Einsum) and mapping.levels:
        view = gemm_view(op)
        inner = per_instance(dict(mapping.levels[-1].tile), spread)
        rows = math.prod(inner.get(d, 1) for d in view.b + view.m)
        if rows > depth:
            return f"{unit.name} streams {rows} rows per tile into {depth} accumulator rows"
    for level in mapping.levels:
        problem = sizes.overflow(index[level.level], dict(level.tile), level.double_buffered, spread)
        if problem:
            return problem
    return None


def nothing_fits(op: IROp, arch, problem: Overflow | str) -> MappingError:
    if isinstance(problem, str):
        return MappingError(f"{arch.name}: op {op.name!r} cannot be mapped: {problem}")
    return MappingError(f"{arch.name}: op {op.name!r} does not fit even at its smallest tile: operand "
                        f"{problem.tensor!r} needs {problem.needed:,} bytes of {problem.level} (with the other "
                        f"operands it holds, double-buffered), which has {problem.available:,} bytes")
