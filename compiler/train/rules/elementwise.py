"""Gradient rules of element-wise ops: arithmetic with broadcasting, activations, rounding, casts and selection.

A broadcast operand's gradient is summed back to its shape (Tape.sum_to). Round passes its gradient straight
through (the straight-through estimator BitNet and the MatMul-free LM train their quantisers with), and so does a
Clip of a Round's output: the estimator spans the whole quantiser, as `x + (q(x) - x).detach()` does in their
reference code, so a latent weight beyond the ternary range still learns. Cast passes the gradient back in the
input's float type; any other Clip, and Max, pass it where the input won, as PyTorch does (a tie in Max halves it).
Where sends the gradient to the branch each element was taken from (zeros to the other); Exp's is dy * y, Log's
dy / x.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compiler.errors import ModelError
from compiler.ops.base import const_input
from compiler.graph import Node
from compiler.train.autodiff import Grads, Tape, output_grad, rule


def _each(node: Node, wants: list[bool], make: Callable[[int], str]) -> Grads:
    return [make(i) if want else None for i, want in enumerate(wants)]


@rule("Add", "Sub", "Sum")
def add(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    dy = output_grad(node, dys)

    def grad(i: int) -> str:
        g = t.node("Neg", [dy]) if node.op == "Sub" and i == 1 else dy
        return t.sum_to(g, t.shape(node.inputs[i]))
    return _each(node, wants, grad)


@rule("Mul")
def mul(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    return _each(node, wants, lambda i: t.sum_to(t.node("Mul", [output_grad(node, dys), node.inputs[1 - i]]),
                                                 t.shape(node.inputs[i])))


@rule("Div")
def div(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    a, b = node.inputs
    return [t.sum_to(t.node("Div", [output_grad(node, dys), b]), t.shape(a)) if wants[0] else None,
            t.sum_to(t.node("DivisorGrad", [output_grad(node, dys), node.outputs[0], b], training=True), t.shape(b))
            if wants[1] else None]


@rule("Exp")
def exp(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    return [t.node("Mul", [output_grad(node, dys), node.outputs[0]])]


@rule("Log")
def log(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    return [t.node("Div", [output_grad(node, dys), node.inputs[0]])]


@rule("Where")
def where(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    condition, dy = node.inputs[0], output_grad(node, dys)
    zero = t.const(np.asarray(0), t.dtype(dy), "zero") if any(wants[1:]) else ""
    branches = [[condition, dy, zero], [condition, zero, dy]]
    return [None] + [t.sum_to(t.node("Where", branches[i]), t.shape(node.inputs[i + 1])) if want else None
                     for i, want in enumerate(wants[1:])]


@rule("Neg")
def neg(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    return [t.node("Neg", [output_grad(node, dys)])]


@rule("Pow")
def power(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    if wants[1]:
        raise ModelError(f"{t.graph.source}: {node.where()}: the exponent {node.inputs[1]!r} depends on a parameter; "
                         f"only the base of a Pow is differentiated")
    exponent = node.inputs[1]
    if t.dtype(exponent) != t.dtype(node.inputs[0]):
        exponent = t.node("Cast", [exponent], to=t.dtype(node.inputs[0]).onnx)
    return [t.node("PowGrad", [output_grad(node, dys), node.inputs[0], exponent], training=True), None]


# activations whose derivative reads the input x, or the output y
# (Relu's from its output, y > 0 exactly where x > 0, as PyTorch saves it: the input need not outlive the forward)
_FROM_INPUT = {"Erf": "ErfGrad", "Gelu": "GeluGrad", "Abs": "AbsGrad"}
_FROM_OUTPUT = {"Relu": "ReluGrad", "Sigmoid": "SigmoidGrad", "Tanh": "TanhGrad", "Sqrt": "SqrtGrad"}


@rule(*_FROM_INPUT)
def from_input(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    if node.op == "Gelu" and node.attr("approximate", "none") != "none":
        raise ModelError(f"{t.graph.source}: {node.where()}: only the exact Gelu (approximate='none') has a "
                         f"gradient rule")
    return [t.node(_FROM_INPUT[node.op], [output_grad(node, dys), node.inputs[0]], training=True)]


@rule(*_FROM_OUTPUT)
def from_output(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    return [t.node(_FROM_OUTPUT[node.op], [output_grad(node, dys), node.outputs[0]], training=True)]


@rule("Max", "Min")
def extreme(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    if len(node.inputs) != 2:
        raise ModelError(f"{t.graph.source}: {node.where()}: {node.op} of {len(node.inputs)} inputs has no "
                         f"gradient rule (two inputs do)")
    dy = output_grad(node, dys)

    def grad(i: int) -> str:
        mine, other = node.inputs[i], node.inputs[1 - i]
        if node.op == "Min":   # min(a, b) = -max(-a, -b): the smaller one wins
            mine, other = t.node("Neg", [mine]), t.node("Neg", [other])
        mine, other = (x if t.shape(x) == t.shape(dy) else t.node("Expand", [x, t.ints(t.shape(dy))])
                       for x in (mine, other))
        return t.sum_to(t.node("MaxGrad", [dy, mine, other], training=True), t.shape(node.inputs[i]))
    return _each(node, wants, grad)


@rule("Clip")
def clip(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    made = t.producer(node.inputs[0])
    if made is not None and made.op == "Round":   # a quantiser's clip
        return [output_grad(node, dys)] + [None] * (len(node.inputs) - 1)
    bounds = list(node.inputs[1:3]) + [""] * (3 - len(node.inputs))
    if "min" in node.attrs or "max" in node.attrs:     # opset < 11: bounds are attributes
        dtype = t.dtype(node.inputs[0])
        bounds = [t.const(np.asarray(node.attr(k)), dtype, k) if k in node.attrs else "" for k in ("min", "max")]
    grad = t.node("ClipGrad", [output_grad(node, dys), node.inputs[0], *bounds], training=True)
    return [grad] + [None] * (len(node.inputs) - 1)


@rule("Round", "Identity")
def straight_through(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    return [output_grad(node, dys)]


@rule("Cast", "CastLike")
def cast(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    source = t.dtype(node.inputs[0])
    grad = output_grad(node, dys)
    if source.is_float and t.dtype(grad) != source:
        grad = t.node("Cast", [grad], to=source.onnx)
    return [grad] + [None] * (len(node.inputs) - 1)


@rule("Dropout")
def dropout(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    mask = node.outputs[1] if len(node.outputs) > 1 and node.outputs[1] else ""
    if not mask:            # inference form: the identity
        return [output_grad(node, dys)] + [None] * (len(node.inputs) - 1)
    ratio = float(const_input(node, t.graph, 1, "ratio").reshape(-1)[0]) if len(node.inputs) > 1 and node.inputs[1] \
        else 0.5
    dy = output_grad(node, dys)
    scale = t.const(np.asarray(1.0 / (1.0 - ratio)), t.dtype(dy), "dropout_scale")
    return [t.node("DropoutGrad", [dy, mask, scale], training=True)] + [None] * (len(node.inputs) - 1)
