"""Gradient rules of the losses: SoftmaxCrossEntropyLoss reads the log-probabilities its forward pass saved (its
second output; recomputed by a LogSoftmax when the node has none), NegativeLogLikelihoodLoss only the labels."""
from __future__ import annotations

from compiler.graph import Node
from compiler.train.autodiff import Grads, Tape, output_grad, rule


@rule("SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss")
def cross_entropy(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    softmax = node.op == "SoftmaxCrossEntropyLoss"
    if softmax:
        saved = node.outputs[1] if len(node.outputs) > 1 and node.outputs[1] else \
            t.node("LogSoftmax", [node.inputs[0]], axis=1)
    else:
        saved = node.inputs[0]
    attrs = {k: v for k, v in node.attrs.items() if k in ("reduction", "ignore_index")}
    grad = t.node("CrossEntropyGrad", [output_grad(node, dys), saved, *node.inputs[1:]], training=True,
                  softmax=int(softmax), **attrs)
    return [grad] + [None] * (len(node.inputs) - 1)
