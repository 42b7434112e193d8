"""BitNet b1.58 (Ma et al. 2024): a Llama-style decoder whose projections are ternary BitLinear layers.

Embeddings, norms and the LM head stay in the float dtype, as in the paper and its reference model.
"""
from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from compiler.dtypes import DType
from compiler.zoo.decoder import Config, decoder
from compiler.zoo.ternary import bitlinear

if TYPE_CHECKING:
    from compiler.graph import Graph


def bitnet_b158(batch: int = 1, dtype: DType | str = DType.fp32, weights: bool = True, seq: int = 128,
                mode: str = "prefill", past: int | None = None, layers: int = 26, hidden: int = 3200,
                heads: int = 32, mlp: int = 8640, vocab: int = 32002, max_positions: int = 2048,
                seed: int = 0, latent: bool = False) -> Graph:
    """BitNet b1.58 3B (the 1bitLLM/bitnet_b1_58-3B reproduction of the paper's 3B row, table 1).

    seq, mode, past: as gpt2 (prefill of seq tokens, or decode of 1 token over `past` cached ones).
    layers, hidden, heads, mlp, vocab: 26, 3200, 32, 8640, 32002. max_positions: 2048.
    dtype: float type of activations, embeddings and norms (BitLinear weights are always ternary,
    its matmul int8 x ternary -> int32). seed: weight seed (weights are drawn then quantised).
    latent: the training form: float latent weights, quantised in the forward pass (`accelsim train` sets it).
    """
    cfg = Config("bitnet_b158", layers, hidden, heads, mlp, vocab, max_positions, llama=True, eps=1e-5)
    return decoder(cfg, batch, dtype, weights, seq, mode, past, seed, linear_fn=partial(bitlinear, latent=latent))
