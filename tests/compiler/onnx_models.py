"""Tiny ONNX models for op tests: one node (or a few), fixed shapes, a chosen opset."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32, I8, U8 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8
I32, I64 = TensorProto.INT32, TensorProto.INT64
RNG = np.random.default_rng(0)


def model(nodes, inputs, outputs, opset: int, initializers=()) -> onnx.ModelProto:
    """inputs: [(name, elem_type, shape)]; outputs: [(name, elem_type)], shapes left to inference."""
    graph = helper.make_graph(
        list(nodes), "t", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs], initializer=list(initializers))
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = 10 if opset >= 21 else 8   # what onnxruntime reads for these opsets
    # fills in output shapes (the checker wants them); lenient, so tests of bad models still build
    return onnx.shape_inference.infer_shapes(proto)


def init(name: str, value: np.ndarray, doc: str = "") -> onnx.TensorProto:
    tensor = numpy_helper.from_array(np.asarray(value), name)
    tensor.doc_string = doc
    return tensor


def floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def ints(low: int, high: int, *shape: int, dtype=np.int8) -> np.ndarray:
    return RNG.integers(low, high, size=shape).astype(dtype)
