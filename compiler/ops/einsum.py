"""Einsum (ONNX opset 12): a product of operands summed over the letters the output drops -> one Einsum.

Invariant: the IR Einsum's loops are the output letters in output order, then the summed letters in order of
first appearance; its MACs are the product of every letter's extent. An ellipsis stands for the same leading
axes in every operand (numpy broadcasting of size-1 axes inside it is refused, as a letter's extents must agree).
The backward pass writes weight gradients with it: dW = Einsum("btd,bte->de"), no transpose copied.
"""
from __future__ import annotations

import string

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import Axis, Einsum as IREinsum, IROp
from compiler.ops.base import OpDef, fail, operand, out, output_operand, register
from compiler.ops.matmul import accumulator


@register("Einsum")
class Einsum(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        if not ins or any(t is None for t in ins):
            raise fail(node, f"expects 1 or more inputs, got {len(ins)} (omitted inputs are not allowed)")
        if len({t.dtype for t in ins}) > 1:
            raise fail(node, "inputs must share one dtype, but " + ", ".join(f"{t.name!r} is {t.dtype.value}"
                                                                             for t in ins))
        terms, result, extents = parse(node, [t.shape for t in ins])
        return [out(node, tuple(extents[c] for c in result), ins[0].dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        terms, result, _ = parse(node, [a.shape for a in args])
        work = np.float64 if args[0].dtype == np.float64 else np.float32 if args[0].dtype.kind == "f" else np.int64
        y = np.einsum(",".join(terms) + "->" + result, *(a.astype(work) for a in args), optimize=True)
        return [np.asarray(y).astype(args[0].dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        shapes = [graph.tensor(name).shape for name in node.inputs]
        terms, result, extents = parse(node, shapes)
        summed = [c for term in terms for c in term if c not in result]
        order = list(result) + list(dict.fromkeys(summed))
        first = graph.tensor(node.inputs[0])
        return [IREinsum(name=node.name, node=node.name, op=node.op,
                         inputs=tuple(operand(graph, name) for name in node.inputs), output=output_operand(node, graph),
                         loops=tuple((c, extents[c]) for c in order),
                         in_axes=tuple(tuple(Axis.of(c) for c in term) for term in terms),
                         out_dims=tuple(result), acc=accumulator(first.dtype))]


def parse(node: Node, shapes: list[tuple[int, ...]]) -> tuple[list[str], str, dict[str, int]]:
    """(one subscript string per operand, the output's, letter -> extent), the ellipsis expanded."""
    equation = str(node.attr("equation", "")).replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if not equation or len(terms) != len(shapes):
        raise fail(node, f"equation {equation!r} names {len(terms) if equation else 0} operand(s) but the node "
                         f"has {len(shapes)} input(s)")
    spare = [c for c in string.ascii_letters if c not in equation]
    lead = max((len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes) if "..." in t), default=0)
    dots = "".join(spare[:lead])
    expanded = []
    for term, shape in zip(terms, shapes):
        if "..." in term:
            count = len(shape) - len(term.replace("...", ""))
            term = term.replace("...", dots[lead - count:] if count >= 0 else "")
        if not all(c in string.ascii_letters for c in term) or len(term) != len(shape):
            raise fail(node, f"equation {equation!r}: subscripts {term!r} do not fit an operand of shape "
                             f"{list(shape)} (one letter per axis)")
        if len(set(term)) != len(term):
            raise fail(node, f"equation {equation!r}: a letter repeated within one operand ({term!r}, a diagonal) "
                             f"is not supported")
        expanded.append(term)
    extents: dict[str, int] = {}
    for term, shape in zip(expanded, shapes):
        for c, d in zip(term, shape):
            if extents.setdefault(c, d) != d:
                raise fail(node, f"equation {equation!r}: letter {c!r} has extent {extents[c]} in one operand and "
                                 f"{d} in another; they must agree")
    if arrow:
        result = rhs.replace("...", dots)
    else:   # implicit mode: the ellipsis, then the letters that appear once, alphabetically
        once = sorted(c for c in extents if sum(t.count(c) for t in expanded) == 1 and c not in dots)
        result = dots + "".join(once)
    unknown = [c for c in result if c not in extents]
    if unknown or len(set(result)) != len(result):
        raise fail(node, f"equation {equation!r}: the output's letters must each appear once and in an input")
    return expanded, result, extents
