"""Trigonometric and hyperbolic functions (Sin ... Atanh) and the float classifiers IsNaN and IsInf, each one Map.

Invariant: trigonometric outputs keep the input's shape and float dtype, computed in fp32 (fp64 stays fp64) as
onnxruntime's CPU kernels do; IsNaN and IsInf give bool of the input's shape.
"""
from __future__ import annotations

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.activation import FLOAT, Unary, check_dtype
from compiler.ops.base import OpDef, fail, map_op, out, register, require
from compiler.ops.batchnorm import in_work

# op -> (numpy function of (x, node), vector ops per element, allowed input dtypes).
# Cost table (the activation.py convention: exp, log, sqrt, divide count one op each):
#   Sin, Cos    range reduction (mul, round, 2 multiply-adds) + degree-7 polynomial (6) = 10
#   Tan         one reduction shared by sin and cos polynomials (3 + 6 + 6), a divide   = 16
#   Atan        |x| > 1 ? pi/2 - atan(1/x): abs, compare, reciprocal, select, sign, sub
#               + degree-11 odd polynomial (6 multiply-adds)                            = 12
#   Asin, Acos  atan(x / sqrt(1 - x^2)): mul, sub, sqrt, div + atan (Acos: pi/2 - that) = 16 / 17
#   Sinh, Cosh  (e^x -/+ e^-x) / 2: exp, reciprocal, sub or add, mul                    = 4
#   Asinh       sign(x) log(|x| + sqrt(x^2 + 1)): abs, mul, add, sqrt, add, log, sign   = 7
#   Acosh       log(x + sqrt(x^2 - 1)): mul, sub, sqrt, add, log                        = 5
#   Atanh       0.5 log((1 + x) / (1 - x)): add, sub, div, log, mul                     = 5
_TRIG = {
    "Sin": (lambda x, n: np.sin(in_work(x)), 10, FLOAT),
    "Cos": (lambda x, n: np.cos(in_work(x)), 10, FLOAT),
    "Tan": (lambda x, n: np.tan(in_work(x)), 16, FLOAT),
    "Atan": (lambda x, n: np.arctan(in_work(x)), 12, FLOAT),
    "Asin": (lambda x, n: np.arcsin(in_work(x)), 16, FLOAT),
    "Acos": (lambda x, n: np.arccos(in_work(x)), 17, FLOAT),
    "Sinh": (lambda x, n: np.sinh(in_work(x)), 4, FLOAT),
    "Cosh": (lambda x, n: np.cosh(in_work(x)), 4, FLOAT),
    "Asinh": (lambda x, n: np.arcsinh(in_work(x)), 7, FLOAT),
    "Acosh": (lambda x, n: np.arccosh(in_work(x)), 5, FLOAT),
    "Atanh": (lambda x, n: np.arctanh(in_work(x)), 5, FLOAT),
}


@register(*_TRIG)
class Trig(Unary):
    table = _TRIG


@register("IsNaN", "IsInf")
class FloatClass(OpDef):
    """IsNaN: x != x, one compare. IsInf: |x| == inf, narrowed by detect_positive / detect_negative (both 1 by
    default): an abs and a compare, or a compare alone when only one sign is asked for."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        check_dtype(node, x, FLOAT)
        for name in ("detect_positive", "detect_negative"):
            if node.op == "IsInf" and node.attr(name, 1) not in (0, 1):
                raise fail(node, f"attribute {name}={node.attr(name)} is not allowed (0 or 1)")
        return [out(node, x.shape, DType.bool)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(args[0])
        if node.op == "IsNaN":
            return [np.isnan(x)]
        signs = np.zeros(x.shape, dtype=bool)
        if node.attr("detect_positive", 1):
            signs |= x > 0
        if node.attr("detect_negative", 1):
            signs |= x < 0
        return [np.isinf(x) & signs]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        both = node.op == "IsInf" and node.attr("detect_positive", 1) and node.attr("detect_negative", 1)
        return map_op(node, graph, lambda x: self.reference(node, [x])[0], 2 if both else 1)
