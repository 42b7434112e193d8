"""A convolution's gradients: ConvGradData(dy, w) -> dx and ConvGradFilter(x, dy) -> dw, attributes as the forward
Conv's plus `shape` (the input's, or the weight's).

Invariant: dw is ONE Einsum over the forward's loops (g k c r s kept, n p q reduced, x read at stride*p +
dilation*r - pad): the forward's MACs. dx is one Einsum per output phase h = stride*u + phi over the taps that reach
it ((phi + pad - dilation*r) divisible by the stride), the kernel read from a flipped copy (a Move) so that every
index runs forwards, then one Move interleaving the phases (a Reduce when some phase has no tap: its rows are zeros).
No zero-inserted dy: dx's MACs, N*K*C * prod over axes of sum over phi of rows(phi) * taps(phi), are the forward's
N*K*C*P*R per axis whenever H = stride*P (size-keeping convs: AlexNet's conv2-5, ResNet's 3x3 and 1x1, strided or
not), and otherwise differ by boundary rows only (taps reading dy past its edge against windows reading padding).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import Axis, Einsum, IROp, Move, Operand, Reduce, Role
from compiler.ops.base import (TRAINING_DOMAIN, OpDef, fail, given, operand, out, output_operand, register,
                               require)
from compiler.ops.conv import OUT_LOOPS, WINDOW_LOOPS, ConvSpec, conv_spec
from compiler.ops.matmul import accumulator
from compiler.ops.train import work

IN_LOOPS = {1: ("h",), 2: ("h", "w"), 3: ("d", "h", "w")}     # dx's spatial loops (a phase's rows), outermost first


def _shape(node: Node) -> tuple[int, ...]:
    shape = tuple(int(d) for d in node.attr("shape", ()))
    if len(shape) not in (3, 4, 5) or any(d < 1 for d in shape):
        raise fail(node, f"attribute shape {list(shape)} must be the forward tensor's: 3 to 5 positive sizes")
    return shape


def _check_dy(node: Node, dy: Tensor, x_shape: tuple[int, ...], spec: ConvSpec) -> None:
    want = (x_shape[0], spec.k_total, *spec.outs)
    if dy.shape != want:
        raise fail(node, f"dy {dy.name!r} has shape {list(dy.shape)}; the forward Conv's output is {list(want)}")
    if not dy.dtype.is_float:
        raise fail(node, f"the gradient {dy.name!r} is {dy.dtype.value}; gradients are floats")


def _taps(spec: ConvSpec) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...]]]:
    """(kernel offsets, the padded input's window those offsets read for every output position), per tap."""
    for offsets in itertools.product(*(range(r) for r in spec.kernel)):
        yield offsets, tuple(slice(o * d, o * d + s * (p - 1) + 1, s)
                             for o, d, s, p in zip(offsets, spec.dilations, spec.strides, spec.outs))


def _grouped(spec: ConvSpec, x_shape: tuple[int, ...], dy: np.ndarray) -> tuple[int, int, int, int, np.ndarray]:
    """(n, g, c, k, dy as [n, g, k, P...])."""
    n, g, c = x_shape[0], spec.groups, spec.c
    k = spec.k_total // g
    return n, g, c, k, dy.reshape(n, g, k, *spec.outs)


@register("ConvGradData", domain=TRAINING_DOMAIN)
class ConvGradData(OpDef):
    """(dy, w) -> dx of `shape`: every dy element scattered back through every kernel tap."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        dy, w = require(node, ins, 2)
        shape = _shape(node)
        _check_dy(node, dy, shape, conv_spec(node, Tensor("x", shape, w.dtype), w))
        return [out(node, shape, dy.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        stored = given(node, args, 2)
        dy, w = work(*stored)
        shape = _shape(node)
        spec = conv_spec(node, Tensor("x", shape, DType.fp32), Tensor("w", w.shape, DType.fp32))
        n, g, c, k, dy = _grouped(spec, shape, dy)
        wg = w.reshape(g, k, c, *spec.kernel)
        padded = [h + b + e for h, b, e in zip(shape[2:], spec.begin, spec.end)]
        dx = np.zeros((n, g, c, *padded), dy.dtype)
        for offsets, window in _taps(spec):
            dx[(slice(None),) * 3 + window] += np.einsum("ngk...,gkc->ngc...", dy, wg[(slice(None),) * 3 + offsets])
        inside = tuple(slice(b, b + h) for b, h in zip(spec.begin, shape[2:]))
        return [dx[(slice(None),) * 3 + inside].reshape(shape).astype(stored[0].dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        dy, w = graph.tensor(node.inputs[0]), graph.tensor(node.inputs[1])
        shape = _shape(node)
        spec = conv_spec(node, Tensor("x", shape, w.dtype), w)
        ops, weight = _flipped(node, graph, w, len(spec.outs))
        combos = list(itertools.product(*(_phases(h, r, s, d, b) for h, r, s, d, b
                                          in zip(shape[2:], spec.kernel, spec.strides, spec.dilations, spec.begin))))
        live = [c for c in combos if all(p.rows and p.taps for p in c)]
        if not live:
            raise fail(node, "every kernel tap reads only padding, so dx is zero; such a conv has no data gradient")
        if len(combos) == 1:   # stride 1: one phase is all of dx
            return ops + _phase_einsum(node, graph, spec, shape, dy, weight, live[0], output_operand(node, graph), "")
        phases = []
        for combo in live:
            tag = "_".join(str(p.start) for p in combo)
            target = Operand(f"{node.name}:phase{tag}", (shape[0], shape[1], *(p.rows for p in combo)), dy.dtype,
                             Role.output)
            ops += _phase_einsum(node, graph, spec, shape, dy, weight, combo, target, tag)
            phases.append(Operand(target.tensor, target.shape, target.dtype, Role.input))
        return ops + [_interleave(node, graph, spec.strides, live, phases, complete=len(live) == len(combos))]


def _flipped(node: Node, graph: Graph, w: Tensor, rank: int) -> tuple[list[IROp], Operand]:
    """(the Move that flips the kernel's spatial axes, or none for a 1x1 kernel; the weight operand dx reads).

    dx reads the kernel backwards (tap r meets dy row (h + pad - dilation*r) / stride): read from a flipped copy,
    every index runs forwards, as the reference einsum and the tiled codegen need. The copy is read as a weight."""
    weight = operand(graph, w.name)
    if all(r == 1 for r in w.shape[2:]):
        return [], weight
    flipped = Operand(f"{node.name}:flipped", w.shape, w.dtype, Role.output)
    move = Move(name=f"{node.name}:flip", node=node.name, op=node.op, inputs=(weight,), output=flipped,
                fn=lambda a: np.ascontiguousarray(a[(Ellipsis,) + (slice(None, None, -1),) * rank]))
    return [move], Operand(flipped.tensor, w.shape, w.dtype, Role.weight)


def _interleave(node: Node, graph: Graph, strides: Sequence[int], live: list[tuple[_Phase, ...]], phases: list[Operand],
                complete: bool) -> IROp:
    """dx[n, c, stride*u + start] = phase[n, c, u] for every phase: one Move when every phase has rows and taps.

    Rows no tap reaches (a 1x1 stride-2 conv never reads odd rows) get zero, which a Move cannot make: it only places
    source elements (compiler/codegen/execute.py traces each one). Then a Reduce over the spatial axes places the
    phases and writes the zeros, with no arithmetic, cut only along N and C."""
    result = output_operand(node, graph)
    starts = [tuple(p.start for p in combo) for combo in live]

    def interleave(*parts: np.ndarray) -> np.ndarray:
        dx = np.zeros(parts[0].shape[:2] + result.shape[2:], parts[0].dtype)    # a chunk may hold some n or c only
        for start, part in zip(starts, parts):
            dx[(slice(None),) * 2 + tuple(slice(a, None, s) for a, s in zip(start, strides))] = part
        return dx
    name = f"{node.name}:interleave"
    if complete:
        return Move(name=name, node=node.name, op=node.op, inputs=tuple(phases), output=result, fn=interleave)
    return Reduce(name=name, node=node.name, op=node.op, inputs=tuple(phases), output=result,
                  axes=tuple(range(2, len(result.shape))), ops_per_element=0, fn=interleave)


@dataclass(frozen=True)
class _Phase:
    """dx rows h = stride*u + start (u < rows) along one axis, and the taps that reach them: with m counting the
    taps from the last one backwards, tap r = last - period*m reads dy at u + dy_offset + dy_step*m and the
    flipped kernel at w_offset + period*m."""

    start: int
    rows: int
    taps: int
    period: int
    dy_step: int
    dy_offset: int
    w_offset: int


def _phases(size: int, kernel: int, stride: int, dilation: int, pad: int) -> list[_Phase]:
    common = math.gcd(stride, dilation)
    period, dy_step = stride // common, dilation // common
    phases = []
    for start in range(stride):
        taps = [r for r in range(kernel) if (start + pad - dilation * r) % stride == 0]
        last = taps[-1] if taps else 0
        phases.append(_Phase(start, len(range(start, size, stride)), len(taps), period, dy_step,
                             (start + pad - dilation * last) // stride, kernel - 1 - last))
    return phases


def _phase_einsum(node: Node, graph: Graph, spec: ConvSpec, shape: tuple[int, ...], dy: Tensor, weight: Operand,
                  combo: tuple[_Phase, ...], target: Operand, tag: str) -> list[IROp]:
    """dx's rows of one phase (_Phase names the terms):
    dx[n, g, c, u...] += dy[n, g*K + k, u + dy_offset + dy_step*m...] * w_flipped[g*K + k, c, w_offset + period*m...]"""
    rank, groups, k = len(spec.outs), spec.groups, spec.k_total // spec.groups
    rows, taps = IN_LOOPS[rank], WINDOW_LOOPS[rank]
    grouped = groups > 1
    channel = Axis((("g", k), ("k", 1))) if grouped else Axis.of("k")
    dy_axes = (Axis.of("n"), channel) + tuple(Axis(((u, 1), (m, p.dy_step)), p.dy_offset)
                                              for u, m, p in zip(rows, taps, combo))
    w_axes = (channel, Axis.of("c")) + tuple(Axis(((m, p.period),), p.w_offset) for m, p in zip(taps, combo))
    outer = [("n", shape[0])] + ([("g", groups)] if grouped else []) + [("c", spec.c)]
    loops = outer + [(u, p.rows) for u, p in zip(rows, combo)] + [("k", k)] + [(m, p.taps) for m, p in zip(taps, combo)]
    suffix = f":phase{tag}" if tag else ""
    product = Operand(f"{target.tensor}:grouped", (shape[0], groups, spec.c, *target.shape[2:]), target.dtype,
                      Role.output) if grouped else target
    ops: list[IROp] = [Einsum(name=node.name + suffix, node=node.name, op=node.op,
                              inputs=(operand(graph, dy.name), weight), output=product, loops=tuple(loops),
                              in_axes=(dy_axes, w_axes), out_dims=tuple(d for d, _ in outer) + rows,
                              acc=accumulator(dy.dtype))]
    if grouped:   # (N, G, C, ...) is (N, G*C, ...): the same bytes, nothing moves
        ops.append(Move(name=f"{node.name}{suffix}:ungroup", node=node.name, op=node.op,
                        inputs=(Operand(product.tensor, product.shape, product.dtype, Role.input),), output=target,
                        view=True, fn=lambda y: y.reshape(target.shape)))
    return ops


@register("ConvGradFilter", domain=TRAINING_DOMAIN)
class ConvGradFilter(OpDef):
    """(x, dy) -> dw of `shape`: per kernel tap, the forward's input window times dy, summed over n and p, q."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, dy = require(node, ins, 2)
        shape = _shape(node)
        _check_dy(node, dy, x.shape, conv_spec(node, x, Tensor("w", shape, x.dtype)))
        return [out(node, shape, dy.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        stored = given(node, args, 2)
        x, dy = work(*stored)
        shape = _shape(node)
        spec = conv_spec(node, Tensor("x", x.shape, DType.fp32), Tensor("w", shape, DType.fp32))
        n, g, c, k, dy = _grouped(spec, x.shape, dy)
        xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(spec.begin, spec.end)))
        xp = xp.reshape(n, g, c, *xp.shape[2:])
        dy = dy.reshape(n, g, k, -1)
        dw = np.zeros((g, k, c, *spec.kernel), dy.dtype)
        for offsets, window in _taps(spec):
            patch = xp[(slice(None),) * 3 + window].reshape(n, g, c, -1)
            dw[(slice(None),) * 3 + offsets] = np.einsum("ngcp,ngkp->gkc", patch, dy)
        return [dw.reshape(shape).astype(stored[1].dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        x, dy = graph.tensor(node.inputs[0]), graph.tensor(node.inputs[1])
        shape = _shape(node)
        spec = conv_spec(node, x, Tensor("w", shape, x.dtype))
        rank, groups, k = len(spec.outs), spec.groups, spec.k_total // spec.groups
        outs, wins = OUT_LOOPS[rank], WINDOW_LOOPS[rank]
        grouped = groups > 1
        kept = ([("g", groups)] if grouped else []) + [("k", k), ("c", spec.c)] + list(zip(wins, spec.kernel))
        loops = kept + [("n", x.shape[0])] + list(zip(outs, spec.outs))
        # x indexed as in the forward Einsum (compiler/ops/conv.py), dy by the forward's output loops
        x_axes: tuple[Axis, ...] = (Axis.of("n"), Axis((("g", spec.c), ("c", 1))) if grouped else Axis.of("c"))
        x_axes += tuple(Axis(((o, s), (r, d)), -b) for o, r, s, d, b
                        in zip(outs, wins, spec.strides, spec.dilations, spec.begin))
        dy_axes = (Axis.of("n"), Axis((("g", k), ("k", 1))) if grouped else Axis.of("k")) + tuple(map(Axis.of, outs))
        result = output_operand(node, graph)
        product = Operand(f"{node.name}:grouped", (groups, k, spec.c, *spec.kernel), result.dtype,
                          Role.output) if grouped else result
        ops: list[IROp] = [Einsum(name=node.name, node=node.name, op=node.op,
                                  inputs=(operand(graph, x.name), operand(graph, dy.name)), output=product,
                                  loops=tuple(loops), in_axes=(x_axes, dy_axes),
                                  out_dims=tuple(d for d, _ in kept), acc=accumulator(dy.dtype))]
        if grouped:
            ops.append(Move(name=f"{node.name}:ungroup", node=node.name, op=node.op,
                            inputs=(Operand(product.tensor, product.shape, product.dtype, Role.input),),
                            output=result, view=True, fn=lambda a: a.reshape(shape)))
        return ops
