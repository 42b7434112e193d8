"""Ops that change only a tensor's shape, never its bytes: Reshape, Flatten, Squeeze, Unsqueeze, Identity,
Dropout (inference: the identity). Each lowers to one Move(view=True) over the data input alone.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map
from compiler.ops.base import OpDef, const_input, fail, given, move_op, operand, out, output_operand, register, require


def axes_of(node: Node, graph: Graph, index: int) -> list[int] | None:
    """`axes` from the attribute (before opset 13) or from the optional constant input `index` (from 13)."""
    if "axes" in node.attrs:
        return [int(a) for a in node.attrs["axes"]]
    if index < len(node.inputs) and node.inputs[index]:
        return [int(a) for a in const_input(node, graph, index, "axes").reshape(-1)]
    return None


def reshape_target(node: Node, shape: tuple[int, ...], spec: ArrayLike, allowzero: bool) -> tuple[int, ...]:
    """ONNX Reshape: 0 copies the input's dimension at that position (unless allowzero), -1 is inferred."""
    spec = [int(d) for d in np.asarray(spec).reshape(-1)]
    if spec.count(-1) > 1 or any(d < -1 for d in spec):
        raise fail(node, f"shape {spec} may hold at most one -1 and no other negative size")
    if allowzero and 0 in spec and -1 in spec:
        raise fail(node, f"shape {spec} mixes 0 and -1 with allowzero=1, which ONNX forbids")
    dims = []
    for i, d in enumerate(spec):
        if d == 0 and not allowzero:
            if i >= len(shape):
                raise fail(node, f"shape {spec}: the 0 at position {i} copies input dimension {i}, but the "
                                 f"input {list(shape)} has rank {len(shape)}")
            d = shape[i]
        dims.append(d)
    total = math.prod(shape)
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or total % known:
            raise fail(node, f"cannot reshape {list(shape)} ({total} elements) to {spec}")
        dims[dims.index(-1)] = total // known
    if math.prod(dims) != total:
        raise fail(node, f"cannot reshape {list(shape)} ({total} elements) to {spec} ({math.prod(dims)} elements)")
    return tuple(dims)


def flatten_target(node: Node, shape: tuple[int, ...]) -> tuple[int, int]:
    rank, axis = len(shape), int(node.attr("axis", 1))
    if not -rank <= axis <= rank:
        raise fail(node, f"axis {axis} is out of range for rank {rank} (allowed {-rank} to {rank})")
    axis += rank if axis < 0 else 0
    return math.prod(shape[:axis]), math.prod(shape[axis:])


def squeeze_target(node: Node, shape: tuple[int, ...], axes: list[int] | None) -> tuple[int, ...]:
    rank = len(shape)
    if axes is None:
        return tuple(d for d in shape if d != 1)
    for a in axes:
        if not -rank <= a < rank:
            raise fail(node, f"axis {a} is out of range for rank {rank}")
    drop = {a % rank for a in axes}
    for a in sorted(drop):
        if shape[a] != 1:
            raise fail(node, f"cannot squeeze axis {a}: it has size {shape[a]}, not 1 (input {list(shape)})")
    return tuple(d for i, d in enumerate(shape) if i not in drop)


def unsqueeze_target(node: Node, shape: tuple[int, ...], axes: list[int] | None) -> tuple[int, ...]:
    if axes is None:
        raise fail(node, "needs axes (an attribute before opset 13, the second input from 13)")
    rank = len(shape) + len(axes)
    for a in axes:
        if not -rank <= a < rank:
            raise fail(node, f"axis {a} is out of range for the output rank {rank}")
    new = {a % rank for a in axes}
    if len(new) != len(axes):
        raise fail(node, f"axes {axes} name the same output axis twice")
    rest = iter(shape)
    return tuple(1 if i in new else next(rest) for i in range(rank))


def _view(node: Node, graph: Graph, target: tuple[int, ...]) -> IROp:
    data = (operand(graph, node.inputs[0]),)
    return move_op(node, graph, lambda x: np.reshape(x, target), view=True, inputs=data)


@register("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
class Reshape(OpDef):
    value_inputs = (1,)   # Reshape's shape, Squeeze/Unsqueeze's axes

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        if node.op == "Reshape":
            x = require(node, ins, 2)[0]
            spec = const_input(node, graph, 1, "the target shape")
            return [out(node, reshape_target(node, x.shape, spec, bool(node.attr("allowzero", 0))),
                        x.dtype)]
        (x,) = require(node, ins, 1, 2 if node.op in ("Squeeze", "Unsqueeze") else 1)
        shape = x.shape
        if node.op == "Flatten":
            shape = flatten_target(node, shape)
        elif node.op == "Squeeze":
            shape = squeeze_target(node, shape, axes_of(node, graph, 1))
        elif node.op == "Unsqueeze":
            shape = unsqueeze_target(node, shape, axes_of(node, graph, 1))
        return [out(node, shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(args[0])
        axes = [int(a) for a in np.asarray(args[1]).reshape(-1)] if len(args) > 1 and args[1] is not None \
            else None
        axes = [int(a) for a in node.attrs["axes"]] if "axes" in node.attrs else axes
        if node.op == "Reshape":
            spec = given(node, args, 2)[1]
            return [x.reshape(reshape_target(node, x.shape, spec, bool(node.attr("allowzero", 0))))]
        if node.op == "Flatten":
            return [x.reshape(flatten_target(node, x.shape))]
        if node.op == "Squeeze":
            return [x.reshape(squeeze_target(node, x.shape, axes))]
        if node.op == "Unsqueeze":
            return [x.reshape(unsqueeze_target(node, x.shape, axes))]
        return [x]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return [_view(node, graph, graph.tensor(node.outputs[0]).shape)]


@register("Dropout")
class Dropout(OpDef):
    """Inference only: y = x; the optional mask is all true (bool from opset 10, x's dtype before). Training mode
    drops random elements, so it is accepted only with ratio 0, where it is the identity too."""
    value_inputs = (1, 2)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1, 3)
        if len(node.inputs) > 2 and node.inputs[2]:
            training = const_input(node, graph, 2, "training_mode")
            given = len(node.inputs) > 1 and bool(node.inputs[1])
            ratio = float(const_input(node, graph, 1, "ratio").reshape(-1)[0]) if given and training.any() else 0.5
            if bool(training.reshape(-1)[0]) and ratio != 0:
                raise fail(node, f"training_mode=true is not supported with ratio {ratio:g}: it drops random "
                                 f"elements, and accelsim imports models for inference (ratio 0 is accepted)")
        outs = [out(node, x.shape, x.dtype)]
        if len(node.outputs) > 1 and node.outputs[1]:
            outs.append(out(node, x.shape, DType.bool if graph.opset >= 10 else x.dtype, 1))
        return outs

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(args[0])
        return [x, np.ones(x.shape, dtype=bool)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        target = graph.tensor(node.outputs[0]).shape
        ops: list[IROp] = [_view(node, graph, target)]
        if len(node.outputs) > 1 and node.outputs[1]:
            mask = output_operand(node, graph, 1)
            # The mask is a constant fill: written, never computed.
            ops.append(Map(name=f"{node.name}:1", node=node.name, op=node.op, inputs=(), output=mask,
                           fn=lambda: np.ones(mask.shape, dtype=bool), ops_per_element=0))
        return ops
