"""Which operands of a Map, Reduce or Move a chunk along an output axis cuts: the rule every chunk plan keeps.

Invariant: a chunk axis is one every operand either slices the same way or does not depend on (a
BatchNorm's per-channel parameters are never cut along channels; a Reduce is never cut along a reduced
axis), so each chunk computes from its own slices alone.
"""
from __future__ import annotations

from compiler.ir import IROp, Move, Reduce

# Ops lowered to a Map that is not element-wise: a recurrence (an ONNX Scan steps through time), a scatter (an
# embedding's gradient adds any input row into any table row) or a placement (a slice's gradient puts dy inside
# zeros). No axis of theirs is safe to cut without knowing more of the op: they run as one chunk.
WHOLE = frozenset({"Scan", "GatherGrad", "SliceGrad"})


def output_axis_to_input(op: IROp, axis: int) -> int | None:
    """The axis of inputs[0] a chunk along output `axis` cuts (Reduce drops axes unless keepdims)."""
    if not isinstance(op, Reduce):
        return axis
    x = op.inputs[0].shape
    kept = [a for a in range(len(x)) if a not in op.axes]
    a = axis if len(op.output.shape) == len(x) else kept[axis] if axis < len(kept) else None
    return a if a is not None and a not in op.axes and x[a] == op.output.shape[axis] else None


def sliced(op: IROp, axis: int) -> list[bool] | None:
    """Per input: sliced along the chunk axis (True) or whole (False); None if `axis` cannot be cut."""
    if isinstance(op, Move):
        return [True] * len(op.inputs)   # bytes only: a copy's tiles are byte ranges
    if op.op in WHOLE:
        return None
    a = output_axis_to_input(op, axis)
    if a is None or not op.inputs:
        return None
    ref = op.inputs[0].shape if isinstance(op, Reduce) else op.output.shape
    extent = ref[a]
    result = []
    for x in op.inputs:
        if len(x.shape) == len(ref):
            if x.shape[a] not in (extent, 1):
                return None
            result.append(x.shape[a] == extent)
        elif extent in x.shape:
            return None      # a lower-rank operand may index this axis (BatchNorm's channels)
        else:
            result.append(False)
    return result
