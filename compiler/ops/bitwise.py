"""BitShift and BitwiseNot on unsigned and signed integers, each one Map (BitwiseAnd/Or/Xor live in elementwise.py).

Invariant: the output has the broadcast shape and the inputs' integer dtype. BitShift takes unsigned integers, and
from opset 28 signed ones too (a right shift then sign-extends); a shift by a negative amount or by the type's width
or more gives what the sign fill alone gives: -1 for a right shift of a negative x, 0 otherwise.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, broadcast, fail, given, map_op, out, register, require

DIRECTIONS = ("LEFT", "RIGHT")
SIGNED_SHIFT_OPSET = 28


def _integer(node: Node, t: Tensor) -> None:
    if t.dtype.is_float or t.dtype in (DType.bool, DType.ternary, DType.int4):
        raise fail(node, f"input {t.name!r} must have an integer dtype, got {t.dtype.value}")


def _shift(node: Node) -> Callable[[ArrayLike, ArrayLike], np.ndarray]:
    direction = node.attr("direction")

    def shift(values: ArrayLike, amounts: ArrayLike) -> np.ndarray:
        x, amount = np.asarray(values), np.asarray(amounts)
        bits = x.dtype.itemsize * 8
        within = (amount >= 0) & (amount < bits) if amount.dtype.kind == "i" else amount < bits
        safe = np.where(within, amount, 0).astype(x.dtype)
        if direction == "LEFT":
            shifted: np.ndarray = np.where(within, np.left_shift(x, safe), x.dtype.type(0))
            return shifted.astype(x.dtype)
        fill = np.where(x < 0, x.dtype.type(-1), x.dtype.type(0)) if x.dtype.kind == "i" else x.dtype.type(0)
        shifted_right: np.ndarray = np.where(within, np.right_shift(x, safe), fill)
        return shifted_right.astype(x.dtype)
    return shift


@register("BitShift")
class BitShift(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, shift = require(node, ins, 2)
        direction = node.attr("direction")
        if direction not in DIRECTIONS:
            raise fail(node, f"attribute direction={direction!r} is not allowed ('LEFT' or 'RIGHT')")
        for t in (x, shift):
            _integer(node, t)
            if t.dtype.numpy.kind == "i" and graph.opset < SIGNED_SHIFT_OPSET:
                raise fail(node, f"input {t.name!r} is {t.dtype.value}; BitShift takes unsigned integers before "
                                 f"opset {SIGNED_SHIFT_OPSET} (this model is opset {graph.opset})")
        if x.dtype != shift.dtype:
            raise fail(node, f"inputs must share one dtype, but {x.name!r} is {x.dtype.value} and "
                             f"{shift.name!r} is {shift.dtype.value}")
        return [out(node, broadcast(node, x.shape, shift.shape), x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [_shift(node)(*given(node, args, 2))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return map_op(node, graph, _shift(node), 1)   # one shift per element


@register("BitwiseNot")
class BitwiseNot(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        _integer(node, x)
        return [out(node, x.shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [np.invert(np.asarray(args[0]))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return map_op(node, graph, np.invert, 1)     # one not per element
