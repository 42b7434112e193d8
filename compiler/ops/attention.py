"""Attention (opset 23+: 3D or 4D Q/K/V, grouped-query heads, causal, boolean or additive masks, past/present KV
cache, nonpad_kv_seqlen, softcap, sliding windows, softmax_precision, qk_matmul_output) and RotaryEmbedding (opset 23+).

Invariant: Attention lowers to the ops an unfused attention runs: a Move per cache concatenation, a Map each scaling
Q and K by sqrt(scale), an Einsum for Q.K^T (a query head h reads key head h // (Hq/Hkv)), one Map for softcap, mask
and softmax, an Einsum for P.V, and a free view back to the output layout. The reference composes the same functions.
Precision follows the spec: each step is rounded to the inputs' type T1 (Q*sqrt(scale), K*sqrt(scale), Q.K^T,
softcap, + mask), the softmax computes in softmax_precision (default T1: x - max, exp, sum and divide each rounded
to it) and P.V is rounded to T1; products accumulate in fp32. onnx's reference and data agree; onnxruntime scales
Q.K^T once and computes an fp16 softmax in fp32, so for fp16/bf16 inputs it differs by a few ulps (fp32: equal).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import Axis, Einsum, IROp, Map, Move, Operand, Role
from compiler.ops.base import (OpDef, fail, given, map_reference, operand, optional, out, output_operand, register,
                               require)

Step = Callable[[Any], np.ndarray]


@dataclass(frozen=True)
class _Shape:
    """One Attention node resolved (4D layout B, H, S, D; `flat`: the inputs are 3D B, S, H*D)."""

    flat: bool
    batch: int
    q_heads: int
    kv_heads: int
    q_len: int
    past: int            # cached keys (0 without past_key)
    kv_len: int          # past + new keys
    head: int            # Q/K head size
    v_head: int
    dtype: DType         # T1, the inputs' type: every step but the softmax is rounded to it
    softmax: DType       # the softmax's precision (softmax_precision, default T1)


@register("Attention")
class Attention(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        q, k, v = require(node, ins, 3, 7)
        spec = _resolve(node, q, k, v, ins[3:])
        node.resolved["shape"] = spec
        dtype = q.dtype
        y = (spec.batch, spec.q_len, spec.q_heads * spec.v_head) if spec.flat else \
            (spec.batch, spec.q_heads, spec.q_len, spec.v_head)
        shapes = [y, (spec.batch, spec.kv_heads, spec.kv_len, spec.head),
                  (spec.batch, spec.kv_heads, spec.kv_len, spec.v_head), (spec.batch, spec.q_heads, spec.q_len,
                                                                         spec.kv_len)]
        return [out(node, shapes[i], dtype, i) for i, name in enumerate(node.outputs) if name]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        spec = node.resolved["shape"]
        q, k_new, v_new = given(node, args, 3)
        k, v = _heads(spec, k_new, spec.kv_heads), _heads(spec, v_new, spec.kv_heads)
        mask, past_k, past_v, nonpad = (args + [None] * 7)[3:7]
        present_k = k if past_k is None else np.concatenate([past_k, k], axis=2)
        present_v = v if past_v is None else np.concatenate([past_v, v], axis=2)
        scale = _scaler(node, spec)
        scores = _scores(spec, scale(q), scale(present_k))
        probs = _probs(node, spec, scores, mask, nonpad)
        y = _weighted(spec, probs, present_v, q.dtype)
        results = [y, present_k, present_v, _qk_output(node, spec, scores, mask, nonpad).astype(q.dtype)]
        return results[: len(node.outputs)]     # positional: an omitted output ('') is skipped by name

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        spec = node.resolved["shape"]
        names = list(node.inputs) + [""] * (7 - len(node.inputs))
        outs = list(node.outputs) + [""] * (4 - len(node.outputs))
        q, k, v = (operand(graph, names[i]) for i in range(3))
        dtype = q.dtype
        ops: list[IROp] = []
        cached: list[Operand] = []
        for i, (new, past, head) in enumerate(((k, names[4], spec.head), (v, names[5], spec.v_head))):
            shape = (spec.batch, spec.kv_heads, spec.kv_len, head)
            if not past and not outs[1 + i]:
                cached.append(new)
                continue
            name = outs[1 + i] or f"{node.name}:present{i}"
            inputs = (new,) + ((operand(graph, past),) if past else ())
            ops.append(Move(name=f"{node.name}:present{i}", node=node.name, op=node.op, inputs=inputs,
                            output=Operand(name, shape, dtype, Role.output),
                            fn=lambda n, p=None: _present(spec, n, p)))
            cached.append(Operand(name, shape, dtype, Role.input))
        # Q and K scaled by sqrt(scale) first, in T1, as the spec has it (against overflow in fp16)
        scaled = []
        for label, x in (("q_scaled", q), ("k_scaled", cached[0])):
            made = Operand(f"{node.name}:{label}", x.shape, dtype, Role.output)
            ops.append(Map(name=made.tensor, node=node.name, op=node.op, inputs=(x,), output=made,
                           fn=_scaler(node, spec)))
            scaled.append(Operand(made.tensor, x.shape, dtype, Role.input))
        group = spec.q_heads // spec.kv_heads
        shape5 = (spec.batch, spec.kv_heads, group, spec.q_len, spec.kv_len)
        scores = Operand(f"{node.name}:scores", shape5, dtype, Role.output)
        loops = (("b", spec.batch), ("h", spec.kv_heads), ("g", group), ("s", spec.q_len), ("t", spec.kv_len),
                 ("d", spec.head))
        ops.append(Einsum(name=f"{node.name}:qk", node=node.name, op=node.op, inputs=tuple(scaled),
                          output=scores, loops=loops, acc=DType.fp32, out_dims=("b", "h", "g", "s", "t"),
                          in_axes=(_axes(spec, "s", "d", spec.head, group), _axes(spec, "t", "d", spec.head, 1,
                                                                                   cached[0]))))
        extras = tuple(operand(graph, names[i]) for i in (3, 6) if names[i])
        has = (bool(names[3]), bool(names[6]))
        score_in = Operand(scores.tensor, shape5, dtype, Role.input)

        def probs(s: np.ndarray, *rest: np.ndarray) -> np.ndarray:
            mask, nonpad = _unpack(has, rest)
            return _probs(node, spec, s.reshape(_four(spec)), mask, nonpad).reshape(shape5)
        weights = Operand(f"{node.name}:probs", shape5, dtype, Role.output)
        ops.append(Map(name=f"{node.name}:softmax", node=node.name, op=node.op, inputs=(score_in,) + extras,
                       output=weights, fn=probs, ops_per_element=_softmax_ops(node)))
        if outs[3]:
            ops.append(Map(name=f"{node.name}:qk_output", node=node.name, op=node.op, inputs=(score_in,) + extras,
                           output=output_operand(node, graph, 3), ops_per_element=_softmax_ops(node),
                           fn=lambda s, *rest: _qk_output(node, spec, s.reshape(_four(spec)),
                                                          *_unpack(has, rest))))
        order = ("b", "s", "h", "g", "e") if spec.flat else ("b", "h", "g", "s", "e")
        sizes = {"b": spec.batch, "h": spec.kv_heads, "g": group, "s": spec.q_len, "e": spec.v_head}
        grouped = Operand(f"{node.name}:grouped", tuple(sizes[d] for d in order), dtype, Role.output)
        loops = (("b", spec.batch), ("h", spec.kv_heads), ("g", group), ("s", spec.q_len), ("e", spec.v_head),
                 ("t", spec.kv_len))
        p_axes = tuple(Axis.of(d) for d in ("b", "h", "g", "s", "t"))
        ops.append(Einsum(name=f"{node.name}:pv", node=node.name, op=node.op,
                          inputs=(Operand(weights.tensor, shape5, dtype, Role.input), cached[1]), output=grouped,
                          loops=loops, acc=DType.fp32, out_dims=order,
                          in_axes=(p_axes, _axes(spec, "t", "e", spec.v_head, 1, cached[1]))))
        result = output_operand(node, graph)
        ops.append(Move(name=node.name, node=node.name, op=node.op, view=True, output=result,
                        inputs=(Operand(grouped.tensor, grouped.shape, dtype, Role.input),),
                        fn=lambda y: y.reshape(result.shape)))
        return ops


def _axes(spec: _Shape, seq: str, inner: str, size: int, group: int,
          held: Operand | None = None) -> tuple[Axis, ...]:
    """Index expressions over loops b, h, g, `seq`, `inner` of Q (held None: query head h*group + g) or of the
    K/V operand `held` (3D or 4D; every query head of group h reads its key head h)."""
    query = held is None
    head = Axis((("h", group), ("g", 1))) if query else Axis.of("h")
    if held is not None and len(held.shape) == 4 or held is None and not spec.flat:
        return Axis.of("b"), head, Axis.of(seq), Axis.of(inner)
    terms = (("h", group * size), ("g", size), (inner, 1)) if query else (("h", size), (inner, 1))
    return Axis.of("b"), Axis.of(seq), Axis(terms)


def _unpack(has: tuple[bool, bool], rest: tuple[np.ndarray, ...]) -> tuple[np.ndarray | None, ...]:
    it = iter(rest)
    return tuple(next(it) if present else None for present in has)


def _softmax_ops(node: Node) -> int:
    # mask add, max, subtract, exp, sum, divide; softcap adds divide, tanh, multiply
    return 6 + (3 if node.attr("softcap", 0.0) > 0 else 0)


def _four(spec: _Shape) -> tuple[int, ...]:
    return spec.batch, spec.q_heads, spec.q_len, spec.kv_len


def _heads(spec: _Shape, x: np.ndarray, heads: int) -> np.ndarray:
    """A 3D (B, S, H*D) tensor as 4D (B, H, S, D); 4D tensors pass."""
    if x.ndim == 4:
        return x
    return x.reshape(x.shape[0], x.shape[1], heads, -1).transpose(0, 2, 1, 3)


def _present(spec: _Shape, new: np.ndarray, past: np.ndarray | None) -> np.ndarray:
    new = _heads(spec, new, spec.kv_heads)
    return new.copy() if past is None else np.concatenate([past, new], axis=2)


def _rounding(dtype: DType) -> Step:
    """x -> x rounded to `dtype` and held in float32 (float64 for fp64): one step of a computation in `dtype`."""
    work = np.float64 if dtype == DType.fp64 else np.float32
    held = dtype.narrow or dtype.numpy
    return lambda x: np.asarray(x).astype(held).astype(work)


def _scaler(node: Node, spec: _Shape) -> Step:
    """x -> x * sqrt(scale) in T1, the factor itself rounded to T1 first (as onnx's function body casts it)."""
    scale = node.attr("scale")
    root = np.sqrt(1 / np.sqrt(spec.head) if scale is None else float(scale))
    t1 = _rounding(spec.dtype)
    factor = t1(np.float64(root))
    return lambda x: t1(t1(x) * factor)


def _scores(spec: _Shape, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Q.K^T (B, Hq, S, T) of the scaled Q and K, accumulated in fp32 and rounded to T1, query head h against key
    head h // (Hq/Hkv)."""
    q4 = _heads(spec, q, spec.q_heads).astype(np.float32)
    group = spec.q_heads // spec.kv_heads
    q5 = q4.reshape(spec.batch, spec.kv_heads, group, spec.q_len, spec.head)
    product = np.einsum("bhgsd,bhtd->bhgst", q5, _heads(spec, k, spec.kv_heads).astype(np.float32))
    return _rounding(spec.dtype)(product.reshape(_four(spec)))


def _weighted(spec: _Shape, probs: np.ndarray, v: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    group = spec.q_heads // spec.kv_heads
    p5 = probs.astype(np.float32).reshape(spec.batch, spec.kv_heads, group, spec.q_len, spec.kv_len)
    y: np.ndarray = np.einsum("bhgst,bhte->bhgse", p5, v.astype(np.float32)).reshape(
        spec.batch, spec.q_heads, spec.q_len, spec.v_head)
    if spec.flat:
        y = y.transpose(0, 2, 1, 3).reshape(spec.batch, spec.q_len, -1)
    return y.astype(dtype)


def _capped(node: Node, spec: _Shape, scores: np.ndarray) -> np.ndarray:
    """softcap * tanh(scores / softcap), each step in T1; the scores as they are without a softcap."""
    cap = float(node.attr("softcap", 0.0))
    if cap <= 0:
        return scores
    t1 = _rounding(spec.dtype)
    cap_t1 = t1(np.float64(cap))
    return t1(t1(np.tanh(t1(scores / cap_t1))) * cap_t1)


def _bias(node: Node, spec: _Shape, mask: np.ndarray | None, nonpad: np.ndarray | None) -> np.ndarray:
    """The additive bias (B, Hq, S, T): 0 where a query may attend a key, -inf where not (ONNX's rules)."""
    s, t = spec.q_len, spec.kv_len
    if mask is not None:
        pad = t - mask.shape[-1]
        if pad > 0:
            mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, pad)],
                          constant_values=False if mask.dtype == bool else -np.inf)
        mask = np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask.astype(np.float32)
    bias = np.zeros((s, t), np.float32) if mask is None else mask.astype(np.float32)
    # a query at i attends keys up to i + offset (bottom-right aligned when keys run past the queries)
    offset = (nonpad.reshape(-1, 1, 1, 1) - s) if nonpad is not None and not spec.past else spec.past
    i, j = np.arange(s).reshape(s, 1), np.arange(t).reshape(1, t)
    if node.attr("is_causal", 0):
        bias = bias + np.where(j <= i + offset, 0.0, -np.inf)
    left, right = int(node.attr("left_window_size", -1)), int(node.attr("right_window_size", -1))
    if left >= 0:
        bias = bias + np.where(i + offset - j <= left, 0.0, -np.inf)
    if right >= 0:
        bias = bias + np.where(j - i - offset <= right, 0.0, -np.inf)
    if nonpad is not None:
        bias = bias + np.where(np.arange(t) < nonpad.reshape(-1, 1, 1, 1), 0.0, -np.inf)
    return np.broadcast_to(bias, _four(spec)).astype(np.float32)


def _probs(node: Node, spec: _Shape, scores: np.ndarray, mask: np.ndarray | None,
           nonpad: np.ndarray | None) -> np.ndarray:
    """softmax(softcap(scores) + bias) over keys, computed in the softmax precision (x - max, exp, sum and divide
    each rounded to it; the sum accumulated in fp32) and rounded to T1; a row with every key masked is 0."""
    bias = _bias(node, spec, mask, nonpad)
    step = _rounding(spec.softmax)
    x = step(_rounding(spec.dtype)(_capped(node, spec, scores) + bias))
    top = np.max(x, axis=-1, keepdims=True)
    e = step(np.exp(step(x - np.where(np.isneginf(top), 0, top))))
    total = step(e.sum(axis=-1, keepdims=True))
    p = step(e / np.where(total == 0, 1, total))
    p = np.where(np.isneginf(np.max(bias, axis=-1, keepdims=True)), 0, p)
    return _rounding(spec.dtype)(p)


def _qk_output(node: Node, spec: _Shape, scores: np.ndarray, mask: np.ndarray | None,
               nonpad: np.ndarray | None) -> np.ndarray:
    """qk_matmul_output by qk_matmul_output_mode: 0 scaled Q.K^T, 1 after softcap, 2 plus the mask, 3 softmax."""
    mode = int(node.attr("qk_matmul_output_mode", 0))
    if mode == 3:
        return _probs(node, spec, scores, mask, nonpad)
    if mode == 2:
        return _rounding(spec.dtype)(_capped(node, spec, scores) + _bias(node, spec, mask, nonpad))
    # mode 0 is before softcap, as the spec and onnxruntime have it (onnx's numpy reference caps it too)
    return _capped(node, spec, scores) if mode == 1 else scores


def _resolve(node: Node, q: Tensor, k: Tensor, v: Tensor, extra: list[Tensor | None]) -> _Shape:
    """The node's shapes from Q, K, V and the optional inputs after them (mask, past_key, past_value, nonpad)."""
    _, past_k, past_v, nonpad = (list(extra) + [None] * 4)[:4]
    if not len(q.shape) == len(k.shape) == len(v.shape) or len(q.shape) not in (3, 4):
        raise fail(node, f"Q, K and V have shapes {list(q.shape)}, {list(k.shape)}, {list(v.shape)}; they must "
                         f"all be 3D (batch, sequence, heads*size) or all 4D (batch, heads, sequence, size)")
    flat = len(q.shape) == 3
    if flat:
        hq, hkv = node.attr("q_num_heads"), node.attr("kv_num_heads")
        if not hq or not hkv or q.shape[2] % hq or k.shape[2] % hkv or v.shape[2] % hkv:
            raise fail(node, f"3D inputs need q_num_heads and kv_num_heads dividing the hidden sizes (Q "
                             f"{q.shape[2]}, K {k.shape[2]}, V {v.shape[2]}), got {hq} and {hkv}")
        batch, q_len, new = q.shape[0], q.shape[1], k.shape[1]
        head, v_head = q.shape[2] // hq, v.shape[2] // hkv
        if k.shape[2] // hkv != head:
            raise fail(node, f"Q's head size {head} differs from K's {k.shape[2] // hkv}")
    else:
        batch, hq, q_len, head = q.shape
        hkv, new, v_head = k.shape[1], k.shape[2], v.shape[3]
        if k.shape[3] != head or v.shape[1] != hkv or v.shape[2] != new:
            raise fail(node, f"K {list(k.shape)} and V {list(v.shape)} do not match Q {list(q.shape)} (same batch, "
                             f"K's head size = Q's, K and V: same heads and sequence)")
    if hq % hkv:
        raise fail(node, f"{hq} query heads must be a multiple of the {hkv} key/value heads")
    if (past_k is None) != (past_v is None):
        raise fail(node, "past_key and past_value must be given together")
    past = 0
    if past_k is not None and past_v is not None:     # given together, as checked above
        if nonpad is not None:
            raise fail(node, "nonpad_kv_seqlen cannot be combined with past_key/past_value")
        past = past_k.shape[2]
        if past_k.shape != (batch, hkv, past, head) or past_v.shape != (batch, hkv, past, v_head):
            raise fail(node, f"past_key {list(past_k.shape)} and past_value {list(past_v.shape)} must be "
                             f"[{batch}, {hkv}, past, {head}] and [{batch}, {hkv}, past, {v_head}]")
    mode = int(node.attr("qk_matmul_output_mode", 0))
    if mode not in (0, 1, 2, 3):
        raise fail(node, f"qk_matmul_output_mode {mode} is not one of 0, 1, 2, 3")
    precision = node.attr("softmax_precision")
    softmax = q.dtype if precision is None else DType.from_onnx(int(precision), f"node {node.name!r} (Attention): "
                                                                               f"softmax_precision")
    if not softmax.is_float:
        raise fail(node, f"softmax_precision {precision} ({softmax.value}) is not a float type")
    return _Shape(flat=flat, batch=batch, q_heads=hq, kv_heads=hkv, q_len=q_len, past=past, kv_len=past + new,
                  head=head, v_head=v_head, dtype=q.dtype, softmax=softmax)


@register("RotaryEmbedding")
class RotaryEmbedding(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, cos, sin = require(node, ins, 3, 4)
        if len(x.shape) not in (3, 4):
            raise fail(node, f"input has shape {list(x.shape)}; it must be 3D (batch, sequence, hidden) or 4D "
                             f"(batch, heads, sequence, head size)")
        heads = int(node.attr("num_heads", 0))
        if len(x.shape) == 3 and (heads < 1 or x.shape[2] % heads):
            raise fail(node, f"a 3D input needs num_heads dividing its hidden size {x.shape[2]}, got {heads}")
        head = x.shape[3] if len(x.shape) == 4 else x.shape[2] // heads
        dim = int(node.attr("rotary_embedding_dim", 0)) or head
        if dim % 2 or dim > head or cos.shape[-1] != dim // 2 or sin.shape != cos.shape:
            raise fail(node, f"rotary_embedding_dim {dim} must be even and at most the head size {head}, and "
                             f"cos_cache {list(cos.shape)} and sin_cache {list(sin.shape)} must end in {dim // 2}")
        return [out(node, x.shape, x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x, cos, sin = given(node, args, 3)
        positions = optional(args, 3)
        four = x.ndim == 4
        h = x.transpose(0, 2, 1, 3) if four else x.reshape(*x.shape[:2], int(node.attr("num_heads")), -1)
        dim = int(node.attr("rotary_embedding_dim", 0)) or h.shape[3]
        if positions is not None:
            cos, sin = cos[positions], sin[positions]
        cos, sin = cos[:, :, None, :], sin[:, :, None, :]
        part = h[..., :dim]
        interleaved = bool(node.attr("interleaved", 0))
        x1, x2 = (part[..., 0::2], part[..., 1::2]) if interleaved else np.split(part, 2, axis=-1)
        real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
        rotated = np.stack([real, imag], axis=-1).reshape(part.shape) if interleaved else \
            np.concatenate([real, imag], axis=-1)
        y = np.concatenate([rotated, h[..., dim:]], axis=-1).astype(x.dtype)
        return [y.transpose(0, 2, 1, 3) if four else y.reshape(x.shape)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        # per rotated pair: four multiplies and two adds, i.e. three ops per element
        return map_reference(self, node, graph, ops_per_element=3)
