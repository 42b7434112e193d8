"""Which unit runs an op and at which dtype's rate: one rule for the roofline, the mapper, codegen and pricing.

Invariant: an Einsum runs on the fastest matrix unit that computes its dtype, else widened as the hardware
would; Map/Reduce/Move run on the vector unit, widened likewise.
"""
from __future__ import annotations

from compiler.dtypes import DType
from compiler.errors import MappingError
from compiler.ir import Einsum, IROp, OpKind
from compiler.hardware import Arch, ComputeUnit


def compute_dtype(op: IROp) -> DType:
    """The dtype an op's arithmetic runs in: ternary if any operand is, else its widest data input (a
    block-scaled Einsum's fp32 scales are not data: its products are fp8)."""
    inputs = [op.inputs[i] for i in op.factors] if isinstance(op, Einsum) else op.inputs
    dtypes: list[DType] = [o.dtype for o in inputs if o.dtype not in (DType.int64, DType.bool)] or [op.output.dtype]
    if DType.ternary in dtypes:
        return DType.ternary
    return max(dtypes, key=lambda d: (d.bits, d.is_float))


INDEX_DTYPES = (DType.int64, DType.uint64)     # positions and labels, not data (compiler.passes.quantize keeps them)


def widen(unit: ComputeUnit, dtype: DType) -> DType:
    """The dtype whose rate a vector unit applies to `dtype`: itself if listed, else the narrowest listed
    dtype at least as wide (int16 on {fp32, fp16} runs as fp16). A unit with nothing as wide refuses it: fp64 at
    H100 CUDA cores' fp16 rate (twice their fp32 one) priced a type the hardware runs slower as a faster one.
    The one exception is int64 index arithmetic, run as the unit's widest integer (int32 on a GPU, not its fp64)."""
    if unit.supports(dtype):
        return dtype
    wider = [d for d in unit.dtypes if d.bits >= dtype.bits]
    integers = [d for d in unit.dtypes if not d.is_float and d.bits > 8]
    if dtype in INDEX_DTYPES and integers:
        # index arithmetic (a training step's labels and gather positions), which kernels compute in 32 bits
        # where a tensor has under 2^31 elements: the widest integer the unit lists
        return max(integers, key=lambda d: d.bits)
    if not wider:
        listed = ", ".join(d.value for d in unit.dtypes)
        raise MappingError(f"compute unit {unit.name!r} has no {dtype.value} path and none as wide (it computes "
                           f"{listed}); a narrower one would price {dtype.value} too fast: list {dtype.value} in the "
                           f"unit's ops_per_cycle, or run in one of {listed}")
    return min(wider, key=lambda d: d.bits)


def pick_unit(op: IROp, arch: Arch) -> tuple[ComputeUnit, DType]:
    """(unit, rate dtype): the unit an op runs on and the dtype whose rate applies; the roofline, the
    mapper and the engine all use this one rule.

    Einsums take the fastest matrix unit for their dtype (H100 fp32 runs on CUDA cores, bf16 on tensor
    cores). A dtype no unit has is widened, as the hardware would (ternary weights run on an int8 path,
    fp16 on a GTX 580's fp32 cores): to the wider supported dtype with the highest peak, integers
    preferring integers. Vector ops run on
    the vector unit, widened by `widen`.
    """
    dtype = compute_dtype(op)
    if op.kind != OpKind.einsum:
        return arch.vector, widen(arch.vector, dtype)
    if dtype == DType.bool:     # a mask type: `--dtype bool` made every conv and matmul one, then run as int8
        raise MappingError(f"{arch.source_file}: op {op.name!r} ({op.op}) would multiply in bool, which is no "
                           f"arithmetic type; {arch.name} computes in {', '.join(d.value for d in arch.dtypes)}: "
                           f"run with --dtype {arch.native_dtype.value}")
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
