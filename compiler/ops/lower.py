"""Graph -> IR: each node lowers through its op's `lower`; nodes folded at import time emit nothing.

Invariant: the IR computes the graph's outputs from the graph's inputs and weights (checked by the
reference interpreter against the graph's own reference in the tests).
"""
from compiler.errors import ModelError
from compiler.graph import Graph
from compiler.ir import IR
from compiler.ops.shapes import opdef


def lower(graph: Graph) -> IR:
    ops = []
    names: set[str] = set()
    for node in graph.nodes:
        if node.outputs and all(not o or o in graph.constants for o in node.outputs):
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
    return [n.name for n in graph.nodes if n.outputs and all(not o or o in graph.constants for o in n.outputs)]
