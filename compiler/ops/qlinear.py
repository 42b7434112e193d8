"""QLinearConv, QLinearMatMul and ConvInteger: integer Einsums over int8/uint8 data, with the zero points and the
requantisation (QLinear*) as priced epilogue Maps. The QDQ pass (compiler/passes/qdq.py) builds the same ops.

Invariant: the Einsum multiplies the stored 8-bit values (the MXU's int8 path). A weight zero point is
subtracted first (a Map, int16), as is a data zero point when the weights are not known at compile time; a data
zero point with known weights is instead padded in (a Move, only where the window reads outside the input) and
corrected after the sum by zx * sum(w) per output channel: sum (x - zx) w = sum x w - zx sum w. Requantisation
matches onnxruntime's: q = saturate(round_half_even(float32(acc + bias) * (sx * sw / sy)) + zy).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import cast

import numpy as np

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.graph import Graph, Node, Tensor
from compiler.ir import Axis, Einsum, IROp, Map, Move, Operand, Role
from compiler.ops.base import OpDef, fail, given, operand, optional, out, output_operand, register
from compiler.ops.conv import conv_einsum, conv_shape, convolve
from compiler.ops.matmul import matmul_einsum, matmul_shape
from compiler.ops.quantize import NARROW_FLOATS, RANGES, Quantize, saturate

DATA = (DType.int8, DType.uint8)
# Epilogue ops per output element: multiply by the combined scale, round and add the output zero point, clamp;
# one more add when a bias or a zero-point correction is folded into the accumulator first.
REQUANTIZE_OPS = 3


@dataclass(frozen=True, eq=False)
class Requantize:
    """An int32 (or fp8 models' fp32) accumulator to `dtype`: the Map inputs after the accumulator are named by
    `roles` (x_scale, x_zero_point, w_scale, y_scale, y_zero_point, bias; bias_float with an fp32 accumulator).
    Per-channel weight scales and the bias run along output axis `channel`; a per-row data scale or zero point
    (QLinearMatMul's A) along the second-to-last axis. With an x_zero_point, `weight_sums` (broadcastable to the
    output; None in a shape-only model) times it is subtracted: the correction for data that was not centered
    (the hardware folds it into the bias: K values).
    `relu` clamps at the output zero point (a Relu folded in by the QDQ pass)."""

    roles: tuple[str, ...]
    dtype: DType
    channel: int
    weight_sums: np.ndarray | None = field(default=None, repr=False)
    relu: bool = False
    accumulator: DType = DType.int32

    def __call__(self, acc: np.ndarray, *arrays: np.ndarray) -> np.ndarray:
        given = dict(zip(self.roles, arrays))
        rank = acc.ndim
        if np.asarray(acc).dtype.kind == "f":   # fp8 products summed in fp32: scale, bias, quantize as floats
            scale = rows(given["x_scale"], rank).astype(np.float32) * along(given["w_scale"], self.channel, rank)
            y = np.asarray(acc, np.float32) * scale.astype(np.float32)
            if "bias_float" in given:
                y = y + along(given["bias_float"], self.channel, rank).astype(np.float32)
            y = np.maximum(y, 0) if self.relu else y
            return Quantize(0, 0, self.dtype)(y, given["y_scale"], given.get("y_zero_point"))
        total = np.asarray(acc).astype(np.int64)
        if "bias" in given:
            total = total + along(given["bias"], self.channel, rank).astype(np.int64)
        if "x_zero_point" in given:
            if self.weight_sums is None:   # a shape-only model: simulation never computes values
                raise ModelError("the zero-point correction needs the weights' values, which were not loaded "
                                 "(load the model with its weights to evaluate it)")
            total = total - rows(given["x_zero_point"], rank).astype(np.int64) * self.weight_sums
        scale = rows(given["x_scale"], rank).astype(np.float32) * along(given["w_scale"], self.channel, rank)
        y = total.astype(np.float32) * (scale.astype(np.float32) / np.float32(np.asarray(given["y_scale"])))
        if self.dtype in NARROW_FLOATS:
            return saturate(np.maximum(y, 0) if self.relu else y, self.dtype)
        zero = int(np.asarray(given.get("y_zero_point", 0)).reshape(-1)[0])
        lo, hi = RANGES[self.dtype]
        quantized: np.ndarray = np.clip(np.rint(y) + zero, max(lo, zero) if self.relu else lo, hi)
        return quantized.astype(self.dtype.numpy)

    @property
    def ops_per_element(self) -> int:
        return REQUANTIZE_OPS + any(r in self.roles for r in ("bias", "bias_float", "x_zero_point"))


def along(values: np.ndarray, axis: int, rank: int) -> np.ndarray:
    """A scalar or 1-D per-channel array shaped to broadcast along output axis `axis` of a rank-`rank` array."""
    values = np.asarray(values)
    if values.size == 1:
        return values.reshape(())
    shape = [1] * rank
    shape[axis] = -1
    return values.reshape(shape)


def rows(values: np.ndarray, rank: int) -> np.ndarray:
    """A scalar, or a per-row (second-to-last axis) array as QLinearMatMul's A scale and zero point are."""
    return along(values, rank - 2, rank) if rank >= 2 else np.asarray(values).reshape(())


def as_input(o: Operand) -> Operand:
    return Operand(o.tensor, o.shape, o.dtype, Role.input)


def centered(name: str, node: str, op: str, source: Operand, zero_point: Operand, axis: int | None) -> Map:
    """source - zero point as int16 (int8 - int8 fits); a 1-D zero point runs along `axis` of the source."""
    result = Operand(name, source.shape, DType.int16, Role.output)
    rank = len(source.shape)

    def subtract(x: np.ndarray, zp: np.ndarray) -> np.ndarray:
        zp = np.asarray(zp).astype(np.int32)
        centred: np.ndarray = x.astype(np.int32) - (along(zp, axis, rank) if axis is not None else zp.reshape(()))
        return centred
    return Map(name=name, node=node, op=op, inputs=(source, zero_point), output=result, fn=subtract,
               ops_per_element=1)


def pad_with_zero_point(op: Einsum, zero_point: Operand) -> tuple[list[IROp], Einsum]:
    """Input 0 padded with its zero point wherever the Einsum reads outside it (a conv's border), so that the
    padding represents 0 after the correction; ([], op) when it never does."""
    x, extents = op.inputs[0], dict(op.loops)
    pads, axes = [], []
    for length, a in zip(x.shape, op.in_axes[0]):
        lo = a.offset + sum(min(0, c * (extents[d] - 1)) for d, c in a.terms)
        hi = a.offset + sum(max(0, c * (extents[d] - 1)) for d, c in a.terms)
        pads.append((max(0, -lo), max(0, hi - (length - 1))))
        axes.append(Axis(a.terms, a.offset + pads[-1][0]))
    if not any(b or e for b, e in pads):
        return [], op
    shape = tuple(n + b + e for n, (b, e) in zip(x.shape, pads))
    padded = Operand(f"{op.name}:padded", shape, x.dtype, Role.output)
    move = Move(name=f"{op.name}:pad", node=op.node, op=op.op, inputs=(x, zero_point), output=padded,
                fn=lambda a, zp: np.pad(a, pads, constant_values=np.asarray(zp).reshape(-1)[0]))
    return [move], replace(op, inputs=(as_input(padded),) + op.inputs[1:], in_axes=(tuple(axes),) + op.in_axes[1:])


def known_zero(graph: Graph, name: str) -> bool:
    value = graph.value(name) if name else None
    return not name or (value is not None and not np.any(value))


def _input(node: Node, index: int) -> str:
    return node.inputs[index] if len(node.inputs) > index else ""


@dataclass
class Product:
    """An integer Einsum and the ops before it; `corrected` when the data zero point is corrected after the sum
    (by `weight_sums`, None where the weights' values are not loaded) rather than subtracted before it."""

    ops: list[IROp]
    corrected: bool
    weight_sums: np.ndarray | None


def integer_product(node: Node, graph: Graph, x: int, x_zp: int, w: int, w_zp: int, acc: Operand,
                    conv: bool) -> Product:
    """sum (x - zx)(w - zw) as an int32 Einsum into `acc` (up to the correction by `weight_sums`)."""
    ops: list[IROp] = []
    x_op, w_op = operand(graph, node.inputs[x]), operand(graph, node.inputs[w])
    x_zp_name, w_zp_name = _input(node, x_zp), _input(node, w_zp)
    constant = node.inputs[w] in graph.weights or node.inputs[w] in graph.constants
    weights = graph.value(node.inputs[w])
    w_axis = 0 if conv else len(w_op.shape) - 1
    if not known_zero(graph, w_zp_name):
        zw = graph.value(w_zp_name)
        constant = constant and zw is not None
        ops.append(centered(f"{node.name}:w_centered", node.name, node.op, w_op, operand(graph, w_zp_name), w_axis))
        w_op = replace(as_input(ops[-1].output), role=w_op.role)
        weights = None if weights is None or zw is None else \
            weights.astype(np.int64) - along(zw, w_axis, weights.ndim).astype(np.int64)
    corrected = not known_zero(graph, x_zp_name) and constant
    if not known_zero(graph, x_zp_name) and not constant:   # weights known only at run time: center the data
        ops.append(centered(f"{node.name}:x_centered", node.name, node.op, x_op, operand(graph, x_zp_name),
                            None if conv else len(x_op.shape) - 2))
        x_op = as_input(ops[-1].output)
    sums = weight_sums(weights, conv, len(acc.shape)) if corrected and weights is not None else None
    if conv:
        product = conv_einsum(node, x_op, w_op, acc, DType.int32)
        if corrected:
            padding, product[0] = pad_with_zero_point(cast(Einsum, product[0]), operand(graph, x_zp_name))
            ops += padding
        ops += product
    else:
        ops.append(matmul_einsum(node, x_op, w_op, acc, DType.int32))
    return Product(ops, corrected, sums)


def weight_sums(weights: np.ndarray, conv: bool, rank: int, k_axis: int = -2) -> np.ndarray:
    """Per output channel, the sum of the weights over the reduction, broadcastable to the rank-`rank` output:
    conv weights [K, C, R, S] -> [K, 1, 1]; matmul B [..., k, n] -> [..., 1, n] (`k_axis`: where k is)."""
    weights = weights.astype(np.int64)
    if conv:
        per_channel: np.ndarray = weights.sum(axis=tuple(range(1, weights.ndim))).reshape((-1,) + (1,) * (rank - 2))
        return per_channel
    if weights.ndim == 1:
        total: np.ndarray = weights.sum()
        return total
    sums = weights.sum(axis=k_axis)
    return np.expand_dims(sums, -2) if weights.ndim > 2 else sums


def _check_data(node: Node, ins: list[Tensor], *indices: int) -> None:
    for i in indices:
        if ins[i].dtype not in DATA:
            raise fail(node, f"input {i} ({node.inputs[i]!r}) is {ins[i].dtype.value}; allowed: int8, uint8")


def _present(node: Node, ins: list[Tensor | None], required: int, total: int) -> list[Tensor]:
    """The `required` inputs, typed, after checking there are `required` to `total`."""
    if len(ins) < required or len(ins) > total or any(ins[i] is None for i in range(required)):
        raise fail(node, f"expects {required} to {total} inputs, got {len(ins)}")
    return [t for t in ins[:required] if t is not None]


# QLinearConv / QLinearMatMul inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point
_QROLES = {1: "x_scale", 2: "x_zero_point", 4: "w_scale", 6: "y_scale", 7: "y_zero_point", 8: "bias"}


def _requantize(node: Node, graph: Graph, product: Product, acc: Operand, channel: int) -> Map:
    indices = [i for i in sorted(_QROLES) if _input(node, i) and (i != 2 or product.corrected)]
    fn = Requantize(tuple(_QROLES[i] for i in indices), graph.tensor(node.outputs[0]).dtype, channel,
                    product.weight_sums)
    return Map(name=f"{node.name}:requantize", node=node.name, op=node.op,
               inputs=(as_input(acc),) + tuple(operand(graph, node.inputs[i]) for i in indices),
               output=output_operand(node, graph), fn=fn, ops_per_element=fn.ops_per_element)


def _reference(node: Node, args: list[np.ndarray | None], acc: np.ndarray, channel: int) -> np.ndarray:
    present = {i: a for i, a in enumerate(args) if i in _QROLES and a is not None and i != 2}
    roles = tuple(_QROLES[i] for i in sorted(present))
    dtype = DType.from_numpy(np.asarray(args[7]).dtype) if len(args) > 7 and args[7] is not None else DType.uint8
    return Requantize(roles, dtype, channel)(acc, *(present[i] for i in sorted(present)))


def _minus(x: np.ndarray, zp: np.ndarray | None, axis: int | None) -> np.ndarray:
    x = np.asarray(x).astype(np.int64)
    if zp is None:
        return x
    return x - (along(zp, axis, x.ndim) if axis is not None else np.asarray(zp).reshape(())).astype(np.int64)


@register("QLinearConv")
class QLinearConv(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        tensors = _present(node, ins, 8, 9)
        _check_data(node, tensors, 0, 3, 7)
        bias = optional(ins, 8)
        if bias is not None and bias.dtype != DType.int32:
            raise fail(node, f"bias is {bias.dtype.value}; QLinearConv's bias is int32")
        return [out(node, conv_shape(node, tensors[0], tensors[3]), tensors[7].dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x, _, x_zp, w, _, w_zp = given(node, args, 6)
        acc = convolve(node, _minus(x, x_zp, None), _minus(w, w_zp, 0), np.int64)
        return [_reference(node, args, acc, 1)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        result = output_operand(node, graph)
        acc = Operand(f"{node.name}:acc", result.shape, DType.int32, Role.output)
        product = integer_product(node, graph, 0, 2, 3, 5, acc, conv=True)
        return product.ops + [_requantize(node, graph, product, acc, 1)]


@register("QLinearMatMul")
class QLinearMatMul(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        tensors = _present(node, ins, 8, 8)
        _check_data(node, tensors, 0, 3, 7)
        return [out(node, matmul_shape(node, tensors[0].shape, tensors[3].shape), tensors[7].dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x, _, x_zp, w, _, w_zp = given(node, args, 6)
        a = _minus(x, x_zp, x.ndim - 2 if x.ndim > 1 else None)
        b = _minus(w, w_zp, w.ndim - 1)
        return [_reference(node, args, np.matmul(a, b), -1)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        result = output_operand(node, graph)
        acc = Operand(f"{node.name}:acc", result.shape, DType.int32, Role.output)
        product = integer_product(node, graph, 0, 2, 3, 5, acc, conv=False)
        return product.ops + [_requantize(node, graph, product, acc, -1)]


@register("ConvInteger")
class ConvInteger(OpDef):
    """y (int32) = conv(x - x_zero_point, w - w_zero_point); the weight zero point may be per output channel."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, w = _present(node, ins, 2, 4)
        _check_data(node, [x, w], 0, 1)
        return [out(node, conv_shape(node, x, w), DType.int32)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x_raw, w_raw = given(node, args, 2)
        x = _minus(x_raw, optional(args, 2), None)
        w = _minus(w_raw, optional(args, 3), 0)
        return [convolve(node, x, w, np.int64).astype(np.int32)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        result = output_operand(node, graph)
        raw = Operand(f"{node.name}:acc", result.shape, DType.int32, Role.output)
        product = integer_product(node, graph, 0, 2, 1, 3, raw, conv=True)
        if not product.corrected:
            return [replace_output(op, raw, result) for op in product.ops]
        sums = product.weight_sums
        return product.ops + [Map(name=f"{node.name}:zero_point", node=node.name, op=node.op,
                                  inputs=(as_input(raw), operand(graph, node.inputs[2])), output=result,
                                  fn=lambda y, zp: y - _known(sums) * np.int64(np.asarray(zp).reshape(-1)[0]),
                                  ops_per_element=2)]


def _known(sums: np.ndarray | None) -> np.ndarray:
    if sums is None:   # a shape-only model: simulation never computes values
        raise ModelError("the zero-point correction needs the weights' values, which were not loaded "
                         "(load the model with its weights to evaluate it)")
    return sums


def replace_output(op: IROp, old: Operand, new: Operand) -> IROp:
    """The op writing `new` where it wrote `old` (other ops unchanged)."""
    return replace(op, output=new) if op.output == old else op
