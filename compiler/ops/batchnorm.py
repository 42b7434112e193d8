"""BatchNormalization in inference form (opsets 9-15, and the legacy `spatial` attribute) -> one Map.

Invariant: y = (x - mean) / sqrt(var + epsilon) * scale + B with per-channel parameters (per
activation when spatial=0); training mode is refused with a clear error.
"""
from __future__ import annotations

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp
from compiler.ops.base import OpDef, fail, map_op, out, register, require

PARAMETERS = ("scale", "B", "input_mean", "input_var")


@register("BatchNormalization")
class BatchNormalization(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        require(node, ins, 5)
        if node.attr("training_mode", 0) or any(node.outputs[1:]):
            raise fail(node, "only inference is supported (training_mode=0, a single output Y); the "
                             "running-statistics outputs are training outputs")
        x = ins[0]
        if len(x.shape) < 2 or not x.dtype.is_float:
            raise fail(node, f"input is {x.dtype.value} {list(x.shape)}; expected a float N x C x ... tensor")
        expected = _parameter_shape(node, x.shape)
        for name, t in zip(PARAMETERS, ins[1:]):
            if t.shape != expected:
                per = "one per channel" if len(expected) == 1 else "spatial=0: one per activation"
                raise fail(node, f"{name} has shape {list(t.shape)}, expected {list(expected)} ({per})")
        return [out(node, x.shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        return [_normalize(node, *args[:5])]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        # The per-channel factor scale/sqrt(var+eps) and shift fold ahead of time (O(C) work), so
        # each element costs a multiply and an add.
        return map_op(node, graph, lambda *a: _normalize(node, *a), ops_per_element=2)


def _parameter_shape(node: Node, shape: tuple[int, ...]) -> tuple[int, ...]:
    return shape[1:] if node.attr("spatial", 1) == 0 else shape[1:2]


def _normalize(node: Node, x, scale, bias, mean, var) -> np.ndarray:
    work = np.float64 if x.dtype == np.float64 else np.float32
    epsilon = float(node.attr("epsilon", 1e-5))
    # (C,) parameters line up with axis 1; spatial=0 parameters already have x's trailing shape
    lead = (-1,) + (1,) * (x.ndim - 2) if len(_parameter_shape(node, x.shape)) == 1 else scale.shape
    scale, bias, mean, var = (np.asarray(p).astype(work).reshape(lead) for p in (scale, bias, mean, var))
    y = (x.astype(work) - mean) * (scale / np.sqrt(var + work(epsilon))) + bias
    return y.astype(x.dtype)
