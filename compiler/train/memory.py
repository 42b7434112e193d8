"""Memory of a training step by liveness over its schedule: every tensor lives from the node that writes it to the
last node that reads it, and the peak is the largest sum of live bytes at any node, split by what the bytes are.

Categories: weights (every parameter and buffer, the whole step), optimizer (its state, the whole step), gradients
(a parameter's gradient, from the node that finishes it to the end: frameworks keep it for the update),
activations (what the forward pass and the loss write, while anything still reads them: the backward pass reads
the saved ones), workspace (what the backward pass writes besides parameter gradients: activation gradients and
temporaries). A view (Reshape, Flatten, Squeeze, Unsqueeze, Identity) shares its input's bytes, and an optimizer
writes its parameter and state in place, so neither adds bytes; nor does the update of an fp32 master copy cast
back into its narrow parameter (`in_place`: frameworks copy it into the parameter's own buffer).
Invariant: peak == weights + optimizer + gradients + activations + workspace at the peak node.
"""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from compiler.graph import Graph

CATEGORIES = ("weights", "gradients", "optimizer", "activations", "workspace")
VIEWS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
IN_PLACE = frozenset({"SGD", "AdamW"})


@dataclass(frozen=True)
class Memory:
    peak: int                                  # bytes live at the peak node
    by_category: dict[str, int]                # the peak's bytes per category
    at: str                                    # the node the peak happens at
    phase: str                                 # forward, loss, backward or optimizer
    largest: list[tuple[str, str, int]]        # (tensor, category, bytes) live at the peak, largest first
    saved: int = 0                             # activations live when the backward pass starts (kept for it)
    gradients_total: int = 0                   # the gradients the update reads (_held_gradients)
    transient: tuple[int, int] = (0, 0)        # (activations, workspace) where together they are highest

    def to_dict(self) -> dict[str, Any]:
        return {**self.by_category, "peak": self.peak, "peak_node": self.at, "peak_phase": self.phase,
                "saved_activations": self.saved, "gradients_total": self.gradients_total,
                "transient_activations": self.transient[0], "transient_workspace": self.transient[1],
                "largest": [{"tensor": t, "category": c, "bytes": b} for t, c, b in self.largest]}


def liveness(graph: Graph, phase: dict[str, str], grads: set[str], state: set[str],
             accumulators: AbstractSet[str] = frozenset(), top: int = 5,
             in_place: dict[str, str] | None = None) -> Memory:
    """The step's peak memory. `phase`: node -> phase (TrainingStep.phase); `grads`: the parameters' gradient
    tensors; `state`: the optimizer's state weights (with an fp32 master copy, as ZeRO counts it);
    `accumulators`: gradient accumulation buffers (gradients, the whole step); `in_place`: output -> the weight
    whose bytes it overwrites (a parameter's update cast back from its fp32 master)."""
    birth, death, category, sizes = _lifetimes(graph, phase, grads, state, accumulators, in_place or {})
    names, table = _arrays(birth, death, category, sizes)
    curve = _sweep(len(graph.nodes), table)
    at = int(curve.sum(axis=1).argmax()) if len(curve) else 0          # the first node of the highest total
    first_born, last_read, column, nbytes = table
    held = np.flatnonzero((first_born <= at) & (at <= last_read))      # in birth's order, as its dict lists them
    by_category = {c: int(nbytes[held[column[held] == k]].sum()) for k, c in enumerate(CATEGORIES)}
    node = graph.nodes[at] if graph.nodes else None
    order = held[np.argsort(-nbytes[held], kind="stable")][:top]        # largest first, ties in birth's order
    largest = [(names[i], CATEGORIES[column[i]], int(nbytes[i])) for i in order]
    passing = curve[:, ACTIVATIONS] + curve[:, WORKSPACE]
    high = curve[int(passing.argmax())] if len(curve) else (0,) * len(CATEGORIES)
    return Memory(peak=sum(by_category.values()), by_category=by_category, at=node.name if node else "",
                  phase=phase.get(node.name, "") if node else "", largest=largest,
                  saved=_saved(graph, phase, table),
                  gradients_total=_held_gradients(graph, grads, accumulators),
                  transient=(int(high[ACTIVATIONS]), int(high[WORKSPACE])))


def profile(graph: Graph, phase: dict[str, str], grads: set[str], state: set[str],
            accumulators: AbstractSet[str] = frozenset(), in_place: dict[str, str] | None = None) \
        -> tuple[list[tuple[int, ...]], int, int]:
    """Bytes live at each node, by category in CATEGORIES' order (the curve whose highest point `liveness` reports),
    the activations live when the backward pass starts (Memory.saved) and every gradient's bytes
    (Memory.gradients_total), from one pass over the lifetimes (accelsim.parallel.blocks follows each node of a
    repeated block through stages of 2 and 3 blocks)."""
    birth, death, category, sizes = _lifetimes(graph, phase, grads, state, accumulators, in_place or {})
    _, table = _arrays(birth, death, category, sizes)
    curve = [tuple(row) for row in _sweep(len(graph.nodes), table).tolist()]
    return curve, _saved(graph, phase, table), _held_gradients(graph, grads, accumulators)


ACTIVATIONS, WORKSPACE = CATEGORIES.index("activations"), CATEGORIES.index("workspace")


def _held_gradients(graph: Graph, grads: set[str], accumulators: AbstractSet[str]) -> int:
    """The gradients the update reads, which a framework holds for the whole step: the fp32 accumulators when
    micro-batches add into them (each narrow gradient is added as it is made: Megatron's main_grad), else every
    parameter's gradient."""
    return sum(graph.tensors[name].nbytes for name in (accumulators or grads))


def _arrays(birth: dict[str, int], death: dict[str, int], category: dict[str, str], sizes: dict[str, int]
            ) -> tuple[list[str], tuple[np.ndarray, ...]]:
    """The tensors in birth's order and, per tensor, its first node, last node, category's column and bytes, as
    arrays (int64; Python ints where the bytes together could pass 2^63: a model of tensors near 2^59 bytes)."""
    names = list(birth)
    column = {c: k for k, c in enumerate(CATEGORIES)}
    wide = sum(sizes.values()) >= 1 << 62
    table = (np.fromiter(birth.values(), np.int64, len(names)), np.array([death[n] for n in names], np.int64),
             np.array([column[category[n]] for n in names], np.int64),
             np.array([sizes[n] for n in names], object if wide else np.int64))
    return names, table


def _sweep(nodes: int, table: tuple[np.ndarray, ...]) -> np.ndarray:
    """Bytes live at each node by category, [node, category] (bytes born at i count from i, bytes dying at i count
    through i)."""
    first_born, last_read, column, nbytes = table
    delta = np.zeros((nodes + 3, len(CATEGORIES)), nbytes.dtype)
    np.add.at(delta, (first_born + 1, column), nbytes)
    np.add.at(delta, (last_read + 2, column), -nbytes)
    return np.cumsum(delta[:nodes + 1], axis=0)[1:]


def _saved(graph: Graph, phase: dict[str, str], table: tuple[np.ndarray, ...]) -> int:
    """Activations live when the backward pass starts: those it keeps for its gradients."""
    first = next((i for i, n in enumerate(graph.nodes) if phase.get(n.name) in ("backward", "recompute")), None)
    if first is None:
        return 0
    first_born, last_read, column, nbytes = table
    return int(nbytes[(column == CATEGORIES.index("activations")) & (first_born < first) & (first <= last_read)].sum())


def _lifetimes(graph: Graph, phase: dict[str, str], grads: set[str], state: set[str], accumulators: AbstractSet[str],
               in_place: dict[str, str]) -> tuple[dict[str, int], dict[str, int], dict[str, str], dict[str, int]]:
    """Each tensor's first and last node (-1: before the step; len(nodes): to its end), category and bytes."""
    alias = _aliases(graph, in_place)
    end = len(graph.nodes)
    birth: dict[str, int] = {}
    death: dict[str, int] = {}
    category: dict[str, str] = {}
    for name in graph.weights:
        if name not in graph.constants:
            birth[name], death[name] = -1, end
            category[name] = "optimizer" if name in state else "gradients" if name in accumulators else "weights"
    for name in graph.inputs:
        birth[name], death[name], category[name] = -1, -1, "activations"
    constants = graph.constants
    for i, node in enumerate(graph.nodes):
        for name in node.inputs:
            last = death.get(alias.get(name, name) if alias else name)
            if last is not None and last < i:      # nodes come in order: a later reader only moves death on
                death[alias.get(name, name)] = i
        written = None
        for name in node.outputs:
            if not name or name in alias or name in constants:
                continue
            birth[name] = i
            if name in grads:
                category[name], death[name] = "gradients", end
            else:
                if written is None:
                    written = "workspace" if phase.get(node.name) in ("backward", "optimizer") else "activations"
                category[name], death[name] = written, i
    for name in graph.outputs:
        root = alias.get(name, name)
        if root in death:
            death[root] = end
    return birth, death, category, {name: graph.tensors[name].nbytes for name in birth}


def _aliases(graph: Graph, in_place: dict[str, str]) -> dict[str, str]:
    """Tensor -> the tensor whose bytes it is (views share their input's; in-place updates their target's)."""
    alias: dict[str, str] = {}
    for node in graph.nodes:
        if node.op in VIEWS and node.outputs and node.inputs:
            alias[node.outputs[0]] = alias.get(node.inputs[0], node.inputs[0])
        elif node.op in IN_PLACE:
            written = [node.inputs[0], *node.inputs[2:]]        # the parameter, then the state (the gradient is read)
            for out, target in zip(node.outputs, written):
                alias[out] = alias.get(target, target)
        elif node.outputs and node.outputs[0] in in_place:
            target = in_place[node.outputs[0]]
            alias[node.outputs[0]] = alias.get(target, target)
    return alias
