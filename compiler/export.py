"""Graph -> ONNX: a finalized Graph becomes a ModelProto, or a .onnx file, that onnx's checker and
onnxruntime accept. Invariant: `graphs_equal(g, from_model(to_model(g)))` is empty (compiler.compare).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, BinaryIO, SupportsInt, cast

import ml_dtypes
import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.frontend import TERNARY_MARK
from compiler.graph import Graph, Node, Tensor
from compiler.output import replacing

# protobuf cannot serialize a message past 2 GiB; above 1.5 GiB of weights the graph's own bytes
# could push it over, so weights go to a side file (`<model>.onnx.data`) instead.
EXTERNAL_THRESHOLD_BYTES = 3 << 29
# Offsets in the side file are aligned so onnxruntime can memory-map each tensor.
EXTERNAL_ALIGN_BYTES = 4096

# ONNX stores these without a numpy type of their own; the Graph holds them widened (float32, int8).
_STORAGE = {DType.bf16: ml_dtypes.bfloat16, DType.fp8: ml_dtypes.float8_e4m3fn, DType.int4: ml_dtypes.int4}
# The IR version that first carries each element type (float8: IR 9, int4: IR 10).
_MIN_IR_FOR_DTYPE = {DType.fp8: 9, DType.int4: 10}


def to_model(graph: Graph, opset: int | None = None) -> onnx.ModelProto:
    """The Graph as an in-memory ModelProto with every weight embedded."""
    return _model(graph, opset, sink=None)


def save_onnx(graph: Graph, path: str | os.PathLike[str], external_data: bool | None = None,
              opset: int | None = None, check: bool = True) -> Path:
    """Write `path` (and `path.data` with external data: on request, or by default past 1.5 GiB), each file
    written aside and renamed (compiler.output): a failure leaves the files there before as they were.

    With `check`, the written file is read back by onnx's full checker (strict shape inference) before it
    replaces `path`.
    """
    path = Path(path)
    if external_data is None:
        external_data = weight_bytes(graph) > EXTERNAL_THRESHOLD_BYTES
    with replacing(path) as temporary:
        if not external_data:
            onnx.save_model(to_model(graph, opset), str(temporary))
        else:
            location = path.name + ".data"
            # the side file is renamed first: the model names it, and the checker reads it through the model
            with replacing(path.parent / location) as side, open(side, "wb") as data:
                model = _model(graph, opset, sink=_Sink(data, location))
            onnx.save_model(model, str(temporary))
        if check:
            try:
                onnx.checker.check_model(str(temporary), full_check=True)
            except Exception as error:
                raise ModelError(f"{path}: the exported model fails onnx's checker ({error})") from None
    return path


def graph_proto(graph: Graph) -> onnx.GraphProto:
    """The Graph as a GraphProto with embedded weights (a Scan body, or a model without its header)."""
    return _graph_proto(graph, None)


def weight_bytes(graph: Graph) -> int:
    """Bytes the weights take in the ONNX file: ternary is stored one int8 per weight, not packed."""
    def stored(t: Tensor) -> int:
        return t.elements if t.dtype == DType.ternary else t.nbytes
    return sum(stored(graph.tensor(name)) for name in graph.weights)


class _Sink:
    """Appends tensor bytes to the side file and records where each one went."""

    def __init__(self, file: BinaryIO, location: str):
        self.file, self.location = file, location

    def put(self, proto: TensorProto) -> None:
        data = proto.raw_data
        offset = self.file.tell()
        pad = -offset % EXTERNAL_ALIGN_BYTES
        self.file.write(b"\0" * pad)
        self.file.write(data)
        onnx.external_data_helper.set_external_data(proto, self.location, offset + pad, len(data))
        proto.ClearField("raw_data")  # after: set_external_data insists the bytes are still there
        proto.data_location = TensorProto.EXTERNAL


def _model(graph: Graph, opset: int | None, sink: _Sink | None) -> onnx.ModelProto:
    proto = _graph_proto(graph, sink)
    domains = sorted({n.domain for n in graph.nodes if n.domain not in ("", "ai.onnx")})
    imports = [helper.make_opsetid("", graph.opset)] + [helper.make_opsetid(d, 1) for d in domains]
    model = helper.make_model(proto, opset_imports=imports, producer_name="accelsim")
    used = {graph.tensor(name).dtype for name in graph.tensors}
    # A custom domain (the collectives' ai.accelsim.comm) has no IR version of its own: the standard domain's decides.
    model.ir_version = max([helper.find_min_ir_version_for(imports, ignore_unknown=True)]
                           + [_MIN_IR_FOR_DTYPE.get(d, 0) for d in used])
    if opset is not None and opset != graph.opset:
        try:
            model = onnx.version_converter.convert_version(model, opset)
        except Exception as error:
            raise ModelError(f"{graph.source}: cannot convert from opset {graph.opset} to {opset} "
                             f"({error})") from None
    return model


def _graph_proto(graph: Graph, sink: _Sink | None) -> onnx.GraphProto:
    missing = [name for name, value in graph.weights.items() if value is None]
    if missing:
        raise ModelError(f"{graph.source}: export needs weights, but {len(missing)} carry none "
                         f"({', '.join(missing[:3])}...); build the model with weights (weights=True) "
                         f"or import it with its external data")
    initializers = []
    for name, value in graph.weights.items():
        assert value is not None, f"{name}: a weight without values is refused above"
        init = _initializer(name, value, graph.tensor(name), graph.source)
        if sink is not None and len(init.raw_data) > 1024:  # small tensors stay inline, as onnx does
            sink.put(init)
        initializers.append(init)
    nodes = [_node_proto(node, graph, sink) for node in graph.nodes]
    ends = set(graph.inputs) | set(graph.outputs) | set(graph.weights)
    inner = [_value_info(t) for name, t in graph.tensors.items() if name not in ends]
    return helper.make_graph(nodes, graph.name, [_value_info(graph.tensor(n)) for n in graph.inputs],
                             [_value_info(graph.tensor(n)) for n in graph.outputs],
                             initializer=initializers, value_info=inner)


def _initializer(name: str, value: np.ndarray, tensor: Tensor, source: str) -> TensorProto:
    where = f"{source}: weight {name!r}"
    array = np.asarray(value)
    if array.shape != tensor.shape:
        raise ModelError(f"{where}: value has shape {list(array.shape)}, the tensor {list(tensor.shape)}")
    if tensor.dtype == DType.ternary and not np.isin(array, (-1, 0, 1)).all():
        raise ModelError(f"{where}: a ternary weight holds values other than -1, 0 and +1")
    # bf16/fp8 round to nearest even here, exactly as a cast to the dtype would
    storage = _STORAGE.get(tensor.dtype, tensor.dtype.numpy)
    proto = numpy_helper.from_array(array.astype(storage, copy=False), name)
    if tensor.dtype == DType.ternary:
        proto.doc_string = TERNARY_MARK
    return proto


def _value_info(tensor: Tensor) -> onnx.ValueInfoProto:
    info = helper.make_tensor_value_info(tensor.name, tensor.dtype.onnx, list(tensor.shape))
    if tensor.dtype == DType.ternary:
        info.doc_string = TERNARY_MARK
    return info


def _node_proto(node: Node, graph: Graph, sink: _Sink | None) -> onnx.NodeProto:
    proto = helper.make_node(node.op, list(node.inputs), list(node.outputs), name=node.name,
                             domain=node.domain or None)
    try:
        schema = onnx.defs.get_schema(node.op, graph.opset, node.domain)
        types = {key: int(cast(SupportsInt, a.type)) for key, a in schema.attributes.items()}
    except onnx.defs.SchemaError:
        types = {}  # a custom op: let onnx infer each attribute's type from its value
    for key, value in node.attrs.items():
        proto.attribute.append(_attribute(key, value, types.get(key), node, graph, sink))
    return proto


def _attribute(key: str, value: Any, attr_type: int | None, node: Node, graph: Graph,
               sink: _Sink | None) -> AttributeProto:
    if isinstance(value, Graph):  # a Scan/Loop/If body kept as a compiler Graph
        value = _graph_proto(value, sink)
    elif isinstance(value, np.ndarray):  # a tensor attribute (Constant's value) held as an array
        value = numpy_helper.from_array(value)
    elif isinstance(value, np.generic):
        value = value.item()
    elif isinstance(value, (list, tuple)):
        value = [v.item() if isinstance(v, np.generic) else v for v in value]
    # The schema decides the type: `alpha=1` is a FLOAT in LeakyRelu, and `[]` has no type of its own.
    if attr_type == AttributeProto.FLOAT:
        value = float(value)
    elif attr_type == AttributeProto.INT:
        value = int(value)
    elif attr_type == AttributeProto.FLOATS:
        value = [float(v) for v in value]
    elif attr_type == AttributeProto.INTS:
        value = [int(v) for v in value]
    if attr_type == AttributeProto.UNDEFINED:
        attr_type = None
    try:
        return helper.make_attribute(key, value, attr_type=attr_type)
    except Exception as error:
        raise ModelError(f"{graph.source}: {node.where()}: attribute {key!r} = {value!r} cannot be "
                         f"written to ONNX ({error})") from None
