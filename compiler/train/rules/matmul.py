"""Gradient rules of products: MatMul, Gemm, Einsum and MatMulInteger, each gradient one ONNX Einsum.

dA = dY x B^T and dB = A^T x dY are written as Einsums over the operands as stored (no transpose is copied), and
a batch axis that A or B broadcast is summed inside the same Einsum. MatMulInteger (BitNet's ternary layers)
differentiates as the float product of its integer operands: the straight-through estimator.
"""
from __future__ import annotations


import numpy as np

from compiler.errors import ModelError
from compiler.ops.einsum import parse
from compiler.graph import Node
from compiler.train.autodiff import Grads, Tape, output_grad, rule


def _grad_einsum(t: Tape, terms: list[str], result: str, dy: str, operands: list[str], i: int) -> str:
    """d/d operands[i] of Einsum(terms -> result): dy times every other operand, onto operand i's letters."""
    mine = terms[i]
    others = [(term, name) for j, (term, name) in enumerate(zip(terms, operands)) if j != i]
    seen = set(result) | {c for term, _ in others for c in term}
    lost = [c for c in mine if c not in seen]
    if lost:
        where = t.at.where() if t.at is not None else t.scope      # t.at: the node whose rule runs
        raise ModelError(f"{t.graph.source}: {where}: letter(s) {''.join(lost)} are summed within operand "
                         f"{i} alone; that gradient is a broadcast, which has no rule yet")
    kept = "".join(c for c in mine)
    equation = ",".join([result] + [term for term, _ in others]) + "->" + kept
    return t.node("Einsum", [dy] + [name for _, name in others], equation=equation)


@rule("Einsum")
def einsum(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    terms, result, _ = parse(node, [t.shape(name) for name in node.inputs])
    return [_grad_einsum(t, terms, result, output_grad(node, dys), list(node.inputs), i) if want else None
            for i, want in enumerate(wants)]


BATCH_LETTERS = "abcdefghij"      # m, k and n stay free for the matrix axes


def _matmul_terms(a: tuple[int, ...], b: tuple[int, ...], y: tuple[int, ...]
                  ) -> tuple[list[str], str, list[list[bool]]]:
    """Subscripts for numpy's matmul of shapes a and b: (terms, result, per operand which axes carry a letter; a
    size-1 batch axis that broadcasts against a larger one carries none and is squeezed for the Einsum)."""
    nb = len(y) - (len(a) > 1) - (len(b) > 1)
    batch = BATCH_LETTERS[:nb]

    def side(shape: tuple[int, ...], tail: str) -> tuple[str, list[bool]]:
        if len(shape) == 1:
            return "k", [True]
        count = len(shape) - 2
        keep = [shape[i] == y[nb - count + i] for i in range(count)]
        return "".join(c for c, k in zip(batch[nb - count:], keep) if k) + tail, keep + [True, True]
    (ta, ka), (tb, kb) = side(a, "mk"), side(b, "kn")
    return [ta, tb], batch + ("m" if len(a) > 1 else "") + ("n" if len(b) > 1 else ""), [ka, kb]


def _product(t: Tape, terms: list[str], result: str, dy: str, operands: list[str], wants: list[bool],
             keeps: list[list[bool]], floats: list[str] | None = None) -> Grads:
    inputs = [t.reshape(x, [d for d, k in zip(t.shape(x), keep) if k])
              for x, keep in zip(floats or operands, keeps)]
    return [t.reshape(_grad_einsum(t, terms, result, dy, inputs, i), t.shape(operands[i])) if want else None
            for i, want in enumerate(wants[:2])]


@rule("MatMul")
def matmul(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    a, b = node.inputs
    if len(t.shape(node.outputs[0])) > len(BATCH_LETTERS) + 2:
        raise ModelError(f"{t.graph.source}: {node.where()}: a MatMul with more than {len(BATCH_LETTERS)} batch "
                         f"axes has no gradient rule")
    terms, result, keeps = _matmul_terms(t.shape(a), t.shape(b), t.shape(node.outputs[0]))
    return _product(t, terms, result, output_grad(node, dys), [a, b], wants, keeps)


@rule("MatMulInteger")
def matmul_integer(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    if len(node.inputs) > 2 and any(node.inputs[2:]):
        zero = [t.graph.value(z) for z in node.inputs[2:] if z]
        if any(v is None or np.any(v) for v in zero):
            raise ModelError(f"{t.graph.source}: {node.where()}: MatMulInteger with zero points has no gradient rule")
    a, b = node.inputs[:2]
    dy = output_grad(node, dys)
    dtype = t.dtype(dy)
    # operand i's own values never enter its gradient: cast only the other one
    floats = [t.node("Cast", [x], to=dtype.onnx) if wants[1 - i] else x for i, x in enumerate((a, b))]
    terms, result, keeps = _matmul_terms(t.shape(a), t.shape(b), t.shape(node.outputs[0]))
    return _product(t, terms, result, dy, [a, b], wants, keeps, floats) + [None] * (len(node.inputs) - 2)


@rule("Gemm")
def gemm(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    a, b = node.inputs[:2]
    ta = "km" if node.attr("transA", 0) else "mk"
    tb = "nk" if node.attr("transB", 0) else "kn"
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    dy = output_grad(node, dys)
    scaled = dy if alpha == 1 else t.node("Mul", [dy, t.const(np.asarray(alpha), t.dtype(dy), "alpha")])
    grads = [_grad_einsum(t, [ta, tb], "mn", scaled, [a, b], i) if wants[i] else None for i in range(2)]
    if len(node.inputs) > 2 and node.inputs[2]:
        c = dy if beta == 1 else t.node("Mul", [dy, t.const(np.asarray(beta), t.dtype(dy), "beta")])
        grads.append(t.sum_to(c, t.shape(node.inputs[2])) if wants[2] else None)
    return grads
