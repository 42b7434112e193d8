"""BitLinear (BitNet b1.58, Ma et al. 2024): weights ternarised at build time, activations int8 in the graph.
y = MatMulInteger(int8(x * 127 / absmax x), W~) * absmax x / 127 * mean|W|: the only matmul is integer,
with weights in {-1, 0, +1}, which a ternary accelerator runs as additions.

The training form (`latent=True`) keeps the full-precision latent weights W as parameters and quantises both
operands in the forward pass, as the reference code trains (1bitLLM/bitnet_b1_58, utils_quant.BitLinear):
y = MatMul(q(x), q(W)) with q a fake quantiser (round, clip, divide back by the scale) in the float dtype. Its
gradient is the straight-through estimator (compiler/train/autodiff.py). With the same seed both forms draw the same
W and compute the same numbers but for summation order (which can move a value across a rounding boundary).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from compiler.dtypes import DType
from compiler.zoo.layers import reduce_last, rms_norm, scalar

if TYPE_CHECKING:
    from compiler.builder import Builder


def absmean_ternary(w: np.ndarray, eps: float = 1e-5) -> tuple[np.ndarray, float]:
    """(W~, gamma) with gamma = mean|W| and W~ = clip(round(W / gamma), -1, 1) (BitNet b1.58, eq. 1-3)."""
    gamma = max(float(np.mean(np.abs(w))), eps)
    return np.clip(np.round(w / gamma), -1, 1).astype(np.int8), gamma


def fake_quantize(b: Builder, x: str, scale: str, low: float, high: float) -> str:
    """round(x * scale) clipped to [low, high], divided by scale again: the quantised values in x's float type."""
    q = b.node("Round", [b.node("Mul", [x, scale], name="mul_scale")], name="round")
    q = b.node("Clip", [q, scalar(b, low), scalar(b, high)], name="clip")
    return b.node("Div", [q, scale], name="dequant")


def quantize_activations(b: Builder, x: str) -> tuple[str, str]:
    """Per-token absmax to int8: (x_int8, 127 / absmax). The clamp at 1e-5 and the [-128, 127] clip
    follow the BitNet b1.58 reference code (1bitLLM/bitnet_b1_58, utils_quant.activation_quant)."""
    absmax = reduce_last(b, "ReduceMax", b.node("Abs", [x], name="abs"), "absmax")
    absmax = b.node("Max", [absmax, scalar(b, 1e-5)], name="clamp")
    scale = b.node("Div", [scalar(b, 127.0), absmax], name="act_scale")
    q = b.node("Round", [b.node("Mul", [x, scale], name="mul_scale")], name="round")
    q = b.node("Clip", [q, scalar(b, -128.0), scalar(b, 127.0)], name="clip")
    # onnxruntime's CPU MatMulInteger takes int8 x int8 (checked with onnxruntime 1.32), so no uint8
    # activations with a zero point of 128 are needed.
    return b.node("Cast", [q], name="to_int8", to=DType.int8.onnx), scale


def bitlinear(b: Builder, x: str, features: int, name: str, bias: bool = False, norm: bool = False,
              latent: bool = False) -> str:
    """A BitLinear layer over the last axis of x; `norm` puts an RMSNorm before the quantiser, as the
    MatMul-free LM's fused BitLinear does (Zhu et al. 2024, sec. 3.2). Bias-free like both papers.
    `latent`: the training form (float latent weights, fake-quantised in the forward pass)."""
    assert not bias, "BitNet b1.58 and the MatMul-free LM use no biases"
    fan_in = b.shape(x)[-1]
    if latent:
        return _latent_bitlinear(b, x, features, name, norm)
    with b.scope(name):
        w_q = gamma = None
        if b.with_weights:
            w_q, gamma = absmean_ternary(b.rng.standard_normal((fan_in, features)) / math.sqrt(fan_in))
        w = b.weight("weight", (fan_in, features), dtype=DType.ternary, value=w_q)
        w_scale = b.weight("weight_scale", (), value=None if gamma is None else np.array(gamma))
        if norm:
            x = rms_norm(b, x, "norm", eps=1e-8)
        x_q, x_scale = quantize_activations(b, x)
        acc = b.node("MatMulInteger", [x_q, w], name="matmul_integer")   # int32 accumulators
        y = b.node("Cast", [acc], name="to_float", to=b.dtype.onnx)
        y = b.node("Div", [y, x_scale], name="dequant_act")
        return b.node("Mul", [y, w_scale], name="dequant_weight")


def _latent_bitlinear(b: Builder, x: str, features: int, name: str, norm: bool) -> str:
    fan_in = b.shape(x)[-1]
    with b.scope(name):
        value = b.rng.standard_normal((fan_in, features)) / math.sqrt(fan_in) if b.with_weights else None
        w = b.weight("weight", (fan_in, features), value=value)
        if norm:
            x = rms_norm(b, x, "norm", eps=1e-8)
        with b.scope("act_quant"):     # per token: 127 / absmax, clamped as quantize_activations does
            absmax = reduce_last(b, "ReduceMax", b.node("Abs", [x], name="abs"), "absmax")
            scale = b.node("Div", [scalar(b, 127.0), b.node("Max", [absmax, scalar(b, 1e-5)], name="clamp")],
                           name="scale")
            x_q = fake_quantize(b, x, scale, -128.0, 127.0)
        with b.scope("weight_quant"):  # per tensor: 1 / mean|W|, as absmean_ternary
            mean = b.node("ReduceMean", [b.node("Abs", [w], name="abs")], name="absmean", keepdims=0)
            scale = b.node("Div", [scalar(b, 1.0), b.node("Max", [mean, scalar(b, 1e-5)], name="clamp")],
                           name="scale")
            w_q = fake_quantize(b, w, scale, -1.0, 1.0)
        return b.node("MatMul", [x_q, w_q], name="matmul")


def mmfree_linear(b: Builder, x: str, features: int, name: str, bias: bool = False, latent: bool = False) -> str:
    """BitLinear with its RMSNorm, the MatMul-free LM's dense layer."""
    return bitlinear(b, x, features, name, bias, norm=True, latent=latent)

