"""Graph inputs bound by value at import: which inputs an ONNX model needs as constants (a Reshape's shape, a
Resize's sizes, TopK's k), and a given array made the value the reference holds for a declared dtype.

accelsim compiles static shapes, so an input a node reads for its value must be known when the model is imported:
`--bind NAME=V0,V1,...` (bind= in Python) gives it, and `eval` takes it from its inputs where the model needs it.
Invariant: a value is bound at the declared dtype, exactly (an ml_dtypes array as the type it names, a narrow float
rounded to its own precision), or refused naming the input.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from compiler.dtypes import DType
from compiler.errors import ModelError, UnknownValueError, UserError
from compiler.graph import Graph, Node, Tensor
from compiler.ops import REGISTRY, OpDef

if TYPE_CHECKING:           # onnx is imported by the frontend that calls these
    import onnx


def static_inputs(g: onnx.GraphProto) -> set[str]:
    """Graph inputs whose values import needs: those a node reads for their values (its OpDef's value_inputs: a
    shape, axes, pads), directly, through the nodes computing them (an expanded function's shape arithmetic) or
    from inside a control-flow body. The walk stops at ops known from shapes alone (Shape, Size): their inputs need
    no values; inputs read for their type only (CastLike's second) need none either."""
    return _needed(g) & {info.name for info in g.input}


def needed_values(g: onnx.GraphProto) -> set[str]:
    """Every name in `g` whose value import needs: the value inputs of its nodes and what they are computed from."""
    return _needed(g)


def feeding(g: onnx.GraphProto, names: Iterable[str]) -> list[str]:
    """The graph inputs whose values `names` are computed from (themselves, if graph inputs), in input order."""
    wanted = set(names)
    for node in reversed(g.node):
        if wanted & set(node.output):
            definition = _definition(node)
            if not (definition and _known_from_shapes(definition)):
                skip = definition.type_inputs if definition else ()
                wanted.update(name for i, name in enumerate(node.input) if name and i not in skip)
    return [info.name for info in g.input if info.name in wanted]


def _definition(node: onnx.NodeProto) -> OpDef | None:
    return REGISTRY.get(node.op_type) if node.domain in ("", "ai.onnx") else None


def _needed(g: onnx.GraphProto, wanted: Iterable[str] = ()) -> set[str]:
    """Names in `g`, or in the scopes around it, whose values `g`'s nodes need at import (`wanted`: names whose
    values are needed already, such as a body's outputs when the node owning the body is needed)."""
    needed = set(wanted)
    for node in reversed(g.node):                 # ONNX lists nodes in topological order
        definition = _definition(node)
        whole = any(name in needed for name in node.output)
        if whole and not (definition and _known_from_shapes(definition)):
            skip = definition.type_inputs if definition else ()
            needed.update(name for i, name in enumerate(node.input) if i not in skip)
        if definition:
            needed.update(node.input[i] for i in definition.value_inputs if i < len(node.input))
        for body in _bodies(node):
            outputs = [info.name for info in body.output] if whole else []
            needed |= _needed(body, outputs) - _local(body)    # what the body needs from outside it
    return needed


def outer_names(body: onnx.GraphProto) -> set[str]:
    """Names `body` reads that it does not define, those its nested bodies read from outside them included: a body
    two Ifs deep reading the graph's folded constant gets it through the body between."""
    read = {name for node in body.node for name in node.input if name} | {info.name for info in body.output}
    for node in body.node:
        for inner in _bodies(node):
            read |= outer_names(inner) - _local(inner)
    return read


def _bodies(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The graphs a node holds in its attributes (If's branches, Loop's and Scan's body)."""
    import onnx

    return [body for attr in node.attribute
            for body in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs)]


def _local(body: onnx.GraphProto) -> set[str]:
    return {info.name for info in (*body.input, *body.initializer)} | {name for n in body.node for name in n.output}


def _known_from_shapes(definition: OpDef) -> bool:
    return type(definition).fold_from_shapes is not OpDef.fold_from_shapes


def held_input(value: object, dtype: DType, where: str) -> np.ndarray:
    """`value` as the reference holds an input of `dtype`: an ml_dtypes array (bfloat16, float8, int4) of that type
    widened; raw bytes of its width (an ml_dtypes array saved in an .npz reads back as void: '|V2' for bfloat16) read
    as that type; a float for a narrow float (bf16, fp8) rounded to it, so a float32 array holding bf16 values, the
    reference's own convention, is taken as it is. Another ml_dtypes type is refused naming both."""
    array = np.asarray(value)
    narrow = dtype.narrow
    if array.dtype.kind == "V":
        try:
            given = DType.from_numpy(array.dtype)
        except UserError:
            given = None
        if given is None and narrow is not None and not array.dtype.fields and \
                array.dtype.itemsize == np.dtype(narrow).itemsize:
            array, given = array.view(narrow), dtype
        if given is None:
            raise ModelError(f"{where} is {array.dtype} (raw bytes), the model expects {dtype.value}; give "
                             f"{_numpy_name(dtype)} values")
        widening = given.is_float and dtype in (DType.fp32, DType.fp64)     # every narrow float is exact there
        if given != dtype and not widening:
            raise ModelError(f"{where} is {array.dtype}, the model expects {dtype.value}; give "
                             f"{_numpy_name(dtype)} values")
        return array.astype(dtype.numpy)
    if narrow is not None and dtype.is_float and array.dtype.kind == "f":
        return array.astype(np.float32).astype(narrow).astype(np.float32)
    return array


def _numpy_name(dtype: DType) -> str:
    narrow = dtype.narrow
    if narrow is None:
        return str(dtype.numpy)
    return f"ml_dtypes.{np.dtype(narrow).name} (or float32 holding such)" if dtype.is_float else \
        f"ml_dtypes.{np.dtype(narrow).name}"


def unbound(error: UnknownValueError, g: onnx.GraphProto, inputs: list[str]) -> ModelError:
    """`error` with what to do when the value it lacks comes from graph inputs: bind them by value."""
    names = [name for name in feeding(g, error.tensors) if name in inputs] or \
        [name for name in inputs if name in static_inputs(g)]
    if not names:
        return error
    how = " ".join(f"--bind {name}=V0,V1,..." for name in names)
    return UnknownValueError(
        f"{error}; it is computed from graph input{'s' * (len(names) > 1)} {', '.join(map(repr, names))}, whose "
        f"value accelsim needs when it imports the model (it compiles static shapes): give it with {how} "
        f"(Python: bind={{{names[0]!r}: [...]}}), or, to `eval`, in the --inputs file", error.tensors)


def bound(g: onnx.GraphProto, values: dict[str, Any], source: str) -> dict[str, tuple[np.ndarray, Tensor]]:
    """Each value (input name -> numbers) as the array and Tensor its graph input imports as: its declared dtype,
    its declared shape (one value for a scalar or a [1], the values of a fixed shape in order), or an error naming
    the input and what it takes. Integers bind a float input; a float binds an integer input only when whole."""
    declared = {info.name: info for info in g.input}
    result = {}
    for name, value in values.items():
        if name not in declared:
            raise ModelError(f"{source}: a value is bound to {name!r}, which is not a graph input (inputs: "
                             f"{', '.join(declared)})")
        where = f"{source}: the value bound to graph input {name!r}"
        tensor_type = declared[name].type.tensor_type
        dtype = DType.from_onnx(tensor_type.elem_type, f"{source}: graph input {name!r}")
        array = held_input(value, dtype, where)
        if array.dtype.kind == "f" and dtype.numpy.kind in "iub" and not np.all(np.mod(array, 1) == 0):
            shown = array.ravel()[:4].tolist()
            raise ModelError(f"{where} holds {shown}{'...' * (array.size > 4)}, the model declares {dtype.value}: "
                             f"give whole numbers")
        if array.dtype.kind not in "iubf" or (array.dtype.kind == "b") != (dtype.numpy.kind == "b"):
            raise ModelError(f"{where} is {array.dtype}, the model declares {dtype.value}")
        array = _shaped(array, tensor_type, where)
        result[name] = (array.astype(dtype.numpy), Tensor(name, array.shape, dtype))
    return result


def _shaped(array: np.ndarray, tensor_type: onnx.TypeProto.Tensor, where: str) -> np.ndarray:
    if not tensor_type.HasField("shape"):
        return array
    dims = [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None for d in tensor_type.shape.dim]
    sizes = [d for d in dims if d is not None]
    fixed = len(sizes) == len(dims)
    if fixed and array.size == math.prod(sizes):
        return array.reshape(sizes)
    if len(dims) == array.ndim and all(d is None or d == n for d, n in zip(dims, array.shape)):
        return array
    shown = [d if d is not None else "?" for d in dims]
    raise ModelError(f"{where} has shape {list(array.shape)} ({array.size} values), the model declares {shown}")


def runtime_inputs(graph: Graph) -> dict[str, str]:
    """Integer graph inputs that decide an output's shape only at run time (TopK's K, a reduction's axes, a window's
    size, given as graph inputs and left unbound): input name -> the node reading it. Drawn at random, they would mean
    nothing (a K of 39 on an axis of 4); an If's condition or a Loop's trip count is data and is not listed."""
    from compiler.ops.runtime import RUNTIME
    from compiler.ops.shapes import opdef

    producers = graph.producers()
    found: dict[str, str] = {}
    for node in graph.nodes:
        if RUNTIME not in node.resolved or node.op in ("If", "Loop"):
            continue
        for i in opdef(graph, node).value_inputs:
            name = node.inputs[i] if i < len(node.inputs) else ""
            for source in _sources(graph, producers, name):
                if not graph.tensor(source).dtype.is_float and graph.tensor(source).dtype != DType.bool:
                    found.setdefault(source, f"input {i} of node {node.name!r} ({node.op})")
    return found


def _sources(graph: Graph, producers: dict[str, Node], name: str) -> list[str]:
    """The graph inputs `name` is computed from (through ops not known from shapes alone)."""
    from compiler.ops.shapes import opdef

    seen: set[str] = set()
    stack, found = [name] if name else [], []
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if current in graph.inputs:
            found.append(current)
        node = producers.get(current)
        if node is not None and not _known_from_shapes(opdef(graph, node)):
            stack.extend(n for n in node.inputs if n)
    return found
