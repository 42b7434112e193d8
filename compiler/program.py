"""The Program: the contract between the compiler and the engine.

One row per tile instruction, in issue order: loads move a tile across one memory level toward the
compute units, computes run a tile on a unit, stores move results back out. `dep` lists the rows an
instruction must wait for (data, and buffer reuse: with double buffering, the load into slot s of
tile i+2 waits for the compute that used slot s for tile i). The engine sees only these arrays; it
never sees a Graph, and the compiler never imports the engine. The rows are counts (bytes, tile shapes, MACs),
never prices: accelsim.price turns them into cycles and energy.
"""
from __future__ import annotations

import numpy as np

LOAD, COMPUTE, STORE, SYNC = 0, 1, 2, 3
MAX_DEPS = 8                      # a Map may read 5 operands (BatchNorm) and wait for a free output slot
# Rows one op's Program may hold, refused before they are allocated: the rows, their pricing and the schedule take
# about ROW_BYTES_SIMULATED bytes of host memory each (measured: GPT-2's LM head on a GTX 580, 1.33 M rows, 436 MB)
MAX_ROWS = 8_000_000
ROW_BYTES_SIMULATED = 350

INSTRUCTION = np.dtype([
    ("op", np.int32),            # index of the IR op in IR.ops
    ("kind", np.int8),           # LOAD, COMPUTE, STORE or SYNC
    ("level", np.int16),         # memory level index the transfer reads (load) or writes (store); -1: compute
    ("operand", np.int8),        # input index, or -2 for the output; -1 for compute and sync
    ("bytes", np.int64),         # bytes the transfer moves
    ("unit", np.int16),          # compute unit index in arch.compute; -1 for transfers
    ("m", np.int32),             # compute tile as a GEMM (b folded into m) for matrix units;
    ("n", np.int32),             # (elements, 1, 1) for vector units
    ("k", np.int32),
    ("work", np.int64),          # MACs or vector ops this compute performs, ragged padding included
    ("useful", np.int64),        # the same without padding
    ("dep", np.int32, (MAX_DEPS,)),  # rows this one waits for; -1 = none
])


def empty(rows: int) -> np.ndarray:
    program = np.zeros(rows, dtype=INSTRUCTION)
    program["dep"] = -1
    program["level"] = -1
    program["unit"] = -1
    program["operand"] = -1
    return program
