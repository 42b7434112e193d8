"""ReduceMean, ReduceSum, ReduceMax, ReduceMin -> one Reduce (axes, keepdims, noop_with_empty_axes).

Invariant: axes come from the attribute, or from input 1 (ReduceSum from opset 13, the others from 18);
no axes reduces everything, unless noop_with_empty_axes makes the op an identity lowered to a view.
"""
from __future__ import annotations

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Reduce
from compiler.ops.base import (OpDef, const_input, fail, input_operands, move_op, normalize_axis, out,
                               output_operand, register, require)

FUNCTIONS = {"ReduceMean": np.mean, "ReduceSum": np.sum, "ReduceMax": np.max, "ReduceMin": np.min}
AXES_INPUT_OPSET = {"ReduceSum": 13, "ReduceMean": 18, "ReduceMax": 18, "ReduceMin": 18}


@register(*FUNCTIONS)
class ReduceOp(OpDef):
    value_inputs = (1,)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        require(node, ins, 1, 2)
        x = ins[0]
        has_input = len(node.inputs) > 1 and bool(node.inputs[1])
        if has_input and graph.opset < AXES_INPUT_OPSET[node.op]:
            raise fail(node, f"axes come from the attribute before opset {AXES_INPUT_OPSET[node.op]} "
                             f"(this model is opset {graph.opset})")
        if "axes" in node.attrs and graph.opset >= AXES_INPUT_OPSET[node.op]:
            raise fail(node, f"from opset {AXES_INPUT_OPSET[node.op]} axes are input 1, not an attribute")
        values = const_input(node, graph, 1, "axes") if has_input else None
        axes = _axes(node, values, len(x.shape))
        return [out(node, _reduced_shape(node, x.shape, axes), x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = args[0]
        axes = _axes(node, args[1] if len(args) > 1 else None, x.ndim)
        return [_reduce(node.op, x, axes, bool(node.attr("keepdims", 1)))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        x = graph.tensor(node.inputs[0])
        has_input = len(node.inputs) > 1 and bool(node.inputs[1])
        axes = _axes(node, const_input(node, graph, 1, "axes") if has_input else None, len(x.shape))
        source = input_operands(node, graph)[:1]  # the axes input is a compile-time constant
        if axes is None:
            return [move_op(node, graph, lambda a: a, view=True, inputs=source)]
        keepdims, op = bool(node.attr("keepdims", 1)), node.op
        # one add (or compare) per input element; ReduceMean's divide is per output, not counted
        return [Reduce(name=node.name, node=node.name, op=node.op, inputs=source,
                       output=output_operand(node, graph), axes=axes, ops_per_element=1,
                       fn=lambda a: _reduce(op, a, axes, keepdims))]


def _axes(node: Node, values, rank: int) -> tuple[int, ...] | None:
    """The reduced axes, sorted; None when the op is the identity (noop_with_empty_axes)."""
    listed = node.attr("axes") if values is None else np.asarray(values).reshape(-1).tolist()
    if not listed:
        return None if node.attr("noop_with_empty_axes", 0) else tuple(range(rank))
    axes = sorted({normalize_axis(node, int(a), rank) for a in listed})
    if len(axes) != len(listed):
        raise fail(node, f"axes {list(listed)} name an axis twice")
    return tuple(axes)


def _reduced_shape(node: Node, shape: tuple[int, ...], axes) -> tuple[int, ...]:
    if axes is None:
        return shape
    if node.op in ("ReduceMax", "ReduceMin") and any(shape[a] == 0 for a in axes):
        raise fail(node, f"cannot take the {node.op[6:].lower()} of an empty axis (shape {list(shape)})")
    keep = node.attr("keepdims", 1)
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keep or i not in axes)


def _reduce(op: str, x: np.ndarray, axes, keepdims: bool) -> np.ndarray:
    if axes is None:
        return x
    work = x.astype(np.float32) if x.dtype == np.float16 else x
    return np.asarray(FUNCTIONS[op](work, axis=axes, keepdims=keepdims)).astype(x.dtype)
