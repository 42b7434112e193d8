"""Decoder-only transformers, GPT-2 and Llama style, in prefill (S tokens) or decode (1 token + KV cache).

Prefill writes present_key.i / present_value.i [B, H, S, Dh] per layer. Decode runs as serving engines do (vLLM,
TensorRT-LLM, a static cache): per layer a cache buffer of the whole context, past_key.i [B, H, Dh, past+1] (keys
stored transposed, as Q.K^T reads them, the layout vLLM's and FasterTransformer's key caches keep) and past_value.i
[B, H, past+1, Dh], holding positions 0..past-1; the new token's key and value are written in place at position
`past` (ONNX TensorScatter, opset 24), giving present_key.i / present_value.i (the same buffers), and attention reads
each cache once. Its logits equal the last row of a prefill over the same past+1 tokens.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.zoo.layers import (attention_core, check_divides, gelu, ints, layer_norm, linear,
                                 mask_value, merge_heads, parse_dtype, rms_norm, silu, split_heads)

if TYPE_CHECKING:
    from compiler.builder import Builder
    from compiler.graph import Graph

Linear = Callable[["Builder", str, int, str, bool], str]


@dataclass(frozen=True)
class Config:
    name: str
    layers: int
    hidden: int
    heads: int
    mlp: int
    vocab: int
    max_positions: int
    llama: bool             # RMSNorm, SwiGLU, rotary, no biases, untied head; else GPT-2 style
    eps: float
    rope_theta: float = 10000.0


def check_mode(cfg: Config, mode: str, seq: int, past: int | None) -> tuple[int, int]:
    """(new tokens, cached tokens) for a mode; decode defaults to past = seq - 1 (same context as prefill)."""
    if mode == "prefill":
        if past not in (None, 0):
            raise ModelError(f"{cfg.name}: past={past} only applies to mode='decode'")
        tokens, cached = seq, 0
    elif mode == "decode":
        tokens, cached = 1, seq - 1 if past is None else past
    else:
        raise ModelError(f"{cfg.name}: mode must be 'prefill' or 'decode', not {mode!r}")
    if tokens < 1 or cached < 0 or tokens + cached > cfg.max_positions:
        raise ModelError(f"{cfg.name}: {cached} cached + {tokens} new tokens must fit in "
                         f"1..{cfg.max_positions} positions")
    check_divides(f"{cfg.name} hidden / heads", cfg.hidden, cfg.heads)
    return tokens, cached


def causal_mask(b: Builder, tokens: int, cached: int) -> str | None:
    """Additive [S, past+S] mask: query i (at position past+i) sees keys 0..past+i. None for one token."""
    if tokens == 1:
        return None
    def mask() -> np.ndarray:
        allowed = np.arange(cached + tokens)[None, :] <= cached + np.arange(tokens)[:, None]
        # a finite value rather than -inf: exp underflows to 0 either way, and a row never turns NaN
        return np.where(allowed, 0.0, mask_value(b.dtype))
    return b.table((tokens, cached + tokens), mask, dtype=b.dtype, name="const_causal_mask")


def rotary_tables(b: Builder, cfg: Config, tokens: int, cached: int) -> tuple[str, str]:
    """cos and sin [S, Dh] for positions past..past+S-1 (Su et al. 2021), halves laid out as in Llama."""
    head_dim = cfg.hidden // cfg.heads

    def angles() -> np.ndarray:
        inv_freq = cfg.rope_theta ** (-np.arange(0, head_dim, 2) / head_dim)
        half = np.outer(np.arange(cached, cached + tokens), inv_freq)
        return np.concatenate([half, half], axis=-1)
    return (b.table((tokens, head_dim), lambda: np.cos(angles()), dtype=b.dtype, name="const_rope_cos"),
            b.table((tokens, head_dim), lambda: np.sin(angles()), dtype=b.dtype, name="const_rope_sin"))


def rotate(b: Builder, x: str, cos: str, sin: str, name: str) -> str:
    """x cos + rotate_half(x) sin, with rotate_half([x1, x2]) = [-x2, x1] over the head dimension."""
    half = b.shape(x)[-1] // 2
    with b.scope(name):
        axis = ints(b, [-1])
        x1 = b.node("Slice", [x, ints(b, [0]), ints(b, [half]), axis], name="first_half")
        x2 = b.node("Slice", [x, ints(b, [half]), ints(b, [2 * half]), axis], name="second_half")
        rotated = b.node("Concat", [b.node("Neg", [x2], name="neg"), x1], name="rotate_half", axis=-1)
        return b.node("Add", [b.node("Mul", [x, cos], name="mul_cos"),
                              b.node("Mul", [rotated, sin], name="mul_sin")], name="add")


def _attention(b: Builder, cfg: Config, x: str, layer: int, cache: tuple[str, int] | None, mask: str | None,
               rope: tuple[str, str] | None, linear_fn: Linear) -> tuple[str, str, str]:
    """Self-attention; returns (output, key, value): this step's keys and values in prefill; in decode (`cache`:
    the write position tensor and the context length T) the layer's cache buffers with the new token written in
    (keys [B, H, Dh, T], values [B, H, T, Dh])."""
    bias = not cfg.llama
    with b.scope("attn"):
        q = split_heads(b, linear_fn(b, x, cfg.hidden, "q_proj", bias), cfg.heads, "q_heads")
        k = split_heads(b, linear_fn(b, x, cfg.hidden, "k_proj", bias), cfg.heads, "k_heads")
        v = split_heads(b, linear_fn(b, x, cfg.hidden, "v_proj", bias), cfg.heads, "v_heads")
        if rope is not None:
            q, k = rotate(b, q, *rope, "rope_q"), rotate(b, k, *rope, "rope_k")
        if cache is not None:
            k, v = _cache_write(b, cfg, b.node("Transpose", [k], name="k_column", perm=[0, 1, 3, 2]), v, layer,
                                *cache)
        context = merge_heads(b, attention_core(b, q, k, v, mask, k_transposed=cache is not None))
        return linear_fn(b, context, cfg.hidden, "o_proj", bias), k, v


def _cache_write(b: Builder, cfg: Config, k_column: str, v: str, layer: int, position: str,
                 context: int) -> tuple[str, str]:
    """The new token's key column [B, H, Dh, 1] and value row [B, H, 1, Dh] written in place into the layer's
    cache buffers at `position` (TensorScatter): present_key.i [B, H, Dh, T] and present_value.i [B, H, T, Dh]."""
    batch = b.shape(v)[0]
    head_dim = cfg.hidden // cfg.heads
    past_k = b.input(f"past_key.{layer}", (batch, cfg.heads, head_dim, context))
    past_v = b.input(f"past_value.{layer}", (batch, cfg.heads, context, head_dim))
    with b.unscoped():
        return (b.node("TensorScatter", [past_k, k_column, position], name=f"present_key.{layer}", axis=3),
                b.node("TensorScatter", [past_v, v, position], name=f"present_value.{layer}", axis=2))


def _mlp(b: Builder, cfg: Config, x: str, linear_fn: Linear) -> str:
    with b.scope("mlp"):
        if cfg.llama:   # SwiGLU (Shazeer 2020): down(silu(gate(x)) * up(x))
            gate = silu(b, linear_fn(b, x, cfg.mlp, "gate_proj", False))
            up = linear_fn(b, x, cfg.mlp, "up_proj", False)
            return linear_fn(b, b.node("Mul", [gate, up], name="glu"), cfg.hidden, "down_proj", False)
        h = gelu(b, linear_fn(b, x, cfg.mlp, "fc", True))
        return linear_fn(b, h, cfg.hidden, "proj", True)


def _norm(b: Builder, cfg: Config, x: str, name: str) -> str:
    return rms_norm(b, x, name, cfg.eps) if cfg.llama else layer_norm(b, x, name, cfg.eps)


def decoder(cfg: Config, batch: int, dtype: DType | str, weights: bool, seq: int, mode: str, past: int | None,
            seed: int, linear_fn: Linear = linear) -> Graph:
    """Build a decoder graph; `linear_fn` swaps the projection layers (BitNet uses BitLinear)."""
    tokens, cached = check_mode(cfg, mode, seq, past)
    from compiler.builder import Builder   # here, not at the top: see compiler.zoo

    # decode writes its cache with TensorScatter, an opset-24 op; prefill stays at the zoo's opset 17
    b = Builder(cfg.name, dtype=parse_dtype(dtype), weights=weights, seed=seed, opset=24 if mode == "decode" else 17)
    ids = b.input("input_ids", (batch, tokens), DType.int64)
    wte = b.weight("embed_tokens", (cfg.vocab, cfg.hidden), fan_in=1)
    x = b.node("Gather", [wte, ids], name="embed", axis=0)
    rope = None
    if cfg.llama:
        rope = rotary_tables(b, cfg, tokens, cached)
    else:   # GPT-2's learned positions, read at past..past+S-1
        wpe = b.weight("embed_positions", (cfg.max_positions, cfg.hidden), fan_in=1)
        pos = b.node("Gather", [wpe, ints(b, np.arange(cached, cached + tokens)[None, :])], name="position",
                     axis=0)
        x = b.node("Add", [x, pos], name="add_position")
    mask = causal_mask(b, tokens, cached)
    # decode: each batch entry's new token goes to cache position `cached` (TensorScatter's write_indices)
    cache = (ints(b, [cached] * batch), cached + tokens) if mode == "decode" else None
    presents: list[str] = []
    for i in range(cfg.layers):
        with b.scope(f"layers.{i}"):   # pre-norm residual blocks (GPT-2 sec. 2.3, Llama)
            h, k, v = _attention(b, cfg, _norm(b, cfg, x, "norm1"), i, cache, mask, rope, linear_fn)
            x = b.node("Add", [x, h], name="residual1")
            x = b.node("Add", [x, _mlp(b, cfg, _norm(b, cfg, x, "norm2"), linear_fn)], name="residual2")
        if cache is None:
            k, v = b.node("Identity", [k], name=f"present_key.{i}"), b.node("Identity", [v], name=f"present_value.{i}")
        presents += [k, v]
    x = _norm(b, cfg, x, "norm_final")
    if cfg.llama:
        logits = b.node("MatMul", [x, b.weight("lm_head", (cfg.hidden, cfg.vocab), fan_in=cfg.hidden)],
                        name="logits")
    else:   # GPT-2 ties the output projection to the token embedding: logits = h wte^T
        flat = b.node("Reshape", [x, ints(b, [batch * tokens, cfg.hidden])], name="flatten")
        logits = b.node("Gemm", [flat, wte], name="lm_head", transB=1)
        logits = b.node("Reshape", [logits, ints(b, [batch, tokens, cfg.vocab])], name="logits")
    return b.build([logits] + presents)


def gpt2(batch: int = 1, dtype: DType | str = DType.fp32, weights: bool = True, seq: int = 128,
         mode: str = "prefill", past: int | None = None, layers: int = 12, hidden: int = 768,
         heads: int = 12, mlp: int | None = None, vocab: int = 50257, max_positions: int = 1024,
         seed: int = 0) -> Graph:
    """GPT-2 small (Radford et al. 2019): outputs `logits` [batch, S, vocab] then present_key/value.i.

    seq: context length (128); prefill runs all seq tokens, decode runs 1 token over `past` cached
    ones (default seq - 1). mode: 'prefill' or 'decode'. layers, hidden, heads: 12, 768, 12.
    mlp: feed-forward width (4 * hidden). vocab: 50257. max_positions: learned positions (1024).
    seed: weight seed (the same seed gives the same weights in both modes).
    """
    cfg = Config("gpt2", layers, hidden, heads, mlp or 4 * hidden, vocab, max_positions, llama=False,
                 eps=1e-5)
    return decoder(cfg, batch, dtype, weights, seq, mode, past, seed)


def llama(batch: int = 1, dtype: DType | str = DType.fp32, weights: bool = True, seq: int = 128,
          mode: str = "prefill", past: int | None = None, layers: int = 32, hidden: int = 4096,
          heads: int = 32, mlp: int = 11008, vocab: int = 32000, max_positions: int = 4096,
          seed: int = 0) -> Graph:
    """Llama-2-7B shaped decoder (Touvron et al. 2023): RMSNorm, SwiGLU, rotary, no biases, untied head.

    seq, mode, past: as gpt2. layers, hidden, heads, mlp, vocab: 32, 4096, 32, 11008, 32000
    (Llama-2-7B, table of the paper; multi-head, not grouped-query, attention). max_positions: 4096.
    seed: weight seed.
    """
    cfg = Config("llama", layers, hidden, heads, mlp, vocab, max_positions, llama=True, eps=1e-5)
    return decoder(cfg, batch, dtype, weights, seq, mode, past, seed)

