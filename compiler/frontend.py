"""ONNX import: a `.onnx` file (or ModelProto) becomes a finalized Graph.

Weights whose external data is missing import as shape-only (value None), so the model still
simulates; initializers that old exporters also list as graph inputs are treated as weights.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
from onnx import numpy_helper

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.graph import Graph, Node, Tensor
from compiler.ops.shapes import finalize

TERNARY_MARK = "accelsim:ternary"   # doc_string of an int8 initializer holding -1/0/+1 weights
SUPPORTED_OPSETS = range(9, 22)
SHAPE_ONLY_KEEP_ELEMENTS = 4096     # without weights, initializers this small keep values (shapes, axes)


Shapes = dict[str, tuple[int, ...]]


def load_onnx(path: str | os.PathLike, input_shapes: Shapes | None = None, batch: int | None = None,
              weights: bool = True) -> Graph:
    """`input_shapes` (input name -> shape) fixes symbolic dimensions; `batch` sets the first
    dimension of every input that `input_shapes` leaves alone (a dynamic or a fixed batch).
    `weights=False` keeps only small initializers' values (shapes, axes, indices): enough to import
    and simulate, at a fraction of the memory for a large model."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: no such ONNX file")
    if path.stat().st_size == 0:
        raise ModelError(f"{path}: the file is empty, not an ONNX model")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as error:  # onnx raises DecodeError, ValueError... for a damaged file
        raise ModelError(f"{path}: not a readable ONNX model ({type(error).__name__}: {error})") from None
    return from_model(model, source=str(path), base_dir=path.parent, input_shapes=input_shapes, batch=batch,
                      weights=weights)


def from_model(model: onnx.ModelProto, source: str = "<onnx model>", base_dir: Path | None = None,
               input_shapes: Shapes | None = None, batch: int | None = None, weights: bool = True) -> Graph:
    if not model.HasField("graph") or not model.graph.node:
        # protobuf parses many damaged files (text, truncated at a field boundary) into an empty model
        raise ModelError(f"{source}: not an ONNX model, or one with no graph or no nodes (damaged file?)")
    opset = _opset(model, source)
    g = model.graph
    values = weights
    weights: dict[str, np.ndarray | None] = {}
    tensors: dict[str, Tensor] = {}
    for init in g.initializer:
        where = f"{source}: initializer {init.name!r}"
        dtype = DType.from_onnx(init.data_type, where)
        small = math.prod(init.dims) <= SHAPE_ONLY_KEEP_ELEMENTS
        value = _initializer_value(init, base_dir, where) if values or small else None
        if dtype == DType.int8 and init.doc_string == TERNARY_MARK:
            dtype = DType.ternary
        weights[init.name] = value
        tensors[init.name] = Tensor(init.name, tuple(int(d) for d in init.dims), dtype)
    inputs = [info.name for info in g.input if info.name not in weights]
    # an initializer listed as an input too (IR version < 4 exports) is a weight, not an input
    overrides = dict(input_shapes or {})
    unknown = [name for name in overrides if name not in inputs]
    if unknown:
        raise ModelError(f"{source}: input_shapes names {', '.join(map(repr, unknown))}, which "
                         f"{'is' if len(unknown) == 1 else 'are'} not a graph input (inputs: "
                         f"{', '.join(inputs)})")
    if batch is not None:
        overrides = {**_batched(g.input, inputs, batch, source), **overrides}
    for info in g.input:
        if info.name not in weights:
            tensors[info.name] = _value_info(info, source, overrides.get(info.name))
    nodes = [_node(n, i, source) for i, n in enumerate(g.node)]
    graph = Graph(name=g.name or Path(source).stem, inputs=inputs, outputs=[o.name for o in g.output],
                  import_body=from_subgraph,
                  nodes=nodes, tensors=tensors, weights=weights, opset=opset, source=source)
    return finalize(graph)


def _batched(infos, inputs: list[str], batch: int, source: str) -> Shapes:
    """Shapes with the first dimension set to `batch`; other symbolic dimensions stay an error."""
    shapes: Shapes = {}
    for info in infos:
        dims = info.type.tensor_type.shape.dim
        if info.name not in inputs or not dims:
            continue
        rest = []
        for i, dim in enumerate(dims[1:], start=1):
            if not dim.HasField("dim_value") or dim.dim_value <= 0:
                raise ModelError(f"{source}: graph input {info.name!r}: dimension {i} is symbolic; "
                                 f"--batch sets only the first")
            rest.append(dim.dim_value)
        shapes[info.name] = (batch, *rest)
    return shapes


def _opset(model: onnx.ModelProto, source: str) -> int:
    versions = {imp.domain: imp.version for imp in model.opset_import}
    version = versions.get("", versions.get("ai.onnx"))
    if version is None:
        raise ModelError(f"{source}: the model imports no default ONNX opset")
    if version not in SUPPORTED_OPSETS:
        raise ModelError(f"{source}: opset {version} is not supported (supported: "
                         f"{SUPPORTED_OPSETS.start} to {SUPPORTED_OPSETS.stop - 1})")
    return version


def _initializer_value(init: onnx.TensorProto, base_dir: Path | None, where: str) -> np.ndarray | None:
    """The initializer's values in the numpy type the Graph holds them in (bf16/fp8 as float32, int4 as
    int8), or None when its external data file is absent."""
    if init.data_location == onnx.TensorProto.EXTERNAL:
        info = {e.key: e.value for e in init.external_data}
        relative = Path(info.get("location", ""))
        if relative.is_absolute() or ".." in relative.parts or not relative.parts:
            raise ModelError(f"{where}: external data location {str(relative)!r} must be a file beside "
                             f"the model")
        folder = (base_dir or Path(".")).resolve()
        location = (folder / relative).resolve()      # links followed: a link beside the model may point anywhere
        if not location.is_relative_to(folder):
            raise ModelError(f"{where}: external data {str(relative)!r} resolves to {location}, outside the "
                             f"model's folder {folder}; external data must be a file in that folder")
        if not location.is_file():
            return None  # shapes suffice to simulate; `eval` reports the missing weights
        plain = _plain_numpy(init.data_type)
        if plain is not None:
            return _read_external(init, location, info, plain, where)
        try:
            onnx.external_data_helper.load_external_data_for_tensor(init, str(base_dir or "."))
        except Exception as error:
            raise ModelError(f"{where}: cannot read external data {location} ({error})") from None
    try:
        value = numpy_helper.to_array(init)
    except Exception as error:
        raise ModelError(f"{where}: cannot decode ({error})") from None
    if value.dtype.type in _WIDEN:  # an ml_dtypes array (bf16, fp8, int4): no numpy arithmetic on it
        value = value.astype(_WIDEN[value.dtype.type])
    return value


_WIDEN = {ml_dtypes.bfloat16: np.float32, ml_dtypes.float8_e4m3fn: np.float32, ml_dtypes.int4: np.int8}


def _plain_numpy(data_type: int) -> np.dtype | None:
    """The little-endian numpy type whose bytes ONNX stores as is (not packed int4, not strings)."""
    for dtype in (DType.fp64, DType.fp32, DType.fp16, DType.int64, DType.int32, DType.int16, DType.int8,
                  DType.uint8, DType.bool):
        if dtype.onnx == data_type:
            return dtype.numpy.newbyteorder("<")
    return None


def _read_external(init, location: Path, info: dict, dtype: np.dtype, where: str) -> np.ndarray:
    # Read straight into the array: going through the proto (onnx's loader) holds every weight twice.
    count = int(np.prod([int(d) for d in init.dims], dtype=np.int64))
    size = count * dtype.itemsize
    if "length" in info and int(info["length"]) != size:
        raise ModelError(f"{where}: external data length {info['length']} bytes, but its shape "
                         f"{list(init.dims)} needs {size}")
    offset = int(info.get("offset", 0))
    available = max(0, location.stat().st_size - offset)
    if size > available:      # checked before a byte is allocated: a 110-byte model may declare gigabytes
        raise ModelError(f"{where}: external data file {location} is truncated ({available} of {size} bytes "
                         f"at offset {offset})")
    buffer = bytearray(size)
    with open(location, "rb") as file:
        file.seek(offset)
        got = file.readinto(buffer)
    if got != size:
        raise ModelError(f"{where}: external data file {location} is truncated ({got} of {size} bytes "
                         f"at offset {info.get('offset', 0)})")
    return np.frombuffer(buffer, dtype).astype(dtype.newbyteorder("="), copy=False).reshape(tuple(init.dims))


def _value_info(info: onnx.ValueInfoProto, source: str, override=None) -> Tensor:
    where = f"{source}: graph input {info.name!r}"
    kind = info.type.WhichOneof("value")
    if kind != "tensor_type":
        raise ModelError(f"{where}: only tensor inputs are supported, not {kind}")
    tensor_type = info.type.tensor_type
    dtype = DType.from_onnx(tensor_type.elem_type, where)
    if dtype == DType.int8 and info.doc_string == TERNARY_MARK:
        dtype = DType.ternary
    if not tensor_type.HasField("shape") and override is None:
        raise ModelError(f"{where}: the model gives no shape (not even a rank); pass input_shapes="
                         f"{{{info.name!r}: (...)}}")
    dims = tensor_type.shape.dim
    if override is not None:
        shape = tuple(int(d) for d in override)
        if tensor_type.HasField("shape") and len(shape) != len(dims):
            raise ModelError(f"{where}: input_shapes gives rank {len(shape)} ({list(shape)}), the model "
                             f"rank {len(dims)}")
        if any(d <= 0 for d in shape):
            raise ModelError(f"{where}: input_shapes gives {list(shape)}; every dimension must be positive")
        return Tensor(info.name, shape, dtype)
    shape = []
    for i, dim in enumerate(dims):
        if dim.HasField("dim_value") and dim.dim_value > 0:
            shape.append(dim.dim_value)
        elif dim.HasField("dim_param"):
            raise ModelError(f"{where}: dimension {i} is symbolic ({dim.dim_param!r}); fix it with "
                             f"input_shapes={{{info.name!r}: (...)}}")
        else:
            raise ModelError(f"{where}: dimension {i} has no size; fix it with "
                             f"input_shapes={{{info.name!r}: (...)}}")
    return Tensor(info.name, tuple(shape), dtype)


def _node(proto: onnx.NodeProto, index: int, source: str) -> Node:
    attrs = {}
    for attr in proto.attribute:
        try:
            attrs[attr.name] = onnx.helper.get_attribute_value(attr)
        except Exception as error:
            raise ModelError(f"{source}: node {proto.name or index!r} ({proto.op_type}): attribute "
                             f"{attr.name!r} cannot be read ({error})") from None
        if isinstance(attrs[attr.name], bytes):
            attrs[attr.name] = attrs[attr.name].decode()
    return Node(proto.name, proto.op_type, tuple(proto.input), tuple(proto.output), attrs, proto.domain)


def from_subgraph(body: onnx.GraphProto, outer: Graph, input_tensors: list[Tensor], where: str) -> Graph:
    """Import a control-flow body (Scan's `body`) as a finalized Graph whose inputs take `input_tensors`'
    shapes and dtypes. Outer-scope names it reads must be the outer graph's weights or constants."""
    source = f"{outer.source}: {where} body"
    if len(body.input) != len(input_tensors):
        raise ModelError(f"{source}: the body has {len(body.input)} inputs, the op feeds it "
                         f"{len(input_tensors)}")
    weights: dict[str, np.ndarray | None] = {}
    tensors: dict[str, Tensor] = {}
    for init in body.initializer:
        dtype = DType.from_onnx(init.data_type, f"{source}: initializer {init.name!r}")
        weights[init.name] = _initializer_value(init, None, f"{source}: initializer {init.name!r}")
        if dtype == DType.int8 and init.doc_string == TERNARY_MARK:
            dtype = DType.ternary
        tensors[init.name] = Tensor(init.name, tuple(int(d) for d in init.dims), dtype)
    for info, given in zip(body.input, input_tensors):
        declared = info.type.tensor_type.elem_type
        if declared and DType.from_onnx(declared, source) != given.dtype and given.dtype != DType.ternary:
            raise ModelError(f"{source}: input {info.name!r} is declared "
                             f"{DType.from_onnx(declared, source).value}, the op feeds {given.dtype.value}")
        tensors[info.name] = Tensor(info.name, given.shape, given.dtype)
    inputs = [info.name for info in body.input]
    nodes = [_node(n, i, source) for i, n in enumerate(body.node)]
    produced = {name for n in nodes for name in n.outputs if name}
    read = {name for n in nodes for name in n.inputs if name} | {o.name for o in body.output}
    for name in sorted(read - produced - set(inputs) - set(weights)):
        # Outer weights and folded constants become weights of the body (read at every step).
        if name in outer.weights or name in outer.constants:
            weights[name] = outer.value(name)
        elif name in outer.tensors:
            raise ModelError(f"{source}: reads {name!r}, which the enclosing graph computes at run time; "
                             f"a body may read only the enclosing graph's initializers and constants")
        else:
            continue  # finalize reports the dangling name
        tensors[name] = outer.tensor(name)
    graph = Graph(name=body.name or where, inputs=inputs, outputs=[o.name for o in body.output], nodes=nodes,
                  import_body=from_subgraph,
                  tensors=tensors, weights=weights, opset=outer.opset, source=source)
    return finalize(graph)
