"""The mapper's cost model: traffic with reuse, bounds against the roofline, and `accelsim map`."""
from dataclasses import replace

import pytest

from accelsim import roofline
from accelsim.arch import load_arch, preset_names
from accelsim.cli import main
from accelsim.cost import cycles, reporter, traffic
from accelsim.model import load_model
from compiler.map import map_ir, map_op
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.map.legal import pick_unit
from compiler.mapping import LevelTile
from compiler.pipeline import Options, compile_graph
from tests.compiler.test_map import gemm


def ir_of(model, arch, **options):
    return compile_graph(load_model(model, **options), Options(dtype=arch.native_dtype))


def test_loop_order_decides_reuse():
    # 64x64x64 int8 GEMM on the 8x8 array, 16x16 tiles in the SRAMs, 16x8x8 folds. An operand is re-read
    # once per iteration of the loops outside its innermost relevant loop: w[k, n] ignores m, x[m, k] n.
    arch = load_arch("systolic_8x8")
    op = gemm(64, 64, 64)
    base = map_op(op, arch, reporter(arch, [op]), cache=None)
    full = LevelTile("dram", op.loops, ("m", "n", "k"), double_buffered=False)
    tile = (("m", 16), ("n", 16), ("k", 64))

    def dram_bytes(order, fold_order):
        levels = (full, LevelTile("weight_sram", tile, order), LevelTile("input_sram", tile, order),
                  LevelTile("output_sram", (("m", 16), ("n", 8), ("k", 8)), fold_order))
        return traffic(replace(base, levels=levels), op, arch)["dram"]
    x = w = y = 64 * 64                                   # int8 bytes of each operand
    assert dram_bytes(("m", "n", "k"), ("m", "n", "k")) == 4 * w + x + y    # m outside n: w per m tile
    assert dram_bytes(("n", "m", "k"), ("m", "n", "k")) == w + 4 * x + y    # n outside m: x per n tile
    # k outside n in the folds: each 16x8 output tile leaves 8 times, 7 of them as int32 partial sums
    # stored and reloaded (32 tiles, 256 visits, 128 B final, 512 B partial)
    assert dram_bytes(("m", "n", "k"), ("m", "k", "n")) == 4 * w + x + 32 * 128 + 2 * 224 * 512


@pytest.mark.parametrize("arch_name", preset_names())
def test_traffic_and_cycles_bound_by_the_roofline(arch_name):
    arch = load_arch(arch_name)
    for model in ("resnet18", "alexnet"):
        ir = ir_of(model, arch)
        mappings = map_ir(ir, arch, reporter(arch, ir))
        for op in ir.ops:
            compulsory = roofline.bytes_by_level(op, arch)
            moved = traffic(mappings[op.name], op, arch)
            for level, nbytes in compulsory.items():
                assert moved[level] >= nbytes, (op.name, level)
            bound = roofline.estimate_op(op, arch).cycles
            assert cycles(mappings[op.name], op, arch) >= bound * (1 - 1e-6) - 1, op.name


def test_unit_choice_widens_as_the_hardware_would():
    # one rule for the roofline, the mapper and the engine (compiler.map.legal.pick_unit)
    ternary = gemm(64, 64, 64, DType.ternary)
    assert pick_unit(ternary, load_arch("fpga_ternary"))[1] == DType.ternary
    assert pick_unit(ternary, load_arch("h100"))[1] == DType.int8          # no ternary path: int8 tensor cores
    unit, rate = pick_unit(gemm(64, 64, 64, DType.fp16), load_arch("gtx580"))
    assert (unit.name, rate) == ("cuda_cores", DType.fp32)                 # Fermi widens fp16 to fp32
    with pytest.raises(UserError, match="--dtype int8"):
        pick_unit(gemm(64, 64, 64, DType.fp32), load_arch("tpu_v1"))


def test_padding_costs_cycles():
    arch = load_arch("systolic_8x8")
    op = gemm(10, 10, 10)
    best = map_op(op, arch, reporter(arch, [op]), cache=None)
    full = LevelTile("dram", op.loops, ("m", "n", "k"), double_buffered=False)
    ragged = replace(best, levels=(full, LevelTile("output_sram", (("m", 8), ("n", 8), ("k", 8)), ("m", "n", "k"))),
                     spatial=())
    assert cycles(ragged, op, arch) > cycles(best, op, arch)


@pytest.mark.parametrize("arch_name, unit", [("tpu_v1", "mxu"), ("h100", "tensor_cores")])
def test_map_cli_prints_a_conv_loop_nest(capsys, arch_name, unit):
    assert main(["map", "resnet18", "--arch", arch_name, "--layer", "layer2.0/conv1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# layer2.0/conv1 on {unit}") and "padding waste" in out
    assert "for " in out and "parallel_for" in out and "mac()" in out and "# estimate:" in out
    levels = [lv.name for lv in load_arch(arch_name).memory]
    assert all(f"# {name}: tile" in out for name in levels)
    if arch_name == "tpu_v1":
        assert "dataflow WS" in out and "# rows" in out and "# cols" in out
    else:
        assert "# units" in out and "thread-block tile" in out


def test_map_cli_bad_layer_lists_close_matches(capsys):
    assert main(["map", "resnet18", "--layer", "layer2.0/conv9"]) == 2
    err = capsys.readouterr().err
    assert "no layer 'layer2.0/conv9' in resnet18" in err and "layer2.0/conv1" in err
