"""rtl/systolic_core.v under Icarus and Verilator: every output value against numpy and every output's cycle (and
every row's acceptance cycle) against the cycle-level model, checked by the cocotb bench as the rows appear.

One pytest case per (simulator, shape, variant) runs the whole suite of accelsim/rtl/workloads.py in one
simulation; the drained parts' cycle counts must also equal the closed form the tile-level engine uses."""
import numpy as np
import pytest

from accelsim.price.systolic import native_cycles
from accelsim.rtl import runner
from accelsim.sim.stimulus import chain
from accelsim.rtl.workloads import suite, wraparound

ACC_DEPTH = 64
IO_REGISTERS = 3     # docs/rtl.md: activation input, de-skew output, accumulator

# (rows, cols, ternary): five shapes under Icarus, two of them not square, and the ternary core on two of them.
ICARUS = [(2, 2, False), (3, 5, False), (5, 3, False), (8, 8, False), (16, 16, False), (3, 5, True), (8, 8, True)]
# Verilator compiles each shape to C++ (20-90 s a build on 2 cores, ccache only helps the second time): three.
VERILATOR = [(2, 2, False), (4, 8, False), (8, 8, True)]
CASES = [("icarus", *c) for c in ICARUS] + [("verilator", *c) for c in VERILATOR]


def _needs(sim: str) -> None:
    try:
        runner._runner(sim)
    except runner.RTLError as e:
        if __import__("os").environ.get("CI"):
            raise
        pytest.skip(str(e))


@pytest.mark.parametrize("sim, rows, cols, ternary", CASES,
                         ids=[f"{s}-{r}x{c}-{'ternary' if t else 'int8'}" for s, r, c, t in CASES])
def test_rtl_matches_numpy_and_the_cycle_model(sim, rows, cols, ternary, tmp_path):
    _needs(sim)
    parts = suite(rows, cols, ternary, seed=rows * 100 + cols, acc_depth=ACC_DEPTH)
    run = runner.run_rtl(chain(parts), sim, acc_depth=ACC_DEPTH, check=True, workdir=tmp_path)
    outcome = run.outcome
    assert len(outcome.y_cycle) == sum(len(p.x_rows) for p in parts)
    # Each part without idle gaps starts on a drained core: its cycles are the closed form's, tile by tile.
    first_w, first_y = 0, 0
    for part in parts:
        last_y = first_y + len(part.x_rows) - 1
        if not part.w_delay.any() and not part.x_delay.any() and _one_gemm(part):
            m = len(part.x_rows) // part.tiles
            measured = outcome.y_cycle[last_y] - outcome.w_accept[first_w] + 1
            expected = native_cycles(m, cols, part.tiles * rows, rows, cols, "ws", 2, 1, IO_REGISTERS)
            assert measured == int(expected), (part.tiles, m)
        first_w += len(part.w_rows)
        first_y = last_y + 1


def test_accumulator_wraps_at_32_bits(tmp_path):
    """131,072 cycles: under Verilator only (Icarus with cocotb runs about a thousand cycles a second)."""
    sim = "verilator"
    _needs(sim)
    stim = wraparound(2, 2, ACC_DEPTH)
    run = runner.run_rtl(stim, sim, acc_depth=ACC_DEPTH, check=True, workdir=tmp_path)
    # Every product is +16,384: the true sum passes 2^31, the 32-bit accumulator wraps to a negative number
    # (the bench has already compared it with numpy's wrapping int32).
    assert np.all(run.outcome.y_data[-1] < 0)
    assert len(run.outcome.y_cycle) == len(stim.x_rows)


def _one_gemm(part) -> bool:
    """A single-row-block GEMM of one column block: every tile streams the same rows."""
    t = np.flatnonzero(part.x_last)
    lengths = np.diff(np.concatenate([[-1], t]))
    return bool(np.all(lengths == lengths[0]))
