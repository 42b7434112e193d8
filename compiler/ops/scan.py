"""ONNX Scan (opset 9+): a body graph run once per step over slices of the scan inputs, carrying state.

Invariant: the reference runs the imported body step by step; the lowering is one Map of ops = body work
per step x steps. The recurrence is sequential (step t reads step t-1's state, as in the MatMul-free LM's
MLGRU h_t = f_t*h_{t-1} + (1-f_t)*c_t): only the elements within one step run in parallel.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map, Role
from compiler.ops.base import (OpDef, fail, given, input_operands, normalize_axis, operand, out, output_operand,
                               register)


@dataclass(frozen=True)
class _Plan:
    states: int                    # N: state variables, carried from step to step
    steps: int                     # the length of every scan input along its scan axis
    in_axes: tuple[int, ...]
    in_reverse: tuple[bool, ...]
    out_axes: tuple[int, ...]
    out_reverse: tuple[bool, ...]


@register("Scan")
class Scan(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        m = int(node.attr("num_scan_inputs", 0))
        tensors = [t for t in ins if t is not None]
        if not 1 <= m <= len(ins) or len(tensors) != len(ins):
            raise fail(node, f"num_scan_inputs is {m}; it must be between 1 and the {len(ins)} inputs")
        n = len(ins) - m
        states, scans = tensors[:n], tensors[n:]
        in_axes = _axes(node, "scan_input_axes", [len(t.shape) for t in scans])
        lengths = {t.shape[a] for t, a in zip(scans, in_axes)}
        if len(lengths) != 1:
            raise fail(node, f"scan inputs have different lengths {sorted(lengths)} along their scan axes")
        slices = [Tensor(t.name, t.shape[:a] + t.shape[a + 1:], t.dtype) for t, a in zip(scans, in_axes)]
        body = _import_body(node, graph, list(states) + slices)
        k = len(body.outputs) - n
        if k < 0 or len(node.outputs) != n + k:
            raise fail(node, f"the body has {len(body.outputs)} outputs for {n} states; the node must have "
                             f"{n} state outputs plus one per body scan output, got {len(node.outputs)}")
        for state, name in zip(states, body.outputs[:n]):
            produced = body.tensor(name)
            if (produced.shape, produced.dtype) != (state.shape, state.dtype):
                raise fail(node, f"the body returns state {name!r} as {produced.dtype.value} "
                                 f"{list(produced.shape)}, but it enters as {state.dtype.value} "
                                 f"{list(state.shape)}")
        per_step = [body.tensor(name) for name in body.outputs[n:]]
        out_axes = _axes(node, "scan_output_axes", [len(t.shape) + 1 for t in per_step])
        plan = _Plan(n, lengths.pop(), in_axes, _directions(node, "scan_input_directions", m), out_axes,
                     _directions(node, "scan_output_directions", k))
        node.resolved.update(body=body, plan=plan)  # reference sees no graph: keep the imported body
        outs = [out(node, s.shape, s.dtype, i) for i, s in enumerate(states)]
        outs += [out(node, t.shape[:a] + (plan.steps,) + t.shape[a:], t.dtype, n + i)
                 for i, (t, a) in enumerate(zip(per_step, out_axes))]
        return outs

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return _run(node, given(node, args, len(args)))

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        from compiler.ops.lower import lower

        body, plan = node.resolved["body"], node.resolved["plan"]
        body_ir = lower(body)
        # Work per step: the body's vector ops, and its MACs counted one op each (a recurrence body
        # runs on the vector unit, a step at a time). Scan outputs hold every step; states only the last.
        total = plan.steps * sum(op.ops + op.macs for op in body_ir.ops)
        weights = tuple(operand(graph, name, Role.weight) for name in body.weights if name in graph.tensors
                        and (name in graph.weights or name in graph.constants))
        inputs = input_operands(node, graph) + weights
        count = len(node.inputs)
        used = set(graph.outputs) | {name for other in graph.nodes for name in other.inputs}
        wanted = [i for i, name in enumerate(node.outputs) if name and name in used] or [0]
        ops: list[IROp] = []
        for i in wanted:
            result = output_operand(node, graph, i)
            # The first Map carries all the work; a second wanted output (rare: a final state beside
            # the stacked outputs) is the same recurrence and counts no ops a second time.
            per_element = -(-total // max(result.elements, 1)) if not ops else 0
            ops.append(Map(name=node.name if not ops else f"{node.name}:{i}", node=node.name, op=node.op,
                           inputs=inputs, output=result, ops_per_element=per_element,
                           fn=lambda *a, i=i: _run(node, list(a[:count]))[i]))
        return ops


def _import_body(node: Node, graph: Graph, feeds: list[Tensor]) -> Graph:
    body = node.attr("body")
    if isinstance(body, Graph):  # a body built in Python (compiler.builder)
        given = [body.tensor(name) for name in body.inputs]
        if [(t.shape, t.dtype) for t in given] != [(t.shape, t.dtype) for t in feeds]:
            raise fail(node, f"the body's inputs {[list(t.shape) for t in given]} do not match the slices "
                             f"the node feeds it {[list(t.shape) for t in feeds]}")
        return body
    from onnx import GraphProto

    if not isinstance(body, GraphProto):
        raise fail(node, "attribute body must be a graph")
    if graph.import_body is None:
        raise fail(node, "its body is an ONNX graph, and this graph was not imported from ONNX")
    imported: Graph = graph.import_body(body, graph, feeds, f"{node.where()}")
    return imported


def _axes(node: Node, key: str, ranks: list[int]) -> tuple[int, ...]:
    values = node.attr(key, [0] * len(ranks))
    if len(values) != len(ranks):
        raise fail(node, f"{key} has {len(values)} values for {len(ranks)} tensors")
    return tuple(normalize_axis(node, int(v), r) for v, r in zip(values, ranks))


def _directions(node: Node, key: str, count: int) -> tuple[bool, ...]:
    values = [int(v) for v in node.attr(key, [0] * count)]
    if len(values) != count or any(v not in (0, 1) for v in values):
        raise fail(node, f"{key} must be {count} values each 0 (forward) or 1 (reverse), got {values}")
    return tuple(bool(v) for v in values)


def _run(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    from compiler.ops.interpret import run_graph

    body, plan = node.resolved["body"], node.resolved["plan"]
    states, scans = list(args[: plan.states]), args[plan.states:]
    collected: list[list[np.ndarray]] = [[] for _ in body.outputs[plan.states:]]
    for t in range(plan.steps):
        feeds = dict(zip(body.inputs, states))
        for name, x, axis, reverse in zip(body.inputs[plan.states:], scans, plan.in_axes, plan.in_reverse):
            feeds[name] = np.take(x, plan.steps - 1 - t if reverse else t, axis=axis)
        results = run_graph(body, feeds)
        states = [results[name] for name in body.outputs[: plan.states]]
        for values, name in zip(collected, body.outputs[plan.states:]):
            values.append(results[name])
    stacked = []
    for values, name, axis, reverse in zip(collected, body.outputs[plan.states:], plan.out_axes,
                                           plan.out_reverse):
        if not values:  # zero steps: an empty stack of the right shape
            t = body.tensor(name)
            stacked.append(np.zeros(t.shape[:axis] + (0,) + t.shape[axis:], dtype=t.dtype.numpy))
            continue
        stacked.append(np.stack(values[::-1] if reverse else values, axis=axis))
    return states + stacked
