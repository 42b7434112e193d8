"""Sampling at computed positions: GridSample (opset 16+, 2D; opset 20+, N-D: nearest, (bi)linear, (bi)cubic;
zeros, border and reflection padding), AffineGrid (opset 20+) and RoiAlign (opset 10+, avg or max).

Invariant: each lowers to one Map that reads its data and computed positions and counts, per output element,
the multiply-adds of its interpolation taps (plus the coordinate arithmetic), as ONNX's reference defines them.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, const_input, fail, given, map_reference, out, register, require

GRID_MODES = {"nearest": 1, "linear": 2, "bilinear": 2, "cubic": 4, "bicubic": 4}   # taps per axis
PADDINGS = ("zeros", "border", "reflection")


@register("GridSample")
class GridSample(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, grid = require(node, ins, 2)
        rank = len(x.shape) - 2
        if rank < 1 or grid.shape != (x.shape[0], *grid.shape[1:-1], rank) or len(grid.shape) != rank + 2:
            raise fail(node, f"grid has shape {list(grid.shape)}; for input {list(x.shape)} it must be "
                             f"[{x.shape[0]}, {rank} output sizes..., {rank}]")
        if node.attr("mode", "linear" if graph.opset >= 20 else "bilinear") not in GRID_MODES:
            raise fail(node, f"mode {node.attr('mode')!r} is not one of {', '.join(GRID_MODES)}")
        if node.attr("padding_mode", "zeros") not in PADDINGS:
            raise fail(node, f"padding_mode {node.attr('padding_mode')!r} is not one of {', '.join(PADDINGS)}")
        node.resolved["mode"] = node.attr("mode", "linear" if graph.opset >= 20 else "bilinear")
        return [out(node, (x.shape[0], x.shape[1], *grid.shape[1:-1]), x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x, grid = given(node, args, 2)
        return [grid_sample(x, grid, node.resolved["mode"], node.attr("padding_mode", "zeros"),
                            bool(node.attr("align_corners", 0)))]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        rank = len(graph.tensor(node.inputs[0]).shape) - 2
        taps = GRID_MODES[node.resolved["mode"]] ** rank
        return map_reference(self, node, graph, ops_per_element=2 * taps + 6 * rank)


def grid_sample(x: np.ndarray, grid: np.ndarray, mode: str, padding: str, align: bool) -> np.ndarray:
    n, c, sizes = x.shape[0], x.shape[1], x.shape[2:]
    rank = len(sizes)
    points = grid.reshape(n, -1, rank)[..., ::-1].astype(np.float32)        # (x, y[, z]) -> data axis order
    y = np.zeros((n, c, points.shape[1]), np.float64)
    for b in range(n):
        per_axis = [_grid_taps(points[b, :, k], sizes[k], mode, padding, align) for k in range(rank)]
        for combo in itertools.product(*(range(GRID_MODES[mode]) for _ in range(rank))):
            weight = np.ones(points.shape[1])
            index = []
            for (idx, w, valid), j in zip(per_axis, combo):
                weight = weight * w[:, j] * valid[:, j]
                index.append(idx[:, j])
            y[b] += x[b][(slice(None), *index)] * weight
    return y.reshape(n, c, *grid.shape[1:-1]).astype(x.dtype)


def _grid_taps(g: np.ndarray, size: int, mode: str, padding: str, align: bool
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One axis: (index[points, taps], weight[points, taps], in_range[points, taps]) of normalized coords g."""
    length = np.float32(size)
    x = (g + 1) / 2 * (length - 1) if align else ((g + 1) * length - 1) / 2
    x = x.astype(np.float64)
    lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
    if mode == "nearest":
        x = np.rint(x)
    outside = (x < lo) | (x > hi)
    if padding == "border" and GRID_MODES[mode] < 4:
        # cubic clamps each tap instead (onnxruntime and PyTorch; the spec leaves it open)
        x = np.where(outside, np.clip(x, 0, size - 1), x)
    elif padding == "reflection":
        x = np.where(outside, _reflect(x, lo, hi), x)
    if mode == "nearest":
        index, weight = np.trunc(x).astype(np.int64)[:, None], np.ones((len(x), 1))
    else:
        base = np.floor(x)
        t = x - base
        offsets = np.arange(2) if mode in ("linear", "bilinear") else np.arange(-1, 3)
        index = base.astype(np.int64)[:, None] + offsets[None, :]
        weight = np.stack([1 - t, t], axis=1) if len(offsets) == 2 else _keys(t)
    if padding == "zeros":
        valid = (index >= 0) & (index < size)
    else:
        valid = np.ones(index.shape, bool)
        index = np.clip(index, 0, size - 1) if padding == "border" else \
            np.trunc(_reflect(index.astype(np.float64), lo, hi)).astype(np.int64)
    return np.clip(index, 0, size - 1), weight, valid


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """x folded back into [lo, hi] by reflecting at the ends, as many times as it takes."""
    span = hi - lo
    if span <= 0:
        return np.full(x.shape, lo)
    below, above = x < lo, x > hi
    distance = np.where(below, lo - x, np.where(above, x - hi, 0.0))
    flips = np.floor(distance / span)
    rest = distance - flips * span
    even = flips % 2 == 0
    folded_below = np.where(even, lo + rest, hi - rest)
    folded_above = np.where(even, hi - rest, lo + rest)
    return np.where(below, folded_below, np.where(above, folded_above, x))


def _keys(t: np.ndarray, a: float = -0.75) -> np.ndarray:
    """Keys' cubic weights of the taps at distances 1 + t, t, 1 - t, 2 - t."""
    d = np.stack([1 + t, t, 1 - t, 2 - t], axis=1)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    weights: np.ndarray = np.where(d <= 1, near, far)
    return weights


@register("AffineGrid")
class AffineGrid(OpDef):
    value_inputs = (1,)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        theta = require(node, ins, 2)[0]
        size = [int(v) for v in const_input(node, graph, 1, "size").reshape(-1)]
        rank = len(size) - 2
        if rank not in (2, 3) or theta.shape != (size[0], rank, rank + 1):
            raise fail(node, f"size {size} must be [N, C, H, W] or [N, C, D, H, W] and theta "
                             f"[N, 2, 3] or [N, 3, 4] to match; theta is {list(theta.shape)}")
        node.resolved["size"] = size
        return [out(node, (size[0], *size[2:], rank), theta.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        (theta,), size = given(node, args, 1), node.resolved["size"]
        align = bool(node.attr("align_corners", 0))
        axes = [np.linspace(-1, 1, n) if align else (2 * np.arange(n) + 1) / n - 1 for n in size[2:]]
        mesh = np.meshgrid(*axes, indexing="ij")                      # data order (D,) H, W
        base = np.stack([m.reshape(-1) for m in mesh[::-1]] + [np.ones(mesh[0].size)], axis=1)  # (x, y[, z], 1)
        grid = np.einsum("pk,njk->npj", base.astype(theta.dtype), theta)
        return [grid.reshape(size[0], *size[2:], len(size) - 2).astype(theta.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        rank = len(node.resolved["size"]) - 2
        return map_reference(self, node, graph, ops_per_element=2 * (rank + 1))   # a (rank+1)-term dot product


@register("RoiAlign")
class RoiAlign(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, rois, index = require(node, ins, 3)
        if len(x.shape) != 4 or len(rois.shape) != 2 or rois.shape[1] != 4 or index.shape != (rois.shape[0],):
            raise fail(node, f"input {list(x.shape)} must be [N, C, H, W], rois {list(rois.shape)} [R, 4] and "
                             f"batch_indices {list(index.shape)} [R]")
        if node.attr("mode", "avg") not in ("avg", "max"):
            raise fail(node, f"mode {node.attr('mode')!r} is not one of avg, max")
        transform = node.attr("coordinate_transformation_mode", "half_pixel" if graph.opset >= 16 else
                              "output_half_pixel")
        if transform not in ("half_pixel", "output_half_pixel"):
            raise fail(node, f"coordinate_transformation_mode {transform!r} is not one of half_pixel, "
                             f"output_half_pixel")
        node.resolved["half_pixel"] = transform == "half_pixel"
        return [out(node, (rois.shape[0], x.shape[1], int(node.attr("output_height", 1)),
                           int(node.attr("output_width", 1))), x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x, rois, index = given(node, args, 3)
        ph, pw = int(node.attr("output_height", 1)), int(node.attr("output_width", 1))
        y = np.zeros((rois.shape[0], x.shape[1], ph, pw), np.float64)
        for r in range(rois.shape[0]):
            y[r] = _roi(node, x[int(index[r])].astype(np.float64), rois[r].astype(np.float64), ph, pw)
        return [y.astype(x.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        x = graph.tensor(node.inputs[0])
        ratio = int(node.attr("sampling_ratio", 0))
        ph, pw = int(node.attr("output_height", 1)), int(node.attr("output_width", 1))
        # the adaptive sample count depends on the boxes: priced at its bound for a box spanning the input
        samples = ratio * ratio if ratio > 0 else math.ceil(x.shape[2] / ph) * math.ceil(x.shape[3] / pw)
        return map_reference(self, node, graph, ops_per_element=samples * 8)   # 4 corners: multiply and add


def _roi(node: Node, image: np.ndarray, box: np.ndarray, ph: int, pw: int) -> np.ndarray:
    """One box pooled from image[C, H, W] into [C, ph, pw]: bilinear samples on a grid in each bin."""
    height, width = image.shape[1:]
    half = node.resolved["half_pixel"]
    scale = float(node.attr("spatial_scale", 1.0))
    start_w, start_h, end_w, end_h = box * scale - (0.5 if half else 0.0)
    roi_w, roi_h = end_w - start_w, end_h - start_h
    if not half:
        roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
    ratio = int(node.attr("sampling_ratio", 0))
    grid_h = ratio if ratio > 0 else int(np.ceil(roi_h / ph))
    grid_w = ratio if ratio > 0 else int(np.ceil(roi_w / pw))
    ys = _samples(start_h, roi_h / ph, ph, grid_h, height)
    xs = _samples(start_w, roi_w / pw, pw, grid_w, width)
    (y_lo, y_hi, ly, y_ok), (x_lo, x_hi, lx, x_ok) = ys, xs
    ok = y_ok[:, :, None, None] & x_ok[None, None, :, :]                    # (ph, gh, pw, gw)
    corners = []
    for rows, wy in ((y_lo, 1 - ly), (y_hi, ly)):
        for cols, wx in ((x_lo, 1 - lx), (x_hi, lx)):
            w = np.where(ok, wy[:, :, None, None] * wx[None, None, :, :], 0.0)
            v = image[:, rows[:, :, None, None], cols[None, None, :, :]]
            corners.append(np.where(ok, w * v, 0.0))
    if node.attr("mode", "avg") == "max":
        pooled = np.max(np.max(corners, axis=0), axis=(2, 4)) if grid_h * grid_w else np.zeros((1, ph, pw))
    else:
        pooled = np.sum(corners, axis=0).sum(axis=(2, 4)) / max(grid_h * grid_w, 1)
    return np.broadcast_to(pooled, (image.shape[0], ph, pw))


def _samples(start: float, bin_size: float, bins: int, grid: int, length: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sample rows along one axis per (bin, sample): low and high rows, the fraction, and whether in range."""
    pos = start + np.arange(bins)[:, None] * bin_size + (np.arange(grid)[None, :] + 0.5) * bin_size / max(grid, 1)
    ok = (pos >= -1.0) & (pos <= length)
    pos = np.maximum(pos, 0)
    low = np.trunc(pos).astype(np.int64)
    edge = low >= length - 1
    low = np.where(edge, length - 1, low)
    high = np.where(edge, length - 1, low + 1)
    pos = np.where(edge, low, pos)
    return low, high, pos - low, ok
