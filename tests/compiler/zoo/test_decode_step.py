"""A decode step as serving engines run it: the new token's key and value written into the cache in place, each
cache read once by attention, the keys stored as Q.K^T reads them; its DRAM traffic is the weights, the cache once
and the new rows, computed here by hand from Llama-2-7B's shapes (Touvron et al. 2023)."""
import pytest

import accelsim
from accelsim.arch import load_arch
from compiler.dtypes import DType
from compiler.ir import Move
from compiler.compile import Options, compile_graph

# Llama-2-7B per layer, two of its 32 layers, at batch 16 over 2,048 positions in fp16
HIDDEN, MLP, VOCAB, HEADS, LAYERS, BATCH, CONTEXT, FP16 = 4096, 11008, 32000, 32, 2, 16, 2048, 2
STEP = dict(mode="decode", seq=CONTEXT, batch=BATCH, dtype="fp16", layers=LAYERS, weights=False)


def test_no_copy_in_a_decode_step_touches_the_cache():
    """Every byte-moving Move (rotary halves, the cache writes) moves at most a token's rows; before, a Concat of
    past and new keys and a Transpose of the keys each copied the whole 268 MB cache, every layer, every step."""
    graph = accelsim.load_model("llama", **STEP)
    ir = compile_graph(graph, Options(dtype=DType.fp16, arch=load_arch("a100")))
    rows = BATCH * HIDDEN * FP16                        # one token's keys (or values) over all heads
    cache = BATCH * CONTEXT * HIDDEN * FP16             # one layer's keys: 268 MB
    moves = [op for op in ir.ops if isinstance(op, Move) and not op.view]
    assert moves and all(op.nbytes <= 2 * rows for op in moves), [(op.name, op.nbytes) for op in moves
                                                                  if op.nbytes > 2 * rows]
    writes = [op for op in moves if op.in_place]
    assert len(writes) == 2 * LAYERS and all(op.nbytes == 2 * rows for op in writes)
    assert {op.output.tensor for op in writes} == {f"present_{kv}.{i}" for kv in ("key", "value")
                                                   for i in range(LAYERS)}
    assert all(op.output.nbytes == cache for op in writes)


def test_a_decode_steps_dram_traffic_is_weights_cache_once_and_new_rows():
    """HBM bytes of the step on an A100 within 3% of: every weight once (the embedding only at the batch's rows),
    the keys and values of all 2,048 positions read once, the new token's rows written once."""
    result = accelsim.run("llama", "a100", **STEP)
    per_layer = 4 * HIDDEN * HIDDEN + 3 * HIDDEN * MLP + 2 * HIDDEN      # q k v o, gate up down, two norms
    weights = (LAYERS * per_layer + HIDDEN + HIDDEN * VOCAB + BATCH * HIDDEN) * FP16
    cache_read = 2 * LAYERS * BATCH * CONTEXT * HIDDEN * FP16
    rows_written = 2 * LAYERS * BATCH * HIDDEN * FP16
    hbm = sum(op.bytes_by_level.get("hbm2", 0) for op in result.ops)
    assert hbm == pytest.approx(weights + cache_read + rows_written, rel=0.03)
