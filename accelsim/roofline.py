"""The roofline estimate: per IR op, time = max(work / peak, bytes / bandwidth at each level, latency).

A lower bound by construction (the tile-level engine may only add time): every operand crosses each
memory level that holds its role exactly once, from the level it is served from inward, and the
compute unit runs at its peak for the op's dtype. Weights are served from the outermost level that
holds weights, activations from where they live between ops (compiler.placement: TPU v1's Unified
Buffer, a GPU's L2 when they fit).
"""
from __future__ import annotations

from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.ir import IR, IROp, Kind, Move
from compiler.placement import op_home, role_path
from accelsim.arch import Arch, ComputeUnit
from accelsim.compute import widen
from accelsim.result import OpResult


def estimate(ir: IR, arch: Arch) -> list[OpResult]:
    return [estimate_op(op, arch) for op in ir.ops]


def estimate_op(op: IROp, arch: Arch) -> OpResult:
    dtype = compute_dtype(op)
    unit, rate_dtype = pick_unit(op, arch, dtype)
    if isinstance(op, Move) and op.view:
        return _view(op, unit.name, dtype)
    work = op.macs if op.kind == Kind.einsum else op.ops
    compute_s = work / unit.peak_per_second(rate_dtype) if work else 0.0
    by_level = bytes_by_level(op, arch)
    levels = [lv for lv in arch.memory if by_level.get(lv.name)]
    level_s = {lv.name: by_level[lv.name] / lv.bandwidth_total for lv in levels}
    latency_s = max((lv.latency_s for lv in levels), default=0.0)
    candidates = {"compute": compute_s, **level_s, "latency": latency_s}
    bound = max(candidates, key=lambda key: candidates[key])
    seconds = candidates[bound]
    return OpResult(
        name=op.name, node=op.node, op=op.op, kind=op.kind.value, shape=op.output.shape, dtype=dtype.value,
        rate_dtype=rate_dtype.value, unit=unit.name, macs=op.macs, ops=op.ops, bytes=op.nbytes, bytes_by_level=by_level,
        compute_seconds=compute_s, level_seconds=level_s, latency_seconds=latency_s, seconds=seconds,
        cycles=arch.cycles(seconds), bound=bound, utilisation=compute_s / seconds if seconds else 0.0,
        energy_j=energy(op, arch, unit, rate_dtype, by_level))


def compute_dtype(op: IROp) -> DType:
    """The dtype an op's arithmetic runs in: ternary if any operand is, else its widest data input."""
    dtypes = [o.dtype for o in op.inputs if o.dtype not in (DType.int64, DType.bool)] or [op.output.dtype]
    if DType.ternary in dtypes:
        return DType.ternary
    return max(dtypes, key=lambda d: (d.bits, d.is_float))


def pick_unit(op: IROp, arch: Arch, dtype: DType) -> tuple[ComputeUnit, DType]:
    """The unit an op runs on and the dtype whose rate applies.

    Einsums take the fastest matrix unit for their dtype (H100 fp32 runs on CUDA cores, bf16 on tensor
    cores). A dtype no unit has is widened, as the hardware would (ternary weights run on an int8 path,
    fp16 on a GTX 580's fp32 cores): to the wider supported dtype with the highest peak. Vector units
    widen the same way to the nearest dtype they list.
    """
    if op.kind == Kind.einsum:
        if any(u.supports(dtype) for u in arch.matrix_units):
            return arch.matrix_for(dtype), dtype
        wider = [d for d in arch.dtypes if d.bits >= dtype.bits and d.bits > 2]
        if wider:
            best = max(wider, key=lambda d: (arch.matrix_for(d).peak_per_second(d), -d.bits))
            return arch.matrix_for(best), best
        supported = ", ".join(d.value for d in arch.dtypes)
        raise UserError(f"{arch.source_file}: no matrix unit computes {dtype.value} (op {op.name!r}, {op.op}); "
                        f"{arch.name} supports {supported}: run with --dtype {arch.native_dtype.value}")
    return arch.vector, widen(arch.vector, dtype)


def bytes_by_level(op: IROp, arch: Arch) -> dict[str, int]:
    """Bytes each level moves for this op: every operand, at each level on its role's path."""
    moved = {lv.name: 0 for lv in arch.memory}
    home = op_home(arch, op)
    for role, nbytes in op.bytes_by_role().items():
        if nbytes:
            for i in role_path(arch, role, home):
                moved[arch.memory[i].name] += nbytes
    return {name: n for name, n in moved.items() if n}


def energy(op: IROp, arch: Arch, unit, dtype: DType, by_level: dict[str, int]) -> dict[str, float]:
    """Actions x per-action energy: MACs or vector ops on the unit, accesses at each level."""
    parts: dict[str, float] = {}
    work = op.macs if op.kind == Kind.einsum else op.ops
    if work:
        parts[unit.name] = work * unit.energy_per_action(dtype)
    written = op.output.nbytes
    for lv in arch.memory:
        nbytes = by_level.get(lv.name, 0)
        if nbytes:
            writes = min(written, nbytes)
            parts[lv.name] = (nbytes - writes) * lv.energy_per_byte() + writes * lv.energy_per_byte(write=True)
    return parts


def _view(op: IROp, unit: str, dtype: DType) -> OpResult:
    return OpResult(name=op.name, node=op.node, op=op.op, kind=op.kind.value, shape=op.output.shape,
                    dtype=dtype.value, rate_dtype=dtype.value, unit=unit, macs=0, ops=0, bytes=0, bytes_by_level={}, compute_seconds=0.0,
                    level_seconds={}, latency_seconds=0.0, seconds=0.0, cycles=0, bound="view",
                    utilisation=0.0, energy_j={})
