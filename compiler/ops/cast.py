"""Cast and CastLike: convert element types (one Map op; a cast to the same type is a view).

Float -> int truncates toward zero and narrower ints wrap, as numpy astype and ORT's static_cast do;
bf16 and fp8, held in float32 by the reference, are rounded to their own precision.
"""
from __future__ import annotations

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map
from compiler.ops.base import OpDef, fail, move_op, operand, out, output_operand, register, require


def convert(x: np.ndarray, dtype: DType) -> np.ndarray:
    """Values of `x` as `dtype` holds them (bf16/fp8 rounded to nearest even, int4 wrapped to [-8, 7])."""
    x = np.asarray(x)
    if dtype in (DType.bf16, DType.fp8):
        import ml_dtypes  # installed with onnx; only these two narrow floats need it

        narrow = ml_dtypes.bfloat16 if dtype == DType.bf16 else ml_dtypes.float8_e4m3fn
        return x.astype(np.float32).astype(narrow).astype(np.float32)
    if dtype == DType.int4:
        return ((x.astype(np.int64) + 8) % 16 - 8).astype(np.int8)
    if dtype == DType.bool:
        return x != 0
    with np.errstate(invalid="ignore"):   # NaN -> int is undefined in ONNX too
        return x.astype(dtype.numpy)


def _target(node: Node, like: DType | None) -> DType:
    if node.op == "CastLike":
        return like
    to = node.attr("to")
    if to is None:
        raise fail(node, "attribute 'to' (the target element type) is missing")
    return DType.from_onnx(int(to), node.where())


@register("Cast", "CastLike")
class Cast(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        require(node, ins, 2 if node.op == "CastLike" else 1)
        like = ins[1].dtype if node.op == "CastLike" else None
        return [out(node, ins[0].shape, _target(node, like))]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        like = DType.from_numpy(np.asarray(args[1]).dtype) if node.op == "CastLike" else None
        return [convert(args[0], _target(node, like))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        source = graph.tensor(node.inputs[0]).dtype
        target = graph.tensor(node.outputs[0]).dtype
        data = (operand(graph, node.inputs[0]),)   # CastLike's second input only names the type
        if source == target:
            return [move_op(node, graph, lambda x: x, view=True, inputs=data)]
        return [Map(name=node.name, node=node.name, op=node.op, inputs=data,
                    output=output_operand(node, graph), fn=lambda x: convert(x, target), ops_per_element=1)]
