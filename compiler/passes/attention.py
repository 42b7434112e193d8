"""Attention as FlashAttention runs it: the scores Einsum (Q.K^T), its element-wise scale and additive masks, the
row softmax and the weighted sum (P.V) found in the IR and made one kernel by compiler.passes.fuse.

Invariant: a group is only ever these ops in this order, each intermediate (scores, masked scores, probabilities)
read by the next op alone and by nothing outside, so the kernel keeps them on chip and its numbers are the ops'.
"""
from __future__ import annotations

from dataclasses import dataclass

from compiler.ir import IR, Einsum, IROp, Map, Reduce, Role


@dataclass(frozen=True)
class Attention:
    """One attention kernel's ops, by index in the IR: scores, the Maps between, softmax, weighted sum."""

    scores: int
    maps: tuple[int, ...]
    softmax: int
    weighted: int

    @property
    def members(self) -> tuple[int, ...]:
        return (*self.maps, self.softmax, self.weighted)


def attention_groups(ir: IR) -> list[Attention]:
    """Every Q.K^T -> (scale, mask)* -> softmax over keys -> P.V chain of `ir` whose intermediates nothing else
    reads. Causal and padding masks are the additive Maps; a KV cache is simply a longer key axis."""
    starts = [i for i, op in enumerate(ir.ops) if _scores(op)]
    if not starts:
        return []                 # no Q.K^T: nobody's readers are asked for (a CNN, a chain of 100,000 Relus)
    readers: dict[str, list[int]] = {}
    for i, op in enumerate(ir.ops):
        for o in op.inputs:
            readers.setdefault(o.tensor, []).append(i)
    outputs = set(ir.outputs)

    def only_reader(op: IROp) -> int | None:
        found = readers.get(op.output.tensor, [])
        return found[0] if len(found) == 1 and op.output.tensor not in outputs else None

    groups = []
    for i in starts:
        op = ir.ops[i]
        maps, at = [], only_reader(op)
        while at is not None and isinstance(ir.ops[at], Map) and ir.ops[at].output.shape == op.output.shape:
            maps.append(at)
            at = only_reader(ir.ops[at])
        if at is None or not _softmax(ir.ops[at], op):
            continue
        softmax, at = at, only_reader(ir.ops[at])
        if at is not None and _weighted(ir.ops[at], ir.ops[softmax]):
            groups.append(Attention(i, tuple(maps), softmax, at))
    return groups


def _scores(op: IROp) -> bool:
    """Q.K^T: an Einsum of two activations (no weights) over plain loop dims, one contracted."""
    return (isinstance(op, Einsum) and op.op == "MatMul" and len(op.inputs) == 2 and len(op.output.shape) >= 2
            and all(o.role != Role.weight for o in op.inputs) and len(op.reduction_dims) == 1)


def _softmax(op: IROp, scores: IROp) -> bool:
    """A softmax over the key axis (the scores' last) that keeps the scores' shape."""
    return (isinstance(op, Reduce) and op.op == "Softmax" and op.output.shape == scores.output.shape
            and tuple(a % len(op.output.shape) for a in op.axes) == (len(op.output.shape) - 1,))


def _weighted(op: IROp, softmax: IROp) -> bool:
    """P.V: an Einsum whose first operand is the probabilities, contracting the key axis."""
    return (isinstance(op, Einsum) and op.op == "MatMul" and len(op.inputs) == 2
            and op.inputs[0].tensor == softmax.output.tensor and len(op.reduction_dims) == 1
            and op.inputs[1].role != Role.weight)
