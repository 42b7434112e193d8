"""ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum,
ReduceLogSumExp -> one Reduce (axes, keepdims, noop_with_empty_axes).

Invariant: axes come from the attribute, or from input 1 (ReduceSum from opset 13, the others from 18), which
evaluation also takes at run time (the output's shape then known only then: no simulation);
no axes reduces everything, unless noop_with_empty_axes makes the op an identity lowered to a view (or, for the ops
with an element-wise step, a Map: ReduceL1 gives |x|). An empty reduced axis gives the reduction's identity (0 for
sums, 1 for products, -inf or the type's lowest value for a max). fp16 data reduce in fp32, as onnxruntime
accumulates them.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map, Reduce
from compiler.ops.base import (OpDef, const_input, fail, given, input_operands, move_op, normalize_axis, out,
                               output_operand, register, require)
from compiler.ops.runtime import forget_stand_in, known_input, require_static, stand_in


def _extreme(pick: Callable[..., Any], lowest: bool) -> Callable[..., Any]:
    """np.max / np.min with the identity of an empty axis: -inf (or the type's lowest) for max, +inf for min."""
    def reduce(x: np.ndarray, axis: Any, keepdims: bool) -> Any:
        initial: bool | float
        if x.dtype == np.bool_:
            initial = not lowest
        elif x.dtype.kind == "f":
            initial = -np.inf if lowest else np.inf
        else:
            initial = np.iinfo(x.dtype).min if lowest else np.iinfo(x.dtype).max
        return pick(x, axis=axis, keepdims=keepdims, initial=initial)
    return reduce


def _log_sum_exp(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    """log(sum(exp(x - max))) + max: the stable form onnxruntime computes (an all -inf row stays -inf)."""
    top = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    top = np.where(np.isfinite(top), top, 0)
    total: np.ndarray = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top
    return total if keepdims else np.squeeze(total, axis=axis)


# op -> (numpy function of (x, axis, keepdims), vector ops per input element). One add, multiply or compare per
# element, plus the element-wise step before it (abs, square; max, subtract, exp for LogSumExp). The per-output
# finish (ReduceMean's divide, ReduceL2's sqrt, ReduceLogSum's log) is not counted.
REDUCTIONS: dict[str, tuple[Callable[..., Any], int]] = {
    "ReduceMean": (np.mean, 1), "ReduceSum": (np.sum, 1), "ReduceProd": (np.prod, 1),
    "ReduceMax": (_extreme(np.max, lowest=True), 1), "ReduceMin": (_extreme(np.min, lowest=False), 1),
    "ReduceL1": (lambda x, axis, keepdims: np.sum(np.abs(x), axis=axis, keepdims=keepdims), 2),
    "ReduceL2": (lambda x, axis, keepdims: np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims)), 2),
    "ReduceSumSquare": (lambda x, axis, keepdims: np.sum(x * x, axis=axis, keepdims=keepdims), 2),
    "ReduceLogSum": (lambda x, axis, keepdims: np.log(np.sum(x, axis=axis, keepdims=keepdims)), 1),
    "ReduceLogSumExp": (_log_sum_exp, 4),
}
# noop_with_empty_axes reduces over no axis, which still applies these ops' element-wise step (|x|, x^2, log x), as
# onnxruntime and the ONNX reference compute it: lowered to a Map, where the other reductions are a view.
ELEMENTWISE_WHEN_EMPTY = {"ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum"}
AXES_INPUT_OPSET = {op: 13 if op == "ReduceSum" else 18 for op in REDUCTIONS}


@register(*REDUCTIONS)
class ReduceOp(OpDef):
    value_inputs = (1,)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x = require(node, ins, 1, 2)[0]
        has_input = len(node.inputs) > 1 and bool(node.inputs[1])
        if has_input and graph.opset < AXES_INPUT_OPSET[node.op]:
            raise fail(node, f"axes come from the attribute before opset {AXES_INPUT_OPSET[node.op]} "
                             f"(this model is opset {graph.opset})")
        if "axes" in node.attrs and graph.opset >= AXES_INPUT_OPSET[node.op]:
            raise fail(node, f"from opset {AXES_INPUT_OPSET[node.op]} axes are input 1, not an attribute")
        values = known_input(node, graph, 1) if has_input else None
        if has_input and values is None:   # axes fed at run time: evaluation works, simulation needs them constant
            return [out(node, stand_in(node, x.shape, f"the axes (input {node.inputs[1]!r})"), x.dtype)]
        forget_stand_in(node)
        axes = reduced_axes(node, values, len(x.shape))
        return [out(node, _reduced_shape(node, x.shape, axes), x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = given(node, args, 1)[0]
        axes = reduced_axes(node, args[1] if len(args) > 1 else None, x.ndim)
        return [_reduce(node.op, x, axes, bool(node.attr("keepdims", 1)))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        require_static(node)
        x = graph.tensor(node.inputs[0])
        has_input = len(node.inputs) > 1 and bool(node.inputs[1])
        axes = reduced_axes(node, const_input(node, graph, 1, "axes") if has_input else None, len(x.shape))
        source = input_operands(node, graph)[:1]  # the axes input is a compile-time constant
        keepdims, op = bool(node.attr("keepdims", 1)), node.op
        if axes is None and op in ELEMENTWISE_WHEN_EMPTY:
            return [Map(name=node.name, node=node.name, op=op, inputs=source, output=output_operand(node, graph),
                        ops_per_element=1, fn=lambda a: _reduce(op, a, None, keepdims))]
        if axes is None:
            return [move_op(node, graph, lambda a: a, view=True, inputs=source)]
        return [Reduce(name=node.name, node=node.name, op=node.op, inputs=source,
                       output=output_operand(node, graph), axes=axes, ops_per_element=REDUCTIONS[op][1],
                       fn=lambda a: _reduce(op, a, axes, keepdims))]


def reduced_axes(node: Node, values: Any, rank: int) -> tuple[int, ...] | None:
    """A Reduce node's reduced axes, sorted, from its `axes` attribute or input `values` (the gradient's too); None
    when the op is the identity (noop_with_empty_axes)."""
    listed = node.attr("axes") if values is None else np.asarray(values).reshape(-1).tolist()
    if not listed:
        return None if node.attr("noop_with_empty_axes", 0) else tuple(range(rank))
    axes = sorted({normalize_axis(node, int(a), rank) for a in listed})
    if len(axes) != len(listed):
        raise fail(node, f"axes {list(listed)} name an axis twice")
    return tuple(axes)


def _reduced_shape(node: Node, shape: tuple[int, ...], axes: tuple[int, ...] | None) -> tuple[int, ...]:
    if axes is None:
        return shape
    keep = node.attr("keepdims", 1)
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keep or i not in axes)


def _reduce(op: str, x: np.ndarray, axes: tuple[int, ...] | None, keepdims: bool) -> np.ndarray:
    if axes is None and op not in ELEMENTWISE_WHEN_EMPTY:
        return x
    work = x.astype(np.float32) if x.dtype == np.float16 else x
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf, the mean of nothing: ORT's IEEE results
        y = REDUCTIONS[op][0](work, axis=() if axes is None else axes, keepdims=keepdims)
    return np.asarray(y).astype(x.dtype)
