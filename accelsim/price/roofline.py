"""The roofline estimate: per IR op, time = max(work / peak, bytes / bandwidth at each level, latency).

A lower bound by construction (the tile-level engine may only add time): every operand crosses each
memory level that holds its role exactly once, from the level it is served from inward, and the
compute unit runs at its peak for the op's dtype. Weights are served from the outermost level that
holds weights, activations from where they live between ops (compiler.targeting.placement: TPU v1's Unified
Buffer, a GPU's L2 when they fit).
"""
from __future__ import annotations

from dataclasses import fields

from accelsim.arch import Arch
from compiler.hardware import ComputeUnit
from accelsim.results.result import OpResult
from accelsim.price.energy import energy_j, with_promotion_j
from compiler.dtypes import DType
from compiler.frozen import but
from compiler.ir import IR, IROp, OpKind, Move, Operand, Role
from compiler.memo import Memo
from compiler.targeting import compute_dtype, op_home, operand_path, pick_unit, role_path
from compiler.targeting.identity import arch_key

# estimates kept per process (a planner prices the same block's ops in hundreds of programs)
_KNOWN: Memo[tuple[object, ...], OpResult] = Memo("accelsim.price.roofline.estimate", 65536)


def estimate(ir: IR, arch: Arch) -> list[OpResult]:
    """Every op's estimate; an op like one estimated before (the same kind, shapes, dtypes and placement flags, on
    the same arch: a model's repeated blocks) gets that estimate under its own name."""
    where = arch_key(arch)
    out = []
    for op in ir.ops:
        key = (where, _twin(op))
        known = _KNOWN.get(key)
        if known is None:
            known = _KNOWN[key] = estimate_op(op, arch)
        out.append(known if known.name == op.name and known.node == op.node else
                   but(known, name=op.name, node=op.node))
    return out


def _twin(op: IROp) -> tuple[object, ...]:
    """All an estimate depends on: the op's fields but its names (and its kernel and launch, which it does not read),
    its operands' but their tensors' names."""
    names = _FIELDS.get(type(op))
    if names is None:
        names = _FIELDS[type(op)] = tuple(f.name for f in fields(op) if f.compare and f.name not in _NAMES)
    values = []
    for name in names:
        value = getattr(op, name)
        if name == "inputs":
            value = tuple(_operand(o) for o in value)
        elif name == "output":
            value = _operand(value)
        values.append(value)
    return type(op), *values


def _operand(o: Operand) -> tuple[object, ...]:
    return tuple(getattr(o, name) for name in _OPERAND)


_NAMES = ("name", "node", "kernel", "launch")
_OPERAND = tuple(f.name for f in fields(Operand) if f.name != "tensor")
_FIELDS: Memo[type, tuple[str, ...]] = Memo("accelsim.price.roofline: op fields", 64)     # per IR op class


def estimate_op(op: IROp, arch: Arch) -> OpResult:
    dtype = compute_dtype(op)
    unit, rate_dtype = pick_unit(op, arch)
    if isinstance(op, Move) and op.view:
        return _view(op, unit.name, dtype)
    work = op.macs if op.kind == OpKind.einsum else op.ops
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


def bytes_by_level(op: IROp, arch: Arch) -> dict[str, int]:
    """Bytes each level moves for this op: every operand, at each level on its role's path; a fused operand at
    none (an Einsum's output formed in its accumulators for an epilogue is the tile engine's to add)."""
    moved = {lv.name: 0 for lv in arch.memory}
    home = op_home(arch, op)
    if isinstance(op, Move):       # by role: a copy reads what it keeps, even of a weight, as an activation
        paths = [(role_path(arch, role, home), n) for role, n in op.bytes_by_role().items()]
    else:
        paths = [(operand_path(arch, op, i, home), 0 if o.fused else o.nbytes)
                 for i, o in enumerate((*op.inputs, op.output))]
    for path, nbytes in paths:
        for level in path if nbytes else ():
            moved[arch.memory[level].name] += nbytes
    return {name: n for name, n in moved.items() if n}


def energy(op: IROp, arch: Arch, unit: ComputeUnit, dtype: DType, by_level: dict[str, int]) -> dict[str, float]:
    """Actions x per-action energy: the op's MACs or vector ops, and at each level its bytes: the output's written
    into the levels on the output's path, everything else read (as the tile engine's loads and stores count)."""
    out_path = {arch.memory[i].name for i in role_path(arch, Role.output, op_home(arch, op))}
    stored = 0 if op.output.fused else op.written if isinstance(op, Move) else op.output.nbytes
    written = {name: min(stored, n) if name in out_path else 0 for name, n in by_level.items()}
    read = {name: n - written[name] for name, n in by_level.items()}
    work = op.macs if op.kind == OpKind.einsum else op.ops
    return with_promotion_j(energy_j(unit, dtype, work, arch.memory, read, written), op, arch)


def _view(op: IROp, unit: str, dtype: DType) -> OpResult:
    return OpResult(name=op.name, node=op.node, op=op.op, kind=op.kind.value, shape=op.output.shape,
                    dtype=dtype.value, rate_dtype=dtype.value, unit=unit, macs=0, ops=0, bytes=0, bytes_by_level={},
                    compute_seconds=0.0, level_seconds={}, latency_seconds=0.0, seconds=0.0, cycles=0, bound="view",
                    utilisation=0.0, energy_j={})
