"""Layers the zoo models share (linear, norms, GELU, attention), written only with ONNX-standard ops.

Every helper takes the Builder first and returns the output tensor name; shapes are known as it goes.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.errors import ModelError

if TYPE_CHECKING:
    from compiler.builder import Builder


def parse_dtype(dtype: DType | str) -> DType:
    """The float type weights and activations are stored in; integer kinds belong to the quantize pass."""
    dtype = DType.parse(dtype) if isinstance(dtype, str) else dtype
    if not dtype.is_float:
        raise ModelError(f"zoo models are built in a float dtype, not {dtype.value}: quantise a built "
                         f"model with compiler.passes, or use bitnet_b158 / matmulfree_lm for ternary "
                         f"weights")
    return dtype


def scalar(b: Builder, value: float, dtype: DType | None = None) -> str:
    """A scalar constant in the activation dtype, so element-wise ops see matching types."""
    return b.const(np.array(value), dtype=dtype or b.dtype)


def mask_value(dtype: DType) -> float:
    """The additive mask for a blocked position: -1e4 (as BERT's and GPT-2's code) zeroes exp() and stays
    finite in fp16; fp8 (e4m3) tops out at 448, which still gives exp(-448) = 0."""
    return -448.0 if dtype == DType.fp8 else -1e4


def ints(b: Builder, values: ArrayLike) -> str:
    """An int64 constant (shapes, axes, slice bounds)."""
    return b.const(np.array(values, dtype=np.int64), dtype=DType.int64)


def reduce_last(b: Builder, op: str, x: str, name: str) -> str:
    """ReduceMean / ReduceMax over the last axis, keeping it; the axes an attribute before opset 18, input 1 after."""
    if b.graph.opset >= 18:
        return b.node(op, [x, ints(b, [-1])], name=name, keepdims=1)
    return b.node(op, [x], name=name, axes=[-1], keepdims=1)


def linear(b: Builder, x: str, features: int, name: str, bias: bool = True) -> str:
    """y = x W + b over the last axis; W is stored [in, out] so MatMul reads it without a transpose."""
    fan_in = b.shape(x)[-1]
    with b.scope(name):
        w = b.weight("weight", (fan_in, features), fan_in=fan_in)
        y = b.node("MatMul", [x, w], name="matmul")
        if bias:
            y = b.node("Add", [y, b.weight("bias", (features,))], name="add_bias")
    return y


def layer_norm(b: Builder, x: str, name: str, eps: float = 1e-5) -> str:
    features = b.shape(x)[-1]
    with b.scope(name):
        gamma = b.weight("weight", (features,), init="uniform")
        beta = b.weight("bias", (features,))
    return b.node("LayerNormalization", [x, gamma, beta], name=name, axis=-1, epsilon=eps)


def rms_norm(b: Builder, x: str, name: str, eps: float = 1e-5) -> str:
    """x / sqrt(mean(x^2) + eps) * g from elementary ops (Zhang & Sennrich 2019; opset 17 has no RMSNorm)."""
    features = b.shape(x)[-1]
    with b.scope(name):
        gamma = b.weight("weight", (features,), init="uniform")
        square = b.node("Pow", [x, scalar(b, 2.0)], name="pow")
        mean = reduce_last(b, "ReduceMean", square, "mean")
        rms = b.node("Sqrt", [b.node("Add", [mean, scalar(b, eps)], name="add_eps")], name="sqrt")
        y = b.node("Div", [x, rms], name="div")
        return b.node("Mul", [y, gamma], name="scale")


def gelu(b: Builder, x: str, name: str = "gelu") -> str:
    """Exact GELU, 0.5 x (1 + erf(x / sqrt 2)) (Hendrycks & Gimpel 2016): opset 17 has Erf but not Gelu."""
    with b.scope(name):
        erf = b.node("Erf", [b.node("Div", [x, scalar(b, math.sqrt(2.0))], name="div")], name="erf")
        y = b.node("Mul", [x, b.node("Add", [erf, scalar(b, 1.0)], name="add_one")], name="mul")
        return b.node("Mul", [y, scalar(b, 0.5)], name="half")


def silu(b: Builder, x: str, name: str = "silu") -> str:
    """x * sigmoid(x) (the Swish of SwiGLU, Shazeer 2020)."""
    with b.scope(name):
        return b.node("Mul", [x, b.node("Sigmoid", [x], name="sigmoid")], name="mul")


def split_heads(b: Builder, x: str, heads: int, name: str) -> str:
    """[B, S, H*Dh] -> [B, H, S, Dh]."""
    batch, seq, width = b.shape(x)
    with b.scope(name):
        x = b.node("Reshape", [x, ints(b, [batch, seq, heads, width // heads])], name="reshape")
        return b.node("Transpose", [x], name="transpose", perm=[0, 2, 1, 3])


def merge_heads(b: Builder, x: str, name: str = "merge_heads") -> str:
    """[B, H, S, Dh] -> [B, S, H*Dh]."""
    batch, heads, seq, head_dim = b.shape(x)
    with b.scope(name):
        x = b.node("Transpose", [x], name="transpose", perm=[0, 2, 1, 3])
        return b.node("Reshape", [x, ints(b, [batch, seq, heads * head_dim])], name="reshape")


def attention_core(b: Builder, q: str, k: str, v: str, mask: str | None, k_transposed: bool = False) -> str:
    """softmax(Q K^T / sqrt(Dh) + mask) V over [B, H, S, Dh] (Vaswani et al. 2017, eq. 1); with `k_transposed`
    K is given as K^T [B, H, Dh, S] (a decoder's key cache, stored as the product reads it)."""
    head_dim = b.shape(q)[-1]
    k_t = k if k_transposed else b.node("Transpose", [k], name="k_transpose", perm=[0, 1, 3, 2])
    scores = b.node("MatMul", [q, k_t], name="qk")
    scores = b.node("Mul", [scores, scalar(b, 1.0 / math.sqrt(head_dim))], name="scale")
    if mask is not None:
        scores = b.node("Add", [scores, mask], name="mask")
    probs = b.node("Softmax", [scores], name="softmax", axis=-1)
    return b.node("MatMul", [probs, v], name="pv")


def self_attention(b: Builder, x: str, heads: int, name: str, mask: str | None = None) -> str:
    """Multi-head self-attention with biased Q, K, V and output projections (BERT, ViT)."""
    hidden = b.shape(x)[-1]
    with b.scope(name):
        q = split_heads(b, linear(b, x, hidden, "query"), heads, "q_heads")
        k = split_heads(b, linear(b, x, hidden, "key"), heads, "k_heads")
        v = split_heads(b, linear(b, x, hidden, "value"), heads, "v_heads")
        context = merge_heads(b, attention_core(b, q, k, v, mask))
        return linear(b, context, hidden, "output")


def gelu_mlp(b: Builder, x: str, inner: int, name: str) -> str:
    """Linear -> GELU -> Linear, the transformer feed-forward block."""
    hidden = b.shape(x)[-1]
    with b.scope(name):
        return linear(b, gelu(b, linear(b, x, inner, "fc1")), hidden, "fc2")


def check_divides(what: str, total: int, parts: int) -> None:
    if parts <= 0 or total % parts:
        raise ModelError(f"{what}: {total} is not divisible by {parts}")
