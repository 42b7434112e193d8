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

    def to_dict(self) -> dict:
        return {**self.by_category, "peak": self.peak, "peak_node": self.at, "peak_phase": self.phase,
                "saved_activations": self.saved, "gradients_total": self.gradients_total,
                "transient_activations": self.transient[0], "transient_workspace": self.transient[1],
                "largest": [{"tensor": t, "category": c, "bytes": b} for t, c, b in self.largest]}


def liveness(graph: Graph, phase: dict[str, str], grads: set[str], state: set[str], accumulators: set[str] = frozenset(),
             top: int = 5, in_place: dict[str, str] | None = None) -> Memory:
    """The step's peak memory. `phase`: node -> phase (TrainingStep.phase); `grads`: the parameters' gradient
    tensors; `state`: the optimizer's state weights (with an fp32 master copy, as ZeRO counts it);
    `accumulators`: gradient accumulation buffers (gradients, the whole step); `in_place`: output -> the weight
    whose bytes it overwrites (a parameter's update cast back from its fp32 master)."""
    birth, death, category, sizes = _lifetimes(graph, phase, grads, state, accumulators, in_place or {})
    curve = _sweep(len(graph.nodes), birth, death, category, sizes)
    totals = [sum(row) for row in curve]
    at = totals.index(max(totals)) if totals else 0
    held = [(name, category[name], sizes[name]) for name in birth if birth[name] <= at <= death[name]]
    by_category = {c: sum(b for _, cat, b in held if cat == c) for c in CATEGORIES}
    node = graph.nodes[at] if graph.nodes else None
    largest = sorted(held, key=lambda t: -t[2])[:top]
    passing = [row[ACTIVATIONS] + row[WORKSPACE] for row in curve]
    high = curve[passing.index(max(passing))] if curve else (0,) * len(CATEGORIES)
    return Memory(peak=sum(by_category.values()), by_category=by_category, at=node.name if node else "",
                  phase=phase.get(node.name, "") if node else "", largest=largest,
                  saved=_saved(graph, phase, birth, death, category, sizes),
                  gradients_total=_held_gradients(graph, grads, accumulators),
                  transient=(high[ACTIVATIONS], high[WORKSPACE]))


def profile(graph: Graph, phase: dict[str, str], grads: set[str], state: set[str],
            accumulators: set[str] = frozenset(), in_place: dict[str, str] | None = None) \
        -> tuple[list[tuple[int, ...]], int, int]:
    """Bytes live at each node, by category in CATEGORIES' order (the curve whose highest point `liveness` reports),
    the activations live when the backward pass starts (Memory.saved) and every gradient's bytes
    (Memory.gradients_total), from one pass over the lifetimes (accelsim.parallel.blocks follows each node of a
    repeated block through stages of 2 and 3 blocks)."""
    birth, death, category, sizes = _lifetimes(graph, phase, grads, state, accumulators, in_place or {})
    curve = _sweep(len(graph.nodes), birth, death, category, sizes)
    return curve, _saved(graph, phase, birth, death, category, sizes), _held_gradients(graph, grads, accumulators)


ACTIVATIONS, WORKSPACE = CATEGORIES.index("activations"), CATEGORIES.index("workspace")


def _held_gradients(graph: Graph, grads: set[str], accumulators: set[str]) -> int:
    """The gradients the update reads, which a framework holds for the whole step: the fp32 accumulators when
    micro-batches add into them (each narrow gradient is added as it is made: Megatron's main_grad), else every
    parameter's gradient."""
    return sum(graph.tensors[name].nbytes for name in (accumulators or grads))


def _sweep(nodes: int, birth: dict, death: dict, category: dict, sizes: dict) -> list[tuple[int, ...]]:
    """Bytes live at each node by category (bytes born at i count from i, bytes dying at i count through i)."""
    column = {c: k for k, c in enumerate(CATEGORIES)}
    delta = [[0] * len(CATEGORIES) for _ in range(nodes + 3)]
    for name, b in birth.items():
        delta[b + 1][column[category[name]]] += sizes[name]
        delta[death[name] + 2][column[category[name]]] -= sizes[name]
    live, curve = [0] * len(CATEGORIES), []
    for i in range(nodes + 1):
        live = [a + d for a, d in zip(live, delta[i])]
        if i >= 1:
            curve.append(tuple(live))
    return curve


def _saved(graph: Graph, phase: dict[str, str], birth: dict, death: dict, category: dict, sizes: dict) -> int:
    """Activations live when the backward pass starts: those it keeps for its gradients."""
    first = next((i for i, n in enumerate(graph.nodes) if phase.get(n.name) in ("backward", "recompute")), None)
    return 0 if first is None else sum(sizes[name] for name in birth if category[name] == "activations"
                                       and birth[name] < first <= death[name])


def _lifetimes(graph: Graph, phase: dict[str, str], grads: set[str], state: set[str], accumulators: set[str],
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
    for i, node in enumerate(graph.nodes):
        for name in node.inputs:
            root = alias.get(name, name)
            if root in birth:
                death[root] = max(death[root], i)
        for name in node.outputs:
            if not name or name in alias or name in graph.constants:
                continue
            birth[name], death[name] = i, i
            if name in grads:
                category[name] = "gradients"
                death[name] = end
            else:
                category[name] = "workspace" if phase.get(node.name) in ("backward", "optimizer") else "activations"
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
