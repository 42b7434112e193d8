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

import numpy as np

from compiler.errors import ModelError
from compiler.train.autodiff import Tape, rule


def _each(node, wants, make):
    return [make(i) if want else None for i, want in enumerate(wants)]


@rule("Add", "Sub", "Sum")
def add(t: Tape, node, dys, wants):
    dy = dys[0]

    def grad(i):
        g = t.node("Neg", [dy]) if node.op == "Sub" and i == 1 else dy
        return t.sum_to(g, t.shape(node.inputs[i]))
    return _each(node, wants, grad)


@rule("Mul")
def mul(t: Tape, node, dys, wants):
    return _each(node, wants, lambda i: t.sum_to(t.node("Mul", [dys[0], node.inputs[1 - i]]),
                                                 t.shape(node.inputs[i])))


@rule("Div")
def div(t: Tape, node, dys, wants):
    a, b = node.inputs
    return [t.sum_to(t.node("Div", [dys[0], b]), t.shape(a)) if wants[0] else None,
            t.sum_to(t.node("DivisorGrad", [dys[0], node.outputs[0], b], training=True), t.shape(b))
            if wants[1] else None]


@rule("Exp")
def exp(t: Tape, node, dys, wants):
    return [t.node("Mul", [dys[0], node.outputs[0]])]


@rule("Log")
def log(t: Tape, node, dys, wants):
    return [t.node("Div", [dys[0], node.inputs[0]])]


@rule("Where")
def where(t: Tape, node, dys, wants):
    condition, dy = node.inputs[0], dys[0]
    zero = t.const(np.asarray(0), t.dtype(dy), "zero") if any(wants[1:]) else ""
    branches = [[condition, dy, zero], [condition, zero, dy]]
    return [None] + [t.sum_to(t.node("Where", branches[i]), t.shape(node.inputs[i + 1])) if want else None
                     for i, want in enumerate(wants[1:])]


@rule("Neg")
def neg(t: Tape, node, dys, wants):
    return [t.node("Neg", [dys[0]])]


@rule("Pow")
def power(t: Tape, node, dys, wants):
    if wants[1]:
        raise ModelError(f"{t.graph.source}: {node.where()}: the exponent {node.inputs[1]!r} depends on a parameter; "
                         f"only the base of a Pow is differentiated")
    exponent = node.inputs[1]
    if t.dtype(exponent) != t.dtype(node.inputs[0]):
        exponent = t.node("Cast", [exponent], to=t.dtype(node.inputs[0]).onnx)
    return [t.node("PowGrad", [dys[0], node.inputs[0], exponent], training=True), None]


# activations whose derivative reads the input x, or the output y
# (Relu's from its output, y > 0 exactly where x > 0, as PyTorch saves it: the input need not outlive the forward)
_FROM_INPUT = {"Erf": "ErfGrad", "Gelu": "GeluGrad", "Abs": "AbsGrad"}
_FROM_OUTPUT = {"Relu": "ReluGrad", "Sigmoid": "SigmoidGrad", "Tanh": "TanhGrad", "Sqrt": "SqrtGrad"}


@rule(*_FROM_INPUT)
def from_input(t: Tape, node, dys, wants):
    if node.op == "Gelu" and node.attr("approximate", "none") != "none":
        raise ModelError(f"{t.graph.source}: {node.where()}: only the exact Gelu (approximate='none') has a "
                         f"gradient rule")
    return [t.node(_FROM_INPUT[node.op], [dys[0], node.inputs[0]], training=True)]


@rule(*_FROM_OUTPUT)
def from_output(t: Tape, node, dys, wants):
    return [t.node(_FROM_OUTPUT[node.op], [dys[0], node.outputs[0]], training=True)]


@rule("Max", "Min")
def extreme(t: Tape, node, dys, wants):
    if len(node.inputs) != 2:
        raise ModelError(f"{t.graph.source}: {node.where()}: {node.op} of {len(node.inputs)} inputs has no "
                         f"gradient rule (two inputs do)")

    def grad(i):
        mine, other = node.inputs[i], node.inputs[1 - i]
        if node.op == "Min":   # min(a, b) = -max(-a, -b): the smaller one wins
            mine, other = t.node("Neg", [mine]), t.node("Neg", [other])
        mine, other = (x if t.shape(x) == t.shape(dys[0]) else t.node("Expand", [x, t.ints(t.shape(dys[0]))])
                       for x in (mine, other))
        return t.sum_to(t.node("MaxGrad", [dys[0], mine, other], training=True), t.shape(node.inputs[i]))
    return _each(node, wants, grad)


@rule("Clip")
def clip(t: Tape, node, dys, wants):
    made = t.producer(node.inputs[0])
    if made is not None and made.op == "Round":   # a quantiser's clip
        return [dys[0]] + [None] * (len(node.inputs) - 1)
    bounds = list(node.inputs[1:3]) + [""] * (3 - len(node.inputs))
    if "min" in node.attrs or "max" in node.attrs:     # opset < 11: bounds are attributes
        dtype = t.dtype(node.inputs[0])
        bounds = [t.const(np.asarray(node.attr(k)), dtype, k) if k in node.attrs else "" for k in ("min", "max")]
    grad = t.node("ClipGrad", [dys[0], node.inputs[0], *bounds], training=True)
    return [grad] + [None] * (len(node.inputs) - 1)


@rule("Round", "Identity")
def straight_through(t: Tape, node, dys, wants):
    return [dys[0]]


@rule("Cast", "CastLike")
def cast(t: Tape, node, dys, wants):
    source = t.dtype(node.inputs[0])
    grad = dys[0]
    if source.is_float and t.dtype(grad) != source:
        grad = t.node("Cast", [grad], to=source.onnx)
    return [grad] + [None] * (len(node.inputs) - 1)


@rule("Dropout")
def dropout(t: Tape, node, dys, wants):
    mask = node.outputs[1] if len(node.outputs) > 1 and node.outputs[1] else ""
    if not mask:            # inference form: the identity
        return [dys[0]] + [None] * (len(node.inputs) - 1)
    ratio = float(t.graph.value(node.inputs[1]).reshape(-1)[0]) if len(node.inputs) > 1 and node.inputs[1] else 0.5
    scale = t.const(np.asarray(1.0 / (1.0 - ratio)), t.dtype(dys[0]), "dropout_scale")
    return [t.node("DropoutGrad", [dys[0], mask, scale], training=True)] + [None] * (len(node.inputs) - 1)
