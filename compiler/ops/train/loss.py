"""The gradient of SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss with respect to their scores.

Cross-entropy: dscores = (softmax - onehot(label)) * weight * dloss / denominator, from the log-probabilities the
forward pass saved; NLL: -onehot(label) * weight * dloss / denominator. Attributes as the forward op's
(reduction, ignore_index), plus softmax = 1 or 0. One Map over the scores.
"""
from __future__ import annotations

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Reduce
from compiler.ops.base import TRAINING_DOMAIN, OpDef, fail, input_operands, operand, out, output_operand, register, require
from compiler.ops.loss import REDUCTIONS, picked, with_class_axis


@register("CrossEntropyGrad", domain=TRAINING_DOMAIN)
class CrossEntropyGrad(OpDef):
    """(dloss, log_prob or the NLL input [N, C, d...], labels [N, d...], weights [C]?) -> d scores."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        require(node, ins, 3, 4)
        dloss, scores, labels = ins[:3]
        if labels.shape != scores.shape[:1] + scores.shape[2:]:
            raise fail(node, f"labels {list(labels.shape)} do not fit scores {list(scores.shape)}")
        if node.attr("reduction", "mean") not in REDUCTIONS:
            raise fail(node, f"reduction {node.attr('reduction')!r} is not one of {', '.join(REDUCTIONS)}")
        return [out(node, scores.shape, scores.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        dloss, scores, labels = (np.asarray(a) for a in args[:3])
        work = np.float64 if scores.dtype == np.float64 else np.float32
        safe, weight = picked(node, labels, scores.shape[1], args[3] if len(args) > 3 else None)
        reduction = node.attr("reduction", "mean")
        scale = weight * (dloss if reduction == "none" else dloss.reshape(()))
        if reduction == "mean":
            scale = scale / weight.sum()
        onehot = np.zeros(scores.shape, work)
        np.put_along_axis(onehot, np.expand_dims(safe, 1), 1.0, axis=1)
        base = np.exp(scores.astype(work)) - onehot if node.attr("softmax", 1) else -onehot
        return [(base * np.expand_dims(scale, 1)).astype(scores.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        # A Reduce over the class axis (the one-hot needs whole rows, so that axis is never cut), labels and a
        # per-position dloss viewed as [N, 1, d...]; per score: exp, subtract the one-hot, two multiplies.
        views = [with_class_axis(node, graph, node.inputs[2], "labels")]
        per_position = node.attr("reduction", "mean") == "none"
        if per_position:
            views.append(with_class_axis(node, graph, node.inputs[0], "dloss"))
        dloss = views[1][1] if per_position else operand(graph, node.inputs[0])
        inputs = (operand(graph, node.inputs[1]), views[0][1], dloss, *input_operands(node, graph)[3:])

        def gradient(scores, labels, dy, weights=None):
            dy = np.asarray(dy).squeeze(1) if per_position else dy
            return self.reference(node, [dy, scores, np.asarray(labels).squeeze(1), weights])[0]
        return [move for move, _ in views] + [Reduce(name=node.name, node=node.name, op=node.op, inputs=inputs,
                                                     output=output_operand(node, graph), axes=(1,), ops_per_element=4,
                                                     fn=gradient)]
