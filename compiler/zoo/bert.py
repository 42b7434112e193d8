"""BERT-base (Devlin et al. 2019): word + position + token-type embeddings, 12 post-LN encoder layers, pooler.

Inputs follow Hugging Face: input_ids, token_type_ids and attention_mask (1 = attend, 0 = padding).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.zoo.layers import (check_divides, gelu_mlp, ints, layer_norm, linear, mask_value,
                                 parse_dtype, scalar, self_attention)

if TYPE_CHECKING:
    from compiler.graph import Graph


def bert_base(batch: int = 1, dtype: DType | str = DType.fp32, weights: bool = True, seq: int = 128,
              layers: int = 12, hidden: int = 768, heads: int = 12, mlp: int = 3072, vocab: int = 30522,
              max_positions: int = 512, seed: int = 0) -> Graph:
    """BERT-base encoder; outputs `last_hidden` [batch, seq, hidden] and `pooler` [batch, hidden].

    seq: tokens per sequence (128, at most max_positions). layers, hidden, heads, mlp: depth, width,
    attention heads, feed-forward width (12, 768, 12, 3072: BERT-base). vocab: word pieces (30522,
    bert-base-uncased). max_positions: learned positions (512). seed: weight seed.
    """
    check_divides("bert_base hidden / heads", hidden, heads)
    if not 0 < seq <= max_positions:
        raise ModelError(f"bert_base: seq {seq} must be between 1 and max_positions {max_positions}")
    from compiler.builder import Builder   # here, not at the top: see compiler.zoo

    b = Builder("bert_base", dtype=parse_dtype(dtype), weights=weights, seed=seed)
    ids = b.input("input_ids", (batch, seq), DType.int64)
    types = b.input("token_type_ids", (batch, seq), DType.int64)
    mask = b.input("attention_mask", (batch, seq), DType.int64)
    with b.scope("embeddings"):
        table = b.weight("word_embeddings", (vocab, hidden), fan_in=1)
        word = b.node("Gather", [table, ids], name="word", axis=0)
        table = b.weight("position_embeddings", (max_positions, hidden), fan_in=1)
        pos = b.node("Gather", [table, ints(b, np.arange(seq)[None, :])], name="position", axis=0)
        table = b.weight("token_type_embeddings", (2, hidden), fan_in=1)
        kind = b.node("Gather", [table, types], name="token_type", axis=0)
        x = b.node("Add", [b.node("Add", [word, pos], name="add_position"), kind], name="add_type")
        x = layer_norm(b, x, "ln", eps=1e-12)
    with b.scope("extended_mask"):
        # (1 - mask) * -10000, broadcast over heads and queries: what BERT's reference code adds.
        m = b.node("Cast", [mask], name="cast", to=b.dtype.onnx)
        m = b.node("Sub", [scalar(b, 1.0), m], name="invert")
        m = b.node("Mul", [m, scalar(b, mask_value(b.dtype))], name="scale")
        additive = b.node("Unsqueeze", [m, ints(b, [1, 2])], name="unsqueeze")   # [B, 1, 1, S]
    for i in range(layers):
        with b.scope(f"encoder.{i}"):
            # Post-LN (paper fig. 1 / Vaswani 2017): LN(x + Sublayer(x)); BERT's LayerNorm eps 1e-12.
            h = self_attention(b, x, heads, "attention", mask=additive)
            x = layer_norm(b, b.node("Add", [x, h], name="residual1"), "ln1", eps=1e-12)
            h = gelu_mlp(b, x, mlp, "ffn")
            x = layer_norm(b, b.node("Add", [x, h], name="residual2"), "ln2", eps=1e-12)
    last = b.node("Identity", [x], name="last_hidden")
    with b.scope("pooler"):
        # The pooler reads the [CLS] token: tanh(W h_0 + b), part of BERT's 110 M parameters.
        cls = b.node("Gather", [x, ints(b, 0)], name="cls", axis=1)
        pooled = b.node("Tanh", [linear(b, cls, hidden, "dense")], name="tanh")
    pooled = b.node("Identity", [pooled], name="pooler")
    return b.build([last, pooled])
