"""Unary element-wise ops (activations, math functions, rounding, Clip) and PRelu, each lowered to one Map.

The output has the input's shape and dtype (Not: bool); attributes (alpha, beta...) follow ONNX defaults.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, broadcast, fail, map_op, map_reference, out, register, require

_ERF = np.frompyfunc(math.erf, 1, 1)   # exact (libm) erf; numpy has none and scipy is not a dependency


def _work(x: np.ndarray) -> np.ndarray:
    """Compute transcendental chains in float32 (float64 stays float64), as ORT's CPU kernels do for fp16."""
    return x.astype(np.float64 if x.dtype == np.float64 else np.float32)


def _erf(x: np.ndarray) -> np.ndarray:
    return cast(np.ndarray, _ERF(np.asarray(x, dtype=np.float64))).astype(np.float64)


def _gelu(x: np.ndarray, node: Node) -> np.ndarray:
    w = _work(x)
    if node.attr("approximate", "none") == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (w + 0.044715 * w ** 3)
        return 0.5 * w * (1.0 + np.tanh(inner))
    return 0.5 * w * (1.0 + _erf(w / math.sqrt(2.0)))


def _hard_sigmoid(x: np.ndarray, node: Node) -> np.ndarray:
    y: np.ndarray = np.clip(node.attr("alpha", 0.2) * _work(x) + node.attr("beta", 0.5), 0.0, 1.0)
    return y


def _elu(x: np.ndarray, node: Node) -> np.ndarray:
    w = _work(x)
    return np.where(w > 0, w, node.attr("alpha", 1.0) * np.expm1(np.minimum(w, 0)))


def _selu(x: np.ndarray, node: Node) -> np.ndarray:
    w = _work(x)
    alpha, gamma = node.attr("alpha", 1.67326319217681884765625), node.attr("gamma", 1.05070102214813232421875)
    y: np.ndarray = gamma * np.where(w > 0, w, alpha * np.expm1(np.minimum(w, 0)))
    return y


def _celu(x: np.ndarray, node: Node) -> np.ndarray:
    w = _work(x)
    alpha = w.dtype.type(node.attr("alpha", 1.0))
    y: np.ndarray = np.maximum(w, 0) + np.minimum(0, alpha * np.expm1(w / alpha))
    return y


def _shrink(x: np.ndarray, node: Node) -> np.ndarray:
    """ORT computes in x's own type: an int x meets integer-cast lambd and bias."""
    lambd, bias = x.dtype.type(node.attr("lambd", 0.5)), x.dtype.type(node.attr("bias", 0.0))
    y: np.ndarray = np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, x.dtype.type(0)))
    return y


FLOAT, NUMERIC, BOOL = "float", "numeric", "bool"
# op -> (numpy function of (x, node), vector ops per element, allowed input dtypes).
# Cost table: one op per add/mul/compare/select; exp, log, sqrt, reciprocal and tanh's exp count one each
# (a special-function unit or a vector instruction sequence treated as one op).
#   Sigmoid     1 / (1 + exp(-x))                          neg, exp, add, div          = 4
#   Tanh        (e^2x - 1) / (e^2x + 1)                    mul, exp, sub, add, div     = 5
#   Erf         rational/polynomial approximation          about 10 multiply-adds      = 10
#   Gelu        0.5 x (1 + erf(x / sqrt 2))                erf + mul, add, mul, mul    = 14
#   Gelu tanh   0.5 x (1 + tanh(c (x + 0.044715 x^3)))     tanh + 7 mul/add            = 12
#   Softplus    log(1 + exp(x))                            exp, add, log               = 3
#   LeakyRelu   x > 0 ? x : a x                            mul, compare, select        = 2 (mul, select)
#   HardSigmoid clip(a x + b, 0, 1)                        multiply-add, max, min      = 3
#   HardSwish   x * HardSigmoid(x)                                                     = 4
#   Elu / Selu  x > 0 ? x : a (exp(x) - 1)  (Selu * gamma) exp, sub, mul, select (+1)  = 4 / 5
#   Celu        max(0, x) + min(0, a (exp(x / a) - 1))     mul, exp, sub, mul, min, max, add = 7
#   ThresholdedRelu  x > a ? x : 0                         compare, select             = 2
#   Softsign    x / (1 + |x|)                              abs, add, div               = 3
#   Mish        x tanh(softplus(x))                        softplus 3 + tanh 5 + mul   = 9
#   Swish       x sigmoid(a x)                             mul + sigmoid 4 + mul       = 6
#   Shrink      x < -l ? x + b : x > l ? x - b : 0         2 compares, add, sub, 2 selects = 6
Activation = Callable[[np.ndarray, Node], np.ndarray]
_UNARY: dict[str, tuple[Activation, int, str]] = {
    "Relu": (lambda x, n: np.maximum(x, x.dtype.type(0)), 1, NUMERIC),
    "Sigmoid": (lambda x, n: 1.0 / (1.0 + np.exp(-_work(x))), 4, FLOAT),
    "Tanh": (lambda x, n: np.tanh(_work(x)), 5, FLOAT),
    "Erf": (lambda x, n: _erf(x), 10, FLOAT),
    "Gelu": (_gelu, 14, FLOAT),
    "Sqrt": (lambda x, n: np.sqrt(x), 1, FLOAT),
    "Exp": (lambda x, n: np.exp(x), 1, FLOAT),
    "Log": (lambda x, n: np.log(x), 1, FLOAT),
    "Neg": (lambda x, n: np.negative(x), 1, NUMERIC),
    "Abs": (lambda x, n: np.abs(x), 1, NUMERIC),
    "Reciprocal": (lambda x, n: np.reciprocal(x), 1, FLOAT),
    "Softplus": (lambda x, n: np.logaddexp(0.0, _work(x)), 3, FLOAT),
    "LeakyRelu": (lambda x, n: np.where(x > 0, x, x * x.dtype.type(n.attr("alpha", 0.01))), 2, FLOAT),
    "HardSigmoid": (_hard_sigmoid, 3, FLOAT),
    "HardSwish": (lambda x, n: _work(x) * np.clip(_work(x) / 6.0 + 0.5, 0.0, 1.0), 4, FLOAT),
    "Elu": (_elu, 4, FLOAT),
    "Selu": (_selu, 5, FLOAT),
    "Round": (lambda x, n: np.round(x), 1, FLOAT),          # numpy rounds half to even, as ONNX asks
    "Floor": (lambda x, n: np.floor(x), 1, FLOAT),
    "Ceil": (lambda x, n: np.ceil(x), 1, FLOAT),
    "Sign": (lambda x, n: np.sign(x), 1, NUMERIC),
    "Not": (lambda x, n: np.logical_not(x), 1, BOOL),
    "Celu": (_celu, 7, FLOAT),
    "ThresholdedRelu": (lambda x, n: np.where(x > x.dtype.type(n.attr("alpha", 1.0)), x, x.dtype.type(0)), 2,
                        FLOAT),
    "Softsign": (lambda x, n: _work(x) / (1.0 + np.abs(_work(x))), 3, FLOAT),
    "Mish": (lambda x, n: _work(x) * np.tanh(np.logaddexp(0.0, _work(x))), 9, FLOAT),
    "Shrink": (_shrink, 6, NUMERIC),
    "Swish": (lambda x, n: _work(x) / (1.0 + np.exp(-n.attr("alpha", 1.0) * _work(x))), 6, FLOAT),
}


def check_dtype(node: Node, tensor: Tensor, allowed: str) -> None:
    ok = tensor.dtype.is_float if allowed == FLOAT else (tensor.dtype == DType.bool) == (allowed == BOOL)
    if not ok:                              # NUMERIC: anything but a bool
        wanted = {FLOAT: "a floating-point", BOOL: "a bool", NUMERIC: "a numeric"}[allowed]
        raise fail(node, f"input {tensor.name!r} must have {wanted} dtype, got {tensor.dtype.value}")


@register(*_UNARY)
class Unary(OpDef):
    """A table of one-input functions: op -> (numpy function of (x, node), ops per element, input dtypes)."""
    table = _UNARY

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        check_dtype(node, x, self.table[node.op][2])
        if node.op == "Gelu" and node.attr("approximate", "none") not in ("none", "tanh"):
            raise fail(node, f"attribute approximate={node.attr('approximate')!r} is not allowed "
                             f"('none' or 'tanh')")
        return [out(node, x.shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(args[0])
        with np.errstate(all="ignore"):  # exp overflow to inf, log(-1) = nan: the IEEE results ORT gives
            y = self.table[node.op][0](x, node)
        return [np.asarray(y).astype(x.dtype, copy=False)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        cost = self.table[node.op][1]
        if node.op == "Gelu" and node.attr("approximate", "none") == "tanh":
            cost = 12
        return map_op(node, graph, lambda x: self.reference(node, [x])[0], cost)


@register("Clip")
class Clip(OpDef):
    """min(max(x, lo), hi): attributes before opset 11, optional scalar inputs from 11 ('' omits one)."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1, 3)
        check_dtype(node, x, NUMERIC)
        for index, bound in zip((1, 2), ("min", "max")):
            t = ins[index] if index < len(ins) else None
            if t is None:
                continue
            if t.elements != 1:
                raise fail(node, f"the {bound} input {t.name!r} must be a scalar, got shape {list(t.shape)}")
            if t.dtype != x.dtype:
                raise fail(node, f"the {bound} input {t.name!r} is {t.dtype.value}, but x is "
                                 f"{x.dtype.value}")
        return [out(node, x.shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(args[0])
        lo, hi = self._bounds(node, x.dtype, list(args[1:]))
        return [np.minimum(np.maximum(x, lo), hi).astype(x.dtype, copy=False)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return map_reference(self, node, graph, 2)

    @staticmethod
    def _bounds(node: Node, dtype: np.dtype[Any], extra: list[np.ndarray | None]) -> tuple[Any, Any]:
        if "min" in node.attrs or "max" in node.attrs:   # opset < 11
            return dtype.type(node.attr("min", -np.inf)), dtype.type(node.attr("max", np.inf))
        info: np.iinfo[Any] | np.finfo[Any]
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
        else:
            info = np.finfo(dtype)
        lo = extra[0] if len(extra) > 0 and extra[0] is not None else info.min
        hi = extra[1] if len(extra) > 1 and extra[1] is not None else info.max
        return np.asarray(lo, dtype=dtype).reshape(()), np.asarray(hi, dtype=dtype).reshape(())


@register("PRelu")
class PRelu(OpDef):
    """x < 0 ? slope * x : x, the slope broadcast to x's shape one way (numpy rules, x's shape unchanged)."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, slope = require(node, ins, 2)
        check_dtype(node, x, NUMERIC)
        if slope.dtype != x.dtype:
            raise fail(node, f"slope {slope.name!r} is {slope.dtype.value}, but x is {x.dtype.value}")
        if broadcast(node, x.shape, slope.shape) != x.shape:
            raise fail(node, f"slope has shape {list(slope.shape)}, which does not broadcast to x's shape "
                             f"{list(x.shape)} (the slope broadcasts to x, never x to the slope)")
        return [out(node, x.shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x, slope = np.asarray(args[0]), np.asarray(args[1])
        return [np.where(x < 0, x * slope, x).astype(x.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return map_reference(self, node, graph, 2)   # mul, select (as LeakyRelu)


@register("SwiGLU")
class SwiGLU(OpDef):
    """Swish(A) * B (opset 28): A the gate, B the value, of one shape (no broadcasting), computed in fp32."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        gate, value = require(node, ins, 2)
        check_dtype(node, gate, FLOAT)
        if (value.shape, value.dtype) != (gate.shape, gate.dtype):
            raise fail(node, f"the gate {gate.name!r} is {gate.dtype.value} {list(gate.shape)} and the value "
                             f"{value.name!r} is {value.dtype.value} {list(value.shape)}; they must match "
                             f"(SwiGLU does not broadcast)")
        return [out(node, gate.shape, gate.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        a = np.asarray(args[0])
        swish = _UNARY["Swish"][0](a, node)
        return [(swish * _work(np.asarray(args[1]))).astype(a.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return map_reference(self, node, graph, 7)   # Swish (6) and the gating multiply
