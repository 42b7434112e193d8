"""Quantize: give every numeric tensor of the IR the dtype the target computes in.

Weights already ternary or int4 keep their dtype (a model that chose them meant it); indices (int64)
and masks (bool) are not data and keep theirs. Einsums accumulate in int32 for integer dtypes and
fp32 for floats. A ternary target makes the weights of Einsums ternary and everything else int8
(BitNet's W1.58A8), unless the model already chose which weights are ternary: then the others (BitNet's
float LM head) are int8 like the data. Only dtypes and byte counts change; shapes and the work of every op stay.
"""
from dataclasses import replace
from operator import is_

from compiler.dtypes import DType
from compiler.frozen import but
from compiler.ir import IR, Einsum, IROp, Operand, Role
from compiler.passes import PassOptions

KEEP = (DType.ternary, DType.int4, DType.int64, DType.bool)


def quantize(ir: IR, options: PassOptions) -> IR:
    target: DType | None = options.dtype
    if target is None:
        return ir
    chosen = target == DType.ternary and any(o.dtype == DType.ternary for op in ir.ops if isinstance(op, Einsum)
                                              for o in op.inputs if o.role == Role.weight)
    weights, data = DType.int8 if chosen else target, held(DType.fp32, target)
    ops = [_quantize_op(op, weights, data) for op in ir.ops]
    return replace(ir, ops=ops)


def _operand(operand: Operand, target: DType) -> Operand:
    if operand.dtype in KEEP or operand.dtype == target:
        return operand
    return but(operand, dtype=target)


def held(dtype: DType, target: DType) -> DType:
    """The dtype a tensor of `dtype` that is no Einsum's weight is held in on a target computing in `target` (what a
    pipeline stage sends the next, say)."""
    return dtype if dtype in KEEP else DType.int8 if target == DType.ternary else target


def _quantize_op(op: IROp, weights: DType, data: DType) -> IROp:
    """`data`: what a float is held in, the target's dtype (int8 on a ternary one: BitNet's W1.58A8)."""
    einsum = isinstance(op, Einsum)
    inputs = tuple([_operand(o, weights if einsum and o.role == Role.weight else data) for o in op.inputs])
    output, acc = _operand(op.output, data), accumulator(data) if einsum else None
    if output is op.output and all(map(is_, inputs, op.inputs)) and (not isinstance(op, Einsum) or acc == op.acc):
        return op                 # already in the target's types: no copy (a 100,000-op graph makes many)
    changes = {"inputs": inputs, "output": output}
    if einsum:
        changes["acc"] = acc
    return but(op, **changes)


def accumulator(dtype: DType) -> DType:
    if dtype == DType.fp64:
        return DType.fp64
    return DType.fp32 if dtype.is_float else DType.int32
