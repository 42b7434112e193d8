"""Waveforms: the RTL's dump and the cycle-level model's VCD carry the same port names and widths, and show the
same outputs the same number of cycles apart, so the two open side by side in GTKWave."""
import numpy as np
import pytest

from accelsim.results import vcd
from accelsim.sim import cycle
from accelsim.rtl import runner
from accelsim.sim.stimulus import gemm, with_gaps

PORTS = {"clk": 1, "rst": 1, "w_valid": 1, "w_ready": 1, "x_valid": 1, "x_ready": 1, "x_last": 1, "x_acc": 1,
         "y_valid": 1, "y_last": 1, "w_data": 16, "x_data": 16, "y_data": 64}


def _ports(wires: dict) -> dict:
    """The top-level ports, by their own name, from a file whose top scope may be wrapped (Verilator: TOP)."""
    out = {}
    for full, (width, changes) in wires.items():
        parts = full.split(".")
        if len(parts) >= 2 and parts[-2] == "systolic_core" and parts[-1] in PORTS:
            out[parts[-1]] = (width, changes)
    return out


def _rises(changes, period: int) -> list[int]:
    """Cycles (time / period) at which a 1-bit wire goes to 1."""
    last, out = 0, []
    for time, value in changes:
        if value == 1 and last != 1:
            out.append(time // period)
        last = value
    return out


def test_rtl_and_model_waveforms_share_names_and_timing(tmp_path):
    try:
        runner._runner("verilator")
    except runner.RTLError as e:
        pytest.skip(str(e))
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (5, 5)).astype(np.int8)
    b = rng.integers(-128, 128, (5, 3)).astype(np.int8)
    stim = with_gaps(gemm(a, b, 2, 2, 64)[0], rng)
    run = runner.run_rtl(stim, "verilator", acc_depth=64, waves=True, workdir=tmp_path / "rtl")
    outcome, waves = cycle.run(stim, acc_depth=64, waves=True)
    cycle.write_vcd(tmp_path / "model.vcd", stim, outcome, waves)
    rtl, model = _ports(vcd.read(run.waves)), _ports(vcd.read(tmp_path / "model.vcd"))
    assert {k: w for k, (w, _) in model.items()} == PORTS
    assert {k: w for k, (w, _) in rtl.items()} == PORTS
    # The same outputs, the same cycles apart (the files start counting at different reset lengths).
    rtl_period = 10_000 if max(t for t, _ in rtl["clk"][1]) > 100_000 else 10   # ps or ns
    rtl_y, model_y = _rises(rtl["y_valid"][1], rtl_period), _rises(model["y_valid"][1], 10)
    assert len(rtl_y) == len(model_y) > 1
    assert np.all(np.diff(rtl_y) == np.diff(model_y))
    assert np.array_equal(run.outcome.y_cycle, outcome.y_cycle)


def test_icarus_dumps_a_vcd(tmp_path):
    """VCD, as the cycle-level model writes, not cocotb's default FST: the two files open on one timescale."""
    try:
        runner._runner("icarus")
    except runner.RTLError as e:
        pytest.skip(str(e))
    stim = gemm(np.ones((3, 2), np.int8), np.ones((2, 2), np.int8), 2, 2, 64)[0]
    run = runner.run_rtl(stim, "icarus", acc_depth=64, waves=True, workdir=tmp_path)
    text = run.waves.read_text()
    assert run.waves.suffix == ".vcd" and "$timescale" in text and "$enddefinitions" in text and len(text) > 200
