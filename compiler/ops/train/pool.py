"""The gradients of the window ops: MaxPoolGrad(dy, x), AveragePoolGrad(dy) and LRNGrad(dy, x), attributes as the
forward op's (AveragePoolGrad also `shape`, the input's). Each lowers to one Reduce over the axes its windows span
(the spatial axes, LRN's channels), so a chunk cuts only the others and never splits a window.

MaxPoolGrad: each window's dy goes to its maximum; a tie goes to the first maximum in the window's row-major order
(a NaN wins over any number, the last NaN over the others), as PyTorch's max_pool backward does. AveragePoolGrad:
each window's dy / count spread over it, the count as the forward's (count_include_pad; never the ceil_mode
overhang). LRNGrad, with D the forward's bias + alpha/size * (sum of x^2 over the channel window) and win^T(i) the
channels whose window holds channel i:
dx_i = dy_i D_i^-beta - 2 alpha beta / size * x_i * sum over c in win^T(i) of dy_c x_c D_c^(-beta-1).

Ops, per element of the Reduce's first input (as compiler/ops/pool.py and lrn.py count the forward):
  MaxPoolGrad   per dy element: kernel compares to find the window's first maximum, one add into dx  = kernel + 1
  AveragePoolGrad  per dy element: a divide by the count, kernel adds into dx                      = kernel + 1
  LRNGrad       per x element: D again (square, size adds, scale and bias: size + 3), its power, dy * D^-beta,
                dy * x * D^-beta / D (3), the transposed window's size adds, two multiplies and a subtract
                                                                                                   = 2 size + 11
"""
from __future__ import annotations

import itertools
import math
from typing import Callable, Iterator, Sequence

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Reduce
from compiler.ops.base import (TRAINING_DOMAIN, OpDef, fail, given, input_operands, out, output_operand,
                               register, require)
from compiler.ops.lrn import window_size
from compiler.ops.pool import includes_pad, pool_geometry
from compiler.ops.train import work


# (kernel, outs, pads_begin, pads_end, strides, dilations): compiler.ops.pool.pool_geometry
Geometry = tuple[list[int], ...]


def _check_dy(node: Node, dy: Tensor, x_shape: tuple[int, ...], outs: Sequence[int]) -> None:
    want = (*x_shape[:2], *outs)
    if dy.shape != want:
        raise fail(node, f"dy {dy.name!r} has shape {list(dy.shape)}; the forward op's output is {list(want)}")
    if not dy.dtype.is_float:
        raise fail(node, f"the gradient {dy.name!r} is {dy.dtype.value}; gradients are floats")


def _pads(geometry: Geometry, sizes: Sequence[int]) -> list[tuple[int, int]]:
    """Begin and end pads of the padded input every window lies in (ceil_mode's overhang added at the end)."""
    kernel, outs, begin, end, strides, dilations = geometry
    extra = [max(0, (o - 1) * s + (k - 1) * d + 1 - (n + b + e))
             for o, s, k, d, n, b, e in zip(outs, strides, kernel, dilations, sizes, begin, end)]
    return [(b, e + x) for b, e, x in zip(begin, end, extra)]


def _taps(geometry: Geometry) -> Iterator[tuple[slice, ...]]:
    """Per kernel tap in row-major order, the slices of the padded input it reads for every output position."""
    kernel, outs, _, _, strides, dilations = geometry
    for offsets in itertools.product(*(range(k) for k in kernel)):
        yield tuple(slice(o * d, o * d + s * (p - 1) + 1, s) for o, d, s, p in zip(offsets, dilations, strides, outs))


def _unpad(dx: np.ndarray, pads: list[tuple[int, int]], sizes: Sequence[int]) -> np.ndarray:
    return dx[(slice(None),) * 2 + tuple(slice(b, b + n) for (b, _), n in zip(pads, sizes))]


def _max_grad(geometry: Geometry, dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    dy, x = work(dy, x)
    sizes = x.shape[2:]
    pads = _pads(geometry, sizes)
    xp = np.pad(x, [(0, 0), (0, 0)] + pads, constant_values=-np.inf)
    best = np.full(dy.shape, -np.inf, x.dtype)
    winner = np.zeros(dy.shape, np.int64)
    for tap, window in enumerate(_taps(geometry)):
        patch = xp[(slice(None),) * 2 + window]
        better = (patch > best) | np.isnan(patch)      # strictly greater: the first maximum keeps a tie
        best, winner = np.where(better, patch, best), np.where(better, tap, winner)
    dx = np.zeros(xp.shape, dy.dtype)
    for tap, window in enumerate(_taps(geometry)):
        dx[(slice(None),) * 2 + window] += np.where(winner == tap, dy, 0.0)
    return _unpad(dx, pads, sizes)


def _average_grad(geometry: Geometry, dy: np.ndarray, sizes: tuple[int, ...], include_pad: bool) -> np.ndarray:
    (dy,) = work(dy)
    pads = _pads(geometry, sizes)
    begin, end = geometry[2:4]
    # which padded positions a window counts: the input, and the pads when include_pad (never the overhang)
    counted = np.pad(np.ones(sizes, dy.dtype), list(zip(begin, end)), constant_values=float(include_pad))
    counted = np.pad(counted, [(0, e - e0) for (_, e), e0 in zip(pads, end)])
    count = sum(counted[window] for window in _taps(geometry))
    share = dy / np.maximum(count, 1)
    dx = np.zeros(dy.shape[:2] + counted.shape, dy.dtype)
    for window in _taps(geometry):
        dx[(slice(None),) * 2 + window] += share
    return _unpad(dx, pads, sizes)


def _window_reduce(node: Node, graph: Graph, fn: Callable[..., np.ndarray], ops_per_element: int) -> list[IROp]:
    """One Reduce with dy first: its spatial axes are never cut, N and C are."""
    rank = len(graph.tensor(node.inputs[0]).shape)
    return [Reduce(name=node.name, node=node.name, op=node.op, inputs=input_operands(node, graph),
                   output=output_operand(node, graph), axes=tuple(range(2, rank)), ops_per_element=ops_per_element,
                   fn=fn)]


@register("MaxPoolGrad", domain=TRAINING_DOMAIN)
class MaxPoolGrad(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        dy, x = require(node, ins, 2)
        _check_dy(node, dy, x.shape, pool_geometry(node, x.shape)[1])
        return [out(node, x.shape, dy.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        dy, x = given(node, args, 2)
        return [_max_grad(pool_geometry(node, x.shape), dy, x).astype(dy.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        kernel = pool_geometry(node, graph.tensor(node.inputs[1]).shape)[0]
        return _window_reduce(node, graph, lambda dy, x: self.reference(node, [dy, x])[0], math.prod(kernel) + 1)


@register("AveragePoolGrad", domain=TRAINING_DOMAIN)
class AveragePoolGrad(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        dy = require(node, ins, 1)[0]
        shape = tuple(int(d) for d in node.attr("shape", ()))
        _check_dy(node, dy, shape, pool_geometry(node, shape)[1])
        return [out(node, shape, dy.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        shape = tuple(int(d) for d in node.attr("shape"))
        dy = given(node, args, 1)[0]
        dx = _average_grad(pool_geometry(node, shape), dy, shape[2:], includes_pad(node))
        return [dx.astype(dy.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        kernel = pool_geometry(node, tuple(int(d) for d in node.attr("shape")))[0]
        return _window_reduce(node, graph, lambda dy: self.reference(node, [dy])[0], math.prod(kernel) + 1)


def _lrn_grad(node: Node, dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    size = window_size(node)
    alpha, beta, bias = (float(node.attr(k, d)) for k, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    dy, x = work(dy, x)
    # channel c's window is [c - below, c + above] (compiler/ops/lrn.py); channel i is in the windows of
    # channels [i - above, i + below]
    below, above = (size - 1) // 2, size - 1 - (size - 1) // 2
    channels, rest = x.shape[1], [(0, 0)] * (x.ndim - 2)
    square = np.pad(x * x, [(0, 0), (below, above)] + rest)
    scale = bias + alpha / size * sum(square[:, i:i + channels] for i in range(size))
    through = np.pad(dy * x * scale ** (-beta - 1), [(0, 0), (above, below)] + rest)
    back = sum(through[:, i:i + channels] for i in range(size))
    return dy * scale ** -beta - 2 * alpha * beta / size * x * back


@register("LRNGrad", domain=TRAINING_DOMAIN)
class LRNGrad(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        dy, x = require(node, ins, 2)
        window_size(node)
        if dy.shape != x.shape or len(x.shape) < 3 or not dy.dtype.is_float:
            raise fail(node, f"dy is {dy.dtype.value} {list(dy.shape)}, x {list(x.shape)}: LRN's gradient takes a "
                             f"float dy of x's shape, N x C x spatial...")
        return [out(node, x.shape, dy.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        dy, x = given(node, args, 2)
        return [_lrn_grad(node, dy, x).astype(dy.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return [Reduce(name=node.name, node=node.name, op=node.op, inputs=input_operands(node, graph),
                       output=output_operand(node, graph), axes=(1,), ops_per_element=2 * window_size(node) + 11,
                       fn=lambda dy, x: self.reference(node, [dy, x])[0])]
