"""Normalisations' gradients, and the statistics of x they read, in the domain `ai.accelsim.training`.

NormStats(x; axes, epsilon) -> mean, inv_std: over `axes` (kept as size 1), the mean and 1 / sqrt(population
variance + epsilon), in fp64 for fp64 x and fp32 otherwise: the numbers BatchNormalization's training mode computes.
BatchNormGrad(dy, x, scale, mean, inv_std) -> dx, dscale, dbias: mean, inv_std [1, C, 1...]; dscale, dbias [C].
LayerNormGrad(dy, x, scale, mean, inv_std; axis) -> dx, dscale, dbias: mean, inv_std x's shape with the axes from
`axis` on 1; dscale, dbias the normalised shape x.shape[axis:] (the rule sums them to Scale's and B's shapes).

With xhat = (x - mean) * inv_std and M the elements one statistic covers:
    dbias = sum dy,  dscale = sum dy * xhat     (BN: over every axis but 1; LN: over the axes before `axis`)
    BN: dx = scale * inv_std * (dy - dbias / M - xhat * dscale / M)
    LN: g = dy * scale;  dx = inv_std * (g - mean(g) - xhat * mean(g * xhat))   (means over the normalised axes)
Invariant: a statistic's axes are the Reduce's axes, never cut; every other operand enters a chunked op with the
rank of the data ([1, C, 1...] views for BN's per-channel tensors), so a chunk along any other axis slices alike.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map, Move, Operand, Reduce
from compiler.ops.base import (TRAINING_DOMAIN, OpDef, broadcast, fail, given, normalize_axis, operand, out,
                               output_operand, register, require)
from compiler.ops.batchnorm import aligned_view, in_work, moments, read, statistic_axes, work_dtype
from compiler.ops.train import attr_axes, work


def _kept(shape: tuple[int, ...], axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _reduce(node: Node, name: str, inputs: Iterable[Operand], output: Operand, axes: Iterable[int], cost: int,
            fn: Callable[..., np.ndarray]) -> Reduce:
    return Reduce(name=name, node=node.name, op=node.op, inputs=tuple(inputs), output=output, axes=tuple(axes),
                  ops_per_element=cost, fn=fn)


@register("NormStats", domain=TRAINING_DOMAIN)
class NormStats(OpDef):
    """Attributes: axes (the reduced axes), epsilon."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        if not x.dtype.is_float:
            raise fail(node, f"input is {x.dtype.value}; NormStats takes a float tensor")
        kept = _kept(x.shape, attr_axes(node, len(x.shape)))
        return [out(node, kept, work_dtype(x.dtype), i) for i in range(2)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        (x,) = given(node, args, 1)
        mean, var = moments(x, attr_axes(node, np.ndim(x)))
        return [mean, _inv_std(var, node)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        x = operand(graph, node.inputs[0])
        axes = attr_axes(node, len(x.shape))
        mean, inv_std = output_operand(node, graph, 0), output_operand(node, graph, 1)
        # per element: the mean's add (1); the variance's subtract, square and add (3); the rsqrt is per row
        return [_reduce(node, f"{node.name}:0", [x], mean, axes, 1, lambda a: moments(a, axes)[0]),
                _reduce(node, f"{node.name}:1", [x, read(mean)], inv_std, axes, 3,
                        lambda a, m: _inv_std(np.square(in_work(a) - m).mean(axis=axes, keepdims=True), node))]


def _inv_std(var: np.ndarray, node: Node) -> np.ndarray:
    inv_std: np.ndarray = 1 / np.sqrt(var + var.dtype.type(node.attr("epsilon", 1e-5)))
    return inv_std


def _check_statistics(node: Node, ins: list[Tensor], kept: tuple[int, ...]) -> None:
    dy, x = ins[:2]
    if dy.shape != x.shape or not dy.dtype.is_float or not x.dtype.is_float:
        raise fail(node, f"dy is {dy.dtype.value} {list(dy.shape)} and x {x.dtype.value} {list(x.shape)}; both must "
                         f"be float tensors of one shape")
    for name, t in zip(("mean", "inv_std"), ins[3:5]):
        if t.shape != kept:
            raise fail(node, f"{name} has shape {list(t.shape)}, expected {list(kept)}")


@register("BatchNormGrad", domain=TRAINING_DOMAIN)
class BatchNormGrad(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        tensors = require(node, ins, 5)
        dy, x, scale = tensors[:3]
        if len(x.shape) < 2:
            raise fail(node, f"x has shape {list(x.shape)}; expected N x C x ...")
        _check_statistics(node, tensors, _kept(x.shape, statistic_axes(len(x.shape))))
        if scale.shape != x.shape[1:2]:
            raise fail(node, f"scale has shape {list(scale.shape)}, expected [{x.shape[1]}] (one per channel)")
        return [out(node, x.shape, dy.dtype), out(node, scale.shape, scale.dtype, 1),
                out(node, scale.shape, scale.dtype, 2)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        dy, x, scale, mean, inv_std = given(node, args, 5)
        axes = statistic_axes(np.ndim(x))
        dscale, dbias = _bn_sums(dy, x, mean, inv_std, axes), work(dy)[0].sum(axis=axes)
        dx = _bn_dx(dy, x, scale, mean, inv_std, dscale, dbias, count=np.size(x) // np.shape(x)[1])
        return [dx.astype(dy.dtype), dscale.astype(scale.dtype), dbias.astype(scale.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        dy, x, scale, mean, inv_std = (operand(graph, name) for name in node.inputs)
        axes = statistic_axes(len(x.shape))
        aligned = _kept(x.shape, axes)
        dscale, dbias = output_operand(node, graph, 1), output_operand(node, graph, 2)
        count = x.elements // x.shape[1]        # a chunk along N sees fewer: M is the whole batch's
        views = {what: aligned_view(node, source, aligned, what)
                 for what, source in (("scale", scale), ("dscale", dscale), ("dbias", dbias))}
        return [
            # per element: dbias's add (1); dscale's subtract, two multiplies and add (4)
            _reduce(node, f"{node.name}:2", [dy], dbias, axes, 1, lambda d: work(d)[0].sum(axis=axes)),
            _reduce(node, f"{node.name}:1", [dy, x, mean, inv_std], dscale, axes, 4,
                    lambda d, v, m, s: _bn_sums(d, v, m, s, axes)),
            *(view for view, _ in views.values()),
            # per element: xhat (subtract, multiply), dy - dbias/M (subtract), - xhat * dscale/M (multiply, subtract),
            # times scale * inv_std (multiply): 6; the per-channel factors fold (O(C))
            Map(name=f"{node.name}:0", node=node.name, op=node.op,
                inputs=(dy, x, views["scale"][1], mean, inv_std, views["dscale"][1], views["dbias"][1]),
                output=output_operand(node, graph), ops_per_element=6,
                fn=lambda d, v, s, m, i, ds, db: _bn_dx(d, v, s, m, i, ds, db, count=count))]


def _bn_sums(dy: np.ndarray, x: np.ndarray, mean: np.ndarray, inv_std: np.ndarray, axes: tuple[int, ...]
             ) -> np.ndarray:
    dy, x, mean, inv_std = work(dy, x, mean, inv_std)
    result: np.ndarray = (dy * (x - mean) * inv_std).sum(axis=axes).reshape(-1)
    return result


def _bn_dx(dy: np.ndarray, x: np.ndarray, scale: np.ndarray, mean: np.ndarray, inv_std: np.ndarray,
           dscale: np.ndarray, dbias: np.ndarray, count: int) -> np.ndarray:
    """dx from per-channel values that arrive as [C] (the reference) or [1, C, 1...] (a chunk); `count` is M."""
    dy, x, scale, mean, inv_std, dscale, dbias = work(dy, x, scale, mean, inv_std, dscale, dbias)
    aligned = _kept(x.shape, statistic_axes(x.ndim))
    scale, dscale, dbias = (np.asarray(p).reshape(aligned[:1] + (-1,) + aligned[2:]) for p in (scale, dscale, dbias))
    xhat = (x - mean) * inv_std
    result: np.ndarray = scale * inv_std * (dy - dbias / count - xhat * dscale / count)
    return result


@register("LayerNormGrad", domain=TRAINING_DOMAIN)
class LayerNormGrad(OpDef):
    """Attribute axis: LayerNormalization's (the first normalised axis)."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        tensors = require(node, ins, 5)
        dy, x, scale = tensors[:3]
        axis = normalize_axis(node, int(node.attr("axis", -1)), len(x.shape))
        normalized = x.shape[axis:]
        _check_statistics(node, tensors, x.shape[:axis] + (1,) * len(normalized))
        if broadcast(node, scale.shape, normalized) != normalized:
            raise fail(node, f"scale has shape {list(scale.shape)}, which does not broadcast to the normalised "
                             f"shape {list(normalized)}")
        return [out(node, x.shape, dy.dtype), out(node, normalized, scale.dtype, 1),
                out(node, normalized, scale.dtype, 2)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        dy, x, scale, mean, inv_std = given(node, args, 5)
        lead = tuple(range(self._axis(node, np.ndim(x))))
        dx = _ln_dx(dy, x, scale, mean, inv_std, self._axis(node, np.ndim(x)))
        dscale, dbias = _ln_sums(dy, x, mean, inv_std, lead), work(dy)[0].sum(axis=lead)
        return [dx.astype(dy.dtype), dscale.astype(scale.dtype), dbias.astype(scale.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        dy, x, scale, mean, inv_std = (operand(graph, name) for name in node.inputs)
        axis = self._axis(node, len(x.shape))
        lead, normalized = tuple(range(axis)), tuple(range(axis, len(x.shape)))
        dscale, dbias = output_operand(node, graph, 1), output_operand(node, graph, 2)
        # Scale enters with x's rank (size-1 axes ahead), so a chunk of leading rows does not slice it
        full = (1,) * (len(x.shape) - len(scale.shape)) + scale.shape
        view, scale_full = aligned_view(node, scale, full, "scale")
        # per element: xhat (2), g = dy * scale (1), the row sums of g and g * xhat (3), dx's subtract, multiply,
        # subtract and multiply (4): 10, one Reduce over the normalised axes
        ops: list[IROp] = [view, _reduce(node, f"{node.name}:0", [dy, x, scale_full, mean, inv_std],
                                         output_operand(node, graph), normalized, 10,
                                         lambda d, v, s, m, i: _ln_dx(d, v, s, m, i, axis))]
        if lead:    # per element: dscale's subtract, two multiplies and add (4); dbias's add (1)
            ops += [_reduce(node, f"{node.name}:1", [dy, x, mean, inv_std], dscale, lead, 4,
                            lambda d, v, m, s: _ln_sums(d, v, m, s, lead)),
                    _reduce(node, f"{node.name}:2", [dy], dbias, lead, 1, lambda d: work(d)[0].sum(axis=lead))]
        else:       # axis 0 normalises everything: nothing to sum, dscale = dy * xhat and dbias = dy
            ops += [Map(name=f"{node.name}:1", node=node.name, op=node.op, inputs=(dy, x, mean, inv_std),
                        output=dscale, ops_per_element=3,
                        fn=lambda d, v, m, s: _ln_sums(d, v, m, s, ())),
                    Move(name=f"{node.name}:2", node=node.name, op=node.op, inputs=(dy,), output=dbias, view=True,
                         fn=lambda d: np.asarray(d))]
        return ops

    @staticmethod
    def _axis(node: Node, rank: int) -> int:
        return normalize_axis(node, int(node.attr("axis", -1)), rank)


def _ln_sums(dy: np.ndarray, x: np.ndarray, mean: np.ndarray, inv_std: np.ndarray, lead: tuple[int, ...]
             ) -> np.ndarray:
    dy, x, mean, inv_std = work(dy, x, mean, inv_std)
    result: np.ndarray = (dy * (x - mean) * inv_std).sum(axis=lead)
    return result


def _ln_dx(dy: np.ndarray, x: np.ndarray, scale: np.ndarray, mean: np.ndarray, inv_std: np.ndarray,
           axis: int) -> np.ndarray:
    dy, x, scale, mean, inv_std = work(dy, x, scale, mean, inv_std)
    normalized = tuple(range(axis, x.ndim))
    xhat = (x - mean) * inv_std
    g = dy * scale
    count = math.prod(x.shape[axis:])
    dx: np.ndarray = inv_std * (g - g.sum(axis=normalized, keepdims=True) / count
                                - xhat * (g * xhat).sum(axis=normalized, keepdims=True) / count)
    return dx

