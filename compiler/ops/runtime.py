"""Output shapes that depend on values known only at run time (NonZero, Unique, TopK with a runtime K...).

Invariant: such a node's output Tensor holds a stand-in shape (an upper bound where one exists) and the node is
marked in `node.resolved`; the numpy reference computes the true shape, so evaluation works, and lowering refuses
the node, naming the value that simulation would need to know.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import SupportsInt

import numpy as np

from compiler.graph import Graph, Node
from compiler.ops.base import fail

RUNTIME = "runtime_shape"   # node.resolved key: what the output shape depends on


def known_input(node: Node, graph: Graph, index: int) -> np.ndarray | None:
    """The compile-time value of input `index`, or None when it is omitted or known only at run time."""
    name = node.inputs[index] if index < len(node.inputs) else ""
    value = graph.value(name) if name else None
    return None if value is None else np.asarray(value)


def forget_stand_in(node: Node) -> None:
    """Forget an earlier stand-in (infer runs again when inputs become known)."""
    node.resolved.pop(RUNTIME, None)


def stand_in(node: Node, shape: Iterable[SupportsInt], depends_on: str) -> tuple[int, ...]:
    """Mark the node's output shape as known only at run time; `shape` stands in for it until then."""
    node.resolved[RUNTIME] = depends_on
    return tuple(int(d) for d in shape)


def require_static(node: Node) -> None:
    """Simulation prices static shapes only: refuse a node whose output shape waits for run-time values."""
    depends_on = node.resolved.get(RUNTIME)
    if depends_on is not None:
        raise fail(node, f"its output shape depends on {depends_on}, known only at run time, so it cannot be "
                         f"simulated (accelsim eval runs it); make that input a constant (an initializer, or a "
                         f"graph input bound with --bind NAME=V0,V1,...) to simulate the model")
