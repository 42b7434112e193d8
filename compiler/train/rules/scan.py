"""Gradient rule of ONNX Scan (the MatMul-free LM's MLGRU recurrence): the backward pass of a recurrence is another
Scan, stepping through time in reverse, whose body is the vector-Jacobian product of the forward body (autodiff's
backprop applied to the body itself, so every op a body may hold has the rule it has outside).

The backward body needs the state each forward step began from. A second forward Scan, its body cut down to the
state update, recomputes them and stacks one per step: the memory a framework saves for a recurrence, and one
forward recurrence of work, both priced. The backward Scan carries the states' gradients from the last step to the
first and emits the scan inputs' gradients step by step; what it carries out of step 0 is the initial states'.
Invariant: a parameter the body reads from the outer graph by name is refused, never silently left untrained.
"""
from __future__ import annotations

import copy

import numpy as np

from compiler.errors import ModelError
from compiler.graph import Graph, Node, Tensor
from compiler.train.autodiff import Grads, Tape, backprop, rule


@rule("Scan")
def scan(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    body, plan = node.resolved["body"], node.resolved["plan"]
    n = plan.states
    captured = [w for w in body.weights if w in t.graph.weights and w in t.leads]
    if captured:
        raise ModelError(f"{t.graph.source}: {node.where()}: its body reads the parameter(s) {', '.join(captured)} "
                         f"of the outer graph by name; gradients through a Scan reach only its inputs (pass them as "
                         f"scan inputs or states, or train without them)")
    ys_seeded = [dy is not None for dy in dys[n:]]
    alive = _reaching(body, n, [dy is not None for dy in dys[:n]], ys_seeded)
    xs_wanted = [want and alive[body.inputs[n + j]] for j, want in enumerate(wants[n:])]
    entry = t.node("Scan", list(node.inputs), outputs=2 * n, body=_entry_states(body, n),
                   num_scan_inputs=len(node.inputs) - n, scan_input_axes=list(plan.in_axes),
                   scan_input_directions=[int(r) for r in plan.in_reverse], scan_output_axes=[0] * n)
    entry = list(entry[n:])
    carried = [dy if dy is not None else t.const(np.zeros(t.shape(s)), t.dtype(s), "zero_state")
               for dy, s in zip(dys[:n], node.outputs[:n])]
    seeded_ys = [dy for dy in dys[n:] if dy is not None]
    outs = t.node("Scan", carried + list(node.inputs[n:]) + entry + seeded_ys,
                  outputs=n + sum(xs_wanted), body=_backward_body(body, n, ys_seeded, xs_wanted),
                  num_scan_inputs=len(node.inputs) - n + n + len(seeded_ys),
                  scan_input_axes=list(plan.in_axes) + [0] * n
                  + [a for a, on in zip(plan.out_axes, ys_seeded) if on],
                  scan_input_directions=[1 - r for r in plan.in_reverse] + [1] * n
                  + [1 - r for r, on in zip(plan.out_reverse, ys_seeded) if on],
                  scan_output_axes=[a for a, on in zip(plan.in_axes, xs_wanted) if on],
                  scan_output_directions=[1 - r for r, on in zip(plan.in_reverse, xs_wanted) if on])
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    grads = [outs[i] if wants[i] and alive[body.inputs[i]] else None for i in range(n)]
    stacked = iter(outs[n:])
    return grads + [next(stacked) if want else None for want in xs_wanted]


def _reaching(body: Graph, n: int, states_seeded: list[bool], ys_seeded: list[bool]) -> dict[str, bool]:
    """Per body input: whether it reaches a seeded output over the steps (a state reaches one if it reaches its own
    next value and that state reaches one later). An input that does not gets no gradient, not a zero one."""
    reach = {name: _downstream(body, name) for name in body.inputs}
    live = {y for y, on in zip(body.outputs[n:], ys_seeded) if on}
    live |= {s for s, on in zip(body.outputs[:n], states_seeded) if on}
    while True:
        more = {body.outputs[i] for i in range(n) if reach[body.inputs[i]] & live} - live
        if not more:
            return {name: bool(reach[name] & live) for name in body.inputs}
        live |= more


def _downstream(body: Graph, name: str) -> set[str]:
    seen = {name}
    for node in body.nodes:
        if any(i in seen for i in node.inputs if i):
            seen.update(o for o in node.outputs if o)
    return seen


def _entry_states(body: Graph, n: int) -> Graph:
    """The forward body cut down to its state update, emitting as scan outputs the states each step was given."""
    g = _copy(body, f"{body.name}/entry")
    tape = Tape(g, scope=g.name)
    copies = [tape.node("Identity", [s]) for s in body.inputs[:n]]
    g.outputs = list(body.outputs[:n]) + copies
    return _pruned(g)


def _backward_body(body: Graph, n: int, ys_seeded: list[bool], xs_wanted: list[bool]) -> Graph:
    """Inputs: the carried state gradients, then per step the scan inputs, the states the step began from and the
    seeded scan outputs' gradients; outputs: the gradients of the states it began from, then the wanted inputs'."""
    g = _copy(body, f"{body.name}/grad")
    tape = Tape(g, scope=g.name)
    states, xs = body.inputs[:n], body.inputs[n:]
    new_states, ys = body.outputs[:n], body.outputs[n:]
    d_states = [_input(g, tape.fresh(f"{s}/grad_in"), body.tensor(s)) for s in new_states]
    d_ys = [_input(g, tape.fresh(f"{y}/grad_in"), body.tensor(y)) for y, on in zip(ys, ys_seeded) if on]
    g.inputs = d_states + list(xs) + list(states) + d_ys
    seeds: dict[str, str] = {}
    for name, grad in list(zip(new_states, d_states)) + list(zip([y for y, on in zip(ys, ys_seeded) if on], d_ys)):
        seeds[name] = tape.node("Add", [seeds[name], grad]) if name in seeds else grad
    wrt = list(states) + [x for x, want in zip(xs, xs_wanted) if want]
    grads = backprop(g, seeds, wrt, tape)
    tape.at = None
    outputs: list[str] = []
    for name in wrt:
        grad = grads.get(name) or tape.const(np.zeros(body.tensor(name).shape), body.tensor(name).dtype, "zero")
        if grad in g.inputs or grad in outputs or grad in g.weights:  # a body output is a distinct, computed name
            grad = tape.node("Identity", [grad])
        outputs.append(grad)
    g.outputs = outputs
    return _pruned(g)


def _copy(body: Graph, name: str) -> Graph:
    return Graph(name=name, inputs=list(body.inputs), outputs=list(body.outputs),
                 nodes=[copy.copy(node) for node in body.nodes], tensors=dict(body.tensors),
                 weights=dict(body.weights), constants=dict(body.constants), opset=body.opset, source=body.source)


def _input(g: Graph, name: str, like: Tensor) -> str:
    g.tensors[name] = Tensor(name, like.shape, like.dtype)
    return name


def _pruned(g: Graph) -> Graph:
    """Without the nodes no output needs (a body's work is counted op by op, every step)."""
    needed, kept = set(g.outputs), []
    for node in reversed(g.nodes):
        if any(o in needed for o in node.outputs if o):
            kept.append(node)
            needed.update(i for i in node.inputs if i)
    g.nodes = kept[::-1]
    return g
