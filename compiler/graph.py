"""The ONNX-like Graph: named tensors (shape, dtype), nodes (op type, attributes), in topological order.

Invariant after `compiler.ops.shapes.finalize(graph)`: `nodes` are topologically sorted, every tensor a node reads
is a graph input, a weight or an earlier node's output, and every tensor has a shape and dtype.
Weights may lack values (shape-only models): simulation never needs them, numerics do.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from compiler.dtypes import DType
from compiler.errors import ModelError


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: DType

    @property
    def elements(self) -> int:
        return int(math.prod(self.shape))          # math.prod: a planner asks millions of times; np.prod is slower

    @property
    def nbytes(self) -> int:
        return self.dtype.nbytes(self.elements)


@dataclass
class Node:
    """One operation. `inputs` may hold '' for an omitted optional input, as in ONNX."""

    name: str
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    domain: str = ""
    # What the op's `infer` resolved from the graph for `reference`, which sees no graph (the opset,
    # an imported Scan body). Not an ONNX attribute: never exported, never compared.
    resolved: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def where(self) -> str:
        return f"node {self.name!r} ({self.op})"


@dataclass
class Graph:
    name: str
    inputs: list[str]                      # runtime inputs (weights excluded)
    outputs: list[str]
    nodes: list[Node]
    tensors: dict[str, Tensor]             # every tensor with a known shape
    weights: dict[str, np.ndarray | None]  # name -> values, None where the file holds only the shape
    constants: dict[str, np.ndarray] = field(default_factory=dict)  # values folded at compile time
    opset: int = 17
    source: str = "<graph>"                # file or builder, for messages
    # How an ONNX control-flow body (a Scan's GraphProto) becomes a Graph: the ONNX frontend's own importer,
    # handed over with the graph it imported (the ops that need it never import the frontend).
    import_body: Callable[..., Any] | None = field(default=None, compare=False, repr=False)

    # -- queries ---------------------------------------------------------------
    def tensor(self, name: str) -> Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise ModelError(f"{self.source}: tensor {name!r} has no known shape") from None

    def value(self, name: str) -> np.ndarray | None:
        """The compile-time value of a tensor (a weight with data or a folded constant), else None."""
        if name in self.constants:
            return self.constants[name]
        return self.weights.get(name)

    def is_weight(self, name: str) -> bool:
        return name in self.weights

    def producers(self) -> dict[str, Node]:
        return {out: node for node in self.nodes for out in node.outputs if out}

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise ModelError(f"{self.source}: no node named {name!r}")

    # -- building --------------------------------------------------------------
    def order(self) -> Graph:
        """Name unnamed nodes, check references and sort topologically (compiler.ops.shapes.finalize then infers
        every shape: shape rules live with the ops, which import this module)."""
        self._name_nodes()
        self._check_references()
        self.nodes = self._topological()
        return self

    def _name_nodes(self) -> None:
        seen: set[str] = set()
        for i, node in enumerate(self.nodes):
            if not node.name or node.name in seen:
                node.name = f"{node.op.lower()}_{i}" if not node.name else f"{node.name}_{i}"
            seen.add(node.name)

    def _check_references(self) -> None:
        known = set(self.inputs) | set(self.weights)
        produced: dict[str, str] = {}
        for node in self.nodes:
            for out in node.outputs:
                if not out:
                    continue
                if out in produced or out in known:
                    raise ModelError(f"{self.source}: tensor {out!r} is written twice "
                                     f"({node.where()} and {produced.get(out, 'a graph input')})")
                produced[out] = node.name
        known |= set(produced)
        for node in self.nodes:
            for name in node.inputs:
                if name and name not in known:
                    raise ModelError(f"{self.source}: {node.where()} reads {name!r}, which no node, "
                                     f"graph input or initializer provides")
        for name in self.outputs:
            if name not in known:
                raise ModelError(f"{self.source}: graph output {name!r} is never produced")

    def _topological(self) -> list[Node]:
        producer = self.producers()
        # Already in order (the zoo builds so), the lexicographic sort below returns the list as it is: at step i
        # every earlier node is placed and node i is free, the smallest free index. networkx is then not imported.
        made: set[str] = set()                  # the outputs of the nodes before this one
        ordered = True
        for node in self.nodes:
            for name in node.inputs:
                if name not in made and name in producer:
                    ordered = False
            if not ordered:
                break
            made.update(node.outputs)
        if ordered:
            return list(self.nodes)
        import networkx as nx

        position = {id(n): i for i, n in enumerate(self.nodes)}
        dag = nx.DiGraph()
        for i in range(len(self.nodes)):
            dag.add_node(i)
        for i, node in enumerate(self.nodes):
            for name in node.inputs:
                if name in producer:
                    dag.add_edge(position[id(producer[name])], i)
        try:
            order = list(nx.lexicographical_topological_sort(dag))
        except nx.NetworkXUnfeasible:
            cycle = nx.find_cycle(dag)
            names = " -> ".join(self.nodes[a].name for a, _ in cycle)
            raise ModelError(f"{self.source}: the graph has a cycle: {names} -> "
                             f"{self.nodes[cycle[0][0]].name}") from None
        return [self.nodes[i] for i in order]
