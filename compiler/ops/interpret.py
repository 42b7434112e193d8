"""The numpy reference interpreter, for a Graph (op by op) and for its IR (IR op by IR op).

Both take the runtime inputs by name and return every graph output by name; every value is stored as its tensor's
dtype holds it (bf16, fp8 and fp4 rounded to their precision, in float32). Weights without values
(a shape-only model) are an error here, and only here: simulation never reads them.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.errors import MissingWeightsError, ModelError
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IR
from compiler.ops import room
from compiler.ops.room import Budget, limited
from compiler.ops.shapes import opdef

# computes a node from its arguments in place of its reference
Step = Callable[[Node, list[np.ndarray | None]], list[np.ndarray]]


def run_graph(graph: Graph, feeds: dict[str, np.ndarray], budget: Budget | None = None,
              step: Step | None = None) -> dict[str, np.ndarray]:
    """Every graph output by name. With a `budget`, a node whose outputs would not fit beside what the run holds
    is refused before it runs (compiler.ops.room); a body run by a Loop or If node shares its node's budget.
    `step(node, args)` computes a node in place of its reference (a run at another precision)."""
    step = step or (lambda node, args: opdef(graph, node).reference(node, args))
    with limited(budget, graph.source):
        env = initial_env(graph, feeds)
        if budget is not None:
            for name in graph.inputs:
                room.charge_input(name, env[name].nbytes)
        for node in graph.nodes:
            if not folded(graph, node):
                room.before(graph, node)
                try:
                    store(graph, node, env, step(node, arguments(node, env)))
                except MemoryError as error:      # a temporary larger than the outputs, or a budget above the RAM
                    raise room.exhausted(node, error) from None
                room.charge(node, sum(env[o].nbytes for o in node.outputs if o))
        return {name: env[name] for name in graph.outputs}


# -- one node at a time: what run_graph does per node, for walks that run several graphs together ------------

def initial_env(graph: Graph, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The values a run starts from: weights, folded constants and the runtime inputs (checked)."""
    return _initial_env(graph.source, graph.inputs, graph.weights, graph.constants, graph.tensors, feeds)


def folded(graph: Graph, node: Node) -> bool:
    """A node computed at import time: its outputs are constants already in the env."""
    return bool(node.outputs) and all(not o or o in graph.constants for o in node.outputs)


def arguments(node: Node, env: dict[str, np.ndarray]) -> list[np.ndarray | None]:
    return [env[name] if name else None for name in node.inputs]


def store(graph: Graph, node: Node, env: dict[str, np.ndarray], results: Iterable[ArrayLike]) -> None:
    """A node's results into the env, each in its output tensor's dtype."""
    for name, value in zip(node.outputs, results):
        if name:
            env[name] = _as_dtype(value, graph.tensors[name].dtype)


def run_ir(ir: IR, feeds: dict[str, np.ndarray], tensors: Mapping[str, Tensor] | None = None
           ) -> dict[str, np.ndarray]:
    env = _initial_env(ir.source, ir.inputs, ir.weights, ir.constants, tensors, feeds)
    for op in ir.ops:
        args = [env[o.tensor] for o in op.inputs]
        env[op.output.tensor] = _as_dtype(op.reference(args), op.output.dtype)
    return {name: env[name] for name in ir.outputs}


def _initial_env(source: str, inputs: Iterable[str], weights: Mapping[str, np.ndarray | None],
                 constants: Mapping[str, np.ndarray], tensors: Mapping[str, Tensor] | None,
                 feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    missing = [name for name, value in weights.items() if value is None]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise MissingWeightsError(f"{source}: evaluating needs weights, but {', '.join(missing[:3])}{more} "
                                  f"carry no values (external data not found?); simulation works without them")
    unknown = sorted(set(feeds) - set(inputs))
    if unknown:
        raise ModelError(f"{source}: {unknown[0]!r} is not a graph input (inputs: {', '.join(inputs)})")
    env: dict[str, np.ndarray] = {}
    env.update({k: np.asarray(v) for k, v in weights.items()})
    env.update(constants)
    for name in inputs:
        if name not in feeds:
            raise ModelError(f"{source}: no value given for graph input {name!r}")
        value = np.asarray(feeds[name])
        if tensors is not None and name in tensors and value.dtype.kind == "V":
            # narrow types arrive as ml_dtypes arrays (onnx's own test data); the reference holds them wider
            value = value.astype(tensors[name].dtype.numpy)
        if tensors is not None and name in tensors and tuple(value.shape) != tensors[name].shape:
            raise ModelError(f"{source}: input {name!r} has shape {list(value.shape)}, the model expects "
                             f"{list(tensors[name].shape)}")
        env[name] = value
    return env


def _as_dtype(value: ArrayLike, dtype: DType) -> np.ndarray:
    """`value` as the reference holds `dtype`: a narrow float (bf16, the fp8 and fp4 formats) rounded to its own
    precision inside float32, as a runtime computing in it stores every result; any other dtype in its numpy type."""
    array = np.asarray(value)
    if dtype.is_float and dtype.narrow is not None:
        return array.astype(np.float32).astype(dtype.narrow).astype(np.float32)
    return array.astype(dtype.numpy, copy=False)
