"""Trilu (keep the upper or lower triangle of the last two axes, from diagonal k) and EyeLike (ones on diagonal k
of a matrix shaped like the input). The diagonal offset k counts up and right from the main diagonal.

Lowering: Trilu is one Map (a row/column compare and a select per element); EyeLike depends on its input's shape
only, so it folds when small and otherwise is a fill: an input-less Map that writes the output.
Invariant: both keep the input's shape (EyeLike: rank 2); only EyeLike may change the dtype (its `dtype`).
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map
from compiler.ops.base import OpDef, fail, map_reference, out, output_operand, register, require
from compiler.ops.shapes import FOLD_LIMIT_ELEMENTS


def trilu(node: Node, x: np.ndarray, k: ArrayLike | None) -> np.ndarray:
    offset = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    return np.triu(x, offset) if int(node.attr("upper", 1)) else np.tril(x, offset)


@register("Trilu")
class Trilu(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1, 2)
        if len(x.shape) < 2:
            raise fail(node, f"input {x.name!r} has shape {list(x.shape)}; Trilu needs rank >= 2")
        if len(ins) > 1 and ins[1] is not None and (ins[1].elements != 1 or ins[1].dtype != DType.int64):
            raise fail(node, f"k ({ins[1].name!r}) must be one int64, got {ins[1].dtype.value} "
                             f"{list(ins[1].shape)}")
        return [out(node, x.shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [trilu(node, np.asarray(args[0]), args[1] if len(args) > 1 else None)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return map_reference(self, node, graph, ops_per_element=1)


def eye_dtype(node: Node, x: Tensor) -> DType:
    code = node.attr("dtype")
    return x.dtype if code is None else DType.from_onnx(int(code), f"{node.where()}: attribute dtype")


def eye(node: Node, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    return np.eye(shape[0], shape[1], int(node.attr("k", 0)), dtype=dtype.numpy)


@register("EyeLike")
class EyeLike(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        if len(x.shape) != 2:
            raise fail(node, f"input {x.name!r} has shape {list(x.shape)}; EyeLike needs rank 2")
        return [out(node, x.shape, eye_dtype(node, x))]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(args[0])
        code = node.attr("dtype")
        dtype = DType.from_numpy(x.dtype) if code is None else DType.from_onnx(int(code), node.where())
        return [eye(node, x.shape, dtype)]

    def fold_from_shapes(self, node: Node, ins: list[Tensor | None]) -> list[np.ndarray] | None:
        (x,) = require(node, ins, 1)
        if x.elements > FOLD_LIMIT_ELEMENTS:
            return None
        return [eye(node, x.shape, eye_dtype(node, x))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        x = graph.tensor(node.inputs[0])
        dtype = eye_dtype(node, x)
        # a fill: reads nothing, writes the output (its bytes are what the hardware spends)
        return [Map(name=node.name, node=node.name, op=node.op, inputs=(), output=output_operand(node, graph),
                    fn=lambda: eye(node, x.shape, dtype), ops_per_element=0)]
