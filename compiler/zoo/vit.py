"""ViT-B/16 (Dosovitskiy et al. 2021): 16x16 patches by a stride-16 Conv, class token, 12 pre-LN layers.

Almost all work is dense GEMMs: the patch embedding, Q/K/V/output projections and the MLP.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from compiler.dtypes import DType
from compiler.zoo.layers import check_divides, gelu_mlp, ints, layer_norm, parse_dtype, self_attention

if TYPE_CHECKING:
    from compiler.graph import Graph


def vit_b16(batch: int = 1, dtype: DType | str = DType.fp32, weights: bool = True, image: int = 224,
            patch: int = 16, layers: int = 12, hidden: int = 768, heads: int = 12, mlp: int = 3072,
            classes: int = 1000, seed: int = 0) -> Graph:
    """ViT-B/16 classifier on an NCHW image batch; output `head` (logits) [batch, classes].

    image: input side (224 -> 14x14 = 196 patches + 1 class token). patch: patch side (16).
    layers, hidden, heads, mlp: encoder depth, width, attention heads, MLP width (12, 768, 12, 3072,
    table 1 of the paper). classes: head outputs (1000). seed: weight seed.
    """
    check_divides("vit_b16 hidden / heads", hidden, heads)
    check_divides("vit_b16 image / patch", image, patch)
    from compiler.builder import Builder   # here, not at the top: see compiler.zoo

    b = Builder("vit_b16", dtype=parse_dtype(dtype), weights=weights, seed=seed)
    x = b.input("image", (batch, 3, image, image))
    grid = image // patch
    tokens = grid * grid + 1
    with b.scope("embeddings"):
        w = b.weight("patch.weight", (hidden, 3, patch, patch), fan_in=3 * patch * patch)
        x = b.node("Conv", [x, w, b.weight("patch.bias", (hidden,))], name="patch",
                   kernel_shape=[patch, patch], strides=[patch, patch])
        x = b.node("Reshape", [x, ints(b, [batch, hidden, grid * grid])], name="flatten")
        x = b.node("Transpose", [x], name="to_tokens", perm=[0, 2, 1])
        cls = b.weight("cls_token", (1, 1, hidden), fan_in=1)
        cls = b.node("Expand", [cls, ints(b, [batch, 1, hidden])], name="cls_expand")
        x = b.node("Concat", [cls, x], name="concat_cls", axis=1)
        x = b.node("Add", [x, b.weight("position", (1, tokens, hidden), fan_in=1)], name="add_position")
    for i in range(layers):
        with b.scope(f"encoder.{i}"):
            # Pre-LN (paper eq. 2-3): x + MSA(LN(x)), then x + MLP(LN(x)); LayerNorm eps 1e-6.
            h = self_attention(b, layer_norm(b, x, "ln1", eps=1e-6), heads, "attention")
            x = b.node("Add", [x, h], name="residual1")
            h = gelu_mlp(b, layer_norm(b, x, "ln2", eps=1e-6), mlp, "mlp")
            x = b.node("Add", [x, h], name="residual2")
    x = layer_norm(b, x, "ln_final", eps=1e-6)
    cls = b.node("Gather", [x, ints(b, 0)], name="cls_token", axis=1)   # [batch, hidden]
    w = b.weight("head.weight", (classes, hidden), fan_in=hidden)
    logits = b.node("Gemm", [cls, w, b.weight("head.bias", (classes,))], name="head", transB=1)
    return b.build([logits])
