"""The MatMul-free LM (Zhu et al. 2024, arXiv 2406.02528): ternary dense layers, an MLGRU token mixer run
by an ONNX Scan over the sequence, and a GLU channel mixer; no attention and no float matmul but the LM head.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.zoo.layers import parse_dtype, rms_norm, scalar, silu
from compiler.zoo.ternary import mmfree_linear

if TYPE_CHECKING:
    from compiler.builder import Builder
    from compiler.graph import Graph


def mlgru_cell(name: str, batch: int, hidden: int, dtype: DType) -> Graph:
    """Scan body, one token: h_t = f_t * h_{t-1} + (1 - f_t) * c_t (paper sec. 3.3.1).

    Inputs (state, then scan inputs): h [B, d], f_t [B, d], c_t [B, d]; outputs: the new state, and a
    copy of it as the scan output (ONNX wants two distinct names).
    """
    from compiler.builder import Builder   # here, not at the top: see compiler.zoo

    body = Builder(name, dtype=dtype)
    with body.scope(name):
        h = body.input(f"{name}/h_prev", (batch, hidden))
        f = body.input(f"{name}/f_t", (batch, hidden))
        c = body.input(f"{name}/c_t", (batch, hidden))
        keep = body.node("Mul", [f, h], name="keep")
        one_minus_f = body.node("Sub", [scalar(body, 1.0), f], name="one_minus_f")
        write = body.node("Mul", [one_minus_f, c], name="write")
        h_next = body.node("Add", [keep, write], name="h_next")
        h_out = body.node("Identity", [h_next], name="h_out")
    return body.build([h_next, h_out])


def mlgru(b: Builder, x: str, layer: int, latent: bool = False) -> str:
    """MLGRU token mixer (sec. 3.3.1): f = sigmoid(x W_f), c = silu(x W_c), g = sigmoid(x W_g), the
    recurrence in a Scan over tokens, then o = (g * h) W_o; every W a ternary BitLinear."""
    batch, seq, hidden = b.shape(x)
    with b.scope("mlgru"):
        f = b.node("Sigmoid", [mmfree_linear(b, x, hidden, "f_proj", latent=latent)], name="forget_gate")
        c = silu(b, mmfree_linear(b, x, hidden, "c_proj", latent=latent), "candidate")
        g = b.node("Sigmoid", [mmfree_linear(b, x, hidden, "g_proj", latent=latent)], name="output_gate")
        h0 = b.const(np.zeros((batch, hidden)), dtype=b.dtype, name="const_h0")
        cell = mlgru_cell(f"layers.{layer}/mlgru/cell", batch, hidden, b.dtype)
        # Scan over axis 1 (tokens) of f and c; the hidden state [B, d] is carried between steps.
        _, h = b.node("Scan", [h0, f, c], outputs=2, name="scan", body=cell, num_scan_inputs=2,
                      scan_input_axes=[1, 1], scan_output_axes=[1])
        gated = b.node("Mul", [g, h], name="gate")
        return mmfree_linear(b, gated, hidden, "o_proj", latent=latent)


def glu(b: Builder, x: str, inner: int, latent: bool = False) -> str:
    """GLU channel mixer with ternary layers: down(silu(gate(x)) * up(x)) (paper sec. 3.3.2)."""
    hidden = b.shape(x)[-1]
    with b.scope("glu"):
        gate = silu(b, mmfree_linear(b, x, inner, "gate_proj", latent=latent))
        up = mmfree_linear(b, x, inner, "up_proj", latent=latent)
        return mmfree_linear(b, b.node("Mul", [gate, up], name="mul"), hidden, "down_proj", latent=latent)


def matmulfree_lm(batch: int = 1, dtype: DType | str = DType.fp32, weights: bool = True, seq: int = 128,
                  layers: int = 24, hidden: int = 2048, mlp: int = 5632, vocab: int = 32000,
                  seed: int = 0, latent: bool = False) -> Graph:
    """MatMul-free LM 1.3B (paper table 2; ridger/MMfreeLM-1.3B): outputs `logits` [batch, seq, vocab].

    seq: tokens processed (128), the whole prompt in one pass. layers, hidden: 24, 2048. mlp: GLU width
    (5632 = 8/3 * 2048 rounded up to a multiple of 256, as the reference code does). vocab: 32000.
    dtype: float type of activations, embeddings, norms and head; dense layers are always ternary
    with int8 activations. seed: weight seed. latent: the training form (float latent weights quantised in
    the forward pass; `accelsim train` sets it).
    """
    if seq < 1:
        raise ModelError(f"matmulfree_lm: seq must be at least 1, not {seq}")
    from compiler.builder import Builder   # here, not at the top: see compiler.zoo

    b = Builder("matmulfree_lm", dtype=parse_dtype(dtype), weights=weights, seed=seed)
    ids = b.input("input_ids", (batch, seq), DType.int64)
    x = b.node("Gather", [b.weight("embed_tokens", (vocab, hidden), fan_in=1), ids], name="embed", axis=0)
    for i in range(layers):
        with b.scope(f"layers.{i}"):   # pre-norm residual blocks, token mixer then channel mixer
            x = b.node("Add", [x, mlgru(b, rms_norm(b, x, "norm1", eps=1e-6), i, latent)], name="residual1")
            x = b.node("Add", [x, glu(b, rms_norm(b, x, "norm2", eps=1e-6), mlp, latent)], name="residual2")
    x = rms_norm(b, x, "norm_final", eps=1e-6)
    head = b.weight("lm_head", (hidden, vocab), fan_in=hidden)
    return b.build([b.node("MatMul", [x, head], name="logits")])

