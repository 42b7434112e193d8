"""What every frontend op provides, and the registry that maps ONNX op types to them.

An op module defines a subclass of OpDef decorated with @register("OpType", ...). It gives:
- infer:     output Tensors from input Tensors (and compile-time values where it needs them),
- reference: numpy outputs from numpy inputs (the numerical ground truth besides onnxruntime),
- lower:     IR ops that together compute the node.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import SupportsInt, TypeVar

import numpy as np

from compiler.dtypes import DType
from compiler.errors import ModelError, UnknownValueError
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map, Move, Operand, Role

REGISTRY: dict[str, OpDef] = {}
# The ops a training step adds (gradients, optimizer updates) are not ONNX ops: they live in their own domain,
# so an ONNX file cannot name them by accident and an exported training graph says where they come from.
TRAINING_DOMAIN = "ai.accelsim.training"
TRAINING: dict[str, OpDef] = {}
# The collectives a parallel plan inserts (compiler/ops/comm.py) are not ONNX ops either: a domain of their own.
COMM_DOMAIN = "ai.accelsim.comm"
COMM: dict[str, OpDef] = {}
DOMAINS: dict[str, dict[str, OpDef]] = {"": REGISTRY, TRAINING_DOMAIN: TRAINING, COMM_DOMAIN: COMM}

Definition = TypeVar("Definition", bound="OpDef")
Value = TypeVar("Value")


def register(*op_types: str, domain: str = "") -> Callable[[type[Definition]], type[Definition]]:
    if domain not in DOMAINS:
        raise RuntimeError(f"ops register in the ONNX domain, {TRAINING_DOMAIN} or {COMM_DOMAIN}, not {domain!r}")
    table = DOMAINS[domain]

    def wrap(cls: type[Definition]) -> type[Definition]:
        instance = cls()
        for op_type in op_types:
            if op_type in table:
                raise RuntimeError(f"op {op_type} registered twice")
            table[op_type] = instance
        return cls
    return wrap


class OpDef:
    # Fold at compile time when every input has a value (shapes computed from Shape/Gather/Concat).
    foldable = True
    # Inputs that are read for their values at compile time (Reshape's shape, Slice's starts...).
    value_inputs: tuple[int, ...] = ()
    # Inputs read for their dtype only (CastLike's second): folding needs no value for them.
    type_inputs: tuple[int, ...] = ()

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        raise NotImplementedError

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        raise NotImplementedError

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        raise NotImplementedError

    def fold_from_shapes(self, node: Node, ins: list[Tensor | None]) -> list[np.ndarray] | None:
        """A value known from shapes alone (the Shape op); None for every other op."""
        return None


# -- helpers shared by op modules ---------------------------------------------------------------------

def fail(node: Node, message: str) -> ModelError:
    return ModelError(f"{node.where()}: {message}")


def unknown(node: Node, message: str, *tensors: str) -> UnknownValueError:
    """The error for `tensors` whose values the node needs at import and nothing gives."""
    return UnknownValueError(f"{node.where()}: {message}", tensors)


def out(node: Node, shape: Iterable[SupportsInt], dtype: DType, index: int = 0) -> Tensor:
    return Tensor(node.outputs[index], tuple(map(int, shape)), dtype)


def require(node: Node, ins: list[Tensor | None], count: int, at_most: int | None = None) -> list[Tensor]:
    """Check the node has `count` to `at_most` inputs, the first `count` given; return those `count`, typed:
    `x, w = require(node, ins, 2, 3)`."""
    present = len(ins)
    hi = count if at_most is None else at_most
    if present < count or present > hi or not all(ins[:count]):     # a Tensor is always true: only None is not
        expected = f"{count}" if hi == count else f"{count} to {hi}"
        raise fail(node, f"expects {expected} inputs, got {present}")
    return [t for t in ins[:count] if t is not None]


def optional(ins: Sequence[Value | None], index: int) -> Value | None:
    """Optional input (or reference argument) `index`: None where it is omitted or past the end."""
    return ins[index] if index < len(ins) else None


def given(node: Node, args: Sequence[Value | None], count: int) -> list[Value]:
    """A reference's first `count` arguments, which infer's `require` checked are given, typed:
    `x, w = given(node, args, 2)`."""
    present = [a for a in args[:count] if a is not None]
    if len(present) < count:
        raise fail(node, f"expects {count} inputs, got {len(present)}")
    return present


def const_input(node: Node, graph: Graph, index: int, what: str) -> np.ndarray:
    """An input that must be known at compile time (a shape, an axis list)."""
    name = node.inputs[index] if index < len(node.inputs) else ""
    value = graph.value(name) if name else None
    if value is None:
        raise unknown(node, f"input {index} ({what}, tensor {name!r}) must be a constant known at import time", name)
    return np.asarray(value)


def broadcast(node: Node, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise fail(node, "input shapes " + " and ".join(str(list(s)) for s in shapes)
                   + " do not broadcast") from None


def normalize_axis(node: Node, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise fail(node, f"axis {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


def operand(graph: Graph, name: str, role: Role | None = None) -> Operand:
    t = graph.tensor(name)
    if role is None:
        role = Role.weight if name in graph.weights or name in graph.constants else Role.input   # graph.is_weight
    return Operand(name, t.shape, t.dtype, role)


def input_operands(node: Node, graph: Graph) -> tuple[Operand, ...]:
    return tuple([operand(graph, name) for name in node.inputs if name])


def output_operand(node: Node, graph: Graph, index: int = 0) -> Operand:
    return operand(graph, node.outputs[index], Role.output)


def map_op(node: Node, graph: Graph, fn: Callable[..., np.ndarray], ops_per_element: int) -> list[IROp]:
    """Lower a node that is one element-wise function of all its inputs."""
    return [Map(name=node.name, node=node.name, op=node.op, inputs=input_operands(node, graph),
                output=output_operand(node, graph), fn=fn, ops_per_element=ops_per_element)]


def map_reference(definition: OpDef, node: Node, graph: Graph, ops_per_element: int) -> list[IROp]:
    """Lower a node to one Map computing its own numpy reference: the Map hands over only the inputs that are
    present, so an omitted optional one ('') goes back into its slot as None."""
    present = [i for i, name in enumerate(node.inputs) if name]

    def compute(*arrays: np.ndarray) -> np.ndarray:
        args: list[np.ndarray | None] = [None] * len(node.inputs)
        for i, a in zip(present, arrays):
            args[i] = a
        return definition.reference(node, args)[0]
    return map_op(node, graph, compute, ops_per_element)


def move_op(node: Node, graph: Graph, fn: Callable[..., np.ndarray], view: bool = False,
            index: int = 0, inputs: tuple[Operand, ...] | None = None) -> Move:
    suffix = f":{index}" if len(node.outputs) > 1 else ""
    return Move(name=node.name + suffix, node=node.name, op=node.op,
                inputs=input_operands(node, graph) if inputs is None else inputs,
                output=output_operand(node, graph, index), fn=fn, view=view)


def elements(shape: tuple[int, ...]) -> int:
    return math.prod(shape)
