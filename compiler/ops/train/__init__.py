"""Ops a training step adds, in the domain `ai.accelsim.training` (they are not ONNX ops): the gradients the backward
pass needs beyond ONNX's own ops (an activation's derivative, a convolution's data and filter gradients, a
normalisation's), and the optimizers' updates. Each has a numpy reference and lowers to IR ops like any other.
"""

import numpy as np
from numpy.typing import ArrayLike

from compiler.graph import Node
from compiler.ops.base import fail, normalize_axis


def work(*arrays: ArrayLike) -> list[np.ndarray]:
    """The arrays in the type a gradient is computed in: float64 if any is float64, else float32 (fp16, bf16 and
    fp8 values widen, as the forward ops' references do)."""
    wide = any(np.asarray(a).dtype == np.float64 for a in arrays)
    return [np.asarray(a).astype(np.float64 if wide else np.float32) for a in arrays]


def attr_axes(node: Node, rank: int) -> tuple[int, ...]:
    """The node's `axes` attribute, normalised and sorted; at least one axis."""
    axes = sorted({normalize_axis(node, int(a), rank) for a in node.attr("axes", [])})
    if not axes:
        raise fail(node, "attribute axes names no axis")
    return tuple(axes)
