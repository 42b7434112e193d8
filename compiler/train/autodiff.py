"""Reverse-mode differentiation of a Graph: the gradient of a scalar loss with respect to chosen weights, added to the
graph as nodes (ONNX ops where ONNX has them, `ai.accelsim.training` ops where it does not).

Invariant: the walk visits, in reverse order, only the nodes on a path from a parameter to the loss; a node's rule
sees the gradients of its outputs (None where nothing downstream needs one) and computes only the input gradients
that lead to a parameter. A tensor read by several nodes sums its gradients in the order they arrive.

Quantisers train with the straight-through estimator: Round passes its gradient through (rules/elementwise.py), and
a scale that a quantiser computes from the very tensor it quantises (BitNet's absmax and absmean) is held constant,
as `x + (q(x) - x).detach()` holds it in the reference code. A scale that is a parameter (learned step size) is not.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, overload

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.graph import Graph, Node, Tensor
from compiler.ops.base import COMM_DOMAIN, TRAINING_DOMAIN
from compiler.ops.shapes import infer_node

# An output count known to be more than one: the node's names come back as a tuple.
Several = Literal[2, 3, 4, 5, 6, 7, 8]
# One gradient tensor (or None) per output or input of a node.
Grads = list[str | None]
# op type -> rule(tape, node, output gradients, which inputs want one) -> one gradient (or None) per input
Rule = Callable[["Tape", Node, Grads, list[bool]], Grads]
RULES: dict[str, Rule] = {}


def rule(*op_types: str) -> Callable[[Rule], Rule]:
    def wrap(fn: Rule) -> Rule:
        for op_type in op_types:
            if op_type in RULES:
                raise RuntimeError(f"gradient rule for {op_type} registered twice")
            RULES[op_type] = fn
        return fn
    return wrap


class Tape:
    """What a rule may do to the graph it differentiates: add nodes (shapes inferred at once) and constants."""

    def __init__(self, graph: Graph, scope: str = "step"):
        self.graph = graph
        self.scope = scope                   # names the nodes added outside any rule (the loss, the optimizer)
        self.at: Node | None = None          # the forward node whose rule is running
        self.at_name: str | None = None      # outside a rule: the forward node added nodes belong to
        self.owner: dict[str, str] = {}      # added node -> the forward node it belongs to
        self.leads: set[str] = set()         # tensors on a path from a parameter to the loss (set by backprop)
        self._count: dict[str, int] = {}
        self._producer: dict[str, Node] = graph.producers()

    def fresh(self, base: str) -> str:
        n = self._count.get(base, 0)
        self._count[base] = n + 1
        name = base if n == 0 else f"{base}_{n}"
        return name if name not in self.graph.tensors else self.fresh(base)

    @overload
    def node(self, op: str, inputs: Sequence[str], outputs: Literal[1] = 1, training: bool = False, domain: str = "",
             **attrs: Any) -> str: ...

    @overload
    def node(self, op: str, inputs: Sequence[str], outputs: Several, training: bool = False, domain: str = "",
             **attrs: Any) -> tuple[str, ...]: ...

    @overload
    def node(self, op: str, inputs: Sequence[str], outputs: int, training: bool = False, domain: str = "",
             **attrs: Any) -> str | tuple[str, ...]: ...

    def node(self, op: str, inputs: Sequence[str], outputs: int = 1, training: bool = False, domain: str = "",
             **attrs: Any) -> str | tuple[str, ...]:
        """Add a node after the forward pass; its output name(s). `training`: an ai.accelsim.training op; `domain`:
        another domain's (ai.accelsim.comm for a collective)."""
        name = self.fresh(f"{self.at.name}/grad/{op}" if self.at is not None else f"{self.scope}/{op}")
        owner = self.at.name if self.at is not None else self.at_name
        if owner is not None:
            self.owner[name] = owner
        outs = tuple(name if outputs == 1 else f"{name}:{i}" for i in range(outputs))
        node = Node(name, op, tuple(inputs), outs, dict(attrs), domain=TRAINING_DOMAIN if training else domain)
        self.graph.nodes.append(node)
        self._producer.update((o, node) for o in outs)
        infer_node(self.graph, node)
        return outs[0] if outputs == 1 else outs

    def const(self, value: ArrayLike, dtype: DType, name: str = "const") -> str:
        full = self.fresh(f"{self.at.name if self.at is not None else self.scope}/{name}")
        self.graph.weights[full] = np.asarray(value).astype(dtype.numpy)
        self.graph.tensors[full] = Tensor(full, tuple(int(d) for d in np.shape(value)), dtype)
        return full

    def ints(self, values: ArrayLike) -> str:
        return self.const(np.asarray(values, dtype=np.int64), DType.int64, "const_ints")

    def producer(self, name: str) -> Node | None:
        """The node that writes `name` (None for an input or a weight)."""
        return self._producer.get(name)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.graph.tensor(name).shape

    def dtype(self, name: str) -> DType:
        return self.graph.tensor(name).dtype

    def reshape(self, x: str, shape: Iterable[int]) -> str:
        return x if self.shape(x) == tuple(shape) else self.node("Reshape", [x, self.ints(list(shape))])

    def sum_to(self, grad: str, shape: tuple[int, ...]) -> str:
        """The gradient of a broadcast operand: `grad` summed over the axes broadcasting added or stretched."""
        have = self.shape(grad)
        if have == tuple(shape):
            return grad
        lead = len(have) - len(shape)
        axes = list(range(lead)) + [lead + i for i, d in enumerate(shape) if d == 1 and have[lead + i] != 1]
        summed = self.reduce_sum(grad, axes) if axes else grad
        return self.reshape(summed, shape)

    def reduce_sum(self, x: str, axes: Iterable[int], keepdims: int = 0) -> str:
        """ReduceSum over `axes`: an input from opset 13, an attribute before (an opset-12 model's graph)."""
        if self.graph.opset >= 13:
            return self.node("ReduceSum", [x, self.ints(list(axes))], keepdims=keepdims)
        return self.node("ReduceSum", [x], axes=list(axes), keepdims=keepdims)


def differentiate(graph: Graph, loss: str, params: list[str], seed: float = 1.0,
                  tape: Tape | None = None) -> dict[str, str]:
    """Add to `graph` the nodes that compute d loss / d p for every p in params; returns p -> gradient tensor.
    `seed`: the loss's own gradient (a loss scale multiplies every gradient by it)."""
    if graph.tensor(loss).elements != 1:
        raise ModelError(f"{graph.source}: the loss {loss!r} has shape {list(graph.tensor(loss).shape)}; "
                         f"a gradient needs a scalar")
    tape = tape or Tape(graph)
    dloss = tape.const(np.full(graph.tensor(loss).shape, seed), graph.tensor(loss).dtype, "dloss")
    return backprop(graph, {loss: dloss}, params, tape)


def backprop(graph: Graph, seeds: dict[str, str], wrt: list[str], tape: Tape | None = None) -> dict[str, str]:
    """Add to `graph` the gradients of `wrt` given the gradients `seeds` (tensor -> its gradient tensor) of some of
    its tensors, as a vector-Jacobian product; returns the gradient of each tensor of `wrt` that the seeds reach."""
    forward = list(graph.nodes)
    leads = _leading_to(graph, forward, set(wrt), set(seeds)) - quantiser_scales(graph)
    tape = tape or Tape(graph)
    tape.leads = leads
    grads = dict(seeds)
    for node in reversed(forward):
        if not any(o in grads for o in node.outputs) or not any(i in leads for i in reads(node, graph) if i):
            continue
        if node.op not in RULES or node.domain not in ("", "ai.onnx", COMM_DOMAIN):
            raise ModelError(f"{graph.source}: {node.where()}: op {node.op!r} has no gradient rule, so the model "
                             f"cannot be trained through it (ops with one: {', '.join(sorted(RULES))})")
        tape.at = node
        wants = [bool(name) and name in leads for name in node.inputs]
        results = RULES[node.op](tape, node, [grads.get(o) for o in node.outputs], wants)
        for name, want, grad in zip(node.inputs, wants, results):
            if not want or grad is None:
                continue
            if tape.shape(grad) != graph.tensor(name).shape:
                raise RuntimeError(f"the {node.op} rule gave {name!r} a gradient of shape {tape.shape(grad)}, "
                                   f"not {graph.tensor(name).shape}")
            grads[name] = tape.node("Add", [grads[name], grad]) if name in grads else grad
    tape.at = None
    return {p: grads[p] for p in wrt if p in grads}


def output_grad(node: Node, dys: Sequence[str | None]) -> str:
    """The gradient of a node's first output, which its rule needs: a rule runs only for a node whose outputs lead
    to the loss, and a single-output op's one output is then the one that does."""
    dy = dys[0]
    if dy is None:
        raise RuntimeError(f"{node.where()}: the {node.op} rule needs the gradient of output 0, and none reaches it")
    return dy


def reads(node: Node, graph: Graph) -> tuple[str, ...]:
    """What a node reads: its inputs, and for a control-flow node (Scan) the outer weights its body uses by name."""
    body = node.resolved.get("body")
    return node.inputs if body is None else node.inputs + tuple(w for w in body.weights if w in graph.weights)


def quantiser_scales(graph: Graph) -> set[str]:
    """Scales computed from the tensor they quantise: s in Round(x * s) or Round(x / s), s broadcast over x and
    derived from x by nodes of the graph."""
    producer = graph.producers()
    scales = set()
    for node in graph.nodes:
        made = producer.get(node.inputs[0]) if node.op == "Round" else None
        if made is None or made.op not in ("Mul", "Div") or len(made.inputs) != 2:
            continue
        x, s = made.inputs
        if made.op == "Mul" and graph.tensor(x).elements < graph.tensor(s).elements:
            x, s = s, x
        if graph.tensor(s).elements < graph.tensor(x).elements and x in _ancestors(s, producer):
            scales.add(s)
    return scales


def _ancestors(name: str, producer: dict[str, Node]) -> set[str]:
    seen, todo = set(), [name]
    while todo:
        node = producer.get(todo.pop())
        for i in node.inputs if node is not None else ():
            if i and i not in seen:
                seen.add(i)
                todo.append(i)
    return seen


def _leading_to(graph: Graph, nodes: list[Node], params: set[str], targets: set[str]) -> set[str]:
    """Tensors on a path from a parameter to a target (the only ones that need a gradient)."""
    reached = set(params)
    for node in nodes:
        if any(i in reached for i in reads(node, graph) if i):
            reached.update(o for o in node.outputs if o)
    needed = set(targets)
    for node in reversed(nodes):
        if any(o in needed for o in node.outputs):
            needed.update(i for i in reads(node, graph) if i)
    return reached & needed
