"""Energy = actions x energy per action, in one place: MACs or vector ops on a unit, bytes read and written at
each memory level (a level's read and write energy are per access of `access` bytes), and a block-scaled GEMM's
promotions on the vector unit."""
from __future__ import annotations

from collections.abc import Iterable

from compiler.dtypes import DType
from compiler.ir import IROp, OpKind
from compiler.targeting import widen
from compiler.hardware import Arch, ComputeUnit, MemoryLevel


def energy_j(unit: ComputeUnit, dtype: DType, work: int, memory: Iterable[MemoryLevel], read: dict[str, int],
             written: dict[str, int]) -> dict[str, float]:
    """Joules per component: `work` actions on `unit` at `dtype`'s energy, and per level in `memory` the bytes
    `read` from it and `written` into it. Components that spent nothing are left out."""
    parts: dict[str, float] = {}
    if work:
        parts[unit.name] = work * unit.energy_per_action(dtype)
    for lv in memory:
        joules = read.get(lv.name, 0) * lv.energy_per_byte() + written.get(lv.name, 0) * lv.energy_per_byte(True)
        if joules:
            parts[lv.name] = joules
    return parts


def with_promotion_j(parts: dict[str, float], op: IROp, arch: Arch) -> dict[str, float]:
    """`parts` with a block-scaled Einsum's promotions (compiler.ir.Einsum.ops: one fused multiply-add per output and
    block of k) charged to the vector unit at its fp32 energy; other ops' parts as they are."""
    if op.kind != OpKind.einsum or not op.ops:
        return parts
    lanes = arch.vector
    joules = op.ops * lanes.energy_per_action(widen(lanes, DType.fp32))
    return {**parts, lanes.name: parts.get(lanes.name, 0.0) + joules}
