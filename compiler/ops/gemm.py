"""Gemm: Y = alpha * op(A) @ op(B) + beta * C -> one Einsum over (m, n, k), plus an epilogue Map.

Invariant: the Einsum holds all M*N*K MACs; the Map (`:bias` with C, `:scale` without) exists only
when alpha != 1 or a C term is added, and counts one op per scaling or addition per output element.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import Axis, Einsum, IROp, Map, Operand, Role
from compiler.ops.base import OpDef, broadcast, fail, given, operand, out, output_operand, register, require
from compiler.ops.matmul import accumulator


@register("Gemm")
class Gemm(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        a, b = require(node, ins, 2, 3)
        m, n, _ = _dims(node, a, b)
        if a.dtype != b.dtype:
            raise fail(node, f"A is {a.dtype.value} but B is {b.dtype.value}; they must match")
        if len(ins) > 2 and ins[2] is not None:
            c = ins[2].shape
            if len(c) > 2 or broadcast(node, c, (m, n)) != (m, n):
                raise fail(node, f"C has shape {list(c)}, which does not broadcast to the output [{m}, {n}]")
        return [out(node, (m, n), a.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        a, b = given(node, args, 2)
        dtype = a.dtype
        work: type[np.number[Any]] = np.float64 if dtype == np.float64 else np.float32 if dtype.kind == "f" \
            else np.int64
        a = a.T if node.attr("transA", 0) else a
        b = b.T if node.attr("transB", 0) else b
        y = np.matmul(a.astype(work), b.astype(work))
        alpha, beta = _coefficients(node)
        c = args[2] if len(args) > 2 else None
        y = _epilogue(alpha, beta, y, c.astype(work) if c is not None else None)
        return [np.asarray(y).astype(dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        a, b = graph.tensor(node.inputs[0]), graph.tensor(node.inputs[1])
        m, n, k = _dims(node, a, b)
        alpha, beta = _coefficients(node)
        c_name = node.inputs[2] if len(node.inputs) > 2 and beta != 0 else ""
        result = output_operand(node, graph)
        needs_epilogue = bool(c_name) or alpha != 1
        product = Operand(f"{node.name}:acc", result.shape, result.dtype, Role.output) \
            if needs_epilogue else result
        a_axes = (Axis.of("k"), Axis.of("m")) if node.attr("transA", 0) else (Axis.of("m"), Axis.of("k"))
        b_axes = (Axis.of("n"), Axis.of("k")) if node.attr("transB", 0) else (Axis.of("k"), Axis.of("n"))
        ops: list[IROp] = [Einsum(name=node.name, node=node.name, op=node.op,
                                  inputs=(operand(graph, node.inputs[0]), operand(graph, node.inputs[1])),
                                  output=product, loops=(("m", m), ("n", n), ("k", k)),
                                  in_axes=(a_axes, b_axes), out_dims=("m", "n"), acc=accumulator(a.dtype))]
        if needs_epilogue:
            # ops per output element: one multiply for alpha != 1, for beta != 1, one add for C
            count = (alpha != 1) + (bool(c_name) and beta != 1) + bool(c_name)
            inputs: tuple[Operand, ...] = (Operand(product.tensor, product.shape, product.dtype, Role.input),)
            inputs += (operand(graph, c_name),) if c_name else ()
            ops.append(Map(name=f"{node.name}:{'bias' if c_name else 'scale'}", node=node.name, op=node.op,
                           inputs=inputs, output=result, ops_per_element=count,
                           fn=lambda y, c=None: _epilogue(alpha, beta, y, c)))
        return ops


def _coefficients(node: Node) -> tuple[float, float]:
    return float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))


def _epilogue(alpha: float, beta: float, y: np.ndarray, c: np.ndarray | None) -> np.ndarray:
    if alpha != 1:
        y = y * alpha
    if c is not None and beta != 0:
        y = y + (c * beta if beta != 1 else c)
    return y


def _dims(node: Node, a: Tensor, b: Tensor) -> tuple[int, int, int]:
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise fail(node, f"A {list(a.shape)} and B {list(b.shape)} must both be 2-D (use MatMul for "
                         f"batched products)")
    m, ka = a.shape[::-1] if node.attr("transA", 0) else a.shape
    kb, n = b.shape[::-1] if node.attr("transB", 0) else b.shape
    if ka != kb:
        raise fail(node, f"inner dimensions differ: op(A) is [{m}, {ka}], op(B) is [{kb}, {n}] "
                         f"(transA={node.attr('transA', 0)}, transB={node.attr('transB', 0)})")
    return m, n, ka
