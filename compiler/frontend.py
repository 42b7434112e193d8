"""ONNX import: a `.onnx` file (or ModelProto) becomes a finalized Graph.

Weights whose external data is missing import as shape-only (value None), so the model still
simulates; initializers that old exporters also list as graph inputs are treated as weights.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.graph import Graph, Node, Tensor

TERNARY_MARK = "accelsim:ternary"   # doc_string of an int8 initializer holding -1/0/+1 weights
SUPPORTED_OPSETS = range(9, 22)


def load_onnx(path: str | os.PathLike) -> Graph:
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: no such ONNX file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as error:  # onnx raises DecodeError, ValueError... for a damaged file
        raise ModelError(f"{path}: not a readable ONNX model ({type(error).__name__}: {error})") from None
    return from_model(model, source=str(path), base_dir=path.parent)


def from_model(model: onnx.ModelProto, source: str = "<onnx model>", base_dir: Path | None = None) -> Graph:
    if not model.HasField("graph") or not model.graph.node:
        raise ModelError(f"{source}: the ONNX model has no graph or no nodes")
    opset = _opset(model, source)
    g = model.graph
    weights: dict[str, np.ndarray | None] = {}
    tensors: dict[str, Tensor] = {}
    for init in g.initializer:
        where = f"{source}: initializer {init.name!r}"
        dtype = DType.from_onnx(init.data_type, where)
        value = _initializer_value(init, base_dir, where)
        if dtype == DType.int8 and init.doc_string == TERNARY_MARK:
            dtype = DType.ternary
        weights[init.name] = value
        tensors[init.name] = Tensor(init.name, tuple(int(d) for d in init.dims), dtype)
    inputs = []
    for info in g.input:
        if info.name in weights:
            continue  # an initializer listed as an input too (IR version < 4 exports)
        tensors[info.name] = _value_info(info, source)
        inputs.append(info.name)
    nodes = [_node(n, i, source) for i, n in enumerate(g.node)]
    graph = Graph(name=g.name or Path(source).stem, inputs=inputs, outputs=[o.name for o in g.output],
                  nodes=nodes, tensors=tensors, weights=weights, opset=opset, source=source)
    return graph.finalize()


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
    if init.data_location == onnx.TensorProto.EXTERNAL:
        info = {e.key: e.value for e in init.external_data}
        location = (base_dir or Path(".")) / info.get("location", "")
        if not location.is_file():
            return None  # shapes suffice to simulate; `eval` reports the missing weights
        try:
            onnx.external_data_helper.load_external_data_for_tensor(init, str(base_dir or "."))
        except Exception as error:
            raise ModelError(f"{where}: cannot read external data {location} ({error})") from None
    try:
        return numpy_helper.to_array(init)
    except Exception as error:
        raise ModelError(f"{where}: cannot decode ({error})") from None


def _value_info(info: onnx.ValueInfoProto, source: str) -> Tensor:
    where = f"{source}: graph input {info.name!r}"
    kind = info.type.WhichOneof("value")
    if kind != "tensor_type":
        raise ModelError(f"{where}: only tensor inputs are supported, not {kind}")
    tensor_type = info.type.tensor_type
    dtype = DType.from_onnx(tensor_type.elem_type, where)
    shape = []
    for i, dim in enumerate(tensor_type.shape.dim):
        if dim.HasField("dim_value") and dim.dim_value > 0:
            shape.append(dim.dim_value)
        elif dim.HasField("dim_param"):
            raise ModelError(f"{where}: dimension {i} is symbolic ({dim.dim_param!r}); give the model "
                             f"fixed input shapes")
        else:
            raise ModelError(f"{where}: dimension {i} has no size")
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
