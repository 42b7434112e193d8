"""Ops whose outputs are known at import time: Constant, ConstantOfShape, Shape, Size, Range.

They fold to constants; only a fill too large to fold (ConstantOfShape, Range) lowers, to an input-less Map.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast, overload

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map
from compiler.ops.base import OpDef, const_input, fail, given, out, output_operand, register, require, unknown

_SCALAR_ATTRS = {"value_float": np.float32, "value_floats": np.float32,
                 "value_int": np.int64, "value_ints": np.int64}


@overload
def tensor_attr(node: Node, key: str, default: np.ndarray) -> tuple[np.ndarray, DType]: ...


@overload
def tensor_attr(node: Node, key: str, default: None) -> tuple[np.ndarray, DType] | None: ...


def tensor_attr(node: Node, key: str, default: np.ndarray | None) -> tuple[np.ndarray, DType] | None:
    """A TensorProto attribute (or an ndarray from the builder) as (values, dtype)."""
    value = node.attr(key)
    if value is None:
        return None if default is None else (default, DType.from_numpy(default.dtype))
    if not isinstance(value, np.ndarray):     # a builder's ndarray needs no onnx (~1 s to import with ml_dtypes)
        import onnx
        from onnx import numpy_helper

        if isinstance(value, onnx.TensorProto):
            dtype = DType.from_onnx(value.data_type, node.where())
            return numpy_helper.to_array(value).astype(dtype.numpy), dtype
    array = np.asarray(value)
    return array, DType.from_numpy(array.dtype)


def _fill(node: Node, graph: Graph, make: Callable[[], np.ndarray]) -> list[IROp]:
    # Too large to fold: the hardware writes the output, reading nothing and computing nothing.
    return [Map(name=node.name, node=node.name, op=node.op, inputs=(), output=output_operand(node, graph),
                fn=make, ops_per_element=0)]


@register("Constant")
class Constant(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        value, dtype = self._value(node)
        return [out(node, value.shape, dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [self._value(node)[0]]

    def fold_from_shapes(self, node: Node, ins: list[Tensor | None]) -> list[np.ndarray] | None:
        # Always a constant, whatever its size: the values are in the file already.
        return [self._value(node)[0]]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return []  # folded at import time; lower() skips folded nodes

    @staticmethod
    def _value(node: Node) -> tuple[np.ndarray, DType]:
        given = [key for key in node.attrs if key.startswith(("value", "sparse_value"))]
        if len(given) != 1:
            raise fail(node, f"needs exactly one value attribute (value, value_float(s), value_int(s)), "
                             f"got {given or 'none'}")
        key = given[0]
        if key == "value":
            # the attribute is there (key == "value"): never the missing-attribute None
            return cast(tuple[np.ndarray, DType], tensor_attr(node, "value", None))
        if key in _SCALAR_ATTRS:
            array = np.asarray(node.attrs[key], dtype=_SCALAR_ATTRS[key])
            return array, DType.from_numpy(array.dtype)
        raise fail(node, f"attribute {key!r} is not supported (allowed: value, value_float(s), value_int(s))")


@register("ConstantOfShape")
class ConstantOfShape(OpDef):
    value_inputs = (0,)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        require(node, ins, 1)
        shape = const_input(node, graph, 0, "the output shape")
        if shape.ndim != 1 or np.any(shape < 0):
            raise fail(node, f"the shape input must be a 1-D list of sizes >= 0, got {shape.tolist()}")
        value, dtype = self._fill_value(node)
        return [out(node, shape.tolist(), dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        value, _ = self._fill_value(node)
        return [np.full([int(d) for d in np.asarray(args[0])], value.reshape(-1)[0], dtype=value.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        shape = graph.tensor(node.outputs[0]).shape
        value, _ = self._fill_value(node)
        return _fill(node, graph, lambda: np.full(shape, value.reshape(-1)[0], dtype=value.dtype))

    @staticmethod
    def _fill_value(node: Node) -> tuple[np.ndarray, DType]:
        value, dtype = tensor_attr(node, "value", np.zeros(1, dtype=np.float32))
        if value.size != 1:
            raise fail(node, f"attribute value must hold one element, got shape {list(value.shape)}")
        return value, dtype


@register("Shape", "Size")
class Shape(OpDef):
    """Shape (start/end from opset 15, clamped like a Python slice) and Size: known from shapes alone."""

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        (x,) = require(node, ins, 1)
        return [out(node, self._value(node, x.shape).shape, DType.int64)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [self._value(node, np.shape(given(node, args, 1)[0]))]

    def fold_from_shapes(self, node: Node, ins: list[Tensor | None]) -> list[np.ndarray] | None:
        return [self._value(node, require(node, ins, 1)[0].shape)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        return []  # always folded from shapes

    @staticmethod
    def _value(node: Node, shape: tuple[int, ...]) -> np.ndarray:
        if node.op == "Size":
            return np.asarray(math.prod(shape), dtype=np.int64)
        start, end = int(node.attr("start", 0)), node.attr("end")
        return np.asarray(shape[start:None if end is None else int(end)], dtype=np.int64)


@register("Range")
class Range(OpDef):
    value_inputs = (0, 1, 2)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        bounds = require(node, ins, 3)
        start = bounds[0]
        names = ("start", "limit", "delta")
        missing = [i for i in range(3) if graph.value(node.inputs[i]) is None]
        if missing:
            # the output's length is (limit - start) / delta: no shape without the values
            what = " and ".join(f"{names[i]} ({node.inputs[i]!r})" for i in missing)
            raise unknown(node, f"{what} must be constants known at import time: the output's length depends on them "
                                f"and accelsim compiles static shapes (make them initializers)",
                          *(node.inputs[i] for i in missing))
        values = [const_input(node, graph, i, name) for i, name in enumerate(names)]
        for t, name in zip(bounds, names):
            if t.elements != 1:
                raise fail(node, f"{name} ({t.name!r}) must be a scalar, got shape {list(t.shape)}")
            if t.dtype != start.dtype:
                raise fail(node, f"{name} is {t.dtype.value} but start is {start.dtype.value}")
        if values[2].reshape(()) == 0:
            raise fail(node, "delta must not be 0")
        count = self._count(*values)
        if count is None:
            shown = ", ".join(f"{name} {np.asarray(v).reshape(()).item()}" for name, v in zip(names, values))
            raise fail(node, f"{shown}: not a finite length")
        return [out(node, (count,), start.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [self._range(*args)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        values = [graph.value(name) for name in node.inputs]
        return _fill(node, graph, lambda: self._range(*values))

    @staticmethod
    def _count(start: Any, limit: Any, delta: Any) -> int | None:
        """The output's length, without making it (Range(0, 1e15, 1) is 7 PiB of float64); None if not finite."""
        start, limit, delta = (np.asarray(v).reshape(()).item() for v in (start, limit, delta))
        if isinstance(start, int):
            count: int = max(-((start - limit) // delta), 0)   # exact ceil((limit - start) / delta) for ints
            return count
        span = (limit - start) / delta
        return max(math.ceil(span), 0) if math.isfinite(span) else None

    @staticmethod
    def _range(start: Any, limit: Any, delta: Any) -> np.ndarray:
        dtype = np.asarray(start).dtype
        count = Range._count(start, limit, delta)
        start, delta = (np.asarray(v).reshape(()).item() for v in (start, delta))
        wide = np.int64 if isinstance(start, int) else np.float64
        values: np.ndarray = start + np.arange(cast(int, count), dtype=wide) * delta   # finite: infer checked
        return values.astype(dtype)
