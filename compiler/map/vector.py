"""The mapper's plan for Map, Reduce and Move: the output cut into chunks along one axis, as a Mapping whose
inner level holds one chunk (its `order` names the axis; empty when nothing can be cut).

Invariant: the plan codegen executes and `accelsim map` prints is this one; it fits every level the op's
operands cross, or the op is refused with the operand, level and bytes (compiler.map.legal.nothing_fits).
"""
from __future__ import annotations

import math

from compiler.ir import IROp
from compiler.map.legal import nothing_fits
from compiler.map.space import shrink_dim
from compiler.mapping import LevelTile, Mapping
from compiler.targeting import Footprints, op_levels, pick_unit, sliced, vector_extent, vector_paths
from compiler.hardware import Arch

MIN_CHUNKS = 4      # enough to overlap loading chunk i+1 with computing chunk i and storing chunk i-1


def chunk_plan(op: IROp, capacity: int) -> tuple[int, int, list[bool] | None]:
    """(axis, chunk extent, sliced per input); a single chunk, and None, when no axis can be cut."""
    shape = op.output.shape
    best = None
    for axis in range(len(shape)):
        cut = sliced(op, axis)
        if cut is not None and shape[axis] > 1 and (best is None or shape[axis] > shape[best[0]]):
            best = (axis, cut)
    if best is None:
        return 0, shape[0] if shape else 1, None
    axis, cut = best
    want = max(MIN_CHUNKS, math.ceil(2 * op.nbytes / max(capacity, 1)))
    chunks = min(shape[axis], want)
    return axis, math.ceil(shape[axis] / chunks), cut


def plan(op: IROp, arch: Arch) -> Mapping:
    """The chunk plan of a vector op on `arch` (a view's moves nothing: no levels)."""
    unit = next(u for u in arch.compute if u.role.value == "vector")
    if getattr(op, "view", False):
        return Mapping(op=op.name, signature="vector", unit=unit.name, loops=(("e", vector_extent(op)),),
                       notes=("a view: no bytes move",), levels=(), dtype=pick_unit(op, arch)[1].value)
    _check_fits(op, arch)
    inner = max((p[-1] for p in vector_paths(arch, op) if p), default=0)
    axis, chunk, cut = chunk_plan(op, arch.memory[inner].capacity_total)
    shape = op.output.shape or (1,)
    dims = tuple(f"a{i}" for i in range(len(shape)))
    full = tuple(zip(dims, shape))
    tile = tuple((d, chunk if i == axis else e) for i, (d, e) in enumerate(full))
    order = (dims[axis],) if cut is not None else ()
    return Mapping(op=op.name, signature="vector", unit=unit.name, loops=full,
                   levels=(LevelTile(arch.memory[0].name, full, ()), LevelTile(arch.memory[inner].name, tile, order)))


def _check_fits(op: IROp, arch: Arch) -> None:
    """Every on-chip level the op's operands cross holds a chunk of them, the op split over the unit's instances
    (the flat walk over its elements the capacity check sees)."""
    unit, dtype = pick_unit(op, arch)
    total = vector_extent(op)
    sizes = Footprints(op, arch)
    levels = op_levels(sizes.paths)
    if not levels or total == 0:
        return
    lanes = unit.peak_per_cycle(dtype)
    spread = {"e": min(unit.count, math.ceil(total / lanes))} if unit.count > 1 else {}
    tile = {"e": total}
    for level in levels[1:]:
        tile = dict(tile)
        shrink_dim(sizes, level, tile, "e", tile["e"], spread.get("e", 1), spread)
        problem = sizes.overflow(level, tile, True, spread)
        if problem:
            raise nothing_fits(op, arch, problem)
