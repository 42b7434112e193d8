"""Conv (1D/2D/3D, groups, depthwise, pads, strides, dilations, auto_pad) and the window geometry pools share;
the convolution Einsum and reference are shared with the quantized convolutions (compiler/ops/qlinear.py).

Invariant: the lowering is ONE Einsum whose MACs are N*K*P*Q*C*R*S (C per group), plus a bias Map.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from numpy.typing import DTypeLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import Axis, Einsum, IROp, Map, Move, Operand, Role
from compiler.ops.base import OpDef, fail, given, operand, out, output_operand, register, require
from compiler.ops.matmul import accumulator

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
OUT_LOOPS = {1: ("p",), 2: ("p", "q"), 3: ("u", "p", "q")}     # output spatial loops, outermost first
WINDOW_LOOPS = {1: ("r",), 2: ("r", "s"), 3: ("t", "r", "s")}  # kernel window loops, same order


def spatial_ints(node: Node, key: str, rank: int, default: int) -> list[int]:
    """A per-spatial-axis attribute (strides, dilations), checked for length and positivity."""
    values = [int(v) for v in node.attr(key, [default] * rank)]
    if len(values) != rank or any(v < 1 for v in values):
        raise fail(node, f"{key} must be {rank} positive integers (one per spatial axis), got {values}")
    return values


def window_geometry(node: Node, sizes: list[int], kernel: list[int], ceil_mode: bool = False
                    ) -> tuple[list[int], list[int], list[int], list[int], list[int]]:
    """Output sizes and begin/end pads of a sliding window, by ONNX's auto_pad, pads and ceil_mode rules.

    Returns (out_sizes, pads_begin, pads_end, strides, dilations).
    """
    rank = len(sizes)
    strides = spatial_ints(node, "strides", rank, 1)
    dilations = spatial_ints(node, "dilations", rank, 1)
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad not in AUTO_PADS:
        raise fail(node, f"auto_pad {auto_pad!r} is not one of {', '.join(AUTO_PADS)}")
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]  # the dilated window's span
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        outs = [-(-n // s) for n, s in zip(sizes, strides)]
        totals = [max(0, (o - 1) * s + e - n) for o, s, e, n in zip(outs, strides, extents, sizes)]
        # SAME_UPPER puts the odd pad at the end, SAME_LOWER at the beginning
        begin = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in totals]
        return outs, begin, [t - b for t, b in zip(totals, begin)], strides, dilations
    if auto_pad == "VALID":
        begin = end = [0] * rank
    else:
        pads = [int(p) for p in node.attr("pads", [0] * (2 * rank))]
        if len(pads) != 2 * rank or any(p < 0 for p in pads):
            raise fail(node, f"pads must be {2 * rank} non-negative integers (begins then ends), got {pads}")
        begin, end = pads[:rank], pads[rank:]
    outs = []
    for n, b, e, ext, s in zip(sizes, begin, end, extents, strides):
        span = n + b + e - ext
        if span < 0:
            raise fail(node, f"window of span {ext} (kernel {kernel}, dilations {dilations}) is larger "
                             f"than the padded input {n + b + e} (input {sizes}, pads {begin + end})")
        count = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (count - 1) * s >= n + b:
            count -= 1  # a window may not start in the end padding (ONNX and PyTorch agree)
        outs.append(count)
    return outs, list(begin), list(end), strides, dilations


@register("Conv")
class Conv(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, w = require(node, ins, 2, 3)
        spec = conv_spec(node, x, w)
        if len(ins) > 2 and ins[2] is not None and ins[2].shape != (spec.k_total,):
            raise fail(node, f"bias has shape {list(ins[2].shape)}, expected [{spec.k_total}] "
                             f"(one per output channel)")
        return [out(node, (x.shape[0], spec.k_total, *spec.outs), x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x, w = given(node, args, 2)
        work = np.float64 if x.dtype == np.float64 else np.float32
        y = convolve(node, x, w, work)
        if len(args) > 2 and args[2] is not None:
            y = y + args[2].astype(work).reshape((-1,) + (1,) * (y.ndim - 2))
        return [y.astype(x.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        x = graph.tensor(node.inputs[0])
        result = output_operand(node, graph)
        has_bias = len(node.inputs) > 2 and bool(node.inputs[2])
        flat = Operand(f"{node.name}:acc", result.shape, result.dtype, Role.output) if has_bias else result
        ops = conv_einsum(node, operand(graph, node.inputs[0]), operand(graph, node.inputs[1]), flat,
                          accumulator(x.dtype))
        if has_bias:
            rank = len(result.shape) - 2
            ops.append(Map(name=f"{node.name}:bias", node=node.name, op=node.op,
                           inputs=(_as_input(flat), operand(graph, node.inputs[2])), output=result,
                           fn=lambda y, b: y + b.reshape((-1,) + (1,) * rank), ops_per_element=1))
        return ops


def convolve(node: Node, x: np.ndarray, w: np.ndarray, work: DTypeLike) -> np.ndarray:
    """The convolution of x by w (no bias) in numpy type `work`; int64 gives ConvInteger's exact sums."""
    spec = conv_spec(node, Tensor("x", x.shape, DType.fp32), Tensor("w", w.shape, DType.fp32))
    xp = np.pad(x.astype(work), [(0, 0), (0, 0)] + list(zip(spec.begin, spec.end)))
    n, g, c, k = x.shape[0], spec.groups, spec.c, spec.k_total // spec.groups
    xg = xp.reshape(n, g, c, *xp.shape[2:])
    wg = w.astype(work).reshape(g, k, c, *w.shape[2:])
    y = np.zeros((n, g, k, *spec.outs), dtype=work)
    for offsets in itertools.product(*(range(r) for r in spec.kernel)):
        window = tuple(slice(o * d, o * d + s * (p - 1) + 1, s)
                       for o, d, s, p in zip(offsets, spec.dilations, spec.strides, spec.outs))
        patch = xg[(slice(None),) * 3 + window]
        y += np.einsum("ngc...,gkc->ngk...", patch, wg[(slice(None),) * 3 + offsets])
    return y.reshape(n, g * k, *spec.outs)


def conv_shape(node: Node, x: Tensor, w: Tensor) -> tuple[int, ...]:
    """The output shape of a Conv-like node over data x and weight w (their dtypes may differ)."""
    spec = conv_spec(node, x, Tensor(w.name, w.shape, x.dtype))
    return (x.shape[0], spec.k_total, *spec.outs)


def conv_einsum(node: Node, x: Operand, w: Operand, result: Operand, acc: DType) -> list[IROp]:
    """The convolution as one Einsum writing `result` (plus a free view back from groups); x and w may be
    of different dtypes (uint8 data, int8 weights)."""
    spec = conv_spec(node, Tensor(x.tensor, x.shape, x.dtype), Tensor(w.tensor, w.shape, x.dtype))
    rank, groups, k = len(spec.outs), spec.groups, spec.k_total // spec.groups
    outs, wins = OUT_LOOPS[rank], WINDOW_LOOPS[rank]
    grouped = groups > 1
    loops = [("n", x.shape[0])] + ([("g", groups)] if grouped else []) + [("k", k)]
    loops += list(zip(outs, spec.outs)) + [("c", spec.c)] + list(zip(wins, spec.kernel))
    # Input row h = stride*p + dilation*r - pad_begin: out-of-range rows read the zero padding.
    x_axes: tuple[Axis, ...] = (Axis.of("n"), Axis((("g", spec.c), ("c", 1))) if grouped else Axis.of("c"))
    x_axes += tuple(Axis(((o, s), (r, d)), -b) for o, r, s, d, b
                    in zip(outs, wins, spec.strides, spec.dilations, spec.begin))
    w_axes: tuple[Axis, ...] = (Axis((("g", k), ("k", 1))) if grouped else Axis.of("k"), Axis.of("c"))
    w_axes += tuple(Axis.of(r) for r in wins)
    # Einsum outputs are indexed by plain loops, so with groups the Einsum writes (N, G, K, P, Q)
    # and a view reshapes it to (N, G*K, P, Q): the same bytes in the same order, nothing moves.
    product = Operand(f"{node.name}:grouped", (x.shape[0], groups, k, *spec.outs), result.dtype,
                      Role.output) if grouped else result
    ops: list[IROp] = [Einsum(name=node.name, node=node.name, op=node.op, inputs=(x, w), output=product,
                              loops=tuple(loops), in_axes=(x_axes, w_axes),
                              out_dims=tuple(d for d, _ in loops[: len(loops) - rank - 1]), acc=acc)]
    if grouped:
        shape = result.shape
        ops.append(Move(name=f"{node.name}:ungroup", node=node.name, op=node.op,
                        inputs=(_as_input(product),), output=result, view=True,
                        fn=lambda y: y.reshape(shape)))
    return ops


def _as_input(o: Operand) -> Operand:
    return Operand(o.tensor, o.shape, o.dtype, Role.input)


@dataclass(frozen=True)
class ConvSpec:
    """The resolved geometry of one Conv node (c: input channels per group)."""

    groups: int
    c: int
    k_total: int
    kernel: list[int]
    outs: list[int]
    begin: list[int]
    end: list[int]
    strides: list[int]
    dilations: list[int]


def conv_spec(node: Node, x: Tensor, w: Tensor) -> ConvSpec:
    """The Conv node's geometry for input `x` and weight `w` (its gradients' ops read the same); a shape, dtype or
    attribute that does not fit is an error naming the node."""
    if len(x.shape) not in (3, 4, 5):
        raise fail(node, f"input has shape {list(x.shape)}; Conv supports rank 3 to 5 (N, C, 1 to 3 "
                         f"spatial axes)")
    if len(w.shape) != len(x.shape):
        raise fail(node, f"weight has shape {list(w.shape)} (rank {len(w.shape)}), the input rank "
                         f"{len(x.shape)}; they must match")
    if x.dtype != w.dtype:
        raise fail(node, f"input is {x.dtype.value} but weight is {w.dtype.value}; they must match")
    groups = int(node.attr("group", 1))
    channels, k_total = x.shape[1], w.shape[0]
    if groups < 1 or channels % groups or k_total % groups:
        raise fail(node, f"group {groups} must divide the input channels ({channels}) and the output "
                         f"channels ({k_total})")
    if w.shape[1] * groups != channels:
        raise fail(node, f"input has {channels} channels in {groups} group(s), so the weight's dim 1 "
                         f"must be {channels // groups}, got weight shape {list(w.shape)}")
    kernel = [int(d) for d in w.shape[2:]]
    declared = node.attr("kernel_shape")
    if declared is not None and [int(d) for d in declared] != kernel:
        raise fail(node, f"kernel_shape {list(declared)} does not match the weight's {kernel}")
    outs, begin, end, strides, dilations = window_geometry(node, list(x.shape[2:]), kernel)
    return ConvSpec(groups=groups, c=channels // groups, k_total=k_total, kernel=kernel, outs=outs,
                 begin=begin, end=end, strides=strides, dilations=dilations)

