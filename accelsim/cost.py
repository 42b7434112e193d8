"""The mapper's analytical cost: cycles = max(compute, traffic / bandwidth per level) + fill latency, with
Timeloop-style reuse (a tile is refetched per iteration of the loops outside its innermost relevant one).
Invariant: traffic at every level >= the bytes the roofline counts there."""
from __future__ import annotations

import math
from typing import Callable, Iterable

import numpy as np

from accelsim import compute
from accelsim.roofline import bytes_by_level
from compiler.dtypes import DType
from compiler.ir import IR, Einsum, IROp, Role
from compiler.map.legal import Footprints, per_instance, relevant_dims, units_spread, vector_extent
from compiler.mapping import Mapping, gemm_view


OVERLAP_LOSS = 0.05


def _nest(mapping: Mapping) -> list[tuple[str, int, int]]:
    """(dim, trips, mapping level) of every loop with more than one trip, outermost first."""
    loops = []
    for i, level in enumerate(mapping.levels):
        trips = mapping.trips(i)
        order = list(level.order) + [d for d, _ in mapping.loops if d not in level.order]
        loops += [(d, trips[d], i) for d in order if trips[d] > 1]
    return loops


def _fetches(nest, level: int, dims: tuple[str, ...]) -> tuple[int, int]:
    """(times the tile at mapping `level` is loaded, distinct tiles) for an operand indexed by `dims`."""
    inside = [(d, t) for d, t, lv in nest if lv <= level]
    last = max((j for j, (d, _) in enumerate(inside) if d in dims), default=-1)
    return math.prod(t for _, t in inside[:last + 1]), math.prod(t for d, t in inside if d in dims)


class _Facts:
    """What costing one op on one arch needs that no mapping changes (the reporter keeps one per op)."""

    def __init__(self, op: IROp, arch):
        self.sizes = Footprints(op, arch)
        self.dims = [relevant_dims(op, i) for i in range(len(self.sizes.operands))]
        self.floor = bytes_by_level(op, arch)
        self.levels = {lv.name: lv for lv in arch.memory}


def traffic(mapping: Mapping, op: IROp, arch, facts: _Facts | None = None) -> dict[str, int]:
    """Bytes each arch level moves for this op: loads read from a level (the tile the next level on the
    path holds, or the compute step), outputs are stored into it, partial sums spill and reload."""
    if not mapping.levels:
        return {}
    facts = facts or _Facts(op, arch)
    sizes = facts.sizes
    moved = {lv.name: 0 for lv in arch.memory}
    nest = _nest(mapping)
    position = {lv.level: i for i, lv in enumerate(mapping.levels)}
    last = len(mapping.levels) - 1
    tiles = [dict(lv.tile) for lv in mapping.levels]
    for index, (operand, path) in enumerate(zip(sizes.operands, sizes.paths)):
        dims = facts.dims[index]
        for j, level in enumerate(path):
            # the transfer at path[j] carries the tile of the next level on the path (the step's after it)
            dest = position.get(arch.memory[path[j + 1]].name, last) if j + 1 < len(path) else last
            loads, distinct = _fetches(nest, dest, dims)
            if operand.role == Role.output:
                final = sizes.bytes(index, tiles[dest], partial=False)
                partial = sizes.bytes(index, tiles[dest], partial=True)
                moved[arch.memory[level].name] += distinct * final + 2 * (loads - distinct) * partial
            else:
                moved[arch.memory[level].name] += loads * sizes.bytes(index, tiles[dest], partial=False)
    # A strided conv (1x1, stride 2) skips rows its tiles never touch; the roofline still counts the
    # whole tensor, and so does the DMA, which moves whole rows.
    floor = facts.floor
    return {name: max(n, floor.get(name, 0)) for name, n in moved.items() if n or floor.get(name)}


def cycles(mapping: Mapping, op: IROp, arch, compat: str | None = None, facts: _Facts | None = None) -> float:
    """Estimated arch cycles: the slower of compute and each level's traffic, plus one tile's latency.
    The compute models (accelsim.compute) return arch cycles per step."""
    facts = facts or _Facts(op, arch)
    unit = next(u for u in arch.compute if u.name == mapping.unit)
    dtype = DType(mapping.dtype) if mapping.dtype else unit.dtypes[0]
    parallel = max(1, min(unit.count, math.prod(units_spread(mapping).values())))
    steps = math.prod(math.prod(mapping.trips(i).values()) for i in range(len(mapping.levels)))
    step = dict(mapping.levels[-1].tile) if mapping.levels else dict(mapping.loops)
    if isinstance(op, Einsum):
        # Each instance runs its share of the step (the mapping's units split it), all at once. Two equal
        # rows: a model adds a once-per-kernel cost (a GPU launch) to the first row only.
        view = gemm_view(op)
        share = per_instance(step, units_spread(mapping))
        size = {g: math.prod(share[d] for d in getattr(view, g)) for g in "bmnk"}
        rows = compute.matrix_cycles(np.full(2, size["b"] * size["m"]), np.full(2, size["n"]),
                                     np.full(2, size["k"]), unit, arch, mapping, dtype, compat)
        launch = float(rows[0] - rows[1])
        per_step = rows[1]
    else:
        total = vector_extent(op)
        work = math.ceil(op.ops * step["e"] / total) if total and op.ops else 0
        # the vector model spreads a row over every instance itself; launch on the first row, as above
        rows = compute.vector_cycles(np.full(2, work), unit, dtype, arch) if work else np.zeros(2)
        launch, per_step = float(rows[0] - rows[1]), rows[1]
    seconds = [(steps * float(per_step) + launch) / arch.clock_hz]
    for name, nbytes in traffic(mapping, op, arch, facts).items():
        level = facts.levels[name]
        seconds.append(nbytes / (level.bandwidth_bytes_per_s * min(level.instances, parallel)))
    latency = sum(facts.levels[t.level].latency_s for t in mapping.levels)
    # Overlap is never perfect (the engine serializes each channel and waits on dependencies): of two
    # mappings with the same bottleneck, the one moving less elsewhere is faster. A small share of the
    # non-bottleneck time says so (TPU v1, 256x4096x4096: keeps partial sums in the accumulators).
    overlap_loss = OVERLAP_LOSS * (sum(seconds) - max(seconds))
    return (max(seconds) + overlap_loss + latency) * arch.clock_hz


def reporter(arch, ops: IR | Iterable[IROp], compat: str | None = None) -> Callable[[Mapping], float]:
    """`cycles` bound to an arch and the ops it will be asked about (looked up by Mapping.op)."""
    by_name = {op.name: op for op in (ops.ops if isinstance(ops, IR) else ops)}
    facts: dict[str, _Facts] = {}

    def report(mapping: Mapping) -> float:
        op = by_name[mapping.op]
        if mapping.op not in facts:
            facts[mapping.op] = _Facts(op, arch)
        return cycles(mapping, op, arch, compat, facts[mapping.op])
    return report
