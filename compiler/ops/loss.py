"""SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (ONNX opset 12/13): a classifier's or a language model's
loss from scores [N, C, d1...] and integer labels [N, d1...], with optional class weights, ignore_index and a
`none`, `sum` or `mean` reduction.

Invariant: mean divides by the summed weights of the labels that count (their number without weights), as ONNX
and PyTorch do; an ignored label contributes nothing to either sum. Lowered to Reduces over the class axis.
"""
from __future__ import annotations

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Move, Operand, Reduce, Role
from compiler.ops.base import OpDef, fail, given, input_operands, operand, out, output_operand, register, require

REDUCTIONS = ("none", "sum", "mean")


def check(node: Node, ins: list[Tensor | None]) -> Tensor:
    """Scores [N, C, d...], labels [N, d...] (int32/int64), weights [C]: the shapes both losses share. Returns
    the scores."""
    scores, labels = require(node, ins, 2, 3)
    if len(scores.shape) < 2 or not scores.dtype.is_float:
        raise fail(node, f"scores {scores.name!r} are {scores.dtype.value} {list(scores.shape)}; expected float "
                         f"[N, C, d1...]")
    if labels.dtype not in (DType.int32, DType.int64):
        raise fail(node, f"labels {labels.name!r} must be int32 or int64, got {labels.dtype.value}")
    if labels.shape != scores.shape[:1] + scores.shape[2:]:
        raise fail(node, f"labels have shape {list(labels.shape)}; scores {list(scores.shape)} need "
                         f"{list(scores.shape[:1] + scores.shape[2:])} (the class axis 1 removed)")
    if len(ins) > 2 and ins[2] is not None and ins[2].shape != scores.shape[1:2]:
        raise fail(node, f"weights have shape {list(ins[2].shape)}, expected [{scores.shape[1]}] (one per class)")
    if node.attr("reduction", "mean") not in REDUCTIONS:
        raise fail(node, f"reduction {node.attr('reduction')!r} is not one of {', '.join(REDUCTIONS)}")
    return scores


def picked(node: Node, labels: np.ndarray, classes: int, weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(labels with ignored ones set to 0, the weight each position counts with: 0 where ignored)."""
    labels = np.asarray(labels).astype(np.int64)
    ignore = node.attr("ignore_index")
    counted = np.ones(labels.shape, bool) if ignore is None else labels != int(ignore)
    bad = labels[counted & ((labels < 0) | (labels >= classes))]
    if bad.size:
        raise fail(node, f"label {int(bad.reshape(-1)[0])} is out of range for {classes} classes")
    safe = np.where(counted, labels, 0)
    weight = counted.astype(np.float64) if weights is None else np.where(counted, np.asarray(weights)[safe], 0.0)
    return safe, weight


def reduce_loss(node: Node, per: np.ndarray, weight: np.ndarray) -> np.ndarray:
    reduction = node.attr("reduction", "mean")
    if reduction == "none":
        return per
    total = per.sum()
    result: np.ndarray = total if reduction == "sum" else total / weight.sum()
    return result


def nll(node: Node, log_prob: np.ndarray, labels: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    safe, weight = picked(node, labels, log_prob.shape[1], weights)
    taken = np.take_along_axis(log_prob, np.expand_dims(safe, 1), axis=1).squeeze(1)
    return reduce_loss(node, -taken * weight, weight)


def log_softmax(scores: np.ndarray) -> np.ndarray:
    work = scores.astype(np.float64 if scores.dtype == np.float64 else np.float32)
    shifted = work - work.max(axis=1, keepdims=True)
    result: np.ndarray = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return result


class _Loss(OpDef):
    softmax = True

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        scores = check(node, ins)
        shape = scores.shape[:1] + scores.shape[2:] if node.attr("reduction", "mean") == "none" else ()
        outs = [out(node, shape, scores.dtype)]
        if self.softmax and len(node.outputs) > 1 and node.outputs[1]:
            outs.append(out(node, scores.shape, scores.dtype, 1))
        return outs

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        scores = np.asarray(args[0])
        log_prob = log_softmax(scores) if self.softmax else scores
        weights = args[2] if len(args) > 2 else None
        loss = np.asarray(nll(node, log_prob, given(node, args, 2)[1], weights)).astype(scores.dtype)
        return [loss, log_prob.astype(scores.dtype)] if self.softmax else [loss]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        scores = graph.tensor(node.inputs[0])
        labels = with_class_axis(node, graph, node.inputs[1], "labels")
        weights = input_operands(node, graph)[2:]
        per = Operand(f"{node.name}:per", scores.shape[:1] + (1,) + scores.shape[2:], scores.dtype, Role.output)
        # per score: the log-softmax's max, subtract, exp and sum (4), or NLL's pick (1); a Reduce over the class
        # axis (never cut), then one over the positions
        ops: list[IROp] = [labels[0], Reduce(
            name=f"{node.name}:per", node=node.name, op=node.op, inputs=(operand(graph, node.inputs[0]),
                                                                        labels[1], *weights),
            output=per, axes=(1,), ops_per_element=4 if self.softmax else 1,
            fn=lambda s, y, w=None: self._per_position(node, s, y, w))]
        counted = Operand(per.tensor, per.shape, per.dtype, Role.input)
        loss = output_operand(node, graph)
        if node.attr("reduction", "mean") == "none":
            ops.append(Move(name=node.name, node=node.name, op=node.op, inputs=(counted,), output=loss, view=True,
                            fn=lambda p: p.reshape(loss.shape)))
        else:
            ops.append(Reduce(name=node.name, node=node.name, op=node.op, inputs=(counted, labels[1], *weights),
                              output=loss, axes=tuple(range(len(per.shape))), ops_per_element=1,
                              fn=lambda p, y, w=None: self._total(node, p, y, w, scores.shape[1])))
        if self.softmax and len(node.outputs) > 1 and node.outputs[1]:
            ops.append(Reduce(name=f"{node.name}:1", node=node.name, op=node.op, inputs=input_operands(node, graph)[:1],
                              output=output_operand(node, graph, 1), axes=(1,), ops_per_element=5,
                              fn=lambda s: log_softmax(np.asarray(s)).astype(s.dtype)))
        return ops

    def _per_position(self, node: Node, scores: np.ndarray, labels: np.ndarray, weights: np.ndarray | None
                      ) -> np.ndarray:
        scores = np.asarray(scores)
        log_prob = log_softmax(scores) if self.softmax else scores
        safe, weight = picked(node, np.asarray(labels).squeeze(1), scores.shape[1], weights)
        taken = np.take_along_axis(log_prob, np.expand_dims(safe, 1), axis=1)
        result: np.ndarray = (-taken * np.expand_dims(weight, 1)).astype(scores.dtype)
        return result

    @staticmethod
    def _total(node: Node, per: np.ndarray, labels: np.ndarray, weights: np.ndarray | None, classes: int
               ) -> np.ndarray:
        _, weight = picked(node, np.asarray(labels).squeeze(1), classes, weights)
        return np.asarray(reduce_loss(node, np.asarray(per).squeeze(1), weight)).astype(per.dtype)


def with_class_axis(node: Node, graph: Graph, name: str, what: str) -> tuple[Move, Operand]:
    """A view of a per-position tensor [N, d...] as [N, 1, d...], so that it lines up with the scores' axes (a chunk
    along N or d cuts both alike; the class axis is reduced, never cut)."""
    source = operand(graph, name)
    shape = source.shape[:1] + (1,) + source.shape[1:]
    view = Operand(f"{node.name}:{what}", shape, source.dtype, Role.output)
    move = Move(name=view.tensor, node=node.name, op=node.op, inputs=(source,), output=view, view=True,
                fn=lambda a: np.asarray(a).reshape(shape))
    return move, Operand(view.tensor, shape, source.dtype, Role.input)


@register("SoftmaxCrossEntropyLoss")
class SoftmaxCrossEntropyLoss(_Loss):
    softmax = True


@register("NegativeLogLikelihoodLoss")
class NegativeLogLikelihoodLoss(_Loss):
    softmax = False
