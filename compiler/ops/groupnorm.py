"""GroupNormalization (opsets 18 and 21) and InstanceNormalization -> one Reduce over each group's elements.

Invariant: y = (x - mean) / sqrt(var + epsilon) * scale + bias, the statistics (population variance) taken per sample
over a group of C / num_groups consecutive channels and all spatial positions (InstanceNormalization: one channel a
group), computed in fp32 (fp64 stays fp64) as onnxruntime does. scale and bias are per channel, except in opset 18's
GroupNormalization, where they are per group. A group that is not a whole set of axes of x is reduced on a view of x
as [N, G, C / G * spatial] (no bytes move), and the result viewed back.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Move, Operand, Reduce, Role
from compiler.ops.base import OpDef, fail, given, operand, out, output_operand, register, require
from compiler.ops.batchnorm import in_work, read

PER_CHANNEL_OPSET = 21   # opset 18's GroupNormalization took scale and bias per group


def _groups(node: Node) -> int:
    return 0 if node.op == "InstanceNormalization" else int(node.attr("num_groups", 0))


def _per_group_parameters(node: Node) -> bool:
    return node.op == "GroupNormalization" and node.resolved.get("opset", PER_CHANNEL_OPSET) < PER_CHANNEL_OPSET


@register("GroupNormalization", "InstanceNormalization")
class GroupNormalization(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, *parameters = require(node, ins, 3)
        node.resolved["opset"] = graph.opset   # the parameters' shape rule changed in opset 21
        least = 3 if node.op == "InstanceNormalization" else 2
        if len(x.shape) < least or not x.dtype.is_float:
            raise fail(node, f"input is {x.dtype.value} {list(x.shape)}; expected a float N x C x ... tensor "
                             f"of rank {least} or more")
        channels = x.shape[1]
        groups = _groups(node) or channels
        if node.op == "GroupNormalization" and ("num_groups" not in node.attrs or groups <= 0
                                                or channels % groups):
            raise fail(node, f"attribute num_groups={node.attr('num_groups')} must be a positive divisor of the "
                             f"{channels} channels")
        size = groups if _per_group_parameters(node) else channels
        for name, t in zip(("scale", "bias"), parameters):
            if t.shape != (size,) or t.dtype != x.dtype:
                per = f"one per group (opset {graph.opset})" if _per_group_parameters(node) else "one per channel"
                raise fail(node, f"{name} {t.name!r} is {t.dtype.value} {list(t.shape)}, expected "
                                 f"{x.dtype.value} [{size}] ({per})")
        return [out(node, x.shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        data, scale, bias = given(node, args, 3)
        x = np.asarray(data)
        grouped = x.reshape(_grouped_shape(node, x.shape))
        return [_normalize(node, grouped, scale, bias).reshape(x.shape)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        x = operand(graph, node.inputs[0])
        params = tuple(operand(graph, name) for name in node.inputs[1:])
        y = output_operand(node, graph)
        grouped = _grouped_shape(node, x.shape)
        # Per element: an add for the mean, a subtract, a square and an add for the variance, the normalising
        # multiply, the scale multiply and the bias add (7); the rsqrt is per group.
        if node.op == "InstanceNormalization":
            return [Reduce(name=node.name, node=node.name, op=node.op, inputs=(x, *params), output=y,
                           axes=tuple(range(2, len(x.shape))), ops_per_element=7,
                           fn=lambda *a: self.reference(node, list(a))[0])]
        x_view = Operand(f"{node.name}:x@grouped", grouped, x.dtype, Role.output)
        y_view = Operand(f"{node.name}:y@grouped", grouped, y.dtype, Role.output)
        return [Move(name=x_view.tensor, node=node.name, op=node.op, inputs=(x,), output=x_view, view=True,
                     fn=lambda a: np.asarray(a).reshape(grouped)),
                Reduce(name=y_view.tensor, node=node.name, op=node.op, inputs=(read(x_view), *params),
                       output=y_view, axes=(2,), ops_per_element=7,
                       fn=lambda a, s, b: _normalize(node, a, s, b)),
                Move(name=node.name, node=node.name, op=node.op, inputs=(read(y_view),), output=y, view=True,
                     fn=lambda a: np.asarray(a).reshape(y.shape))]


def _grouped_shape(node: Node, shape: tuple[int, ...]) -> tuple[int, ...]:
    """x as [N, G, C / G * spatial] (InstanceNormalization keeps x's own shape: each channel is a group)."""
    if node.op == "InstanceNormalization":
        return shape
    groups = _groups(node)
    return (shape[0], groups, int(np.prod(shape[1:])) // groups)


def _normalize(node: Node, grouped: ArrayLike, scale: ArrayLike, bias: ArrayLike) -> np.ndarray:
    """grouped: [N, G, ...] (InstanceNormalization: x itself), normalised over every axis from 2 on."""
    x = np.asarray(grouped)
    work = in_work(x)
    axes = tuple(range(2, x.ndim))
    mean = work.mean(axis=axes, keepdims=True)
    centered = work - mean
    variance = (centered * centered).mean(axis=axes, keepdims=True)
    normal = centered / np.sqrt(variance + work.dtype.type(node.attr("epsilon", 1e-5)))
    scale_w, bias_w = in_work(scale), in_work(bias)
    if node.op == "InstanceNormalization" or _per_group_parameters(node):
        lead = (-1,) + (1,) * (x.ndim - 2)          # one value per axis-1 entry: channel, or group
        y = normal * scale_w.reshape(lead) + bias_w.reshape(lead)
    else:                                          # per channel, channels laid out along the group's axis 2
        channels = (1, x.shape[1], scale_w.size // x.shape[1], 1)
        split = (x.shape[0],) + channels[1:3] + (-1,)
        y = normal.reshape(split) * scale_w.reshape(channels) + bias_w.reshape(channels)
    normalized: np.ndarray = y.reshape(x.shape)
    return normalized.astype(x.dtype)
