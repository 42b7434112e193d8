"""The numpy reference of a parallel group: every rank's Graph interpreted together, node by node in lock-step.

Ordinary nodes run on each rank as compiler.ops.interpret runs them; a comm node (compiler/ops/comm.py) waits for
every rank to reach it and combines their arrays (sum for AllReduce, concatenation for AllGather, sum then slice
for ReduceScatter, identity for ParallelEnter, the rank's slice for Shard).
Invariant: the ranks' graphs have the same nodes in the same order (they differ in weight values and shapes only);
a graph that differs from rank 0's is refused at the first node that differs, and a comm node's group must be
exactly the ranks given.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence, cast

import numpy as np

from compiler.errors import ModelError
from compiler.graph import Graph, Node
from compiler.ops.base import COMM_DOMAIN
from compiler.ops.interpret import arguments, folded, initial_env, store
from compiler.ops.shapes import opdef

if TYPE_CHECKING:
    from compiler.ops.comm import CommOp


def run_ranks(graphs: Sequence[Graph],
              feeds_per_rank: Sequence[dict[str, Any]] | dict[str, Any]) -> list[dict[str, np.ndarray]]:
    """Every rank's outputs by name. `feeds_per_rank`: one dict of inputs per rank, or one dict all ranks read."""
    graphs = list(graphs)
    if not graphs:
        raise ModelError("run_ranks needs at least one rank's graph")
    feeds = [feeds_per_rank] * len(graphs) if isinstance(feeds_per_rank, dict) else list(feeds_per_rank)
    if len(feeds) != len(graphs):
        raise ModelError(f"run_ranks got {len(graphs)} graphs but inputs for {len(feeds)} ranks")
    _check_lockstep(graphs)
    envs = [initial_env(g, f) for g, f in zip(graphs, feeds)]
    for nodes in zip(*(g.nodes for g in graphs)):
        first = nodes[0]
        if folded(graphs[0], first):
            continue
        if first.domain == COMM_DOMAIN:
            _check_group(first, len(graphs))
            # a collective reads every input it names (its infer requires them)
            given = cast("list[list[np.ndarray]]", [arguments(n, env) for n, env in zip(nodes, envs)])
            results = cast("CommOp", opdef(graphs[0], first)).combine(first, given)
            for graph, node, env, result in zip(graphs, nodes, envs, results):
                store(graph, node, env, result)
            continue
        for graph, node, env in zip(graphs, nodes, envs):
            store(graph, node, env, opdef(graph, node).reference(node, arguments(node, env)))
    return [{name: env[name] for name in g.outputs} for g, env in zip(graphs, envs)]


def _check_lockstep(graphs: list[Graph]) -> None:
    first = graphs[0]
    for rank, graph in enumerate(graphs[1:], start=1):
        if len(graph.nodes) != len(first.nodes):
            raise ModelError(f"rank {rank}'s graph has {len(graph.nodes)} nodes, rank 0's {len(first.nodes)}: the "
                             f"ranks of a group run the same program")
        for a, b in zip(first.nodes, graph.nodes):
            if (a.name, a.op, a.domain, a.inputs, a.outputs) != (b.name, b.op, b.domain, b.inputs, b.outputs):
                raise ModelError(f"rank {rank}'s graph differs from rank 0's at {a.where()} (it has {b.where()} "
                                 f"reading {list(b.inputs)}): the ranks of a group run the same program")
        if graph.outputs != first.outputs:
            raise ModelError(f"rank {rank}'s graph has outputs {graph.outputs}, rank 0's {first.outputs}")


def _check_group(node: Node, ranks: int) -> None:
    size = node.attr("size")
    if size != ranks:
        raise ModelError(f"{node.where()} spans the {size} ranks of group {node.attr('group')!r}, but run_ranks "
                         f"was given {ranks} graphs; give it exactly the ranks of that group")
