"""Structural equality of two Graphs, as a list of differences (empty when equal); used by round-trip tests.

Equal means: same inputs, outputs, opset, nodes (name, op, domain, inputs, outputs, attributes), tensor
shapes and dtypes, and weights equal bit for bit in their declared dtype (bf16 compares as bf16).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.dtypes import DType
from compiler.graph import Graph, Tensor

_STORAGE = {DType.bf16: "bfloat16", DType.fp8: "float8_e4m3fn", DType.int4: "int4"}
MAX_REPORTED = 20


def graphs_equal(a: Graph, b: Graph) -> list[str]:
    diffs: list[str] = []
    for what in ("inputs", "outputs", "opset"):
        if getattr(a, what) != getattr(b, what):
            diffs.append(f"{what}: {getattr(a, what)} != {getattr(b, what)}")
    diffs += _nodes(a, b)
    diffs += _tensors(a, b)
    diffs += _values("weight", a.weights, b.weights, a, b)
    diffs += _values("constant", a.constants, b.constants, a, b)
    return diffs[:MAX_REPORTED] + ([f"... and {len(diffs) - MAX_REPORTED} more"]
                                   if len(diffs) > MAX_REPORTED else [])


def _nodes(a: Graph, b: Graph) -> list[str]:
    if len(a.nodes) != len(b.nodes):
        return [f"node count: {len(a.nodes)} != {len(b.nodes)}"]
    diffs = []
    for x, y in zip(a.nodes, b.nodes):
        for what in ("name", "op", "domain", "inputs", "outputs"):
            if getattr(x, what) != getattr(y, what):
                diffs.append(f"{x.where()}: {what} {getattr(x, what)} != {getattr(y, what)}")
        if set(x.attrs) != set(y.attrs):
            diffs.append(f"{x.where()}: attributes {sorted(x.attrs)} != {sorted(y.attrs)}")
            continue
        for key in x.attrs:
            if _canonical(x.attrs[key]) != _canonical(y.attrs[key]):
                diffs.append(f"{x.where()}: attribute {key!r}: {x.attrs[key]!r} != {y.attrs[key]!r}")
    return diffs


def _tensors(a: Graph, b: Graph) -> list[str]:
    diffs = [f"tensor {name!r} only in {side}" for side, names in
             (("the first", a.tensors.keys() - b.tensors.keys()),
              ("the second", b.tensors.keys() - a.tensors.keys())) for name in sorted(names)]
    for name in a.tensors.keys() & b.tensors.keys():
        x, y = a.tensors[name], b.tensors[name]
        if (x.shape, x.dtype) != (y.shape, y.dtype):
            diffs.append(f"tensor {name!r}: {list(x.shape)} {x.dtype.value} != {list(y.shape)} {y.dtype.value}")
    return diffs


def _values(kind: str, x: dict[str, Any], y: dict[str, Any], a: Graph, b: Graph) -> list[str]:
    diffs = [f"{kind} {name!r} only in {side}" for side, names in
             (("the first", x.keys() - y.keys()), ("the second", y.keys() - x.keys()))
             for name in sorted(names)]
    for name in x.keys() & y.keys():
        if (x[name] is None) != (y[name] is None):
            diffs.append(f"{kind} {name!r}: values in one graph only")
        elif x[name] is not None:
            bits_a = _bits(x[name], a.tensors.get(name))
            bits_b = _bits(y[name], b.tensors.get(name))
            if bits_a != bits_b:
                diffs.append(f"{kind} {name!r}: values differ")
    return diffs


def _bits(value: object, tensor: Tensor | None) -> tuple[tuple[int, ...], str, bytes]:
    """Shape, dtype and bytes of a value as stored in its declared dtype (bf16 held in float32 -> bf16)."""
    array = np.asarray(value)
    if tensor is not None and tensor.dtype in _STORAGE:
        import ml_dtypes  # noqa: F401  (registers the dtype names with numpy)

        array = array.astype(_STORAGE[tensor.dtype])
    elif tensor is not None:
        array = array.astype(tensor.dtype.numpy, copy=False)
    return array.shape, str(array.dtype), np.ascontiguousarray(array).tobytes()


def _canonical(value: object) -> object:
    """One spelling per attribute value: ONNX stores floats as float32, bools as ints, strings as bytes."""
    if isinstance(value, Graph):  # a body built in Python equals the GraphProto it exports as
        from compiler.export import graph_proto

        value = graph_proto(value)
    if isinstance(value, onnx.GraphProto):
        return ("graphproto", value.SerializeToString(deterministic=True))
    if isinstance(value, onnx.TensorProto):
        value = numpy_helper.to_array(value)
    if isinstance(value, np.ndarray):
        return ("tensor", value.shape, str(value.dtype), value.tobytes())
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(np.float32(value))
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (list, tuple)):
        return tuple(_canonical(v) for v in value)
    return value
