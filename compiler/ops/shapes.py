"""Shape inference and constant folding over a Graph, node by node in topological order.

A node whose inputs are all known at compile time (and small) is folded: its outputs become constants,
which is how exported shape arithmetic (Shape -> Gather -> Concat -> Reshape) resolves.
"""
from collections.abc import Hashable
from typing import Any

import numpy as np

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.graph import Graph, Node, Tensor
from compiler.ops.base import COMM, COMM_DOMAIN, REGISTRY, TRAINING, TRAINING_DOMAIN, OpDef

# a node's signature -> its outputs' (shape, dtype)
Inferred = dict[Hashable, list[tuple[tuple[int, ...], DType]]]

FOLD_LIMIT_ELEMENTS = 1 << 16   # fold only small tensors: shape arithmetic, not whole layers
# the most bits one tensor may hold (512 PiB, beyond any device or pod): codegen counts a tile's elements, bits
# and bytes in int64, so a ConstantOfShape of [2^32, 2^32] (2^64 elements) wrapped to 0 and "ran" in 616 ns
MAX_TENSOR_BITS = 1 << 62
# the most nodes one graph may have: each costs about 0.1 ms to import, compile and simulate (a 100,000-node chain
# takes 9 to 11 s), so a larger file is refused before any of that work rather than running for minutes (docs/onnx.md)
MAX_NODES = 250_000
VALUE_NEEDED = "value_needed"   # node.resolved key: import needs the node's value (a shape): it folds from weights too
FOLD_READ_LIMIT_ELEMENTS = 1 << 24   # ... of at most this many elements together: never a pass over a whole embedding


def check_node_count(count: int, source: str) -> None:
    if count > MAX_NODES:
        raise ModelError(f"{source}: {count:,} nodes; accelsim simulates graphs of at most {MAX_NODES:,} nodes "
                         f"(the largest published models have tens of thousands, training graphs included)")


def opdef(graph: Graph, node: Node) -> OpDef:
    """The node's OpDef (compiler.ops registered every op module when the package was imported)."""
    if node.domain == TRAINING_DOMAIN and node.op in TRAINING:
        return TRAINING[node.op]
    if node.domain == COMM_DOMAIN and node.op in COMM:
        return COMM[node.op]
    if node.domain not in ("", "ai.onnx") or node.op not in REGISTRY:
        domain = f" in domain {node.domain!r}" if node.domain not in ("", "ai.onnx") else ""
        raise ModelError(f"{graph.source}: {node.where()}: op {node.op!r}{domain} is not supported yet "
                         f"(`accelsim ops` lists the {len(REGISTRY)} supported ONNX ops)")
    return REGISTRY[node.op]


def finalize(graph: Graph) -> Graph:
    """A graph ready for the compiler: nodes named, references checked, sorted, every shape inferred."""
    check_node_count(len(graph.nodes), graph.source)
    infer_shapes(graph.order())
    return graph


def infer_shapes(graph: Graph) -> None:
    inferred: Inferred = {}     # a node's signature -> its outputs' (shape, dtype): a chain of Relus is inferred once
    for node in graph.nodes:
        infer_node(graph, node, inferred)


def infer_node(graph: Graph, node: Node, inferred: Inferred | None = None) -> None:
    """Infer one node's output shapes (its inputs already known) and fold it if it can be. `inferred` holds the
    outputs of nodes inferred before by signature (compiler.ops.shapes.signature): a twin's are taken from there."""
    definition = opdef(graph, node)
    ins = [graph.tensors.get(name) if name else None for name in node.inputs]
    for name, tensor in zip(node.inputs, ins):
        if name and tensor is None:
            raise ModelError(f"{graph.source}: {node.where()}: input {name!r} has no known shape")
    key = signature(graph, node, ins) if inferred is not None else None
    try:
        known = inferred.get(key) if key is not None else None   # type: ignore[union-attr]
    except TypeError:           # an attribute that is no plain value (a list, a tensor, a body)
        key = known = None
    if known is not None:
        outs = [Tensor(name, shape, dtype) for name, (shape, dtype) in zip(node.outputs, known)]
        for tensor in outs:
            graph.tensors[tensor.name] = tensor
        _fold(graph, node, definition, ins, outs)
        return
    try:
        outs = definition.infer(node, ins, graph)
    except ModelError as error:
        if str(error).startswith(graph.source):
            raise
        error.args = (f"{graph.source}: {error}",)     # its class kept: UnknownValueError names what to bind
        raise error from None
    _check(graph, node, outs)
    if key is not None and not node.resolved and [t.name for t in outs] == list(node.outputs):
        inferred[key] = [(t.shape, t.dtype) for t in outs]   # type: ignore[index]
    for tensor in outs:
        graph.tensors[tensor.name] = tensor
    _fold(graph, node, definition, ins, outs)


def signature(graph: Graph, node: Node, ins: list[Tensor | None]) -> tuple[Any, ...] | None:
    """What a node's output shapes and dtypes follow from where its op's rule reads nothing else: the op, its
    attributes (their types too: 1 and 1.0 are equal keys, not equal values), which outputs it has (a Split into 2
    or 3) and its inputs' shapes and dtypes. None where they may follow from more: an input's value (a weight or a
    constant: Reshape's shape) or what import set on the node for its op (node.resolved). Unhashable where an
    attribute is no plain value."""
    if node.resolved:
        return None
    for name in node.inputs:
        if name in graph.weights or name in graph.constants:
            return None
    attrs = tuple([(k, type(v), v) for k, v in node.attrs.items()]) if node.attrs else ()
    outputs = tuple([bool(name) for name in node.outputs])      # how many, and which are omitted ('')
    # a dtype by its id: members are singletons, and an Enum's own hash is a Python call per input
    return node.op, node.domain, attrs, outputs, tuple([(t.shape, id(t.dtype)) if t is not None else None
                                                        for t in ins])


def _check(graph: Graph, node: Node, outs: list[Tensor]) -> None:
    for tensor in outs:
        if tensor.shape and min(tensor.shape) < 0:
            raise ModelError(f"{graph.source}: {node.where()}: output {tensor.name!r} has negative "
                             f"dimension in {list(tensor.shape)}")
        if tensor.elements * tensor.dtype.bits > MAX_TENSOR_BITS:     # Python ints: elements never wrap
            raise ModelError(f"{graph.source}: {node.where()}: output {tensor.name!r} of shape {list(tensor.shape)} "
                             f"holds {tensor.elements:,} {tensor.dtype.value} elements, {tensor.nbytes / 2 ** 50:.3g}"
                             f" PiB; accelsim takes tensors of at most 2^62 bits (512 PiB), more than any device holds")


def _fold(graph: Graph, node: Node, definition: OpDef, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    values = definition.fold_from_shapes(node, ins)
    if values is None:
        if node.inputs and not definition.foldable:
            return
        args: list[np.ndarray | None] = []
        for i, name in enumerate(node.inputs):     # stops at the first input known only at run time, as most do
            arg = graph.value(name) if name else None
            if name and arg is None and i not in definition.type_inputs:
                return
            args.append(arg)
        if any(t.elements > FOLD_LIMIT_ELEMENTS for t in outs):
            return
        read = [graph.tensors[name].elements for name in node.inputs if name in graph.weights]
        if sum(read) > FOLD_READ_LIMIT_ELEMENTS or not node.resolved.get(VALUE_NEEDED) and any(n > 64 for n in read):
            return  # weights stay weights (streamed from memory); only shape arithmetic folds
        values = definition.reference(node, args)
    for tensor, value in zip(outs, values):
        graph.constants[tensor.name] = np.asarray(value)
