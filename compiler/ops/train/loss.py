"""The gradient of SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss with respect to their scores.

Cross-entropy: dscores = (softmax - onehot(label)) * weight * dloss / denominator, from the log-probabilities the
forward pass saved; NLL: -onehot(label) * weight * dloss / denominator. Attributes as the forward op's
(reduction, ignore_index), plus softmax = 1 or 0. Lowered to a Reduce over the class axis; with reduction mean, a
first Reduce over every position computes the denominator, so a chunk of positions never divides by its own count.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Operand, Reduce, Role
from compiler.ops.base import (TRAINING_DOMAIN, OpDef, fail, given, input_operands, operand, optional, out,
                               output_operand, register, require)
from compiler.ops.loss import REDUCTIONS, picked, with_class_axis


@register("CrossEntropyGrad", domain=TRAINING_DOMAIN)
class CrossEntropyGrad(OpDef):
    """(dloss, log_prob or the NLL input [N, C, d...], labels [N, d...], weights [C]?) -> d scores."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        dloss, scores, labels = require(node, ins, 3, 4)
        if labels.shape != scores.shape[:1] + scores.shape[2:]:
            raise fail(node, f"labels {list(labels.shape)} do not fit scores {list(scores.shape)}")
        if node.attr("reduction", "mean") not in REDUCTIONS:
            raise fail(node, f"reduction {node.attr('reduction')!r} is not one of {', '.join(REDUCTIONS)}")
        return [out(node, scores.shape, scores.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        dloss, scores, labels = given(node, args, 3)
        return [_gradient(node, dloss, scores, labels, optional(args, 3))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        # A Reduce over the class axis (the one-hot needs whole rows, so that axis is never cut), labels and a
        # per-position dloss viewed as [N, 1, d...]; per score: exp, subtract the one-hot, two multiplies.
        views = [with_class_axis(node, graph, node.inputs[2], "labels")]
        reduction = node.attr("reduction", "mean")
        if reduction == "none":
            views.append(with_class_axis(node, graph, node.inputs[0], "dloss"))
        dloss = views[1][1] if reduction == "none" else operand(graph, node.inputs[0])
        labels, weights = views[0][1], input_operands(node, graph)[3:]
        ops: list[IROp] = [move for move, _ in views]
        denominator: tuple[Operand, ...] = ()
        if reduction == "mean":   # the weights of every counted label: one scalar the chunks share
            classes = graph.tensor(node.inputs[1]).shape[1]
            total = Operand(f"{node.name}:denominator", (), dloss.dtype, Role.output)

            def count(y: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
                return np.asarray(picked(node, np.asarray(y).squeeze(1), classes, w)[1].sum(), total.dtype.numpy)
            ops.append(Reduce(name=total.tensor, node=node.name, op=node.op, inputs=(labels, *weights), output=total,
                              axes=tuple(range(len(labels.shape))), ops_per_element=1, fn=count))
            denominator = (Operand(total.tensor, (), total.dtype, Role.input),)
        inputs = (operand(graph, node.inputs[1]), labels, dloss, *denominator, *weights)

        def gradient(scores: np.ndarray, labels: np.ndarray, dy: np.ndarray, *rest: np.ndarray) -> np.ndarray:
            dy = np.asarray(dy).squeeze(1) if reduction == "none" else dy
            total, weights = (rest[0], rest[1:]) if denominator else (None, rest)
            return _gradient(node, dy, scores, np.asarray(labels).squeeze(1), weights[0] if weights else None, total)
        return ops + [Reduce(name=node.name, node=node.name, op=node.op, inputs=inputs,
                             output=output_operand(node, graph), axes=(1,), ops_per_element=4, fn=gradient)]


def _gradient(node: Node, dloss: ArrayLike, scores: ArrayLike, labels: np.ndarray, weights: np.ndarray | None = None,
              denominator: ArrayLike | None = None) -> np.ndarray:
    """d scores; `denominator`: mean's sum of counted weights, when the labels given are only some positions'."""
    dy, x = np.asarray(dloss), np.asarray(scores)
    work = np.float64 if x.dtype == np.float64 else np.float32
    safe, weight = picked(node, labels, x.shape[1], weights)
    reduction = node.attr("reduction", "mean")
    scale = weight * (dy if reduction == "none" else dy.reshape(()))
    if reduction == "mean":
        scale = scale / (weight.sum() if denominator is None else np.asarray(denominator, np.float64))
    onehot = np.zeros(x.shape, work)
    np.put_along_axis(onehot, np.expand_dims(safe, 1), 1.0, axis=1)
    base = np.exp(x.astype(work)) - onehot if node.attr("softmax", 1) else -onehot
    dx: np.ndarray = base * np.expand_dims(scale, 1)
    return dx.astype(x.dtype)
