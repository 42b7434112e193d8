"""LayerNormalization (opset 17: axis, epsilon, optional bias) and RMSNormalization (opset 23) -> one Reduce over the
axes from `axis` on.

Invariant: y = (x - mean) / sqrt(var + epsilon) * scale + B, computed in fp32, or in fp64 for fp64 x (as onnxruntime
does); the optional Mean and InvStdDev outputs are fp32 (stash_type 1) and get their own Reduce only when read.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Reduce
from compiler.ops.base import (OpDef, broadcast, fail, given, input_operands, normalize_axis, operand, optional, out,
                               output_operand, register, require)


@register("LayerNormalization")
class LayerNormalization(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x = require(node, ins, 2, 3)[0]
        if not x.dtype.is_float:
            raise fail(node, f"input is {x.dtype.value}; LayerNormalization takes a float tensor")
        axis = normalize_axis(node, int(node.attr("axis", -1)), len(x.shape))
        for name, t in zip(("Scale", "B"), ins[1:]):
            if t is not None and broadcast(node, t.shape, x.shape[axis:]) != x.shape[axis:]:
                raise fail(node, f"{name} has shape {list(t.shape)}, which does not broadcast to the "
                                 f"normalized shape {list(x.shape[axis:])} (axes {axis}.. of {list(x.shape)})")
        stats = x.shape[:axis] + (1,) * (len(x.shape) - axis)
        outs = [out(node, x.shape, x.dtype)]
        outs += [out(node, stats, DType.fp32, i) for i in (1, 2) if i < len(node.outputs) and node.outputs[i]]
        return outs

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        (x,) = given(node, args, 1)
        y, mean, inv_std = _normalize(node, x, optional(args, 1), optional(args, 2))
        return [y, mean, inv_std][: len(node.outputs)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        x = graph.tensor(node.inputs[0])
        axis = normalize_axis(node, int(node.attr("axis", -1)), len(x.shape))
        axes = tuple(range(axis, len(x.shape)))
        has_bias = len(node.inputs) > 2 and bool(node.inputs[2])
        # Per element: an add for the mean, a subtract, a square and an add for the variance, the
        # normalising multiply and the scale multiply (6), plus the bias add; rsqrt is per row.
        ops: list[IROp] = [Reduce(name=node.name, node=node.name, op=node.op,
                                  inputs=input_operands(node, graph), output=output_operand(node, graph),
                                  axes=axes, ops_per_element=6 + has_bias,
                                  fn=lambda *a: _normalize(node, *a, *[None] * (3 - len(a)))[0])]
        used = set(graph.outputs) | {name for n in graph.nodes for name in n.inputs}
        for i, per_element in ((1, 1), (2, 3)):  # mean: an add; inverse std: subtract, square, add
            if i < len(node.outputs) and node.outputs[i] in used:
                ops.append(Reduce(name=f"{node.name}:{i}", node=node.name, op=node.op,
                                  inputs=(operand(graph, node.inputs[0]),), output=output_operand(node, graph, i),
                                  axes=axes, ops_per_element=per_element,
                                  fn=lambda a, i=i: _normalize(node, a, None, None)[i]))
        return ops


def _normalize(node: Node, x: np.ndarray, scale: np.ndarray | None, bias: np.ndarray | None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    axis = normalize_axis(node, int(node.attr("axis", -1)), x.ndim)
    axes = tuple(range(axis, x.ndim))
    work = np.float64 if x.dtype == np.float64 else np.float32
    epsilon = work(node.attr("epsilon", 1e-5))
    xf = x.astype(work)
    mean = xf.mean(axis=axes, keepdims=True)
    centered = xf - mean
    inv_std = 1 / np.sqrt((centered * centered).mean(axis=axes, keepdims=True) + epsilon)
    y = centered * inv_std
    if scale is not None:
        y = y * scale.astype(work)
    if bias is not None:
        y = y + bias.astype(work)
    return y.astype(x.dtype), mean.astype(np.float32), inv_std.astype(np.float32)


@register("RMSNormalization")
class RMSNormalization(OpDef):
    """y = x / sqrt(mean(x^2) + epsilon) * scale over the axes from `axis` on (opset 23), in fp32 (stash_type 1) or
    in fp64 for fp64 x; the normalised result is cast back to x's dtype before the scale, as the ONNX function does."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, scale = require(node, ins, 2)
        if not x.dtype.is_float:
            raise fail(node, f"input is {x.dtype.value}; RMSNormalization takes a float tensor")
        axis = normalize_axis(node, int(node.attr("axis", -1)), len(x.shape))
        if not _fits(scale.shape, x.shape[axis:]):
            raise fail(node, f"scale has shape {list(scale.shape)}, which does not broadcast to the normalized "
                             f"shape {list(x.shape[axis:])} (axes {axis}.. of {list(x.shape)})")
        return [out(node, x.shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [_rms(node, *given(node, args, 2))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        x = graph.tensor(node.inputs[0])
        axis = normalize_axis(node, int(node.attr("axis", -1)), len(x.shape))
        # Per element: a square and an add for the mean square, the normalising multiply and the scale multiply (4);
        # the rsqrt is per row.
        return [Reduce(name=node.name, node=node.name, op=node.op, inputs=input_operands(node, graph),
                       output=output_operand(node, graph), axes=tuple(range(axis, len(x.shape))), ops_per_element=4,
                       fn=lambda a, s: _rms(node, a, s))]


def _fits(shape: tuple[int, ...], normalized: tuple[int, ...]) -> bool:
    """Whether a parameter of `shape` broadcasts to the normalized shape (and not beyond it)."""
    try:
        return tuple(np.broadcast_shapes(shape, normalized)) == tuple(normalized)
    except ValueError:
        return False


def _rms(node: Node, x: ArrayLike, scale: ArrayLike) -> np.ndarray:
    x = np.asarray(x)
    axes = tuple(range(normalize_axis(node, int(node.attr("axis", -1)), x.ndim), x.ndim))
    work: type[np.floating[Any]] = np.float64 if x.dtype == np.float64 else np.float32
    xf = x.astype(work)
    rms = np.sqrt((xf * xf).mean(axis=axes, keepdims=True) + work(node.attr("epsilon", 1e-5)))
    y: np.ndarray = (xf / rms).astype(x.dtype) * np.asarray(scale)
    return y.astype(x.dtype)
