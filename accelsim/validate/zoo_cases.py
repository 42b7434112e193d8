"""A built-in model, op by op, as validation cases: each IR op that one case kind expresses becomes that case's
key, counted as often as the model runs it; the rest are listed with the reason they are not measured.

Invariant: a key's predicted time is the one-op model of accelsim.validate.cases, priced alone (as the vendor
library runs it alone), and `covered_s` says which share of the whole model's predicted time the keys stand for.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from compiler.dtypes import DType
from compiler.ir import Einsum, IROp, OpKind
from compiler.mapping import gemm_view
from accelsim.validate.cases import ELEMENTWISE, ROW_BROADCAST
from compiler.hardware import Arch

_MAP_KINDS = {op: kind for kind, (op, _) in ELEMENTWISE.items()}
_ROW_KINDS = {op: kind for kind, op in ROW_BROADCAST.items()}


@dataclass(frozen=True)
class ModelCases:
    model: str
    counts: dict[str, int]              # case key -> times the model runs it
    skipped: dict[str, str]             # frontend op type -> why its ops are not measured
    covered_s: float                    # predicted seconds of the ops the keys stand for
    total_s: float                      # predicted seconds of the whole model


def case_key(op: IROp, dtype: DType) -> str | None:
    """The case key `op` is, or None; see `reason` for why not."""
    return _key(op, dtype)[0]


def _key(op: IROp, dtype: DType) -> tuple[str | None, str]:
    tail = dtype.value
    if isinstance(op, Einsum):
        view = gemm_view(op)
        e = view.extents
        if op.op == "Conv":
            return _conv_key(op, tail)
        if len(op.inputs) != 2:
            return None, f"{len(op.inputs)}-operand Einsum"
        size = {g: math.prod(e[d] for d in getattr(view, g)) for g in ("b", "m", "n", "k")}
        if view.b:
            return f"bgemm {size['b']} {size['m']} {size['n']} {size['k']} {tail}", ""
        return f"gemm {size['m']} {size['n']} {size['k']} {tail}", ""
    shape = op.output.shape
    rows, cols = math.prod(shape[:-1]), shape[-1] if shape else 1
    if op.kind == OpKind.reduce and op.op in ("Softmax", "LayerNormalization"):
        if tuple(op.axes) != (len(op.inputs[0].shape) - 1,):
            return None, f"reduces axes {op.axes}, not the last one"
        return f"{op.op.lower().replace('normalization', 'norm')} {rows} {cols} {tail}", ""
    if op.kind == OpKind.map and op.op == "BatchNormalization" and len(shape) == 4:
        return f"batchnorm {' '.join(map(str, shape))} {tail}", ""
    if op.kind == OpKind.map and op.op in _ROW_KINDS and len(op.inputs) == 2 and op.inputs[0].shape == shape \
            and math.prod(op.inputs[1].shape) == cols == (op.inputs[1].shape or (1,))[-1]:
        return f"{_ROW_KINDS[op.op]} {rows} {cols} {tail}", ""
    if op.kind == OpKind.map and op.op in _MAP_KINDS:
        if any(i.shape != shape for i in op.inputs) or len(op.inputs) != ELEMENTWISE[_MAP_KINDS[op.op]][1]:
            return None, "an operand is broadcast (a bias or a scale), which the element-wise cases do not express"
        return f"{_MAP_KINDS[op.op]} {rows} {cols} {tail}", ""
    if op.kind == OpKind.move and getattr(op, "view", False):
        return None, "a view: moves no bytes"
    return None, f"no case kind for a {op.kind.value} op of type {op.op}"


def _conv_key(op: Einsum, tail: str) -> tuple[str | None, str]:
    extents = dict(op.loops)
    x, w = op.inputs
    h_axis = op.in_axes[0][2]
    coeff = dict(h_axis.terms)
    if coeff.get("r", 1) != 1:
        return None, "a dilated convolution"
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    return f"conv {n} {c} {h} {wd} {k} {r} {s} {coeff.get('p', 1)} {-h_axis.offset} {extents.get('g', 1)} {tail}", ""


def model_cases(model: str, dtype: DType, arch: Arch, **options) -> ModelCases:
    """The cases of zoo `model` (built with `options`) at `dtype`, and how much of it they cover on `arch`."""
    from accelsim.sim.build import build, simulate

    compiled = build(model, arch, dtype=dtype, **options)
    seconds = {r.name: r.seconds for r in simulate(compiled).ops}
    counts, skipped, covered = Counter(), {}, 0.0
    for op in compiled.ir.ops:
        key, why = _key(op, dtype)
        if key is None:
            skipped.setdefault(op.op, why)
            continue
        counts[key] += 1
        covered += seconds.get(op.name, 0.0)
    return ModelCases(model, dict(counts), skipped, covered, math.fsum(seconds.values()))
