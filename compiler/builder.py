"""Build a Graph in Python, node by node, with shapes known as you go (the zoo is written with it).

    b = Builder("mlp", batch=1)
    x = b.input("x", (1, 784))
    h = b.node("Relu", [b.node("Gemm", [x, b.weight("w1", (256, 784)), b.weight("b1", (256,))],
                                 transB=1)])
    graph = b.build([h])

Weights are random (seeded, scaled by 1/sqrt(fan-in) so activations stay near unit size), or absent
with `weights=False`: a shape-only model simulates just as well and builds in no time.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal, SupportsInt, overload

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ops.shapes import FOLD_LIMIT_ELEMENTS, finalize, infer_node


class Builder:
    def __init__(self, name: str, dtype: DType = DType.fp32, weights: bool = True, seed: int = 0,
                 opset: int = 17):
        self.dtype = dtype
        self.with_weights = weights
        self.rng = np.random.default_rng(seed)
        self.graph = Graph(name=name, inputs=[], outputs=[], nodes=[], tensors={}, weights={},
                           opset=opset, source=f"zoo model {name!r}")
        self._count: dict[str, int] = {}
        self._scope: list[str] = []

    # -- naming ---------------------------------------------------------------------------------------
    def scope(self, name: str) -> _Scope:
        """Prefix names made inside a `with b.scope("layer1"):` block, like a framework's module path."""
        return _Scope(self, name)

    @contextmanager
    def unscoped(self) -> Iterator[None]:
        """Names made inside carry no scope prefix (a model output named by convention: present_key.0)."""
        saved, self._scope = self._scope, []
        try:
            yield
        finally:
            self._scope = saved

    def fresh(self, base: str) -> str:
        full = "/".join(self._scope + [base])
        n = self._count.get(full, 0)
        self._count[full] = n + 1
        return full if n == 0 else f"{full}_{n}"

    # -- tensors --------------------------------------------------------------------------------------
    def input(self, name: str, shape: Iterable[SupportsInt], dtype: DType | None = None) -> str:
        tensor = Tensor(name, tuple(int(d) for d in shape), dtype or self.dtype)
        self.graph.inputs.append(name)
        self.graph.tensors[name] = tensor
        return name

    def weight(self, name: str, shape: Iterable[SupportsInt], dtype: DType | None = None,
               value: np.ndarray | None = None, fan_in: int | None = None, init: str = "normal") -> str:
        """A parameter. `init`: normal (scaled by fan-in), ones, zeros, or uniform in [0.5, 1.5)."""
        full = self.fresh(name)
        dims = tuple(int(d) for d in shape)
        dtype = dtype or self.dtype
        if value is None and self.with_weights:
            value = self._init(dims, init, fan_in)
        if value is not None:
            value = _representable(np.asarray(value), dtype)
            assert value.shape == dims, (full, value.shape, dims)
        self.graph.weights[full] = value
        self.graph.tensors[full] = Tensor(full, dims, dtype)
        return full

    def const(self, value: ArrayLike, dtype: DType | None = None, name: str = "const") -> str:
        """A small constant that always carries its value (shapes, axes, scalars)."""
        array = np.asarray(value)
        dtype = dtype or DType.from_numpy(array.dtype)
        full = self.fresh(name)
        self.graph.weights[full] = array.astype(dtype.numpy)
        self.graph.tensors[full] = Tensor(full, array.shape, dtype)
        return full

    def table(self, shape: Iterable[SupportsInt], make: Callable[[], ArrayLike], dtype: DType | None = None,
              name: str = "const") -> str:
        """A constant computed from positions (a causal mask, rotary tables): its values when the builder draws
        weights or the table is small, else its shape alone. A shape-only build for simulation never holds the
        32 GiB a 65,536-position mask would take; folding only ever needs the small ones (FOLD_LIMIT_ELEMENTS)."""
        dims = tuple(int(d) for d in shape)
        if self.with_weights or math.prod(dims) <= FOLD_LIMIT_ELEMENTS:
            return self.const(make(), dtype=dtype, name=name)
        full = self.fresh(name)
        self.graph.weights[full] = None
        self.graph.tensors[full] = Tensor(full, dims, dtype or self.dtype)
        return full

    def shape(self, name: str) -> tuple[int, ...]:
        return self.graph.tensors[name].shape

    # -- nodes ----------------------------------------------------------------------------------------
    @overload
    def node(self, op: str, inputs: Sequence[str], outputs: Literal[1] = 1, name: str | None = None,
             **attrs: Any) -> str: ...

    @overload
    def node(self, op: str, inputs: Sequence[str], outputs: Literal[2, 3, 4, 5, 6, 7, 8], name: str | None = None,
             **attrs: Any) -> tuple[str, ...]: ...

    @overload
    def node(self, op: str, inputs: Sequence[str], outputs: int, name: str | None = None,
             **attrs: Any) -> str | tuple[str, ...]: ...

    def node(self, op: str, inputs: Sequence[str], outputs: int = 1, name: str | None = None,
             **attrs: Any) -> str | tuple[str, ...]:
        """Add a node; returns its output name, or a tuple of names when `outputs` > 1."""
        node_name = self.fresh(name or op.lower())
        outs = tuple(node_name if outputs == 1 else f"{node_name}:{i}" for i in range(outputs))
        node = Node(node_name, op, tuple(inputs), outs, dict(attrs))
        self.graph.nodes.append(node)
        infer_node(self.graph, node)
        return outs[0] if outputs == 1 else outs

    def build(self, outputs: Iterable[str]) -> Graph:
        self.graph.outputs = list(outputs)
        return finalize(self.graph)

    def _init(self, shape: tuple[int, ...], init: str, fan_in: int | None) -> np.ndarray:
        if init == "ones":
            return np.ones(shape)
        if init == "zeros":
            return np.zeros(shape)
        if init == "uniform":
            uniform: np.ndarray = self.rng.uniform(0.5, 1.5, size=shape)
            return uniform
        fan = fan_in or (math.prod(shape[1:]) if len(shape) > 1 else shape[0])
        normal: np.ndarray = self.rng.standard_normal(shape) / math.sqrt(max(fan, 1))
        return normal


def _representable(value: np.ndarray, dtype: DType) -> np.ndarray:
    """The values `dtype` can hold, in its numpy type: bf16/fp8 live in float32 but must be rounded
    (to nearest even), else the reference computes with precision the hardware and ONNX never see."""
    if dtype in (DType.bf16, DType.fp8):
        import ml_dtypes

        narrow = ml_dtypes.bfloat16 if dtype == DType.bf16 else ml_dtypes.float8_e4m3fn
        return value.astype(np.float32).astype(narrow).astype(np.float32)
    return value.astype(dtype.numpy)


class _Scope:
    def __init__(self, builder: Builder, name: str):
        self.builder, self.name = builder, name

    def __enter__(self) -> None:
        self.builder._scope.append(self.name)

    def __exit__(self, *exc: object) -> None:
        self.builder._scope.pop()
