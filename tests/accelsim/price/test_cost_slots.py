"""The cost model where small tiles meet a far memory (accelsim.price.cost: _round_trips, and the tail a partial-sum
reload exposes), against the pipeline's timing worked out by hand from systolic_32x32's YAML (500 MHz; DRAM 12.8
GB/s = 25.6 B a cycle, 100 ns = 50 cycles; filter SRAM 32 B a cycle) and against the tile engine."""
from dataclasses import replace

import pytest

from accelsim.arch import load_arch
from accelsim.price.cost import reporter
from accelsim.sim.model import load_model
from accelsim.sim.tile import run_tiles
from compiler.map import map_op
from compiler.map.space import candidates
from compiler.compile import Options, compile_graph


@pytest.fixture(scope="module")
def layer4():
    arch = load_arch("systolic_32x32")
    ir = compile_graph(load_model("resnet18", image=32), Options(dtype=arch.native_dtype, arch=arch))
    return arch, ir, {op.name: op for op in ir.ops}


def estimate_and_engine(arch, ir, op, mapping):
    one = replace(ir, ops=[op])
    return reporter(arch, one)(mapping), run_tiles(one, arch, {op.name: mapping})[0][0].cycles


def test_one_weight_tile_per_step_is_paced_by_its_buffer_slots(layer4):
    """layer4.0/conv2 with every SRAM tile one step (2 folds: k = 32 outputs, c*r*s = 7*3*3 = 63 rows, 2,016 B of
    weights): 512/32 * 512/7 = 16 * 74 = 1,184 steps. A filter SRAM slot is refilled only once the step that used
    it has left the array: DRAM 2,016 / 25.6 = 79 cycles + 50 latency, into the array 2,016 / 32 = 63 + 1, the
    step's 64 cycles, so two slots take (129 + 64 + 64) / 2 cycles a step, where the bandwidth alone takes 79."""
    arch, ir, ops = layer4
    op = ops["layer4.0/conv2"]
    pick = map_op(op, arch, reporter(arch, replace(ir, ops=[op])), cache=None)
    step = pick.levels[-1]
    assert dict(step.tile)["c"] == 7 and dict(step.tile)["k"] == 32
    small = replace(pick, levels=(pick.levels[0],) + tuple(replace(lv, tile=step.tile) for lv in pick.levels[1:]))
    by_hand = 1184 * (129 + 64 + 64) / 2                 # 152 k cycles
    estimate, engine = estimate_and_engine(arch, ir, op, small)
    assert engine == pytest.approx(by_hand, rel=0.05)
    assert estimate == pytest.approx(by_hand, rel=0.1)


def test_a_partial_sum_reload_waits_for_the_tail_of_the_step_before_it(layer4):
    """layer4.0/conv1 with its whole k = 512 of weights per c step in the filter SRAM and c outside k: each of the
    16 output tiles is stored and reloaded at every one of the 37 c steps, and the reload of the next tile waits on
    the ofmap channel behind the store of this one, which waits for this step's end, its 63-cycle skew and drain
    included: 592 steps of 64 + 63 cycles, not 64."""
    arch, ir, ops = layer4
    op = ops["layer4.0/conv1"]
    # the filter SRAM holds k = 512 by c = 7: 37 of them along c, and in each the steps walk k (16)
    outer_c = next(m for m in candidates(op, arch)
                   if dict(m.levels[1].tile)["k"] == 512 and dict(m.levels[1].tile)["c"] == 7
                   and dict(m.levels[-1].tile)["c"] == 7)
    assert (outer_c.trips(1)["c"], outer_c.trips(len(outer_c.levels) - 1)["k"]) == (37, 16)
    by_hand = 592 * (64 + 63)                            # 75 k cycles
    estimate, engine = estimate_and_engine(arch, ir, op, outer_c)
    assert engine == pytest.approx(by_hand, rel=0.05)
    assert estimate == pytest.approx(by_hand, rel=0.1)


def test_a_weight_tile_queued_behind_an_input_tile_on_the_dram_channel(layer4):
    """layer4.0/conv2 with a 256 KiB filter SRAM holding c = 175 (25 steps of 7) of every weight and the ifmap SRAM
    c = 91 (13 steps): DRAM serves the loads in program order, and the next weight tile's load is queued behind the
    input tile's loaded at the same step, which waits for its slot, freed by the step 13 steps back. So each 50,400 B
    weight tile (1,969 + 50 cycles from DRAM) starts 13 steps of 64 cycles before it is needed: 1,184 steps of 64
    cycles plus 47 tiles x (2,019 - 832) exposed = 132 k cycles (the steps' 63-cycle tails come on top); the weights
    alone take 92 k at 12.8 GB/s, which the estimate said (101 k)."""
    arch, ir, ops = layer4
    at_256k = replace(arch, memory=tuple(replace(lv, capacity_bytes=256 * 1024) if lv.name == "filter_sram" else lv
                                         for lv in arch.memory))
    op = ops["layer4.0/conv2"]
    queued = next(m for m in candidates(op, at_256k)
                  if (dict(m.levels[1].tile)["c"], dict(m.levels[2].tile)["c"], dict(m.levels[-1].tile)["c"]) ==
                  (175, 91, 7) and dict(m.levels[1].tile)["k"] == 32)
    by_hand = 1184 * 64 + 47 * (2019 - 13 * 64)          # 132 k cycles
    estimate, engine = estimate_and_engine(at_256k, ir, op, queued)
    assert engine == pytest.approx(by_hand, rel=0.1)
    assert estimate == pytest.approx(engine, rel=0.1)


def test_a_weight_tile_read_into_the_array_after_its_queued_load(layer4):
    """An 8x8 output-stationary array (the example sweep's: 64 MACs a cycle, SRAMs one 8-wide edge a cycle, 4 / 4 /
    16 GB/s, DRAM 25.6 GB/s = 51.2 B a cycle) on layer4.0/conv2 with input tiles of c = 128 (a step's) and weight
    tiles of c = 256 (2 steps) from DRAM: each weight tile waits in program order behind the input tile loaded at its
    step, then takes 18,432 / 51.2 = 360 + 50 cycles from DRAM and its first step's 9,216 B at 8 B a cycle into the
    array (1,152), one step of 1,152 cycles after its load could start: 512 x 512 x 9 / 64 = 294,912 cycles of compute
    and 128 tiles x 410 exposed. The estimate had 314 k (the array-bound compute and the bandwidth), now 366 k (each
    step's tail on top), so that the tiling holding the whole input in the ifmap SRAM (302 k in the engine) wins."""
    arch, ir, ops = layer4
    from compiler.hardware import Dataflow
    unit = arch.compute[0]
    unit = replace(unit, array=replace(unit.array, rows=8, cols=8), dataflows=(Dataflow.OS,),
                   per_cycle=tuple((dtype, 64) for dtype, _ in unit.per_cycle))
    edges = {"dram": (1 << 30, 25.6e9, 64), "filter_sram": (256 * 1024, 4e9, 8), "ifmap_sram": (64 * 1024, 4e9, 8),
             "ofmap_sram": (64 * 1024, 16e9, 32)}
    memory = tuple(replace(lv, capacity_bytes=edges[lv.name][0], bandwidth_bytes_per_s=edges[lv.name][1],
                           access_bytes=edges[lv.name][2]) for lv in arch.memory)
    os8 = replace(arch, compute=(unit,) + arch.compute[1:], memory=memory)
    op = ops["layer4.0/conv2"]
    queued = next(m for m in candidates(op, os8)
                  if [dict(lv.tile)["c"] for lv in m.levels[1:]] == [256, 128, 128]
                  and dict(m.levels[1].tile)["k"] == 8)
    by_hand = 294_912 + 128 * 410                        # 347 k cycles
    estimate, engine = estimate_and_engine(os8, ir, op, queued)
    assert engine == pytest.approx(by_hand, rel=0.05)
    assert 0.97 * engine <= estimate <= 1.1 * engine
