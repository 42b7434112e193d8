"""Pipeline parallelism: a model cut into consecutive stages of whole blocks, one Graph per stage.

A block is a scope named `<name>.<index>` (the zoo's `layers.3/...`, `encoder.3/...`, ResNet's `layer2.1/...`), in
order of first appearance; the nodes before the first block go to the first stage (embeddings), those after the last
to the last stage (final norm, head). A tensor one stage computes and a later one reads is an output of the first and
an input of the second, passed through every stage between (BERT's attention mask reaches every layer); the model's
own inputs are given to every stage that reads them, as a data loader does, and each of its outputs leaves the stage
that computes it (a decoder's KV cache, layer by layer).
Invariant: the stages together hold every node once, and run in order they compute the model's outputs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from compiler.errors import ModelError
from compiler.graph import Graph

BLOCK = re.compile(r"^([A-Za-z_]\w*)\.(\d+)/")


@dataclass(frozen=True)
class Stage:
    graph: Graph
    index: int
    blocks: tuple[str, ...]      # the scopes it holds, e.g. ("layers.4", "layers.5")
    received: tuple[str, ...]    # activations it takes from the stage before
    sent: tuple[str, ...]        # activations it hands to the stage after


def blocks(graph: Graph) -> list[str]:
    """The model's repeated blocks in order of first appearance."""
    seen: dict[str, None] = {}
    for node in graph.nodes:
        m = BLOCK.match(node.name)
        if m:
            seen.setdefault(f"{m.group(1)}.{m.group(2)}")
    return list(seen)


def split(graph: Graph, pp: int) -> list[Stage]:
    """`graph` in `pp` stages of equally many blocks; pp = 1 returns the model as one stage."""
    if not isinstance(pp, int) or pp < 1:
        raise ModelError(f"pipeline degree {pp!r} must be a positive integer")
    found = blocks(graph)
    if pp == 1:
        return [Stage(graph, 0, tuple(found), (), tuple(graph.outputs))]
    if not found:
        raise ModelError(f"{graph.source}: the model has no repeated blocks (scopes named like layers.0) to split "
                         f"into pipeline stages; train it with pp=1")
    if len(found) % pp:
        raise ModelError(f"{graph.source}: pipeline degree {pp} does not divide the model's {len(found)} blocks "
                         f"({found[0]} ... {found[-1]}); choose pp among {_divisors(len(found))}")
    per = len(found) // pp
    stage_of_block = {name: i // per for i, name in enumerate(found)}
    owner = _stage_of_nodes(graph, stage_of_block, pp)
    producer = {o: owner[n.name] for n in graph.nodes for o in n.outputs if o}
    last_read: dict[str, int] = {}
    for node in graph.nodes:
        for name in node.inputs:
            if name in producer:
                last_read[name] = max(last_read.get(name, -1), owner[node.name])
    stages: list[Stage] = []
    for s in range(pp):
        # activations alive across the cut after stage s: made at or before s, read after it
        sent = tuple(t for t, made in producer.items() if made <= s < last_read.get(t, -1))
        received = stages[-1].sent if stages else ()
        names = tuple(b for b in found if stage_of_block[b] == s)
        stages.append(Stage(_stage_graph(graph, owner, s, received, sent, pp), s, names, received, sent))
    return stages


def _stage_of_nodes(graph: Graph, stage_of_block: dict[str, int], pp: int) -> dict[str, int]:
    """Each node's stage: its block's; before any block, the first; after, the last; between blocks, the stage of
    the block before it."""
    owner, current = {}, 0
    for node in graph.nodes:
        m = BLOCK.match(node.name)
        if m:
            current = stage_of_block[f"{m.group(1)}.{m.group(2)}"]
        owner[node.name] = current
    last_block = max(i for i, n in enumerate(graph.nodes) if BLOCK.match(n.name))
    for node in graph.nodes[last_block + 1:]:
        owner[node.name] = pp - 1
    return owner


def _stage_graph(graph: Graph, owner: dict[str, int], s: int, received: tuple[str, ...], sent: tuple[str, ...],
                 pp: int) -> Graph:
    nodes = [n for n in graph.nodes if owner[n.name] == s]
    read = {i for n in nodes for i in n.inputs if i} | set(sent)
    inputs = [i for i in graph.inputs if i in read] + [r for r in received if r not in graph.inputs]
    weights = {w: v for w, v in graph.weights.items() if w in read}
    made = {o for n in nodes for o in n.outputs if o}
    outputs = list(sent) + [o for o in graph.outputs if o in made and o not in sent]
    tensors = {name: t for name, t in graph.tensors.items() if name in read or name in inputs or name in made}
    return Graph(name=f"{graph.name}/stage{s}", inputs=inputs, outputs=outputs, nodes=nodes, tensors=tensors,
                 weights=weights, constants={k: v for k, v in graph.constants.items() if k in read}, opset=graph.opset,
                 source=f"{graph.source} (stage {s} of {pp})", import_body=graph.import_body)


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def structure(graph: Graph) -> tuple[Any, ...]:
    """What makes two stages the same work: their ops, attributes and shapes in order, not their names (a middle
    stage of a uniform model is simulated once for all of them)."""
    def shape(name: str) -> tuple[tuple[int, ...], str] | None:
        t = graph.tensors.get(name)
        return None if t is None else (t.shape, t.dtype.value)
    return tuple((n.op, n.domain, tuple(shape(i) for i in n.inputs), tuple(shape(o) for o in n.outputs),
                  repr(sorted((k, v) for k, v in n.attrs.items() if not isinstance(v, Graph))))
                 for n in graph.nodes)
