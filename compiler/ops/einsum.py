"""Einsum (ONNX opset 12): any equation numpy.einsum accepts (explicit or implicit output, ellipses, size-1 axes that
broadcast, a letter repeated within one operand for a diagonal or a trace).

Lowering: a product of two or more operands is one IR Einsum, whose loops are the output letters in output order,
then the summed letters in order of first appearance, and whose MACs are the product of every letter's extent. Before
it, an operand with a repeated letter has its diagonal copied out (a Move reading the diagonal only), and an operand's
size-1 axes that broadcast are dropped (a view). One operand is no product: its summed letters are a Reduce, and a
letter order the output changes is a transpose (a Move); an equation that only renames letters is a view.
`parse` keeps the strict form (one extent per letter, no repeats) that the gradient rules and layouts build on;
`parse_general` is the numpy form.
"""
from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import Axis, Einsum as IREinsum, IROp, Move, Operand, Reduce, Role
from compiler.ops.base import OpDef, fail, given, operand, out, output_operand, register
from compiler.ops.matmul import accumulator


@register("Einsum")
class Einsum(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        tensors = [t for t in ins if t is not None]
        if not ins or len(tensors) != len(ins):
            raise fail(node, f"expects 1 or more inputs, got {len(ins)} (omitted inputs are not allowed)")
        if len({t.dtype for t in tensors}) > 1:
            raise fail(node, "inputs must share one dtype, but " + ", ".join(f"{t.name!r} is {t.dtype.value}"
                                                                             for t in tensors))
        equation = parse_general(node, [t.shape for t in tensors])
        return [out(node, equation.output_shape, tensors[0].dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        arrays = given(node, args, len(args))
        equation = parse_general(node, [a.shape for a in arrays])
        first = arrays[0].dtype
        work: type[np.number[Any]] = np.float64 if first == np.float64 else np.float32 if first.kind == "f" \
            else np.int64
        y = np.einsum(",".join(equation.terms) + "->" + equation.result, *(a.astype(work) for a in arrays),
                      optimize=len(arrays) > 2)
        return [np.asarray(y).astype(first)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        equation = parse_general(node, [graph.tensor(name).shape for name in node.inputs])
        ops: list[IROp] = []
        operands, terms = [], []
        for i in range(len(node.inputs)):
            op, source, term = _plain_operand(node, graph, equation, i)
            ops += [op] if op else []
            operands.append(source)
            terms.append(term)
        y = output_operand(node, graph)
        if len(operands) == 1:
            return ops + _lower_single(node, operands[0], terms[0], equation.result, y)
        summed = [c for term in terms for c in term if c not in equation.result]
        order = list(equation.result) + list(dict.fromkeys(summed))
        ops.append(IREinsum(name=node.name, node=node.name, op=node.op, inputs=tuple(operands), output=y,
                            loops=tuple((c, equation.extents[c]) for c in order),
                            in_axes=tuple(tuple(Axis.of(c) for c in term) for term in terms),
                            out_dims=tuple(equation.result), acc=accumulator(operands[0].dtype)))
        return ops


@dataclass(frozen=True)
class Equation:
    terms: list[str]             # one subscript string per operand, the ellipsis expanded into spare letters
    result: str                  # the output's subscripts
    extents: dict[str, int]      # letter -> extent (the largest where size-1 axes broadcast)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return tuple(self.extents[c] for c in self.result)


def parse(node: Node, shapes: list[tuple[int, ...]]) -> tuple[list[str], str, dict[str, int]]:
    """(one subscript string per operand, the output's, letter -> extent), the ellipsis expanded; refuses what a
    plain product cannot be: a letter repeated within one operand, a size-1 axis broadcast against a larger one."""
    equation = parse_general(node, shapes)
    text = _text(node)
    for term, shape in zip(equation.terms, shapes):
        if len(set(term)) != len(term):
            raise fail(node, f"equation {text!r}: a letter repeated within one operand ({term!r}, a diagonal) "
                             f"is not supported here")
        for c, d in zip(term, shape):
            if d != equation.extents[c]:
                raise fail(node, f"equation {text!r}: letter {c!r} has extent {d} in one operand and "
                                 f"{equation.extents[c]} in another; they must agree here")
    return equation.terms, equation.result, equation.extents


def parse_general(node: Node, shapes: list[tuple[int, ...]]) -> Equation:
    """The equation as numpy.einsum reads it: size-1 axes broadcast, repeated letters take a diagonal."""
    equation = _text(node)
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
            term = term.replace("...", dots[lead - count:] if count >= 0 else "", 1)
        if not all(c in string.ascii_letters for c in term) or len(term) != len(shape):
            raise fail(node, f"equation {equation!r}: subscripts {term!r} do not fit an operand of shape "
                             f"{list(shape)} (one letter per axis, letters a-z and A-Z, at most one ellipsis)")
        expanded.append(term)
    extents: dict[str, int] = {}
    for term, shape in zip(expanded, shapes):
        for c, d in zip(term, shape):
            known = extents.setdefault(c, d)
            if known != d and 1 not in (known, d):
                raise fail(node, f"equation {equation!r}: letter {c!r} has extent {known} in one place and {d} "
                                 f"in another; they must agree (or one be 1, which broadcasts)")
            extents[c] = max(known, d)
    for term, shape in zip(expanded, shapes):   # a diagonal takes equal extents (numpy does not broadcast there)
        for c in {c for c in term if term.count(c) > 1}:
            sizes = {d for t, d in zip(term, shape) if t == c}
            if len(sizes) > 1:
                raise fail(node, f"equation {equation!r}: letter {c!r} repeats in {term!r} over axes of different "
                                 f"extents {sorted(sizes)}; a diagonal needs them equal")
    if arrow:
        if rhs.count("...") > 1:
            raise fail(node, f"equation {equation!r}: the output has more than one ellipsis")
        result = rhs.replace("...", dots)
    else:   # implicit mode: the ellipsis, then the letters that appear once, alphabetically
        once = sorted(c for c in extents if sum(t.count(c) for t in expanded) == 1 and c not in dots)
        result = dots + "".join(once)
    unknown = [c for c in result if c not in extents]
    if unknown or len(set(result)) != len(result):
        raise fail(node, f"equation {equation!r}: the output's letters must each appear once and in an input")
    return Equation(expanded, result, extents)


def _text(node: Node) -> str:
    return str(node.attr("equation", "")).replace(" ", "")


def _plain_operand(node: Node, graph: Graph, equation: Equation, i: int) -> tuple[IROp | None, Operand, str]:
    """Operand i with one letter per axis and no size-1 axis that broadcasts: the op making it (a diagonal's copy,
    or a view dropping broadcast axes; None when the operand is plain already), the operand, and its subscripts."""
    source = operand(graph, node.inputs[i])
    term = equation.terms[i]
    shape = source.shape
    letters = "".join(dict.fromkeys(c for c, d in zip(term, shape) if d == equation.extents[c]))
    if letters == term:
        return None, source, term
    diagonal = len(set(term)) != len(term)
    kept = tuple(equation.extents[c] for c in letters)
    made = Operand(f"{node.name}:{i}@{'diagonal' if diagonal else 'broadcast'}", kept, source.dtype, Role.output)
    squeeze = tuple(a for a, (c, d) in enumerate(zip(term, shape)) if d != equation.extents[c])
    subscripts = "".join(c for a, c in enumerate(term) if a not in squeeze) + "->" + letters

    def take(a: np.ndarray) -> np.ndarray:
        taken: np.ndarray = np.einsum(subscripts, np.asarray(a).squeeze(axis=squeeze)).copy()
        return taken
    op = Move(name=made.tensor, node=node.name, op=node.op, inputs=(source,), output=made, view=not diagonal,
              fn=take)
    # a weight seen through a view is still a weight; a diagonal's copy is an intermediate
    return op, Operand(made.tensor, kept, source.dtype, Role.input if diagonal else source.role), letters


def _lower_single(node: Node, x: Operand, term: str, result: str, y: Operand) -> list[IROp]:
    """One operand: sum its letters the output drops (a Reduce), then order the rest as the output (a Move)."""
    summed = tuple(a for a, c in enumerate(term) if c not in result)
    kept = "".join(c for c in term if c in result)
    permutation = tuple(kept.index(c) for c in result)
    ops: list[IROp] = []
    if summed:
        work = np.float64 if y.dtype.numpy == np.float64 else np.float32 if y.dtype.is_float else np.int64
        kept_shape = tuple(d for a, d in enumerate(x.shape) if a not in summed)
        reduced = y if kept == result else Operand(f"{node.name}:summed", kept_shape, y.dtype, Role.output)
        # one add per element of the operand
        ops.append(Reduce(name=node.name if reduced is y else reduced.tensor, node=node.name, op=node.op,
                          inputs=(x,), output=reduced, axes=summed, ops_per_element=1,
                          fn=lambda a: np.asarray(a).astype(work).sum(axis=summed).astype(y.dtype.numpy)))
        if kept == result:
            return ops
        x = Operand(reduced.tensor, reduced.shape, reduced.dtype, Role.input)
    ops.append(Move(name=node.name, node=node.name, op=node.op, inputs=(x,), output=y,
                    view=permutation == tuple(range(len(permutation))),
                    fn=lambda a: np.transpose(np.asarray(a), permutation).copy()))
    return ops
