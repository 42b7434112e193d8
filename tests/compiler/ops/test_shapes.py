"""Shape inference over a whole graph (compiler.ops.shapes.infer_shapes): twin nodes are inferred once, and nodes
whose shapes follow from more than their op, attributes and input shapes never take a twin's."""
import numpy as np

from compiler.builder import Builder
from compiler.dtypes import DType
from compiler.graph import Graph, Tensor
from compiler.ops.activation import Unary
from compiler.ops.shapes import infer_shapes


def _reinferred(graph: Graph) -> Graph:
    """`graph` with every node's outputs forgotten, then inferred again in one pass."""
    for node in graph.nodes:
        for name in node.outputs:
            del graph.tensors[name]
    infer_shapes(graph)
    return graph


def test_a_chain_of_twins_is_inferred_once(monkeypatch):
    b = Builder("chain", weights=False)
    x = b.input("x", (2, 8))
    for _ in range(5):
        x = b.node("Relu", [x])
    graph = b.build([x])
    calls = []
    infer = Unary.infer
    monkeypatch.setattr(Unary, "infer", lambda self, node, ins, g: calls.append(node.name) or infer(self, node, ins, g))
    _reinferred(graph)
    assert calls == ["relu"]
    assert [graph.tensors[n.outputs[0]] for n in graph.nodes] == [Tensor(n.outputs[0], (2, 8), DType.fp32)
                                                                   for n in graph.nodes]


def test_twins_differ_by_attributes_and_input_values():
    b = Builder("mixed", weights=False)
    x = b.input("x", (2, 3, 4))
    flat1 = b.node("Flatten", [x], axis=1)              # same op and input, another attribute value
    flat2 = b.node("Flatten", [x], axis=2)
    kept = b.node("Transpose", [x], perm=[0, 1, 2])     # a list attribute: no twin taken
    swapped = b.node("Transpose", [x], perm=[2, 1, 0])
    row = b.node("Reshape", [x, b.const(np.array([1, 24]))])     # same op and input shapes, another shape value
    col = b.node("Reshape", [x, b.const(np.array([24, 1]))])
    halves = b.node("Split", [x], outputs=2, axis=2)             # same op, attributes and input, more outputs
    quarters = b.node("Split", [x], outputs=4, axis=2)
    names = (flat1, flat2, kept, swapped, row, col, *halves, *quarters)
    graph = b.build(list(names))
    assert [graph.tensors[name].shape for name in names] == [
        (2, 12), (6, 4), (2, 3, 4), (4, 3, 2), (1, 24), (24, 1), *[(2, 3, 2)] * 2, *[(2, 3, 1)] * 4]
    assert [_reinferred(graph).tensors[name].shape for name in names] == [
        (2, 12), (6, 4), (2, 3, 4), (4, 3, 2), (1, 24), (24, 1), *[(2, 3, 2)] * 2, *[(2, 3, 1)] * 4]
