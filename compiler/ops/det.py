"""Det: the determinant of each square matrix in the trailing two axes -> one Reduce over those axes.

Invariant: the output has the input's leading (batch) shape and float dtype; the value is numpy's LU-based
determinant, in fp32 (fp64 stays fp64), as onnxruntime's Eigen kernel factors the matrix.
"""
from __future__ import annotations

import math

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Reduce
from compiler.ops.base import OpDef, fail, input_operands, out, output_operand, register, require
from compiler.ops.batchnorm import in_work


@register("Det")
class Det(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        if not x.dtype.is_float or len(x.shape) < 2 or x.shape[-1] != x.shape[-2]:
            raise fail(node, f"input is {x.dtype.value} {list(x.shape)}; Det takes float square matrices "
                             f"[..., M, M]")
        return [out(node, x.shape[:-2], x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(args[0])
        return [np.asarray(np.linalg.det(in_work(x))).astype(x.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        rank = len(graph.tensor(node.inputs[0]).shape)
        rows = graph.tensor(node.inputs[0]).shape[-1]
        # LU factorisation: about 2/3 M^3 multiply-adds per matrix, i.e. 2M/3 per input element, and the product of
        # the pivots; counted as ceil(2M/3) ops per element, at least 1.
        return [Reduce(name=node.name, node=node.name, op=node.op, inputs=input_operands(node, graph),
                       output=output_operand(node, graph), axes=(rank - 2, rank - 1),
                       ops_per_element=max(1, math.ceil(2 * rows / 3)),
                       fn=lambda a: self.reference(node, [a])[0])]
