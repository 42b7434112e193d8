"""Boundary: where a model's own inputs and outputs lie when it runs, as `caches` says.

Activations between ops live in the innermost shared level with room for them (compiler.target.placement). A
model's inputs and outputs are read and written there too when its caches are warm: a call repeated in a loop
finds last call's operands still in L2. When they are cold (the first call, or a benchmark that flushes the caches
before each call, as DeepGEMM's and `accelsim validate cuda`'s do) they come from and go back to the outermost
level that holds activations, DRAM: each is marked external and placement serves it from there.
Invariant: only operands named by the IR's inputs or outputs change, and only with caches "cold".
"""
from __future__ import annotations

from dataclasses import replace

from compiler.errors import UserError
from compiler.ir import IR, Role

CACHES = ("warm", "cold")


def boundary(ir: IR, options) -> IR:
    """With `options.caches` "cold", the IR with every operand that is a model input or output marked external;
    with "warm", the IR as it is."""
    if options.caches not in CACHES:
        raise UserError(f"caches {options.caches!r}: choose from {', '.join(CACHES)}")
    if options.caches == "warm":
        return ir
    outside = set(ir.inputs) | set(ir.outputs)

    def mark(operand):
        if operand.tensor in outside and operand.role != Role.weight:
            return replace(operand, external=True)
        return operand

    ops = [replace(op, inputs=tuple(mark(o) for o in op.inputs), output=mark(op.output)) for op in ir.ops]
    return replace(ir, ops=ops)
