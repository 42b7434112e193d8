"""The mapper's cost model: traffic with reuse, bounds against the roofline, and `accelsim map`."""
from dataclasses import replace

import pytest

from accelsim.price import roofline
from accelsim.arch import load_arch, preset_names
from accelsim.cli import main
from accelsim.price.cost import cycles, reporter, traffic
from accelsim.sim.model import load_model
from compiler.map import map_ir, map_op
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.targeting import pick_unit
from compiler.mapping import LevelTile
from compiler.compile import Options, compile_graph
from tests.compiler.map.test_map import gemm


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
            if op.kind.value != "einsum":       # the cost model ranks Einsum mappings; vector ops have one plan
                continue
            compulsory = roofline.bytes_by_level(op, arch)
            moved = traffic(mappings[op.name], op, arch)
            for level, nbytes in compulsory.items():
                assert moved[level] >= nbytes, (op.name, level)
            bound = roofline.estimate_op(op, arch).cycles
            assert cycles(mappings[op.name], op, arch) >= bound * (1 - 1e-6) - 1, op.name


def test_unit_choice_widens_as_the_hardware_would():
    # one rule for the roofline, the mapper and the engine (compiler.targeting.pick_unit)
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


EPYC = "validation/cpu/host_amd_epyc/arch.yaml"    # the committed host dataset's preset (2.45 GHz, AVX2)
MNK = ("m", "n", "k")


def fp32_gemm(m, n, k):
    return gemm(m, n, k, DType.fp32)


def levels_of(op, *tiles):
    """Mapping levels from the outermost in: (level name, {dim: tile}, loop order), a dim left out whole."""
    return tuple(LevelTile(name, tuple((d, tile.get(d, e)) for d, e in op.loops), order)
                 for name, tile, order in tiles)


def test_ragged_outer_tiles_leave_empty_inner_steps_unpriced():
    # 1024 in l2 tiles of 496 (496 + 496 + 32) and l1d steps of 16: the engine computes 64 steps of 16 in k, not
    # 3 x 31 = 93 (compiler.codegen.nest gives the 29 steps past the edge no work), and moves 1,024 rows of B, not
    # 1,488: the cost model counts the same.
    from compiler.codegen.nest import clipped_segments

    arch = load_arch(EPYC)
    op = fp32_gemm(1024, 1024, 1024)
    base = map_op(op, arch, reporter(arch, [op]), cache=None)
    ragged = replace(base, levels=levels_of(op, ("dram", {}, MNK), ("llc", {}, MNK),
                                            ("l2", {"m": 64, "n": 64, "k": 496}, MNK),
                                            ("l1d", {"m": 64, "n": 64, "k": 16}, MNK)))
    l2 = replace(ragged.levels[2], tile=(("m", 64), ("n", 64), ("k", 512)))
    even = replace(ragged, levels=ragged.levels[:2] + (l2,) + ragged.levels[3:])
    assert clipped_segments(ragged, 3)["k"] == {16: 64} and clipped_segments(ragged, 2)["k"] == {496: 2, 32: 1}
    assert ragged.padded_work == 1024 * 1024 * 93 * 16             # what the old estimate charged
    assert traffic(ragged, op, arch)["llc"] == traffic(even, op, arch)["llc"]
    assert cycles(ragged, op, arch) == pytest.approx(cycles(even, op, arch), rel=0.01)


def test_partial_sum_round_trips_are_priced_on_the_chain():
    # The engine stores a C tile after the compute that made it and reloads it before the next compute on it:
    # with k outside n, the 64 x 64 C tile in l1d changes every step and crosses l1d and l2 both ways (240
    # round trips in 256 steps), and the compute waits each time. The cost model must say so, and so prefer
    # keeping C in l1d over a whole K panel.
    from accelsim.sim.tile import run_tiles
    from compiler.ir import IR

    arch = load_arch(EPYC)
    op = fp32_gemm(256, 256, 256)
    base = map_op(op, arch, reporter(arch, [op]), cache=None)
    step = ("l1d", {"m": 64, "n": 64, "k": 16}, MNK)
    panel = replace(base, levels=levels_of(op, ("dram", {}, MNK), ("llc", {}, MNK), ("l2", {"m": 64, "n": 64}, MNK),
                                           step))
    spill = replace(panel, levels=levels_of(op, ("dram", {}, MNK), ("llc", {}, MNK),
                                            ("l2", {"m": 64, "k": 16}, ("m", "k", "n")), step[:2] + (("m", "k", "n"),)))
    ir = IR("g", [op], [], [], {}, {})
    engine = {name: run_tiles(ir, arch, {op.name: m})[0][0].cycles for name, m in (("panel", panel), ("spill", spill))}
    assert engine["spill"] > 1.15 * engine["panel"]
    for name, mapping in (("panel", panel), ("spill", spill)):
        assert cycles(mapping, op, arch) == pytest.approx(engine[name], rel=0.06), name


@pytest.mark.parametrize("arch_name, model, layer", [
    (EPYC, None, "gemm 512 512 512"),           # partial sums of C through l1d and l2 (the pick was 7% slower)
    ("npu4", "alexnet", "fc6"),                 # DRAM weight tiles queued behind output stores (25%)
    ("gtx580", "resnet18", "layer3.0/conv1"),   # ragged tiles and partial sums in the register file (14%)
])
def test_the_mappers_pick_is_the_engines_best_candidate(arch_name, model, layer):
    # The search ranks candidates by this cost model; the engine then runs the pick. The pick must be as good,
    # by the engine, as the best of the candidates the search saw (within 3%: the space also holds the tilings
    # smaller buffers give, some a hair apart; npu4's fc6 has 40 between 615 k and 860 k cycles in the engine,
    # and the pick, 632 k, is 2.3% over the best; with the largest tiles alone it was 638 k).
    import itertools

    from accelsim.sim.tile import run_tiles
    from compiler.ir import IR
    from compiler.map import DEFAULT_BUDGET
    from compiler.map.space import candidates

    arch = load_arch(arch_name)
    if model is None:
        op = fp32_gemm(512, 512, 512)
        ir = IR("g", [op], [], [], {}, {})
    else:
        ir = ir_of(model, arch)
        op = next(o for o in ir.ops if o.name == layer)
        ir = replace(ir, ops=[op])
    pick = map_op(op, arch, reporter(arch, ir), cache=None)
    engine = [run_tiles(ir, arch, {op.name: m})[0][0].cycles for m in itertools.islice(candidates(op, arch),
                                                                                      DEFAULT_BUDGET)]
    assert run_tiles(ir, arch, {op.name: pick})[0][0].cycles <= 1.03 * min(engine)
