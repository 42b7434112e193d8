"""Compute steps that span several array folds along k (compiler.map.targets.FOLD_STEPS): the one-fold step is still
offered first, a 3x3 conv's c*r*s fills its folds, and the engine prices such a step's folds back to back, as the
fold formula counted by hand from the program's compute rows says."""
import math
from dataclasses import replace

from accelsim.arch import load_arch
from accelsim.price.cost import reporter
from accelsim.sim.model import load_model
from accelsim.sim.tile import run_tiles
from compiler.codegen import generate
from compiler.map import map_op
from compiler.map.space import candidates
from compiler.compile import Options, compile_graph
from tests.compiler.map.test_map import gemm

ROWS = COLS = 8
TAIL = 8 + (ROWS - 1) + (COLS - 1) + 3     # systolic_8x8: last load, skew, drain, 3 io registers (docs/rtl.md)


def test_the_one_fold_step_comes_first_then_steps_of_several_folds():
    arch = load_arch("systolic_8x8")
    steps = [dict(m.levels[-1].tile)["k"] for m in candidates(gemm(64, 8, 512), arch)]
    assert steps[0] == ROWS                                  # the old space's step, first: it wins every tie
    assert {2 * ROWS, 8 * ROWS} <= set(steps)


def test_a_3x3_conv_fills_its_folds_and_they_run_back_to_back():
    # ResNet-18's layer1.0/conv1: 64 -> 64 channels, 3x3, 56x56 outputs; k = 64*3*3 = 576 rows, 72 folds of 8.
    # One fold per step holds at most 2*1*3 = 6 of them (whole inner dims first: s = 3, then r = 1 in the room
    # left, c = 2), 96 folds for each of the 8 column folds and 3136 output pixels streamed.
    arch = load_arch("systolic_8x8")
    ir = compile_graph(load_model("resnet18"), Options(dtype=arch.native_dtype))
    op = next(o for o in ir.ops if o.name == "layer1.0/conv1")
    ir = replace(ir, ops=[op])
    best = map_op(op, arch, reporter(arch, ir), cache=None)
    step = dict(best.levels[-1].tile)
    assert step["c"] * step["r"] * step["s"] > ROWS
    code = generate(ir, arch, {op.name: best})
    rows = code.program[code.tiles[0].rows]
    assert len(rows) <= 8 * 3136 * 72 // (4 * 512)     # steps of 4 folds or more of at most 512 pixels
    # WS, double-buffered: each step holds the array folds * max(m, 8) cycles and its skew and drain (the tail)
    # run under the next step's folds; a tail is busy time of its own only where the next step waits for operands
    by_hand = sum(math.ceil(k / ROWS) * math.ceil(n / COLS) * max(m, ROWS)
                  for m, n, k in zip(rows["m"].tolist(), rows["n"].tolist(), rows["k"].tolist())) + TAIL
    busy = run_tiles(ir, arch, {op.name: best})[0][0].compute_cycles
    assert by_hand <= busy <= by_hand + TAIL * len(rows)
    one_fold_floor = 8 * 3136 * 96
    assert by_hand < 0.8 * one_fold_floor
    assert by_hand >= 8 * 3136 * 72                    # no fewer folds than k = 576 needs
