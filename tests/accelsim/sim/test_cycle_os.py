"""The output-stationary cycle-level model (accelsim.sim.cycle.run_os, accelsim/engine/cycle/systolic_os.py; no RTL)
against docs/rtl.md's OS timing: values against numpy, each output row's cycle against its fold's last k-step,
and its total against the tile-level engine's closed form (DESIGN.md: the tile-level systolic compute time
equals the cycle-level model's)."""
import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from accelsim.price import compute
from accelsim.arch import load_arch
from accelsim.price import systolic
from accelsim.price.systolic import native_cycles
from accelsim.sim.cycle import OS_IO_REGISTERS, probe_os, run_os
from compiler.dtypes import DType

# (rows, cols, m, k, n): one fold; k < ROWS (the drain sets the pace); ragged m and n; tall k; 1 x 1; wide
SHAPES = [(2, 2, 2, 2, 2), (4, 4, 9, 2, 5), (3, 2, 4, 5, 3), (4, 3, 2, 9, 7), (2, 3, 7, 3, 4), (1, 1, 3, 2, 2),
          (5, 3, 11, 4, 2), (3, 5, 7, 8, 11), (8, 8, 17, 1, 9), (8, 8, 24, 40, 13)]


def folds(rows, cols, m, n):
    return -(-m // rows) * -(-n // cols)


def operands(seed, m, k, n):
    rng = np.random.default_rng(seed)
    return rng.integers(-128, 128, (m, k)), rng.integers(-128, 128, (k, n))


@pytest.mark.parametrize("banks", [1, 2])
@pytest.mark.parametrize("shape", SHAPES)
def test_values_equal_numpy_and_rows_leave_as_docs_rtl_md_says(shape, banks):
    rows, cols, m, k, n = shape
    a, b = operands(sum(shape) + banks, m, k, n)
    out = run_os(a, b, rows, cols, banks)
    np.testing.assert_array_equal(out.product(m, n), (a @ b).astype(np.int32))
    assert len(out.y_cycle) == folds(rows, cols, m, n) * rows
    # output row j of a fold (tile row ROWS - 1 - j) appears ROWS + COLS + 1 + j cycles after its last k-step
    last = out.s_accept.reshape(-1, k)[:, -1]
    j = np.arange(rows)
    np.testing.assert_array_equal(out.y_cycle.reshape(-1, rows), last[:, None] + rows + cols + 1 + j[None, :])
    assert out.cycles == out.y_cycle[-1] + 1
    # the handshake: one step per cycle; folds' last steps ROWS apart (each column drains ROWS cycles)
    assert (np.diff(out.s_accept) >= 1).all() and (np.diff(last) >= rows).all()
    if banks == 1:                        # a fold starts ROWS cycles after the last step of the one before
        first = out.s_accept.reshape(-1, k)[:, 0]
        assert (first[1:] - last[:-1] >= rows).all()


@pytest.mark.parametrize("shape", SHAPES)
def test_cycles_equal_the_closed_form_with_two_accumulator_banks(shape):
    """The tile-level engine's OS formula (accelsim/price/systolic.py, weight_buffers = 2 accumulators,
    io_registers = 2) is the cycle-level model's total, ragged folds included."""
    rows, cols, m, k, n = shape
    a, b = operands(0, m, k, n)
    array = SimpleNamespace(rows=rows, cols=cols, weight_buffers=2, pes=rows * cols, io_registers=OS_IO_REGISTERS)
    unit = SimpleNamespace(array=array, per_cycle=((DType.int8, rows * cols),), dataflows=("os",), clock_hz=1.0)
    priced = systolic.matrix_cycles(np.array([m]), np.array([n]), np.array([k]), unit, SimpleNamespace(clock_hz=1.0),
                                    SimpleNamespace(dataflow="os"), DType.int8)
    f = folds(rows, cols, m, n)
    assert run_os(a, b, rows, cols).cycles == int(priced[0]) == \
        rows + (f - 1) * max(k, rows) + k + (rows - 1) + (cols - 1) + OS_IO_REGISTERS


def test_the_teaching_preset_run_output_stationary_prices_tiles_as_the_os_model_runs_them():
    """archs/systolic_8x8.yaml with OS and the OS model's io_registers, through compute.matrix_cycles."""
    arch = load_arch("systolic_8x8")
    unit = dataclasses.replace(arch.matrix, dataflows=("os",),
                               array=dataclasses.replace(arch.matrix.array, io_registers=OS_IO_REGISTERS))
    for m, n, k in [(1, 8, 8), (3, 5, 17), (8, 8, 8), (9, 16, 24), (40, 20, 13), (64, 8, 3)]:
        priced = compute.matrix_cycles(np.array([m]), np.array([n]), np.array([k]), unit, arch,
                                       SimpleNamespace(dataflow="os"), DType.int8)
        assert run_os(np.ones((m, k), int), np.ones((k, n), int), 8, 8).cycles == int(priced[0]), (m, n, k)


@pytest.mark.parametrize("shape", SHAPES)
def test_one_bank_overlaps_folds_where_the_closed_form_does_not(shape):
    """With one accumulator per PE the next fold's wavefront follows the drain down each column, so folds start
    k - 1 + ROWS apart; the closed form's single-buffered case overlaps nothing and prices (F - 1) * (ROWS +
    COLS + 1) more (docs/rtl.md, "An output-stationary model")."""
    rows, cols, m, k, n = shape
    f = folds(rows, cols, m, n)
    got = run_os(*operands(1, m, k, n), rows, cols, banks=1).cycles
    assert got == (f - 1) * (k + rows - 1) + k + 2 * rows + cols
    priced = int(native_cycles(m, n, k, rows, cols, "os", 1, 1, OS_IO_REGISTERS))
    assert priced - got == (f - 1) * (rows + cols + 1)


def test_sums_wrap_at_32_bits():
    k = 131200                                              # 131200 * 16384 > 2^31
    out = run_os(np.full((2, k), -128), np.full((k, 3), -128), 2, 2)
    wrapped = (k * 16384 + 2**31) % 2**32 - 2**31
    assert (out.product(2, 3) == wrapped).all() and wrapped < 0


def test_the_probe_records_registers_and_changes_nothing():
    a, b = operands(2, 5, 4, 7)
    plain = run_os(a, b, 3, 4)
    probed, probe = probe_os(a, b, 3, 4)
    for name in ("s_accept", "y_cycle", "y_data"):
        np.testing.assert_array_equal(getattr(plain, name), getattr(probed, name), name)
    assert probe.a.shape == (plain.cycles, 3, 4)
    np.testing.assert_array_equal(probe.a_valid, probe.b_valid)      # A and B meet in every PE
    east = probe.a_valid[:-1, :, :-1].astype(bool)                   # A moves one PE east per cycle
    np.testing.assert_array_equal(probe.a[1:, :, 1:][east], probe.a[:-1, :, :-1][east])
    south = probe.b_valid[:-1, :-1, :].astype(bool)                  # B one PE south
    np.testing.assert_array_equal(probe.b[1:, 1:, :][south], probe.b[:-1, :-1, :][south])
    assert probe.a_valid.sum() == 3 * 4 * 4 * len(plain.folds)       # every k-step visits every PE once


@pytest.mark.parametrize("args, needle", [
    ((np.ones((2, 3)), np.ones((2, 3)), 2, 2), "cannot multiply"),
    ((np.full((2, 2), 128), np.ones((2, 2)), 2, 2), "int8"),
    ((np.ones((2, 2)), np.ones((2, 2)), 0, 2), "at least 1 x 1"),
    ((np.ones((2, 2)), np.ones((2, 2)), 2, 2, 3), "banks"),
])
def test_bad_input_is_a_value_error(args, needle):
    with pytest.raises(ValueError, match=needle):
        run_os(*args)
