"""Gradient rules of the normalisations: BatchNormalization in training mode and LayerNormalization (any axis, with or
without B). Each reads the statistics of x its forward pass normalised with, as frameworks save them.

LayerNormalization's own Mean and InvStdDev outputs serve where the node has them and they are as precise as its
forward pass (fp32, stash_type 1: not for fp64 x); otherwise, and for BatchNormalization, whose ONNX training form
(opset 14+) outputs only the running statistics, a NormStats node computes them again from x.
Invariant: a BatchNormalization reaches its rule only in training mode (compiler/train/modes.py switches it); in
inference form it normalises with fixed statistics, which is not the step PyTorch's train mode takes.
"""
from __future__ import annotations

from collections.abc import Iterable
from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.ops.base import normalize_axis
from compiler.ops.batchnorm import statistic_axes
from compiler.graph import Node
from compiler.train.autodiff import Grads, Tape, output_grad, rule


def _statistics(t: Tape, x: str, axes: Iterable[int], epsilon: float) -> tuple[str, str]:
    mean, inv_std = t.node("NormStats", [x], outputs=2, training=True, axes=list(axes), epsilon=epsilon)
    return mean, inv_std


def _only_through_y(t: Tape, node: Node, dys: Grads) -> None:
    if any(dy is not None for dy in dys[1:]):
        raise ModelError(f"{t.graph.source}: {node.where()}: the loss depends on its statistics outputs "
                         f"({', '.join(o for o, dy in zip(node.outputs[1:], dys[1:]) if dy is not None)}); only the "
                         f"gradient through Y has a rule")


@rule("BatchNormalization")
def batch_norm(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    if not node.attr("training_mode", 0):
        raise ModelError(f"{t.graph.source}: {node.where()}: a BatchNormalization in inference form (training_mode=0) "
                         f"has no gradient rule; a training step normalises with the batch's statistics: switch the "
                         f"graph with compiler.train.modes.training_forward first")
    _only_through_y(t, node, dys)
    x, scale = node.inputs[:2]
    mean, inv_std = _statistics(t, x, statistic_axes(len(t.shape(x))), float(node.attr("epsilon", 1e-5)))
    dx, dscale, dbias = t.node("BatchNormGrad", [output_grad(node, dys), x, scale, mean, inv_std], outputs=3,
                               training=True)
    return [dx, dscale, dbias, None, None]


@rule("LayerNormalization")
def layer_norm(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    _only_through_y(t, node, dys)
    x, scale = node.inputs[:2]
    bias = node.inputs[2] if len(node.inputs) > 2 else ""
    rank = len(t.shape(x))
    axis = normalize_axis(node, int(node.attr("axis", -1)), rank)
    saved = list(node.outputs[1:3])
    if len(saved) == 2 and all(saved) and t.dtype(x) != DType.fp64:
        mean, inv_std = saved
    else:
        mean, inv_std = _statistics(t, x, range(axis, rank), float(node.attr("epsilon", 1e-5)))
    dx, dscale, dbias = t.node("LayerNormGrad", [output_grad(node, dys), x, scale, mean, inv_std], outputs=3,
                               training=True, axis=axis)
    grads = [dx, t.sum_to(dscale, t.shape(scale)) if wants[1] else None]
    if len(node.inputs) > 2:
        grads.append(t.sum_to(dbias, t.shape(bias)) if bias and wants[2] else None)
    return grads
