"""Pad: grow (or, with negative pads, crop) each axis at both ends; constant, reflect, edge or wrap mode.

Pads arrive as attributes before opset 11 and as constant inputs from 11 (axes from 18). One Move.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, const_input, fail, move_op, normalize_axis, operand, out, register, require

_MODES = ("constant", "reflect", "edge", "wrap")
_NUMPY_MODES: dict[str, Literal["reflect", "edge", "wrap"]] = {"reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def pad_widths(node: Node, rank: int, pads: ArrayLike, axes: ArrayLike | None) -> list[tuple[int, int]]:
    """Per axis (before, after) from ONNX's [x1_begin, x2_begin, ..., x1_end, x2_end] over `axes`."""
    sizes = [int(p) for p in np.asarray(pads).reshape(-1)]
    padded = list(range(rank)) if axes is None else [normalize_axis(node, int(a), rank)
                                                      for a in np.asarray(axes).reshape(-1)]
    if len(sizes) != 2 * len(padded):
        raise fail(node, f"pads {sizes} must hold 2 x {len(padded)} values (begins, then ends)")
    widths = [(0, 0)] * rank
    for i, axis in enumerate(padded):
        widths[axis] = (sizes[i], sizes[i + len(padded)])
    return widths


def pad(node: Node, x: np.ndarray, widths: list[tuple[int, int]], value: ArrayLike) -> np.ndarray:
    mode = node.attr("mode", "constant")
    # Negative pads crop first; np.pad only grows.
    crop = tuple(slice(-min(b, 0), x.shape[i] + min(e, 0)) for i, (b, e) in enumerate(widths))
    x = x[crop]
    grow = [(max(b, 0), max(e, 0)) for b, e in widths]
    if mode == "constant":
        return np.pad(x, grow, mode="constant", constant_values=np.asarray(value, dtype=x.dtype).reshape(()))
    return np.pad(x, grow, mode=_NUMPY_MODES[mode])


@register("Pad")
class Pad(OpDef):
    value_inputs = (1, 2, 3)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        legacy = "pads" in node.attrs
        x = require(node, ins, 1 if legacy else 2, 1 if legacy else 4)[0]
        mode = node.attr("mode", "constant")
        if mode not in _MODES:
            raise fail(node, f"mode {mode!r} is not allowed ({', '.join(_MODES)})")
        if len(node.inputs) > 2 and node.inputs[2]:
            const_input(node, graph, 2, "constant_value")
        shape = x.shape
        widths = self._widths(node, len(shape), lambda i, what: const_input(node, graph, i, what))
        result = [d + b + e for d, (b, e) in zip(shape, widths)]
        if any(d < 0 for d in result):
            raise fail(node, f"pads {widths} crop more than the input {list(shape)} holds")
        for d, (b, e), axis in zip(shape, widths, range(len(shape))):
            if mode in ("reflect", "edge", "wrap") and (b > 0 or e > 0) and d == 0:
                raise fail(node, f"mode {mode!r} cannot pad axis {axis} of size 0")
            if mode == "reflect" and max(b, e) >= d:
                raise fail(node, f"reflect pads {b}, {e} on axis {axis} must be smaller than its size {d}")
        return [out(node, result, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(args[0])
        widths = self._widths(node, x.ndim, lambda i, what: args[i])
        return [pad(node, x, widths, self._value(node, lambda i: args[i] if i < len(args) else None))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        rank = len(graph.tensor(node.inputs[0]).shape)
        widths = self._widths(node, rank, lambda i, what: graph.value(node.inputs[i]))
        value = self._value(node, lambda i: graph.value(node.inputs[i]) if i < len(node.inputs) and node.inputs[i]
                            else None)
        data = (operand(graph, node.inputs[0]),)
        return [move_op(node, graph, lambda x: pad(node, np.asarray(x), widths, value), inputs=data)]

    @staticmethod
    def _widths(node: Node, rank: int, value: Callable[[int, str], Any]) -> list[tuple[int, int]]:
        if "pads" in node.attrs:
            return pad_widths(node, rank, node.attrs["pads"], None)
        axes = value(3, "axes") if len(node.inputs) > 3 and node.inputs[3] else None
        return pad_widths(node, rank, value(1, "pads"), axes)

    @staticmethod
    def _value(node: Node, value: Callable[[int], Any]) -> Any:
        if "pads" in node.attrs:
            return node.attr("value", 0.0)
        given = value(2)
        return 0 if given is None else np.asarray(given).reshape(-1)[0]
