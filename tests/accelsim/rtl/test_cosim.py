"""`accelsim cosim`: a real convolution layer through the RTL, compared with the cycle-level and tile-level models."""
import os
import re

import numpy as np
import pytest

from accelsim.cli import main
from accelsim.rtl import cosim as cosim_module, runner

SMALL_RESNET = ["--opt", "image=32", "--opt", "width=0.25"]


def _needs_icarus():
    try:
        runner._runner("icarus")
    except runner.RTLError as e:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(e))


def test_resnet18_conv_through_the_rtl_agrees_tile_by_tile(capsys, tmp_path):
    _needs_icarus()
    vcd = tmp_path / "model.vcd"
    code = main(["cosim", "resnet18", *SMALL_RESNET, "--layer", "layer1.0/conv1", "--arch", "systolic_8x8",
                 "--sim", "icarus", "--vcd", str(vcd)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "layer1.0/conv1" in out and "equal in all three" in out
    total = next(line for line in out.splitlines() if line.lstrip().startswith("total")).split()
    number = lambda text: int(text.replace(",", ""))   # noqa: E731
    engine = number(next(line for line in out.splitlines() if line.startswith("tile-level engine")).split()[2])
    line = next(line for line in out.splitlines() if line.startswith("back to back"))
    model, closed = (number(x) for x in re.findall(r"([\d,]+) (?:cycles )?in the", line))
    assert total[1] == total[2] == total[3] and model == closed
    # the tiles pipeline: back to back they take less than one after another, and the engine no less than that
    assert model < number(total[1]) and engine >= model
    assert vcd.read_text().startswith("$date") or "$timescale" in vcd.read_text()[:500]


def test_alexnet_grouped_conv_and_a_ragged_fc_agree(capsys):
    """conv2 runs as two groups (b dims); ResNet-18's fc has 1000 outputs in tiles of 64 (steps past the edge)."""
    _needs_icarus()
    assert main(["cosim", "alexnet", "--opt", "image=64", "--opt", "width=0.125", "--layer", "conv2"]) == 0
    assert "equal in all three" in capsys.readouterr().out
    assert main(["cosim", "resnet18", *SMALL_RESNET, "--layer", "fc", "--opt", "classes=100"]) == 0
    assert "equal in all three" in capsys.readouterr().out


def test_a_wrong_output_names_tile_cycle_and_value(monkeypatch, capsys):
    """Where the RTL and the models part, the exit is non-zero and names the first differing tile and value."""
    _needs_icarus()
    real = runner.run_rtl

    def corrupted(stim, *args, **kwargs):
        run = real(stim, *args, **kwargs)
        run.outcome.y_data[100, 3] += 1        # one bit of one output of one tile, as a broken PE would
        return run

    monkeypatch.setattr(cosim_module.runner, "run_rtl", corrupted)
    code = main(["cosim", "resnet18", *SMALL_RESNET, "--layer", "layer1.0/conv1", "--arch", "systolic_8x8"])
    out = capsys.readouterr().out
    assert code == 1
    assert "MISMATCH tile 0, output row 100, column 3" in out and "RTL" in out and "numpy" in out


def test_an_arch_unlike_the_rtl_is_refused(capsys):
    assert main(["cosim", "resnet18", *SMALL_RESNET, "--layer", "conv1", "--arch", "tpu_v1"]) == 2
    err = capsys.readouterr().err
    assert "does not describe the core in rtl/" in err and "io_registers is 0" in err


def test_a_layer_that_is_not_a_matrix_layer_is_named(capsys):
    assert main(["cosim", "resnet18", *SMALL_RESNET, "--layer", "relu", "--arch", "systolic_8x8"]) == 2
    assert "relu" in capsys.readouterr().err


def test_gather_reads_zero_padding_like_the_conv():
    """The GEMM operands a conv tile streams are its im2col: padding reads zero."""
    x = np.arange(1, 10, dtype=np.int8).reshape(1, 1, 3, 3)
    from compiler.ir import Axis

    axes = (Axis.of("n"), Axis.of("c"), Axis((("p", 1), ("r", 1)), -1), Axis((("q", 1), ("s", 1)), -1))
    ranges = {d: np.arange(3) for d in ("p", "q", "r", "s")} | {"n": np.arange(1), "c": np.arange(1)}
    a = cosim_module._gather(x, axes, ("n", "p", "q"), ("c", "r", "s"), ranges)
    assert a.shape == (9, 9)
    assert list(a[0]) == [0, 0, 0, 0, 1, 2, 0, 4, 5]      # output (0, 0) sees the top-left corner and padding
    assert list(a[4]) == list(range(1, 10))               # the centre sees the whole image


def test_a_build_is_kept_per_toolchain_so_two_checkouts_never_share_one(monkeypatch):
    from accelsim.rtl.runner import build_folder

    params = {"ROWS": 2, "COLS": 2, "TERNARY": 0, "ACC_DEPTH": 64}
    monkeypatch.setenv("VERILATOR_ROOT", "/one/venv/verilator")
    first = build_folder("verilator", params, waves=False)
    monkeypatch.setenv("VERILATOR_ROOT", "/another/venv/verilator")
    second = build_folder("verilator", params, waves=False)
    assert first != second and first.parent == second.parent
    assert first.name.startswith("verilator_rows2_cols2_ternary0_acc_depth64_")
    waves = build_folder("verilator", params, waves=True)
    assert waves.name.startswith("verilator_rows2_cols2_ternary0_acc_depth64_waves_")
    assert build_folder("verilator", params, waves=False) == second       # the same toolchain: the same build


def test_cache_off_builds_in_a_folder_of_the_process_own(monkeypatch, tmp_path):
    """ACCELSIM_CACHE=off keeps no mapping or run (compiler.map.disk); the simulator builds go to a scratch folder,
    not to a folder named "off" in the working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ACCELSIM_CACHE", "off")
    folder = runner.cache_dir()
    assert "off" not in folder.parts and folder == runner.cache_dir() and not (tmp_path / "off").exists()
    monkeypatch.setenv("ACCELSIM_CACHE", str(tmp_path / "kept"))
    assert runner.cache_dir() == tmp_path / "kept" / "rtl"


def test_the_rtl_and_model_waveforms_share_a_timescale_and_line_up(capsys, tmp_path):
    """--rtl-vcd (the simulator's dump) and --model-vcd (the cycle-level model's): one $timescale, and every edge of
    the core's ports at the same time in both, so the two files overlay in a viewer."""
    _needs_icarus()
    from accelsim.results.vcd import read

    rtl, model = tmp_path / "rtl.vcd", tmp_path / "model.vcd"
    assert main(["cosim", "resnet18", *SMALL_RESNET, "--layer", "fc", "--opt", "classes=10", "--rtl-vcd", str(rtl),
                 "--model-vcd", str(model)]) == 0
    capsys.readouterr()
    scales = [re.search(r"\$timescale\s+(\S+)\s+\$end", path.read_text()[:2000]).group(1) for path in (rtl, model)]
    assert scales == ["1ns", "1ns"]
    r, m = read(rtl), read(model)
    end = m["systolic_core.clk"][1][-1][0]        # the model's file ends at the rising edge after its last cycle
    upto = lambda changes: [(t, v) for t, v in changes if t < end]           # noqa: E731
    for port in ("clk", "rst", "w_valid", "w_ready", "w_data", "x_valid", "x_ready", "x_data", "x_last", "y_valid",
                 "y_last"):
        assert upto(r[f"systolic_core.{port}"][1]) == upto(m[f"systolic_core.{port}"][1]), port
    # cycle 0 is the first with rst low: its inputs are driven at its falling edge, 10 ns x 2 reset cycles + 5 ns
    assert r["systolic_core.rst"][1][:2] == [(0, 1), (25, 0)]
    first_output = next(t for t, v in m["systolic_core.y_valid"][1] if v == 1)
    assert first_output % 10 == 0 and (first_output, 1) in r["systolic_core.y_valid"][1]


def test_the_waveform_options_say_what_they_write_and_keep_their_old_names(capsys):
    with pytest.raises(SystemExit):
        main(["cosim", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--rtl-vcd FILE.vcd, --waves FILE.vcd write the RTL's waveform" in text
    assert "--model-vcd FILE.vcd, --vcd FILE.vcd write the cycle-level model's waveform" in text
    assert "(--waves: the old name, deprecated)" in text and "(--vcd: the old name, deprecated)" in text


@pytest.mark.parametrize("flag", ["--waves", "--rtl-vcd", "--model-vcd"])
def test_a_waveform_named_fst_is_refused_before_anything_runs(flag, tmp_path, capsys):
    """cocotb's waves were FST by default; these files are VCD now, so a .fst name would hold the wrong format."""
    with pytest.raises(SystemExit) as exit_:
        main(["cosim", "resnet18", flag, str(tmp_path / "waves.fst")])
    assert exit_.value.code == 2 and "name the file .vcd" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
