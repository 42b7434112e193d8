"""Resize (opset 10+: nearest, linear, cubic, antialias, scales or sizes, axes, keep_aspect_ratio_policy, every
coordinate_transformation_mode) and Upsample (opset 7-9: nearest or linear, asymmetric coordinates).

Resizing is separable: each resized axis is one matrix of taps (output index x input index, a few non-zero
weights a row) applied in turn. Invariant: the reference and the lowering share that one per-axis rule; nearest
lowers to a gather (one Move), the interpolating modes to one Map of 2 ops (multiply, add) per tap per axis.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map
from compiler.ops.base import (OpDef, fail, given, input_operands, move_op, normalize_axis, out, output_operand,
                               register, require, unknown)

MODES = ("nearest", "linear", "cubic")
TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
              "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
POLICIES = ("stretch", "not_larger", "not_smaller")


@dataclass(frozen=True)
class _Plan:
    """A resolved Resize: per resized axis, its output size, scale and (tf_crop_and_resize) region."""

    axes: tuple[int, ...]
    sizes: tuple[int, ...]
    scales: tuple[float, ...]
    rois: tuple[tuple[float, float] | None, ...]
    mode: str
    transform: str
    nearest: str
    cubic_a: float
    exclude_outside: bool
    antialias: bool
    extrapolation: float


@register("Resize", "Upsample")
class Resize(OpDef):
    value_inputs = (1, 2, 3)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1, 4)
        plan = _plan(node, graph, x.shape)
        node.resolved["plan"] = plan
        shape = list(x.shape)
        for axis, size in zip(plan.axes, plan.sizes):
            shape[axis] = size
        return [out(node, shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [resize(node.resolved["plan"], given(node, args, 1)[0])]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        plan = node.resolved["plan"]
        data = input_operands(node, graph)[:1]
        if plan.mode == "nearest":
            return [move_op(node, graph, lambda x: resize(plan, x), inputs=data)]
        taps = sum(len(_taps(plan, i, graph.tensor(node.inputs[0]).shape[a])[1][0])
                   for i, a in enumerate(plan.axes))
        return [Map(name=node.name, node=node.name, op=node.op, inputs=data, output=output_operand(node, graph),
                    fn=lambda x: resize(plan, x), ops_per_element=2 * taps)]


def resize(plan: _Plan, x: np.ndarray) -> np.ndarray:
    """x resized one axis at a time (in float64), cast back to x's dtype (integers rounded and saturated)."""
    y = x.astype(np.float64)
    for i, axis in enumerate(plan.axes):
        index, weight, outside = _taps(plan, i, x.shape[axis])
        gathered = np.take(y, index, axis=axis)           # output positions x taps in place of the axis
        shape = (1,) * axis + weight.shape + (1,) * (y.ndim - axis - 1)
        y = (gathered * weight.reshape(shape)).sum(axis=axis + 1)
        if outside.any():
            mask = outside.reshape((1,) * axis + outside.shape + (1,) * (y.ndim - axis - 1))
            y = np.where(mask, plan.extrapolation, y)
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        return np.clip(np.rint(y), info.min, info.max).astype(x.dtype)
    return y.astype(x.dtype)


def _taps(plan: _Plan, i: int, length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Resized axis i of input length `length`: (input index[out, taps], weight[out, taps], outside[out]).

    Every mode reads taps base + j, j from 1 - n/2, where base = ceil(x) - 1 and ratio = x - base in (0, 1]
    (x: the output position mapped to input coordinates); indices past the edge read the edge."""
    size, scale = plan.sizes[i], plan.scales[i]
    x = _source(plan, i, length)
    base = np.ceil(x) - 1
    ratio = x - base
    weight = _weights(plan, ratio, scale)
    n = weight.shape[1]
    index = base[:, None].astype(np.int64) + np.arange(1 - n // 2, 1 - n // 2 + n)[None, :]
    if plan.exclude_outside:
        weight = np.where((index < 0) | (index >= length), 0.0, weight)
        total = weight.sum(axis=1, keepdims=True)
        weight = weight / np.where(total == 0, 1.0, total)
    outside = np.zeros(size, bool)
    if plan.transform == "tf_crop_and_resize":
        outside = (x < 0) | (x > length - 1)
    return np.clip(index, 0, length - 1), weight, outside


def _source(plan: _Plan, i: int, length: int) -> np.ndarray:
    """Output positions 0..size-1 of resized axis i in input coordinates, by coordinate_transformation_mode."""
    size, scale, mode = plan.sizes[i], plan.scales[i], plan.transform
    y = np.arange(size, dtype=np.float64)
    scaled = scale * length                               # the output length before rounding
    # the corner-aligned modes divide by the output length (the spec's length_resized, as onnxruntime does;
    # onnx's numpy reference divides by scale * length, which differs when that is fractional)
    if mode == "align_corners":
        return np.zeros(size) if size == 1 else y * (length - 1) / (size - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_crop_and_resize":
        start, end = cast(tuple[float, float], plan.rois[i])    # tf_crop_and_resize: every axis has its roi
        x = np.full(size, (end - start) * (length - 1) / 2) if size == 1 \
            else y * (end - start) * (length - 1) / (size - 1)
        return x + start * (length - 1)
    if mode == "pytorch_half_pixel":
        return np.full(size, -0.5) if size == 1 else (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = length / 2 * (1 - size / scaled)
        return offset + (y + 0.5) / scale - 0.5
    return (y + 0.5) / scale - 0.5                        # half_pixel


def _weights(plan: _Plan, ratio: np.ndarray, scale: float) -> np.ndarray:
    """Tap weights[out, taps] for ratios in (0, 1] (ratio 1: the sample sits on an input index)."""
    if plan.mode == "nearest":
        if plan.nearest == "round_prefer_floor":
            upper = ratio > 0.5
        elif plan.nearest == "round_prefer_ceil":
            upper = ratio >= 0.5
        else:
            upper = np.full(ratio.shape, plan.nearest == "ceil")
        upper = upper | (ratio == 1)
        return np.stack([~upper, upper], axis=1).astype(np.float64)
    if plan.antialias and scale < 1:
        # the kernel stretched by 1/scale: more taps, weights normalized to sum to 1
        reach = 1 if plan.mode == "linear" else 2
        start = math.floor(-reach / scale) + 1
        offsets = np.arange(start, 2 - start)
        t = np.abs(scale * (offsets[None, :] - ratio[:, None]))
        w = np.clip(1 - t, 0, 1) if plan.mode == "linear" else _cubic(t, plan.cubic_a)
        result: np.ndarray = w / w.sum(axis=1, keepdims=True)
        return result
    if plan.mode == "linear":
        return np.stack([1 - ratio, ratio], axis=1)
    t = np.stack([1 + ratio, ratio, 1 - ratio, 2 - ratio], axis=1)
    return _cubic(t, plan.cubic_a)


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel at distances t >= 0."""
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def _plan(node: Node, graph: Graph, shape: tuple[int, ...]) -> _Plan:
    rank = len(shape)
    if node.op == "Upsample":
        return _upsample_plan(node, graph, shape)
    mode = node.attr("mode", "nearest")
    transform = node.attr("coordinate_transformation_mode", "half_pixel")
    nearest = node.attr("nearest_mode", "round_prefer_floor")
    policy = node.attr("keep_aspect_ratio_policy", "stretch")
    for key, value, allowed in (("mode", mode, MODES), ("coordinate_transformation_mode", transform, TRANSFORMS),
                                ("nearest_mode", nearest, NEAREST_MODES), ("keep_aspect_ratio_policy", policy,
                                                                           POLICIES)):
        if value not in allowed:
            raise fail(node, f"{key} {value!r} is not one of {', '.join(allowed)}")
    axes = [normalize_axis(node, int(a), rank) for a in node.attr("axes", range(rank))]
    if len(set(axes)) != len(axes):
        raise fail(node, f"axes {list(node.attr('axes'))} name an axis twice")
    if graph.opset < 11:             # Resize-10: (X, scales), asymmetric coordinates, nearest rounds down
        scales, sizes, roi = _value(node, graph, 1, "scales"), None, None
        transform, nearest = "asymmetric", "floor"
    else:
        roi, scales, sizes = (_value(node, graph, i, what) for i, what in ((1, "roi"), (2, "scales"), (3, "sizes")))
    given = scales if scales is not None else sizes
    if given is None or scales is not None and sizes is not None:
        raise fail(node, "give exactly one of scales and sizes (the other omitted or empty)")
    count = len(axes)
    if given.ndim != 1 or len(given) != count:
        raise fail(node, f"{'scales' if scales is not None else 'sizes'} has {given.size} values; it needs one "
                         f"per resized axis ({count})")
    lengths = [shape[a] for a in axes]
    if scales is not None:
        factors = [float(s) for s in scales]
        if not all(math.isfinite(s) and s > 0 for s in factors):   # nan and inf make no output size
            raise fail(node, f"scales {factors} must be positive finite numbers")
        outs = [int(math.floor(n * s)) for n, s in zip(lengths, factors)]
    else:
        outs = [int(s) for s in given]        # the sizes
        if any(s < 1 for s in outs):
            raise fail(node, f"sizes {outs} must be positive")
        if 0 in lengths:
            raise fail(node, f"resizes an empty axis (input shape {list(shape)}) to sizes {outs}: no scale does that")
        factors = [o / n for o, n in zip(outs, lengths)]
        if policy != "stretch":
            one = min(factors) if policy == "not_larger" else max(factors)
            factors = [one] * count
            outs = [int(n * one + 0.5) for n in lengths]
    rois: list[tuple[float, float] | None] = [None] * count
    if transform == "tf_crop_and_resize":
        if roi is None or roi.size != 2 * count:
            raise fail(node, f"coordinate_transformation_mode tf_crop_and_resize needs roi with {2 * count} values "
                             f"(starts then ends of the resized axes)")
        rois = [(float(roi[i]), float(roi[count + i])) for i in range(count)]
    kept = [i for i in range(count) if not (math.isclose(factors[i], 1.0) and outs[i] == lengths[i]
                                            and (rois[i] is None or rois[i] == (0.0, 1.0)))]
    antialias = bool(node.attr("antialias", 0))
    if antialias and mode == "nearest":
        raise fail(node, "antialias applies to the linear and cubic modes, not nearest")
    return _Plan(axes=tuple(axes[i] for i in kept), sizes=tuple(outs[i] for i in kept),
                 scales=tuple(factors[i] for i in kept), rois=tuple(rois[i] for i in kept), mode=mode,
                 transform=transform, nearest=nearest, cubic_a=float(node.attr("cubic_coeff_a", -0.75)),
                 exclude_outside=bool(node.attr("exclude_outside", 0)), antialias=antialias,
                 extrapolation=float(node.attr("extrapolation_value", 0.0)))


def _upsample_plan(node: Node, graph: Graph, shape: tuple[int, ...]) -> _Plan:
    mode = node.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "bilinear"):
        raise fail(node, f"mode {mode!r} is not one of nearest, linear, bilinear")
    scales = node.attr("scales")
    scales = _value(node, graph, 1, "scales") if scales is None else np.asarray(scales, np.float64)
    if scales is None or scales.ndim != 1 or len(scales) != len(shape) or any(s < 1 for s in scales):
        raise fail(node, f"scales must be {len(shape)} values >= 1 (one per axis), got "
                         f"{None if scales is None else scales.tolist()}")
    axes = [a for a, s in enumerate(scales) if s != 1]
    return _Plan(axes=tuple(axes), sizes=tuple(int(math.floor(shape[a] * scales[a])) for a in axes),
                 scales=tuple(float(scales[a]) for a in axes), rois=(None,) * len(axes),
                 mode="nearest" if mode == "nearest" else "linear", transform="asymmetric", nearest="floor",
                 cubic_a=-0.75, exclude_outside=False, antialias=False, extrapolation=0.0)


def _value(node: Node, graph: Graph, index: int, what: str) -> np.ndarray | None:
    """A value input (roi, scales, sizes): None when omitted or empty; otherwise it must be known at import."""
    name = node.inputs[index] if index < len(node.inputs) else ""
    if not name:
        return None
    value = graph.value(name)
    if value is None:
        if graph.tensor(name).shape in ((0,), ()):
            return None
        raise unknown(node, f"input {index} ({what}, tensor {name!r}) must be a constant known at import time",
                      name)
    value = np.asarray(value)
    return None if value.size == 0 else value.astype(np.float64 if what != "sizes" else np.int64)
