"""Where an op's idle time goes when a fused epilogue runs beside the array (accelsim.sim.tile.charged_stalls):
a conv whose weights stream from DRAM waits on DRAM, with or without its BatchNorm beside it. Checked against
the DRAM's bytes over its bandwidth, not against the engine's own split."""
from dataclasses import replace

import pytest

import accelsim
from accelsim.report.breakdown import COMPUTE, OTHER, time_split
from accelsim.sim.tile import charged_stalls, run_tiles


@pytest.fixture(scope="module")
def conv_with_epilogue():
    """systolic_32x32 (12.8 GB/s DRAM, a 32-lane output stage), ResNet-18 at 32 px: layer4.0/conv2 reads
    2,359,296 B of int8 weights once, and its BatchNorm runs beside the array."""
    compiled = accelsim.build("resnet18", "systolic_32x32", image=32)
    ops = [op for op in compiled.ir.ops if op.name == "layer4.0/conv2" or op.kernel == "layer4.0/conv2"]
    assert [op.name for op in ops] == ["layer4.0/conv2", "layer4.0/bn2"]
    results, _ = run_tiles(replace(compiled.ir, ops=ops), compiled.arch, compiled.mappings)
    return results


def test_a_dram_bound_conv_with_an_epilogue_beside_it_waits_on_dram(conv_with_epilogue):
    conv = conv_with_epilogue[0]
    dram_seconds = 512 * 512 * 3 * 3 / 12.8e9          # its weights once, from the YAML's 12.8 GB/s: 184 us
    split = time_split(conv)
    assert conv.seconds >= dram_seconds
    # the array computes for a fraction of that; the rest of the wait is the weights' stream, not "other"
    assert split[COMPUTE] + split["dram"] >= 0.95 * dram_seconds
    assert split.get(OTHER, 0.0) <= 0.01 * conv.seconds
    assert sum(split.values()) == pytest.approx(conv.seconds)


def test_stalls_fit_the_idle_time_an_op_is_charged():
    assert charged_stalls({"dram": 300, "sram": 100}, 500) == {"dram": 300, "sram": 100}
    assert charged_stalls({"dram": 300, "sram": 100}, 200) == {"dram": 150, "sram": 50}
    assert charged_stalls({"dram": 3, "sram": 1}, 0) == {}
