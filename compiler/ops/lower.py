"""Graph -> IR: each node lowers through its op's `lower`; nodes folded at import time emit nothing.

Invariant: the IR computes the graph's outputs from the graph's inputs and weights (checked by the
reference interpreter against the graph's own reference in the tests).
"""
from collections.abc import Mapping
from typing import Any

from compiler.errors import ModelError
from compiler.graph import Graph, Node
from compiler.ir import IR
from compiler.ops.shapes import opdef


def lower(graph: Graph) -> IR:
    ops = []
    names: set[str] = set()
    for node in graph.nodes:
        if folded(node, graph.constants):
            continue
        for op in opdef(graph, node).lower(node, graph):
            if op.name in names:
                raise ModelError(f"{graph.source}: two IR ops named {op.name!r}")
            names.add(op.name)
            ops.append(op)
    return IR(name=graph.name, ops=ops, inputs=list(graph.inputs), outputs=list(graph.outputs),
              weights=graph.weights, constants=graph.constants, source=graph.source)


def folded_nodes(graph: Graph) -> list[str]:
    """Nodes computed at import time (constants, shape arithmetic): they never run on the hardware."""
    return [n.name for n in graph.nodes if folded(n, graph.constants)]


def folded(node: Node, constants: Mapping[str, Any]) -> bool:
    """Whether the node was computed at import time: each of its outputs a folded constant or omitted ('')."""
    if not node.outputs or (not constants and all(node.outputs)):
        return False           # a model with nothing folded (most, at 100,000 nodes) asks no output of each node
    return all(not o or o in constants for o in node.outputs)


def refuse_empty(graph: Graph) -> None:
    """For simulation: a node that runs on the hardware reads and writes no tensor of zero elements (an input of
    [0, 4], a Slice to [1, 0]): tiles of size 0 divide by zero in every cost model. Constants and initializers may
    be empty (an unused Resize roi); an op that computes from an empty one has an empty input or output beside it.
    (lower() itself lowers them: the reference interpreter runs empty tensors, as ONNX does.)"""
    if not any([0 in tensor.shape for tensor in graph.tensors.values()]):
        return                  # no empty tensor at all (nearly every model): no node to look through
    stored = graph.constants.keys() | set(graph.weights)
    for node in graph.nodes:
        if folded(node, graph.constants):
            continue
        for role, names in (("input", node.inputs), ("output", node.outputs)):
            for name in names:
                tensor = graph.tensors.get(name) if name and name not in stored else None
                if tensor is not None and 0 in tensor.shape:      # no elements (a product over the shape, 0 here)
                    raise ModelError(f"{graph.source}: {node.where()}: {role} {name!r} of shape {list(tensor.shape)} "
                                     f"is empty; accelsim simulates no empty tensors (accelsim eval runs them)")
