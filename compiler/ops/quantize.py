"""QuantizeLinear, DequantizeLinear (per tensor, per axis, per block; 16-, 8-, 4- and 2-bit integers, the fp8
formats and fp4, as far as compiler.dtypes names them) and DynamicQuantizeLinear: the scale-and-round steps of
quantized models, each a priced Map (or Reduce).

Invariant: q = saturate(round_half_even(x / scale) + zero_point) and x' = (q - zero_point) * scale, computed
in float32 as onnxruntime does; the Map's function is a `Quantize` or `Dequantize` object, so the QDQ pass
(compiler/passes/qdq.py) reads the scale axis, block and dtypes from the IR without the graph.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map, Operand, Reduce, Role
from compiler.ops.base import OpDef, fail, given, input_operands, normalize_axis, out, output_operand, register

# The range each quantized integer type saturates to, and the quantized floats, which saturate to their largest
# finite value (DType.narrow, their ml_dtypes type, is read only when a value is converted: ml_dtypes takes ~1 s to
# import). Only the types compiler.dtypes defines take part.
_INTEGERS = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535),
             "int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}
_FLOATS = ("fp8", "fp8_e4m3fnuz", "fp8_e5m2", "fp8_e5m2fnuz", "fp4")
RANGES = {DType[name]: span for name, span in _INTEGERS.items() if name in DType.__members__}
NARROW_FLOATS = frozenset(DType[name] for name in _FLOATS if name in DType.__members__)
QUANTIZED = tuple(RANGES) + tuple(NARROW_FLOATS)
SCALES = (DType.fp32, DType.fp16, DType.bf16)
# Ops per element: QuantizeLinear divides, rounds, adds the zero point and clamps (an fp8 cast rounds and
# clamps in one: 2); DequantizeLinear subtracts the zero point and multiplies.
QUANTIZE_OPS, FP8_QUANTIZE_OPS, DEQUANTIZE_OPS = 4, 2, 2


def expand(scale: np.ndarray, shape: tuple[int, ...], axis: int, block: int) -> np.ndarray:
    """A scale (or zero point) broadcastable against `shape`: a scalar as is, a 1-D one along `axis`, a
    blocked one (same rank, axis divided in blocks of `block`) repeated over each block."""
    scale = np.asarray(scale)
    if scale.size == 1 and block == 0:
        return scale.reshape(())
    if block:
        return np.repeat(scale, block, axis=axis)[tuple(slice(0, d) for d in shape)]
    return scale.reshape([-1 if i == axis else 1 for i in range(len(shape))])


def saturate(values: np.ndarray, dtype: DType, clip: bool = True) -> np.ndarray:
    """float32 values as `dtype` holds them: integers rounded half to even and clamped; a narrow float rounded to
    nearest even, clamped to its largest finite value when `clip`, else out of range goes to its infinity or
    NaN (e4m3fn has no infinity) as the cast gives."""
    if dtype in NARROW_FLOATS:
        import ml_dtypes

        kind = dtype.narrow
        if clip:
            top = float(ml_dtypes.finfo(kind).max)  # type: ignore[no-untyped-call]
            values = np.clip(values, -top, top)
        with np.errstate(over="ignore", invalid="ignore"):
            return values.astype(kind).astype(np.float32)
    lo, hi = RANGES[dtype]
    rounded: np.ndarray = np.clip(np.rint(values), lo, hi)
    return rounded.astype(dtype.numpy)


@dataclass(frozen=True)
class Quantize:
    """q = saturate(round(x / scale) + zero_point) into `dtype`, scales along `axis` (blocks of `block`)."""

    axis: int
    block: int
    dtype: DType
    clip: bool = True

    def __call__(self, x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None) -> np.ndarray:
        x = np.asarray(x)
        scaled = x.astype(np.float32) / expand(scale, x.shape, self.axis, self.block).astype(np.float32)
        if self.dtype in NARROW_FLOATS:
            return saturate(scaled, self.dtype, self.clip)
        q = np.rint(scaled)
        if zero_point is not None:
            q = q + expand(zero_point, x.shape, self.axis, self.block).astype(np.float32)
        return saturate(q, self.dtype)


@dataclass(frozen=True)
class Dequantize:
    """x' = (q - zero_point) * scale in `dtype` (the scale's), scales along `axis` (blocks of `block`)."""

    axis: int
    block: int
    source: DType
    dtype: DType

    def __call__(self, q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None) -> np.ndarray:
        q = np.asarray(q)
        if self.source.is_float:
            centered = q.astype(np.float32)
        else:
            centered = q.astype(np.int64)
            if zero_point is not None:
                centered = centered - expand(zero_point, q.shape, self.axis, self.block).astype(np.int64)
            centered = centered.astype(np.float32)
        scale = expand(scale, q.shape, self.axis, self.block).astype(np.float32)
        scaled: np.ndarray = centered * scale
        return scaled.astype(self.dtype.numpy)


def _quantized_dtype(node: Node, ins: list[Tensor | None]) -> DType:
    """QuantizeLinear's output type: the zero point's, else output_dtype, else uint8."""
    declared = int(node.attr("output_dtype", 0))
    zero_point = ins[2] if len(ins) > 2 else None
    named = DType.from_onnx(declared, node.where()) if declared else None
    if zero_point is not None:
        if named is not None and named != zero_point.dtype:
            raise fail(node, f"output_dtype {named.value} differs from the zero point's type "
                             f"{zero_point.dtype.value}; they must agree")
        return zero_point.dtype
    return named or DType.uint8


def _layout(node: Node, x: Tensor, scale: Tensor, zero_point: Tensor | None, graph: Graph) -> tuple[int, int]:
    """(axis, block) after checking the scale's and zero point's shapes against the data's."""
    rank = len(x.shape)
    block = int(node.attr("block_size", 0))
    if block < 0:
        raise fail(node, f"block_size {block} must be 0 (per tensor or per axis) or positive")
    if block and graph.opset < 21:
        raise fail(node, f"block_size needs opset 21 (this model is opset {graph.opset})")
    per_tensor = scale.shape in ((), (1,)) and not block
    axis = 0 if per_tensor else normalize_axis(node, int(node.attr("axis", 1)), rank)
    if block:
        want = tuple(-(-d // block) if i == axis else d for i, d in enumerate(x.shape))
        if scale.shape != want:
            raise fail(node, f"with block_size {block} along axis {axis} the scale must have shape {list(want)}, "
                             f"got {list(scale.shape)}")
    elif scale.shape not in ((), (1,)):
        if len(scale.shape) != 1 or not rank or scale.shape[0] != x.shape[axis]:
            size = x.shape[axis] if rank else 1
            raise fail(node, f"scale has shape {list(scale.shape)}; allowed: a scalar, [1], or [{size}] along "
                             f"axis {axis} of the input {list(x.shape)}")
        if graph.opset < 13:
            raise fail(node, f"a per-axis scale needs opset 13 (this model is opset {graph.opset})")
    if scale.dtype not in SCALES:
        raise fail(node, f"scale is {scale.dtype.value}; allowed: {', '.join(d.value for d in SCALES)}")
    if zero_point is not None and zero_point.shape != scale.shape and not (
            per_tensor and zero_point.shape in ((), (1,))):
        raise fail(node, f"zero point has shape {list(zero_point.shape)}, the scale {list(scale.shape)}; "
                         f"they must match")
    return axis, block


def _inputs(node: Node, ins: list[Tensor | None]) -> tuple[Tensor, Tensor, Tensor | None]:
    if len(ins) < 2 or len(ins) > 3 or ins[0] is None or ins[1] is None:
        raise fail(node, f"expects 2 or 3 inputs (x, scale, zero point), got {len(ins)}")
    return ins[0], ins[1], ins[2] if len(ins) > 2 else None


@register("QuantizeLinear")
class QuantizeLinear(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, scale, zero_point = _inputs(node, ins)
        if not x.dtype.is_float and x.dtype != DType.int32:
            raise fail(node, f"input is {x.dtype.value}; QuantizeLinear takes a float (or int32) tensor")
        axis, block = _layout(node, x, scale, zero_point, graph)
        dtype = _quantized_dtype(node, ins)
        if dtype not in QUANTIZED:
            raise fail(node, f"output type {dtype.value} is not a quantized type; allowed: "
                             f"{', '.join(d.value for d in QUANTIZED)}")
        if dtype in NARROW_FLOATS and graph.opset < 19:
            raise fail(node, f"{dtype.value} output needs opset 19 (this model is opset {graph.opset})")
        # the reference sees narrow zero points (int4, fp8) in wider holders (int8, float32): the dtype is resolved here
        node.resolved["fn"] = Quantize(axis, block, dtype, bool(node.attr("saturate", 1)))
        return [out(node, x.shape, dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [node.resolved["fn"](*args)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        q = node.resolved["fn"]
        return [Map(name=node.name, node=node.name, op=node.op, inputs=input_operands(node, graph),
                    output=output_operand(node, graph), fn=q,
                    ops_per_element=FP8_QUANTIZE_OPS if q.dtype in NARROW_FLOATS else QUANTIZE_OPS)]


@register("DequantizeLinear")
class DequantizeLinear(OpDef):
    # Never folded at import, even over constants (a quantized bias): the QDQ pass reads the stored integers
    # and their scale from the Map, and removes it where it folds the pattern.
    foldable = False

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, scale, zero_point = _inputs(node, ins)
        if x.dtype not in QUANTIZED + (DType.int32,):
            raise fail(node, f"input is {x.dtype.value}; allowed: "
                             f"{', '.join(d.value for d in QUANTIZED + (DType.int32,))}")
        if zero_point is not None and zero_point.dtype != x.dtype:
            raise fail(node, f"zero point is {zero_point.dtype.value} but the input is {x.dtype.value}; "
                             f"they must match")
        axis, block = _layout(node, x, scale, zero_point, graph)
        declared = int(node.attr("output_dtype", 0))
        dtype = DType.from_onnx(declared, node.where()) if declared else scale.dtype
        node.resolved["fn"] = Dequantize(axis, block, x.dtype, dtype)
        return [out(node, x.shape, dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [node.resolved["fn"](*args)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return [Map(name=node.name, node=node.name, op=node.op, inputs=input_operands(node, graph),
                    output=output_operand(node, graph), fn=node.resolved["fn"], ops_per_element=DEQUANTIZE_OPS)]


# -- DynamicQuantizeLinear: uint8 with a scale and zero point computed from the tensor's own range -------

def dynamic_range(x: np.ndarray) -> np.ndarray:
    """[min(0, min x), max(0, max x)]: the range DynamicQuantizeLinear maps onto 0..255."""
    x = np.asarray(x, dtype=np.float32)
    return np.array([min(0.0, float(x.min())), max(0.0, float(x.max()))], dtype=np.float32)


def dynamic_scale(span: np.ndarray) -> np.ndarray:
    """A float32 scalar (numpy scalars stand in for 0-d arrays here and below)."""
    return cast(np.ndarray, np.float32((np.float32(span[1]) - np.float32(span[0])) / np.float32(255.0)))


def dynamic_zero_point(span: np.ndarray) -> np.ndarray:
    scale = dynamic_scale(span)
    if scale == 0:
        return cast(np.ndarray, np.uint8(0))
    return cast(np.ndarray, np.uint8(np.clip(np.rint(np.float32(0.0) - np.float32(span[0]) / scale), 0, 255)))


def _dynamic_quantize(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray) -> np.ndarray:
    if scale == 0:
        return np.full(np.shape(x), zero_point, dtype=np.uint8)
    return Quantize(0, 0, DType.uint8)(x, scale, zero_point)


@register("DynamicQuantizeLinear")
class DynamicQuantizeLinear(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        if len(ins) != 1 or ins[0] is None:
            raise fail(node, f"expects 1 input, got {len(ins)}")
        if len(node.outputs) != 3:
            raise fail(node, f"has {len(node.outputs)} outputs; DynamicQuantizeLinear gives 3 (y, y_scale, "
                             f"y_zero_point)")
        x = ins[0]
        if x.dtype != DType.fp32:
            raise fail(node, f"input is {x.dtype.value}; DynamicQuantizeLinear takes fp32")
        return [out(node, x.shape, DType.uint8, 0), out(node, (), DType.fp32, 1), out(node, (), DType.uint8, 2)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        (x,) = given(node, args, 1)
        span = dynamic_range(x)
        scale, zero_point = dynamic_scale(span), dynamic_zero_point(span)
        return [_dynamic_quantize(x, scale, zero_point), scale, zero_point]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        # A min and a max over every element, a few scalar ops for the scale and zero point, then a
        # quantizing pass over the tensor: the tensor is read twice.
        x = input_operands(node, graph)[0]
        span = Operand(f"{node.name}:range", (2,), DType.fp32, Role.output)
        scale, zero_point = output_operand(node, graph, 1), output_operand(node, graph, 2)
        as_input = [Operand(o.tensor, o.shape, o.dtype, Role.input) for o in (span, scale, zero_point)]
        return [
            Reduce(name=f"{node.name}:range", node=node.name, op=node.op, inputs=(x,), output=span,
                   axes=tuple(range(len(x.shape))), ops_per_element=2, fn=dynamic_range),
            Map(name=f"{node.name}:scale", node=node.name, op=node.op, inputs=(as_input[0],), output=scale,
                fn=dynamic_scale, ops_per_element=2),
            Map(name=f"{node.name}:zero_point", node=node.name, op=node.op, inputs=(as_input[0],),
                output=zero_point, fn=dynamic_zero_point, ops_per_element=4),
            Map(name=f"{node.name}:quantize", node=node.name, op=node.op, inputs=(x, as_input[1], as_input[2]),
                output=output_operand(node, graph, 0), fn=_dynamic_quantize, ops_per_element=QUANTIZE_OPS),
        ]
