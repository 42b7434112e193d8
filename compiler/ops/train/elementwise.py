"""Element-wise derivatives: the gradient of an activation or arithmetic op, dx = dy * f'(...), as one Map.

Invariant: inputs are (dy, what f' reads), the output has dy's shape and dtype; each reads the tensor the forward
pass saved (the input x, or the output y where f' is cheaper from it, as frameworks save it).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import TRAINING_DOMAIN, OpDef, broadcast, fail, given, map_reference, out, register
from compiler.ops.train import work

_TWO_OVER_ROOT_PI = 2.0 / math.sqrt(math.pi)
_ERF = np.frompyfunc(math.erf, 1, 1)


def _gelu(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    dy, x = work(dy, x)
    cdf = 0.5 * (1.0 + cast(np.ndarray, _ERF(x / math.sqrt(2.0))).astype(x.dtype))
    dx: np.ndarray = dy * (cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi))
    return dx


def _max(dy: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """torch's rule: the larger input takes the gradient, a tie splits it in halves."""
    dy, a, b = work(dy, a, b)
    dx: np.ndarray = dy * ((a > b) + 0.5 * (a == b))
    return dx


def _clip(dy: np.ndarray, x: np.ndarray, lo: np.ndarray | None = None, hi: np.ndarray | None = None) -> np.ndarray:
    dy, x = work(dy, x)
    keep = np.ones(x.shape, bool)
    if lo is not None:
        keep &= x >= lo
    if hi is not None:
        keep &= x <= hi
    return dy * keep


def _sigmoid(dy: np.ndarray, y: np.ndarray) -> np.ndarray:
    d, s = work(dy, y)
    dx: np.ndarray = d * s * (1 - s)
    return dx


def _tanh(dy: np.ndarray, y: np.ndarray) -> np.ndarray:
    d, t = work(dy, y)
    dx: np.ndarray = d * (1 - t * t)
    return dx


def _erf(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    d, v = work(dy, x)
    dx: np.ndarray = d * _TWO_OVER_ROOT_PI * np.exp(-v * v)
    return dx


def _sqrt(dy: np.ndarray, y: np.ndarray) -> np.ndarray:
    d, s = work(dy, y)
    dx: np.ndarray = d * 0.5 / s
    return dx


def _pow(dy: np.ndarray, x: np.ndarray, p: np.ndarray) -> np.ndarray:
    d, v, e = work(dy, x, p)
    dx: np.ndarray = d * e * v ** (e - 1)
    return dx


def _divisor(dy: np.ndarray, y: np.ndarray, b: np.ndarray) -> np.ndarray:
    d, q, v = work(dy, y, b)
    dx: np.ndarray = -d * q / v
    return dx


# op -> (numpy function, vector ops per element, input names). Costs as in ops/activation.py: one op per
# add/mul/compare/select, one per exp/sqrt/divide.
GRADIENTS: dict[str, tuple[Callable[..., Any], int, tuple[str, ...]]] = {
    "ReluGrad": (lambda dy, y: dy * (y > 0), 1, ("dy", "y")),                                  # select
    "SigmoidGrad": (_sigmoid, 3, ("dy", "y")),
    "TanhGrad": (_tanh, 3, ("dy", "y")),
    "ErfGrad": (_erf, 4, ("dy", "x")),
    "GeluGrad": (_gelu, 18, ("dy", "x")),                                 # erf (10), exp and 7 mul/add
    "SqrtGrad": (_sqrt, 2, ("dy", "y")),
    "AbsGrad": (lambda dy, x: dy * np.sign(x), 2, ("dy", "x")),
    "PowGrad": (_pow, 5, ("dy", "x", "p")),
    "DivisorGrad": (_divisor, 3, ("dy", "y", "b")),
    "MaxGrad": (_max, 3, ("dy", "x", "other")),
    "ClipGrad": (_clip, 3, ("dy", "x", "min", "max")),
    "DropoutGrad": (lambda dy, mask, scale: dy * mask * scale, 2, ("dy", "mask", "scale")),
}


@register(*GRADIENTS, domain=TRAINING_DOMAIN)
class ElementwiseGrad(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        names = GRADIENTS[node.op][2]
        dy = ins[0] if ins else None
        if len(ins) > len(names) or len(ins) < 2 or dy is None or ins[1] is None:
            raise fail(node, f"expects inputs ({', '.join(names)}), got {len(ins)}")
        if not dy.dtype.is_float:
            raise fail(node, f"the gradient {dy.name!r} is {dy.dtype.value}; gradients are floats")
        shape = broadcast(node, *(t.shape for t in ins if t is not None))
        if shape != dy.shape:
            raise fail(node, f"inputs broadcast to {list(shape)}, not to the gradient's {list(dy.shape)}")
        return [out(node, dy.shape, dy.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            dx = GRADIENTS[node.op][0](*args)
        return [np.asarray(dx).astype(given(node, args, 1)[0].dtype, copy=False)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return map_reference(self, node, graph, GRADIENTS[node.op][1])
