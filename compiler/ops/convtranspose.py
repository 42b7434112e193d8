"""ConvTranspose (1D/2D/3D, groups, strides, pads, output_padding, output_shape, dilations, auto_pad).

A transposed convolution is a stride-1 convolution of the input spread out by the strides (stride-1 zeros
between samples, pads adjusted) with the kernel flipped and its in/out channels swapped. Invariant: the
lowering is two copies (the spread input, the flipped kernel) and ONE Einsum, the one Conv lowers to
(compiler/ops/conv.py), whose MACs count the zeros a direct spread-then-convolve kernel multiplies.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map, Move, Operand, Role
from compiler.ops.base import OpDef, fail, given, operand, optional, out, output_operand, register, require
from compiler.ops.conv import AUTO_PADS, conv_einsum, convolve, spatial_ints
from compiler.ops.matmul import accumulator


@dataclass(frozen=True)
class _Geometry:
    """One ConvTranspose node resolved: the spread input's pads (may be negative: a crop) and sizes."""

    groups: int
    k_total: int                  # output channels
    kernel: list[int]
    strides: list[int]
    dilations: list[int]
    spread_begin: list[int]       # zeros before the spread input (negative: rows cropped)
    spread_end: list[int]
    outs: list[int]               # output spatial sizes

    def spread_shape(self, x_shape: tuple[int, ...]) -> tuple[int, ...]:
        sizes = [(n - 1) * s + 1 + b + e for n, s, b, e
                 in zip(x_shape[2:], self.strides, self.spread_begin, self.spread_end)]
        return (x_shape[0], x_shape[1], *sizes)


@register("ConvTranspose")
class ConvTranspose(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, w = require(node, ins, 2, 3)
        geo = _geometry(node, x, w)
        if len(ins) > 2 and ins[2] is not None and ins[2].shape != (geo.k_total,):
            raise fail(node, f"bias has shape {list(ins[2].shape)}, expected [{geo.k_total}] "
                             f"(one per output channel)")
        return [out(node, (x.shape[0], geo.k_total, *geo.outs), x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x, w = given(node, args, 2)
        geo = _geometry(node, Tensor("x", x.shape, DType.fp32), Tensor("w", w.shape, DType.fp32))
        work = np.float64 if x.dtype == np.float64 else np.float32
        y = convolve(_conv_node(node, geo), _spread(geo, x.astype(work)), _flipped(geo, w.astype(work)), work)
        bias = optional(args, 2)
        if bias is not None:
            y = y + bias.astype(work).reshape((-1,) + (1,) * (y.ndim - 2))
        return [y.astype(x.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        x, w = graph.tensor(node.inputs[0]), graph.tensor(node.inputs[1])
        geo = _geometry(node, x, w)
        result = output_operand(node, graph)
        spread = Operand(f"{node.name}:spread", geo.spread_shape(x.shape), x.dtype, Role.input)
        flipped_shape = (geo.k_total, x.shape[1] // geo.groups, *geo.kernel)
        flipped = Operand(f"{node.name}:kernel", flipped_shape, w.dtype, Role.weight)
        ops: list[IROp] = [
            Move(name=f"{node.name}:spread", node=node.name, op=node.op, inputs=(operand(graph, node.inputs[0]),),
                 output=_as(spread, Role.output), fn=lambda a: _spread(geo, a)),
            Move(name=f"{node.name}:kernel", node=node.name, op=node.op, inputs=(operand(graph, node.inputs[1]),),
                 output=_as(flipped, Role.output), fn=lambda a: _flipped(geo, a))]
        has_bias = len(node.inputs) > 2 and bool(node.inputs[2])
        flat = Operand(f"{node.name}:acc", result.shape, result.dtype, Role.output) if has_bias else result
        ops += conv_einsum(_conv_node(node, geo), spread, flipped, flat, accumulator(x.dtype))
        if has_bias:
            rank = len(result.shape) - 2
            ops.append(Map(name=f"{node.name}:bias", node=node.name, op=node.op,
                           inputs=(_as(flat, Role.input), operand(graph, node.inputs[2])), output=result,
                           fn=lambda y, b: y + b.reshape((-1,) + (1,) * rank), ops_per_element=1))
        return ops


def _as(o: Operand, role: Role) -> Operand:
    return Operand(o.tensor, o.shape, o.dtype, role)


def _conv_node(node: Node, geo: _Geometry) -> Node:
    """The stride-1, unpadded Conv over the spread input that equals this node (same name: its IR ops)."""
    return Node(node.name, node.op, node.inputs, node.outputs,
                {"group": geo.groups, "dilations": geo.dilations})


def _spread(geo: _Geometry, x: np.ndarray) -> np.ndarray:
    """x with stride-1 zeros between samples along each spatial axis, then padded (or cropped) by the pads."""
    shape = geo.spread_shape(x.shape)
    grown = [(n - 1) * s + 1 + max(b, 0) + max(e, 0) for n, s, b, e
             in zip(x.shape[2:], geo.strides, geo.spread_begin, geo.spread_end)]
    y = np.zeros((*x.shape[:2], *grown), dtype=x.dtype)
    y[(slice(None),) * 2 + tuple(slice(max(b, 0), max(b, 0) + (n - 1) * s + 1, s) for n, s, b
                                 in zip(x.shape[2:], geo.strides, geo.spread_begin))] = x
    crop = tuple(slice(max(-b, 0), max(-b, 0) + size) for b, size in zip(geo.spread_begin, shape[2:]))
    return y[(slice(None),) * 2 + crop]


def _flipped(geo: _Geometry, w: np.ndarray) -> np.ndarray:
    """ConvTranspose's weight (C, K/g, kernel) as a Conv weight (K, C/g, kernel flipped on every axis)."""
    g, rank = geo.groups, len(geo.kernel)
    c, k = w.shape[0] // g, w.shape[1]
    grouped = w.reshape(g, c, k, *geo.kernel).swapaxes(1, 2)
    flipped = grouped[(slice(None),) * 3 + (slice(None, None, -1),) * rank]
    return np.ascontiguousarray(flipped.reshape(g * k, c, *geo.kernel))


def _geometry(node: Node, x: Tensor, w: Tensor) -> _Geometry:
    if len(x.shape) not in (3, 4, 5):
        raise fail(node, f"input has shape {list(x.shape)}; ConvTranspose supports rank 3 to 5 (N, C, 1 to 3 "
                         f"spatial axes)")
    if len(w.shape) != len(x.shape):
        raise fail(node, f"weight has shape {list(w.shape)} (rank {len(w.shape)}), the input rank "
                         f"{len(x.shape)}; they must match")
    rank = len(x.shape) - 2
    groups = int(node.attr("group", 1))
    if groups < 1 or x.shape[1] % groups:
        raise fail(node, f"group {groups} must divide the input channels ({x.shape[1]})")
    if w.shape[0] != x.shape[1]:
        raise fail(node, f"the weight's dim 0 ({w.shape[0]}) must equal the input channels ({x.shape[1]}); "
                         f"a ConvTranspose weight is [C, K/group, kernel...]")
    kernel = [int(d) for d in w.shape[2:]]
    declared = node.attr("kernel_shape")
    if declared is not None and [int(d) for d in declared] != kernel:
        raise fail(node, f"kernel_shape {list(declared)} does not match the weight's {kernel}")
    strides = spatial_ints(node, "strides", rank, 1)
    dilations = spatial_ints(node, "dilations", rank, 1)
    extra = [int(v) for v in node.attr("output_padding", [0] * rank)]
    if len(extra) != rank or any(not 0 <= p < max(s, d) for p, s, d in zip(extra, strides, dilations)):
        raise fail(node, f"output_padding must be {rank} integers each 0 <= p < max(stride, dilation) "
                         f"(strides {strides}, dilations {dilations}), got {extra}")
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad not in AUTO_PADS:
        raise fail(node, f"auto_pad {auto_pad!r} is not one of {', '.join(AUTO_PADS)}")
    sizes = list(x.shape[2:])
    natural = [s * (n - 1) + p + (r - 1) * d + 1 for n, s, p, r, d in zip(sizes, strides, extra, kernel, dilations)]
    wanted = node.attr("output_shape")
    if wanted is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if wanted is not None:
            wanted = [int(v) for v in wanted][-rank:]
            if len(wanted) != rank or any(v < 1 for v in wanted):
                raise fail(node, f"output_shape must give {rank} positive spatial sizes, got "
                                 f"{list(node.attr('output_shape'))}")
        outs = wanted or [n * s for n, s in zip(sizes, strides)]
        totals = [a - o for a, o in zip(natural, outs)]
        # SAME_UPPER puts the odd pad at the end of the input, i.e. it crops the output's start less
        begin = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in totals]
        end = [t - b for t, b in zip(totals, begin)]
    else:
        pads = [0] * (2 * rank) if auto_pad == "VALID" else [int(p) for p in node.attr("pads", [0] * (2 * rank))]
        if len(pads) != 2 * rank or any(p < 0 for p in pads):
            raise fail(node, f"pads must be {2 * rank} non-negative integers (begins then ends), got {pads}")
        begin, end = pads[:rank], pads[rank:]
        outs = [a - b - e for a, b, e in zip(natural, begin, end)]
        if any(o < 1 for o in outs):
            raise fail(node, f"pads {pads} leave no output (output sizes {outs}, input {sizes})")
    spans = [(r - 1) * d for r, d in zip(kernel, dilations)]
    return _Geometry(groups=groups, k_total=w.shape[1] * groups, kernel=kernel, strides=strides,
                     dilations=dilations, spread_begin=[sp - b for sp, b in zip(spans, begin)],
                     spread_end=[sp - e + p for sp, e, p in zip(spans, end, extra)], outs=outs)
