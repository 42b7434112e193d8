"""Activation recomputation: a training step that saves fewer activations and computes them again in the backward
pass, right before the gradients that read them.

    none       every activation the backward pass reads is kept from the forward pass
    selective  attention's scores and probabilities (the batch x heads x tokens^2 tensors: the chain from the
               product of queries and keys through the Softmax) are recomputed; queries and keys are kept
    full       each layer keeps only its input: the whole layer's forward runs again before its backward

Invariant: recomputation changes where a value is computed, never what: the backward pass reads a clone of the
forward node (same op, attributes and inputs, outputs renamed `<tensor>@recompute`), placed just before the first
backward node that reads it; the original forward tensors then die in the forward pass. A layer is the node names'
path up to the first component that carries an index (`layers.3`, `layer2.1`, `h.0`), else the first component.
"""
from __future__ import annotations

import copy
import re

from compiler.errors import ModelError
from compiler.graph import Graph, Node, Tensor

MODES = ("none", "selective", "full")
PRODUCTS = frozenset({"MatMul", "Einsum", "Gemm"})
# ops between the scores' product and the Softmax: scaling, masking, casts, reshapes
SCORE_CHAIN = frozenset({"Div", "Mul", "Add", "Sub", "Where", "Cast", "Reshape", "Transpose", "Softmax", "Dropout"})
_INDEXED = re.compile(r"(^|[._])\d+$")


def recompute(graph: Graph, phase: dict[str, str], owner: dict[str, str], mode: str) -> int:
    """Rewire `graph`'s backward pass for `mode`; returns the number of forward nodes cloned. `phase` and `owner`
    (TrainingStep's) gain the clones: phase `recompute`, the owner of the node they copy."""
    if mode not in MODES:
        raise ModelError(f"unknown recompute mode {mode!r}; allowed: {', '.join(MODES)}")
    if mode == "none":
        return 0
    forward = [n for n in graph.nodes if phase.get(n.name) == "forward"          # runtime nodes, not folded shapes
               and not all(not o or o in graph.constants for o in n.outputs)]
    groups = _attention_groups(graph, forward) if mode == "selective" else _layer_groups(forward)
    return sum(_clone_group(graph, group, phase, owner) for group in groups)


def layer_of(name: str) -> str:
    parts = name.strip("/").split("/")
    for i, part in enumerate(parts[:-1]):
        if _INDEXED.search(part):
            return "/".join(parts[: i + 1])
    return parts[0]


def _layer_groups(forward: list[Node]) -> list[list[Node]]:
    groups: dict[str, list[Node]] = {}
    for node in forward:
        groups.setdefault(layer_of(node.name), []).append(node)
    return list(groups.values())


def _attention_groups(graph: Graph, forward: list[Node]) -> list[list[Node]]:
    """Per Softmax: the nodes from the product that makes its scores through the Softmax itself."""
    producer = {o: n for n in forward for o in n.outputs if o}
    groups = []
    for node in forward:
        if node.op != "Softmax":
            continue
        chain, at = [node], node
        while True:
            source = producer.get(at.inputs[0]) if at.inputs else None
            if source is None or (source.op not in SCORE_CHAIN and source.op not in PRODUCTS):
                break
            chain.append(source)
            if source.op in PRODUCTS:
                groups.append(list(reversed(chain)))
                break
            at = source
    return groups


def _clone_group(graph: Graph, group: list[Node], phase: dict[str, str], owner: dict[str, str]) -> int:
    made = {o for n in group for o in n.outputs if o}
    readers = [i for i, n in enumerate(graph.nodes) if phase.get(n.name) == "backward"
               and any(t in made for t in n.inputs)]
    if not readers:
        return 0
    needed = {t for i in readers for t in graph.nodes[i].inputs if t in made}
    clones = _needed_nodes(group, needed)
    renamed = {o: f"{o}@recompute" for n in clones for o in n.outputs if o}
    copies = []
    for node in clones:
        twin = copy.copy(node)
        twin.name = f"{node.name}@recompute"
        twin.inputs = tuple(renamed.get(t, t) for t in node.inputs)
        twin.outputs = tuple(renamed.get(t, t) for t in node.outputs)
        twin.attrs = dict(node.attrs)
        for old, new in zip(node.outputs, twin.outputs):
            if old:
                t = graph.tensors[old]
                graph.tensors[new] = Tensor(new, t.shape, t.dtype)
        phase[twin.name] = "recompute"
        owner[twin.name] = owner.get(node.name, node.name)
        copies.append(twin)
    for i in readers:
        node = graph.nodes[i]
        node.inputs = tuple(renamed.get(t, t) for t in node.inputs)
    first = readers[0]
    graph.nodes[first:first] = copies
    return len(copies)


def _needed_nodes(group: list[Node], needed: set[str]) -> list[Node]:
    """The nodes of `group` that `needed` depends on, in order."""
    producer = {o: n for n in group for o in n.outputs if o}
    keep: set[str] = set()
    stack = [producer[t] for t in needed]
    while stack:
        node = stack.pop()
        if node.name in keep:
            continue
        keep.add(node.name)
        stack.extend(producer[t] for t in node.inputs if t in producer)
    return [n for n in group if n.name in keep]
