"""ArgMax and ArgMin: the int64 position of the largest (smallest) element along one axis; the first one among
equals, or the last with select_last_index. One Reduce, one comparison per input element.

Invariant: the output is the input's shape with the axis kept as 1 (keepdims, the default) or dropped.
"""
from __future__ import annotations

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Reduce
from compiler.ops.base import OpDef, fail, input_operands, normalize_axis, out, output_operand, register, require

FUNCTIONS = {"ArgMax": np.argmax, "ArgMin": np.argmin}


def arg(node: Node, x: np.ndarray) -> np.ndarray:
    axis = normalize_axis(node, int(node.attr("axis", 0)), x.ndim)
    pick = FUNCTIONS[node.op]
    if int(node.attr("select_last_index", 0)):
        # the first among equals in the flipped axis is the last one in the original order
        found = x.shape[axis] - 1 - pick(np.flip(x, axis), axis=axis)
    else:
        found = pick(x, axis=axis)
    found = np.asarray(found, dtype=np.int64)
    return np.expand_dims(found, axis) if int(node.attr("keepdims", 1)) else found


@register(*FUNCTIONS)
class ArgMaxMin(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        if not x.shape:
            raise fail(node, f"input {x.name!r} is a scalar; {node.op} needs rank >= 1")
        axis = normalize_axis(node, int(node.attr("axis", 0)), len(x.shape))
        if x.shape[axis] == 0:
            raise fail(node, f"axis {axis} of {list(x.shape)} is empty: no element to pick")
        keep = int(node.attr("keepdims", 1))
        shape = tuple(1 if i == axis else d for i, d in enumerate(x.shape) if keep or i != axis)
        return [out(node, shape, DType.int64)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [arg(node, np.asarray(args[0]))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        x = graph.tensor(node.inputs[0])
        axis = normalize_axis(node, int(node.attr("axis", 0)), len(x.shape))
        return [Reduce(name=node.name, node=node.name, op=node.op, inputs=input_operands(node, graph),
                       output=output_operand(node, graph), axes=(axis,), ops_per_element=1,
                       fn=lambda a: arg(node, np.asarray(a)))]
