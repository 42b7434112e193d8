"""MaxPool (with its optional Indices output), AveragePool (pads, strides, dilations, ceil_mode, count_include_pad),
LpPool and the global max and average pools -> Reduce.

Invariant: one Reduce over the spatial axes; its ops cover every window element of every output
(a compare for max, an add for average, |x|^p and an add for Lp), plus one divide (average) or p-th root (Lp)
per output. Lp pools sum (sum |x|^p)^(1/p) over the window, padding adding nothing.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Reduce
from compiler.ops.base import OpDef, fail, given, input_operands, out, output_operand, register, require
from compiler.ops.conv import window_geometry


class _Pool(OpDef):
    mode = "max"

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x = require(node, ins, 1)[0]
        geometry = pool_geometry(node, x.shape)
        _check_p(node, self.mode)
        shape = x.shape[:2] + tuple(geometry[1])
        if node.attr("storage_order", 0) not in (0, 1):
            raise fail(node, f"attribute storage_order={node.attr('storage_order')} is not allowed (0 or 1)")
        if len(node.outputs) > 1 and node.outputs[1]:
            return [out(node, shape, x.dtype), out(node, shape, DType.int64, 1)]
        return [out(node, shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = given(node, args, 1)[0]
        geometry = pool_geometry(node, x.shape)
        y = _pool(x, self._mode(node), geometry, includes_pad(node))
        if len(node.outputs) > 1 and node.outputs[1]:
            return [y, _argmax(x, geometry, bool(node.attr("storage_order", 0)))]
        return [y]

    def _mode(self, node: Node) -> int | str:
        """'max', 'average', or the Lp pool's exponent p."""
        return int(node.attr("p", 2)) if self.mode == "lp" else self.mode

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        x = graph.tensor(node.inputs[0])
        geometry = pool_geometry(node, x.shape)
        kernel, outs = geometry[0], geometry[1]
        mode, include = self._mode(node), includes_pad(node)
        # Reduce counts ops per input element; a window reads each input about prod(kernel/stride)
        # times, so the count is rounded up from the true window work (never below it).
        per_window = math.prod(kernel) * (2 if self.mode == "lp" else 1) + (self.mode != "max")
        work = x.shape[0] * x.shape[1] * math.prod(outs) * per_window
        ops_per_element = max(1, -(-work // x.elements))
        ops: list[IROp] = [Reduce(name=node.name, node=node.name, op=node.op, inputs=input_operands(node, graph),
                                  output=output_operand(node, graph), axes=tuple(range(2, len(x.shape))),
                                  ops_per_element=ops_per_element, fn=lambda a: _pool(a, mode, geometry, include))]
        if len(node.outputs) > 1 and node.outputs[1]:
            # the Indices: the same window compares, each with a select of the position (twice the ops)
            column = bool(node.attr("storage_order", 0))
            ops.append(Reduce(name=f"{node.name}:1", node=node.name, op=node.op, inputs=input_operands(node, graph),
                              output=output_operand(node, graph, 1), axes=tuple(range(2, len(x.shape))),
                              ops_per_element=2 * ops_per_element, fn=lambda a: _argmax(a, geometry, column)))
        return ops


@register("MaxPool")
class MaxPool(_Pool):
    mode = "max"


@register("AveragePool")
class AveragePool(_Pool):
    mode = "average"


@register("LpPool")
class LpPool(_Pool):
    mode = "lp"


class _GlobalPool(OpDef):
    reduce: Callable[..., Any] = staticmethod(np.max)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x = require(node, ins, 1)[0]
        if len(x.shape) < 3:
            raise fail(node, f"input has shape {list(x.shape)}; expected N, C and at least one spatial axis")
        return [out(node, x.shape[:2] + (1,) * (len(x.shape) - 2), x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [self._apply(given(node, args, 1)[0])]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        rank = len(graph.tensor(node.inputs[0]).shape)
        # one add (or compare) per input element; the single divide per output is negligible
        return [Reduce(name=node.name, node=node.name, op=node.op, inputs=input_operands(node, graph),
                       output=output_operand(node, graph), axes=tuple(range(2, rank)), ops_per_element=1,
                       fn=self._apply)]

    def _apply(self, x: np.ndarray) -> np.ndarray:
        axes = tuple(range(2, x.ndim))
        work = x.astype(np.float32) if x.dtype == np.float16 else x
        result: np.ndarray = self.reduce(work, axis=axes, keepdims=True).astype(x.dtype)
        return result


@register("GlobalMaxPool")
class GlobalMaxPool(_GlobalPool):
    reduce = staticmethod(np.max)


@register("GlobalAveragePool")
class GlobalAveragePool(_GlobalPool):
    reduce = staticmethod(np.mean)


def _check_p(node: Node, mode: str) -> None:
    if mode == "lp" and int(node.attr("p", 2)) < 1:
        raise fail(node, f"attribute p={node.attr('p')} is not allowed (a positive integer)")


def includes_pad(node: Node) -> bool:
    """Whether an AveragePool divides by the window with its padding (count_include_pad), as its gradient does."""
    return bool(node.attr("count_include_pad", 0))


def pool_geometry(node: Node, shape: tuple[int, ...]) -> tuple[list[int], ...]:
    """(kernel, outs, pads_begin, pads_end, strides, dilations) of a pooling node for an input shape (its gradient's
    too)."""
    if len(shape) < 3:
        raise fail(node, f"input has shape {list(shape)}; expected N, C and at least one spatial axis")
    kernel = node.attr("kernel_shape")
    rank = len(shape) - 2
    if kernel is None or len(kernel) != rank or any(int(k) < 1 for k in kernel):
        raise fail(node, f"kernel_shape must be {rank} positive integers (one per spatial axis), got "
                         f"{None if kernel is None else list(kernel)}")
    kernel = [int(k) for k in kernel]
    outs, begin, end, strides, dilations = window_geometry(node, list(shape[2:]), kernel,
                                                           bool(node.attr("ceil_mode", 0)))
    return kernel, outs, begin, end, strides, dilations


def _argmax(x: np.ndarray, geometry: tuple[list[int], ...], column_major: bool) -> np.ndarray:
    """MaxPool's Indices: where in x (flattened over N, C and the spatial axes, the spatial ones in column-major
    order when asked) each window's first maximum lies; padding is never chosen."""
    kernel, outs, begin, end, strides, dilations = geometry
    sizes = x.shape[2:]
    extra = [max(0, (o - 1) * s + (k - 1) * d + 1 - (n + b + e))
             for o, s, k, d, n, b, e in zip(outs, strides, kernel, dilations, sizes, begin, end)]
    pads = [(b, e + x_) for b, e, x_ in zip(begin, end, extra)]
    spatial = math.prod(sizes)
    position = np.pad(np.arange(spatial).reshape(sizes, order="F" if column_major else "C"), pads,
                      constant_values=-1)
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    xp = np.pad(x, [(0, 0), (0, 0)] + pads, constant_values=fill)
    best = np.full(x.shape[:2] + tuple(outs), fill, dtype=x.dtype)
    where = np.full(x.shape[:2] + tuple(outs), -1, dtype=np.int64)
    for offsets in itertools.product(*(range(k) for k in kernel)):
        window = tuple(slice(o * d, o * d + s * (p - 1) + 1, s)
                       for o, d, s, p in zip(offsets, dilations, strides, outs))
        patch, at = xp[(slice(None), slice(None)) + window], position[window]
        better = (patch > best) & (at >= 0) | (where < 0) & (at >= 0)
        best = np.where(better, patch, best)
        where = np.where(better, at, where)
    planes = np.arange(x.shape[0] * x.shape[1]).reshape(x.shape[:2] + (1,) * len(sizes)) * spatial
    return planes + where


def _pool(x: np.ndarray, mode: int | str, geometry: tuple[list[int], ...], include_pad: bool) -> np.ndarray:
    """mode: 'max', 'average', or an int p for an Lp pool."""
    kernel, outs, begin, end, strides, dilations = geometry
    sizes = x.shape[2:]
    # ceil_mode may let the last window run past the end padding: pad further, and count none of it
    extra = [max(0, (o - 1) * s + (k - 1) * d + 1 - (n + b + e))
             for o, s, k, d, n, b, e in zip(outs, strides, kernel, dilations, sizes, begin, end)]
    pads = [(b, e + x_) for b, e, x_ in zip(begin, end, extra)]
    if mode == "max":
        fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        xp = np.pad(x, [(0, 0), (0, 0)] + pads, constant_values=fill)
        acc = np.full(x.shape[:2] + tuple(outs), fill, dtype=x.dtype)
    elif mode != "average":   # Lp: the padding's zeros add nothing
        work = np.float64 if x.dtype == np.float64 else np.float32
        xp = np.pad(np.abs(x.astype(work)) ** mode, [(0, 0), (0, 0)] + pads)
        acc = np.zeros(x.shape[:2] + tuple(outs), dtype=work)
    else:
        work = np.float64 if x.dtype == np.float64 else np.float32
        xp = np.pad(x.astype(work), [(0, 0), (0, 0)] + pads)
        acc = np.zeros(x.shape[:2] + tuple(outs), dtype=work)
        # which padded positions count towards the divisor: the real input, plus the pads if included
        mask = np.pad(np.ones(sizes, dtype=work), list(zip(begin, end)), constant_values=float(include_pad))
        mask = np.pad(mask, [(0, e) for e in extra])
        count = np.zeros(tuple(outs), dtype=work)
    for offsets in itertools.product(*(range(k) for k in kernel)):
        window = tuple(slice(o * d, o * d + s * (p - 1) + 1, s)
                       for o, d, s, p in zip(offsets, dilations, strides, outs))
        patch = xp[(slice(None), slice(None)) + window]
        if mode == "max":
            acc = np.maximum(acc, patch)
        elif mode != "average":
            acc += patch
        else:
            acc += patch
            count += mask[window]
    if mode == "max":
        return acc
    if mode != "average":       # an Lp pool's p
        root: np.ndarray = (acc ** (1.0 / int(mode))).astype(x.dtype)
        return root
    return (acc / np.maximum(count, 1)).astype(x.dtype)
