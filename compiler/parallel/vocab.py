"""Megatron-LM's VocabParallelEmbedding (Shoeybi et al. 2019, sec. 3) in ordinary ONNX ops: rank r holds rows
[r*n, (r+1)*n) of a lookup table, looks up the ids in that range at row id - r*n and writes zeros for the others,
so the ranks' lookups add up to the whole one (a partial sum, which compiler/parallel/tensor.py all-reduces, or
reduce-scatters over the tokens with sequence parallelism). Its loss-side twin, vocab-parallel cross-entropy, is
built by the training step (compiler/train/step.py) from the logits' shards.
Invariant: every rank gets the same nodes; only its constants (its first row) differ. Ids are taken to lie in
[0, rows), as token ids do: a negative one, which Gather counts from the end, is no rank's and looks up zeros.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node
from compiler.ops.base import normalize_axis

Emit = Callable[..., str]            # (op, inputs, what, **attrs) -> the new node's output
Constant = Callable[[str, np.ndarray, DType], str]      # (what, value, dtype) -> the new weight's name


def lookup(src: Graph, node: Node, table: str, ids: str, output: str, rank: int, tp: int, emit: Emit,
           const: Constant) -> None:
    """Rank `rank`'s share of Gather `node` (reading `table`, its rows split `tp` ways, at `ids`), written to
    `output`: a partial sum over the ranks."""
    whole, index = src.tensors[node.inputs[0]], src.tensors[node.inputs[1]]
    axis = normalize_axis(node, int(node.attr("axis", 0)), len(whole.shape))
    rows = whole.shape[axis] // tp
    first = const("const_first_row", np.asarray(rank * rows), index.dtype)
    count = const("const_rows", np.asarray(rows), index.dtype)
    zero = const("const_zero_id", np.asarray(0), index.dtype)
    local = emit("Sub", [ids, first], "local_ids")
    inside = emit("And", [emit("GreaterOrEqual", [local, zero], "at_or_after_first"),
                          emit("Less", [local, count], "before_last")], "in_range")
    found = emit("Gather", [table, emit("Where", [inside, local, zero], "safe_ids")], "", axis=axis)
    # the mask over the ids, broadcast along the row's own axes: [ids..., 1...]
    shape = const("const_mask_shape", np.asarray(index.shape + (1,) * (len(whole.shape) - axis - 1), np.int64),
                  DType.int64)
    keep = emit("Reshape", [inside, shape], "keep")
    emit("Where", [keep, found, const("const_zero", np.asarray(0), whole.dtype)], "mask", output=output)
