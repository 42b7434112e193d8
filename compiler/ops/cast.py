"""Cast and CastLike: convert element types (one Map op; a cast to the same type is a view).

Float -> int truncates toward zero and narrower ints wrap, as numpy astype and ORT's static_cast do; the narrow
types (bf16, fp8, fp4, 4- and 2-bit integers), held wider by the reference, are converted as onnx's own arrays
convert them (ml_dtypes). A cast to an fp8 format saturates by default (the `saturate` attribute, opset 19 on):
out-of-range values, infinities included, become the largest finite value, NaN stays NaN; to fp8 e8m0 (a power of
two) it rounds by `round_mode` (up by default, opset 24 on).
"""
from __future__ import annotations

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map
from compiler.ops.base import OpDef, fail, given, move_op, operand, out, output_operand, register, require
from compiler.ops.quantize import saturate as clamp_to

SATURATING = (DType.fp8, DType.fp8_e4m3fnuz, DType.fp8_e5m2, DType.fp8_e5m2fnuz)   # ONNX's `saturate` applies
ROUND_MODES = ("up", "down", "nearest")


def convert(x: np.ndarray, dtype: DType, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """Values of `x` as `dtype` holds them (narrow floats rounded to nearest even, narrow ints as ml_dtypes
    converts them: int4 wrapped to [-8, 7] from integers)."""
    x = np.asarray(x)
    if dtype == DType.fp8_e8m0:
        from onnx.numpy_helper import to_float8e8m0     # onnx (~1 s with ml_dtypes) only for this rare type

        return to_float8e8m0(x.astype(np.float32), saturate, round_mode).astype(np.float32)
    if dtype in SATURATING:
        return clamp_to(x.astype(np.float32), dtype, clip=saturate)
    if dtype.narrow is not None:
        with np.errstate(over="ignore", invalid="ignore"):
            wide = x.astype(np.float32) if dtype.is_float else x
            return wide.astype(dtype.narrow).astype(dtype.numpy)
    if dtype == DType.bool:
        result: np.ndarray = x != 0
        return result
    with np.errstate(invalid="ignore"):   # NaN -> int is undefined in ONNX too
        return x.astype(dtype.numpy)


def _options(node: Node) -> tuple[bool, str]:
    """The cast's `saturate` and `round_mode` attributes (their defaults before the opsets that added them)."""
    mode = node.attr("round_mode", "up")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in ROUND_MODES:
        raise fail(node, f"round_mode {mode!r}: choose among {', '.join(ROUND_MODES)}")
    return bool(node.attr("saturate", 1)), mode


def _target(node: Node, like: DType | None) -> DType:
    if node.op == "CastLike" and like is not None:
        return like
    to = node.attr("to")
    if to is None:
        raise fail(node, "attribute 'to' (the target element type) is missing")
    return DType.from_onnx(int(to), node.where())


@register("Cast", "CastLike")
class Cast(OpDef):
    type_inputs = (1,)     # CastLike's `like`: a Cast of a constant folds whatever computes the `like`

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        tensors = require(node, ins, 2 if node.op == "CastLike" else 1)
        like = tensors[1].dtype if node.op == "CastLike" else None
        node.resolved["to"] = _target(node, like)      # CastLike's: an fp8 `like` is held in float32 at run time
        return [out(node, tensors[0].shape, node.resolved["to"])]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        to = node.resolved.get("to")
        if to is None:
            to = _target(node, DType.from_numpy(np.asarray(args[1]).dtype) if node.op == "CastLike" else None)
        return [convert(given(node, args, 1)[0], to, *_options(node))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        source = graph.tensor(node.inputs[0]).dtype
        target = graph.tensor(node.outputs[0]).dtype
        data = (operand(graph, node.inputs[0]),)   # CastLike's second input only names the type
        options = _options(node)
        if source == target:
            return [move_op(node, graph, lambda x: x, view=True, inputs=data)]
        return [Map(name=node.name, node=node.name, op=node.op, inputs=data,
                    output=output_operand(node, graph), fn=lambda x: convert(x, target, *options), ops_per_element=1)]
