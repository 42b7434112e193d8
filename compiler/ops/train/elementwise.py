"""Element-wise derivatives: the gradient of an activation or arithmetic op, dx = dy * f'(...), as one Map.

Invariant: inputs are (dy, what f' reads), the output has dy's shape and dtype; each reads the tensor the forward
pass saved (the input x, or the output y where f' is cheaper from it, as frameworks save it).
"""
from __future__ import annotations

import math

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import TRAINING_DOMAIN, OpDef, broadcast, fail, map_reference, out, register
from compiler.ops.train import work

_TWO_OVER_ROOT_PI = 2.0 / math.sqrt(math.pi)
_ERF = np.frompyfunc(math.erf, 1, 1)


def _gelu(dy, x):
    dy, x = work(dy, x)
    cdf = 0.5 * (1.0 + _ERF(x / math.sqrt(2.0)).astype(x.dtype))
    return dy * (cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi))


def _max(dy, a, b):
    """torch's rule: the larger input takes the gradient, a tie splits it in halves."""
    dy, a, b = work(dy, a, b)
    return dy * ((a > b) + 0.5 * (a == b))


def _clip(dy, x, lo=None, hi=None):
    dy, x = work(dy, x)
    keep = np.ones(x.shape, bool)
    if lo is not None:
        keep &= x >= lo
    if hi is not None:
        keep &= x <= hi
    return dy * keep


# op -> (numpy function, vector ops per element, input names). Costs as in ops/activation.py: one op per
# add/mul/compare/select, one per exp/sqrt/divide.
GRADIENTS = {
    "ReluGrad": (lambda dy, y: dy * (y > 0), 1, ("dy", "y")),                                  # select
    "SigmoidGrad": (lambda dy, y: (lambda d, s: d * s * (1 - s))(*work(dy, y)), 3, ("dy", "y")),
    "TanhGrad": (lambda dy, y: (lambda d, t: d * (1 - t * t))(*work(dy, y)), 3, ("dy", "y")),
    "ErfGrad": (lambda dy, x: (lambda d, v: d * _TWO_OVER_ROOT_PI * np.exp(-v * v))(*work(dy, x)), 4,
                ("dy", "x")),
    "GeluGrad": (_gelu, 18, ("dy", "x")),                                 # erf (10), exp and 7 mul/add
    "SqrtGrad": (lambda dy, y: (lambda d, s: d * 0.5 / s)(*work(dy, y)), 2, ("dy", "y")),
    "AbsGrad": (lambda dy, x: dy * np.sign(x), 2, ("dy", "x")),
    "PowGrad": (lambda dy, x, p: (lambda d, v, e: d * e * v ** (e - 1))(*work(dy, x, p)), 5, ("dy", "x", "p")),
    "DivisorGrad": (lambda dy, y, b: (lambda d, q, v: -d * q / v)(*work(dy, y, b)), 3, ("dy", "y", "b")),
    "MaxGrad": (_max, 3, ("dy", "x", "other")),
    "ClipGrad": (_clip, 3, ("dy", "x", "min", "max")),
    "DropoutGrad": (lambda dy, mask, scale: dy * mask * scale, 2, ("dy", "mask", "scale")),
}


@register(*GRADIENTS, domain=TRAINING_DOMAIN)
class ElementwiseGrad(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        names = GRADIENTS[node.op][2]
        if len(ins) > len(names) or len(ins) < 2 or ins[0] is None or ins[1] is None:
            raise fail(node, f"expects inputs ({', '.join(names)}), got {len(ins)}")
        dy = ins[0]
        if not dy.dtype.is_float:
            raise fail(node, f"the gradient {dy.name!r} is {dy.dtype.value}; gradients are floats")
        shape = broadcast(node, *(t.shape for t in ins if t is not None))
        if shape != dy.shape:
            raise fail(node, f"inputs broadcast to {list(shape)}, not to the gradient's {list(dy.shape)}")
        return [out(node, dy.shape, dy.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            dx = GRADIENTS[node.op][0](*args)
        return [np.asarray(dx).astype(args[0].dtype, copy=False)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return map_reference(self, node, graph, GRADIENTS[node.op][1])
