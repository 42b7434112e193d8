"""What a mapping may do: the unit it names computes its dtype in a dataflow the unit lists, and every level
holds its tiles (twice where double-buffered); the target facts it checks against live in compiler.targeting."""
from __future__ import annotations

import math

from compiler.dtypes import DType
from compiler.errors import MappingError
from compiler.ir import Einsum, IROp
from compiler.mapping import Mapping, gemm_view
from compiler.targeting import Footprints, Overflow, per_instance, units_spread
from compiler.hardware import Arch


def check(mapping: Mapping, op: IROp, arch: Arch) -> Overflow | str | None:
    """None if an Einsum's mapping is legal; else an Overflow or a sentence saying what the unit cannot do."""
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


def nothing_fits(op: IROp, arch: Arch, problem: Overflow | str) -> MappingError:
    if isinstance(problem, str):
        return MappingError(f"{arch.name}: op {op.name!r} cannot be mapped: {problem}")
    return MappingError(f"{arch.name}: op {op.name!r} does not fit even at its smallest tile: operand "
                        f"{problem.tensor!r} needs {problem.needed:,} bytes of {problem.level} (with the other "
                        f"operands it holds, double-buffered), which has {problem.available:,} bytes")
