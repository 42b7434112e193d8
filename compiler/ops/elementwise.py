"""Binary and n-ary element-wise arithmetic, comparisons and logic (Add ... Where), lowered to one Map.

They share one shape rule: the output is the numpy/ONNX multidirectional broadcast of every input shape,
and (except Pow's exponent and Where's condition) every input has the same dtype.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, broadcast, fail, map_op, out, register, require


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer Div as ONNX Runtime computes it (C++ `/`): truncate toward zero, not numpy's floor.

    e.g. -7 / 2 = -3 (numpy's -7 // 2 = -4).
    """
    with np.errstate(divide="ignore"):  # x / 0 is undefined in ONNX; numpy gives 0, ORT may trap
        q = a // b
    result: np.ndarray = q + ((q < 0) & (q * b != a))
    return result


Fn = Callable[..., Any]


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(np.result_type(a, b), np.integer):
        return _int_div(a, b)
    result: np.ndarray = np.divide(a, b)
    return result


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # The result keeps the base's dtype (ONNX T); an int base computes exactly in int64.
    if np.issubdtype(a.dtype, np.integer):
        return np.power(a.astype(np.int64), b.astype(np.int64)).astype(a.dtype)
    result: np.ndarray = np.power(a, b.astype(a.dtype)).astype(a.dtype)
    return result


FLOAT_MOD_OPSET = 28    # from opset 28 float Mod takes fmod=0 too (floored, the sign of the divisor)


def _mod(node: Node) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    fmod = int(node.attr("fmod", 0))

    def mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # fmod=1: C fmod, the sign of the dividend; fmod=0: Python %, the sign of the divisor.
        with np.errstate(divide="ignore", invalid="ignore"):   # x mod 0 and inf mod y are NaN, as ONNX asks
            result: np.ndarray = np.fmod(a, b) if fmod else np.mod(a, b)
            return result
    return mod


def _variadic(fn: Fn) -> Callable[..., np.ndarray]:
    def fold(*arrays: np.ndarray) -> np.ndarray:
        result = arrays[0]
        for a in arrays[1:]:
            result = fn(result, a)
        return result
    return fold


def _mean(*arrays: np.ndarray) -> np.ndarray:
    return (_variadic(np.add)(*arrays) / len(arrays)).astype(arrays[0].dtype)


# op -> (numpy function of the arrays, vector ops per output element, output dtype rule).
# Costs: one ALU op per add/sub/mul/compare/select; Div counts 1 (a divide unit, or reciprocal+mul
# fused on GPUs); Pow = exp(b * log a) = 3; Mod = divide, floor, multiply-subtract = 3.
# Variadic ops (Sum, Max, Min, Mean) cost one op per extra input (Mean adds one multiply).
_BINARY: dict[str, tuple[Fn, int]] = {
    "Add": (np.add, 1), "Sub": (np.subtract, 1), "Mul": (np.multiply, 1), "Div": (_div, 1),
    "Pow": (_pow, 3),
    "Equal": (np.equal, 1), "Less": (np.less, 1), "Greater": (np.greater, 1),
    "LessOrEqual": (np.less_equal, 1), "GreaterOrEqual": (np.greater_equal, 1),
    "And": (np.logical_and, 1), "Or": (np.logical_or, 1), "Xor": (np.logical_xor, 1),
    "BitwiseAnd": (np.bitwise_and, 1), "BitwiseOr": (np.bitwise_or, 1), "BitwiseXor": (np.bitwise_xor, 1),
}
_COMPARE = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}
_LOGIC = {"And", "Or", "Xor"}
_VARIADIC: dict[str, Fn] = {"Sum": np.add, "Max": np.maximum, "Min": np.minimum}
# ops whose inputs ONNX types as one T: their references assume inputs of one dtype (a float 127.0 over an int8
# 0 is a float division giving inf, where int8 / int8 is an integer one)
ONE_INPUT_DTYPE = frozenset(set(_BINARY) - {"Pow"} | {"Mod", "Mean"} | set(_VARIADIC))


def _same_dtype(node: Node, ins: list[Tensor]) -> DType:
    dtypes = {t.dtype for t in ins}
    if len(dtypes) > 1:
        listed = ", ".join(f"{t.name!r} is {t.dtype.value}" for t in ins)
        raise fail(node, f"inputs must share one dtype, but {listed}")
    return ins[0].dtype


@register(*_BINARY)
class Binary(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        a, b = require(node, ins, 2)
        shape = broadcast(node, a.shape, b.shape)
        if node.op == "Pow":
            dtype = a.dtype  # the exponent may have another numeric type
        else:
            dtype = _same_dtype(node, [a, b])
        if node.op in _LOGIC and dtype != DType.bool:
            raise fail(node, f"inputs must be bool, got {dtype.value}")
        if node.op.startswith("Bitwise") and (dtype.is_float or dtype == DType.bool):
            raise fail(node, f"inputs must be integers, got {dtype.value}")
        if node.op in _COMPARE or node.op in _LOGIC:
            dtype = DType.bool
        return [out(node, shape, dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        fn, _ = _BINARY[node.op]
        return [np.asarray(fn(np.asarray(args[0]), np.asarray(args[1])))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        fn, cost = _BINARY[node.op]
        return map_op(node, graph, lambda a, b: fn(np.asarray(a), np.asarray(b)), cost)


@register("Mod")
class Mod(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        a, b = require(node, ins, 2)
        shape = broadcast(node, a.shape, b.shape)
        dtype = _same_dtype(node, [a, b])
        fmod = node.attr("fmod", 0)
        if fmod not in (0, 1):
            raise fail(node, f"attribute fmod={fmod} is not allowed (0 or 1)")
        if dtype.is_float and fmod != 1 and graph.opset < FLOAT_MOD_OPSET:
            raise fail(node, f"floating-point inputs ({dtype.value}) need fmod=1 before opset {FLOAT_MOD_OPSET} "
                             f"(this model is opset {graph.opset}), got fmod={fmod}")
        return [out(node, shape, dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [_mod(node)(np.asarray(args[0]), np.asarray(args[1]))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return map_op(node, graph, _mod(node), 3)


@register("Sum", "Max", "Min", "Mean")
class Variadic(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        tensors = [t for t in ins if t is not None]
        if not ins or len(tensors) != len(ins):
            raise fail(node, f"expects 1 or more inputs, got {len(ins)} (omitted inputs are not allowed)")
        return [out(node, broadcast(node, *(t.shape for t in tensors)), _same_dtype(node, tensors))]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [self._fn(node)(*(np.asarray(a) for a in args))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        extra = 1 if node.op == "Mean" else 0
        return map_op(node, graph, self._fn(node), max(len(node.inputs) - 1, 0) + extra)

    @staticmethod
    def _fn(node: Node) -> Callable[..., np.ndarray]:
        return _mean if node.op == "Mean" else _variadic(_VARIADIC[node.op])


@register("Where")
class Where(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        condition, x, y = require(node, ins, 3)
        if condition.dtype != DType.bool:
            raise fail(node, f"the condition {node.inputs[0]!r} must be bool, got {condition.dtype.value}")
        dtype = _same_dtype(node, [x, y])
        return [out(node, broadcast(node, condition.shape, x.shape, y.shape), dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [np.where(*(np.asarray(a) for a in args))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return map_op(node, graph, np.where, 1)
