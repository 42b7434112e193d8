"""The systolic compute model: folds, load, skew, stream and drain per fold, and double-buffered overlap."""
import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from accelsim.price import compute
from accelsim.arch import load_arch, preset_names
from accelsim.price import systolic
from accelsim.price.compat import pricing
from compiler.errors import UserError
from compiler.dtypes import DType


def unit_of(rows: int, cols: int, buffers: int, dataflow: str = "ws"):
    """A bare array unit on a 1 Hz arch (unit clock = arch clock: cycles pass through unconverted)."""
    array = SimpleNamespace(rows=rows, cols=cols, weight_buffers=buffers, pes=rows * cols, io_registers=0)
    unit = SimpleNamespace(array=array, per_cycle=((DType.int8, rows * cols),), dataflows=(dataflow,), clock_hz=1.0)
    return unit, SimpleNamespace(clock_hz=1.0)


def cycles(m, n, k, rows=8, cols=8, buffers=1, dataflow="ws", compat=None):
    unit, arch = unit_of(rows, cols, buffers)
    how = pricing(compat)        # an unknown name is refused here
    split = systolic.matrix_split if compat is None else how.matrix_split
    return int(split(np.int64(m), np.int64(n), np.int64(k), unit, arch, SimpleNamespace(dataflow=dataflow),
                     DType.int8)[0])


def test_one_fold_is_load_skew_stream_drain():
    # 8x8 WS, m=10: load 8 + skew 7 + stream 10 + drain 7 = 32, with or without a second weight buffer
    assert cycles(10, 8, 8) == 8 + 7 + 10 + 7 == 32
    assert cycles(10, 8, 8, buffers=2) == 32


def test_folds_multiply_without_overlap():
    # k=16, n=16 on 8x8: 2 x 2 folds of 32 cycles each
    assert cycles(10, 16, 16) == 4 * 32


def test_double_buffering_hides_loads_under_streams():
    # X + (folds-1) * max(T, X) + T + skew + drain: 8 + 3*10 + 10 + 14 = 62 (against 128)
    assert cycles(10, 16, 16, buffers=2) == 8 + 3 * 10 + 10 + 14 == 62
    # m=1: the loads cannot hide, folds start X = 8 apart: 8 + 3*8 + 1 + 14 = 47 (single: 4 * 23 = 92)
    assert cycles(1, 16, 16, buffers=2) == 47
    assert cycles(1, 16, 16) == 92
    # the saving is exactly (folds - 1) * (X + skew + drain + T - max(T, X))
    for m in (1, 5, 8, 9, 40):
        saved = cycles(m, 16, 16) - cycles(m, 16, 16, buffers=2)
        assert saved == 3 * (8 + 14 + m - max(m, 8))


def test_ragged_edges_cost_a_whole_fold():
    assert cycles(10, 9, 9) == cycles(10, 16, 16)
    assert cycles(10, 8, 8) < cycles(10, 8, 9)


def test_dataflows_fold_and_stream_different_dims():
    # a 4 x 8 array: WS folds k over rows, n over cols, streams m; IS folds k, m and streams n; OS folds m, n
    assert cycles(10, 20, 12, rows=4, cols=8, dataflow="ws") == 3 * 3 * (4 + 3 + 10 + 7)
    assert cycles(10, 20, 12, rows=4, cols=8, dataflow="is") == 3 * 2 * (4 + 3 + 20 + 7)
    assert cycles(10, 20, 12, rows=4, cols=8, dataflow="os") == 3 * 3 * (4 + 3 + 12 + 7)
    with pytest.raises(ValueError, match="dataflow"):
        cycles(1, 1, 1, dataflow="rs")


def test_vectorised_over_tiles_and_empty_tiles_are_free():
    unit, arch = unit_of(8, 8, 2)
    m, n, k = np.array([10, 1, 0]), np.array([16, 16, 16]), np.array([16, 16, 16])
    out = systolic.matrix_cycles(m, n, k, unit, arch, None, DType.int8)
    assert out.dtype == np.int64 and out.tolist() == [62, 47, 0]


def test_tpu_v1_batch_1_fc_is_weight_load_bound():
    """The docstring's worked example: 256x256 WS, m=1, k=n=2048 -> 64 folds, each waiting 256 cycles."""
    arch = load_arch("tpu_v1")
    unit = arch.matrix
    assert unit.array.weight_buffers == 2
    got = compute.matrix_cycles(np.array([1, 256]), np.array([2048] * 2), np.array([2048] * 2), unit, arch,
                                None, DType.int8)
    assert got.tolist() == [16895, 17150]
    single = dataclasses.replace(unit, array=dataclasses.replace(unit.array, weight_buffers=1))
    assert int(systolic.matrix_cycles(1, 2048, 2048, single, arch, None, DType.int8)) == 49088
    # 64 cycles of MACs at peak in 16,895: under 0.4% busy
    assert 2048 * 2048 / unit.peak_per_cycle(DType.int8) / 16895 < 0.004


def test_narrow_rate_dtypes_stream_slower():
    """TPU v1 runs 16-bit operands at a quarter of the int8 rate: the stream term takes 4x."""
    arch = load_arch("tpu_v1")
    int8 = int(systolic.matrix_cycles(256, 256, 256, arch.matrix, arch, None, DType.int8))
    int16 = int(systolic.matrix_cycles(256, 256, 256, arch.matrix, arch, None, DType.int16))
    assert int16 - int8 == 3 * 256


def test_compat_scalesim_per_fold_lines_minus_one():
    # WS/IS: folds * (2R + C + T - 2) - 1; OS: folds * (R + C + T - 2) - 1, whatever the weight buffers
    assert cycles(8, 8, 8, compat="scalesim") == 29
    assert cycles(20, 13, 17, compat="scalesim", buffers=2) == 6 * 42 - 1
    assert cycles(20, 13, 17, dataflow="os", compat="scalesim") == 6 * 31 - 1
    assert cycles(20, 13, 17, dataflow="is", compat="scalesim") == 3 * 3 * (16 + 8 + 13 - 2) - 1
    with pytest.raises(UserError, match="compat"):
        cycles(1, 1, 1, compat="timeloop")


def test_default_dataflow_is_the_units_first():
    arch = load_arch("systolic_32x32")
    by_default = systolic.matrix_cycles(64, 64, 64, arch.matrix, arch, None, DType.int8)
    assert int(by_default) == cycles(64, 64, 64, rows=32, cols=32, buffers=2, dataflow="ws")


@pytest.mark.parametrize("name", [n for n in preset_names() if load_arch(n).kind.value in ("systolic", "ternary")])
def test_every_systolic_preset_is_at_least_its_peak(name):
    """No tile finishes faster than its MACs at the array's peak, in any listed dataflow."""
    arch = load_arch(name)
    unit = arch.matrix
    dtype = arch.native_dtype
    m, n, k = np.array([1, 7, 64, 300]), np.array([5, 64, 100, 300]), np.array([3, 64, 257, 300])
    for dataflow in unit.dataflows:
        got = systolic.matrix_cycles(m, n, k, unit, arch, SimpleNamespace(dataflow=dataflow), dtype)
        peak = m * n * k / unit.peak_per_cycle(dtype) * arch.clock_hz / unit.clock_hz
        assert (got >= np.floor(peak)).all(), (dataflow, got, peak)
