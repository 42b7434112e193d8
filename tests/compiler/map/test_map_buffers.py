"""A bigger buffer never makes the same mapping problem slower: the space at a capacity holds every tiling a
smaller power-of-two capacity allowed (compiler.map.space._smaller_buffers), and the search reports every tiling,
so its pick is estimated no slower (compiler.map.search). systolic_32x32 with filter_sram's capacity changed, then
all three SRAMs'.
"""
import math
from dataclasses import replace
from functools import cache

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from accelsim.arch import load_arch
from accelsim.price.cost import reporter
from accelsim.sim.model import load_model
from compiler.map import map_op
from compiler.map.space import INNER_RUNG_TILES, RUNG_TILES, candidates
from compiler.targeting import Footprints
from compiler.compile import Options, compile_graph

LAYERS = ("layer4.0/conv2", "layer2.0/conv1", "fc")      # weights of 2.36 MB, 74 kB and 513 kB, at 32 px
KIB = 1024


@cache
def resnet18():
    arch = load_arch("systolic_32x32")
    return compile_graph(load_model("resnet18", image=32), Options(dtype=arch.native_dtype, arch=arch))


@cache
def with_filter_sram(capacity: int):
    arch = load_arch("systolic_32x32")
    memory = tuple(replace(lv, capacity_bytes=capacity) if lv.name == "filter_sram" else lv for lv in arch.memory)
    return replace(arch, memory=memory)


def op_named(name: str):
    return next(op for op in resnet18().ops if op.name == name)


def tilings(op, arch) -> set:
    return {(m.dataflow, tuple((lv.level, lv.tile) for lv in m.levels), m.spatial) for m in candidates(op, arch)}


def estimate(op, arch) -> float:
    report = reporter(arch, [op])
    return report(map_op(op, arch, report, cache=None))


# From 16 KiB, which holds every step double-buffered (8 folds of 32 x 32 int8 weights: 2 x 8 KiB; below that the
# step itself shrinks), to 4 MiB, and a second capacity up to 64 times the first
capacities = st.tuples(st.integers(4, 12), st.integers(0, 6)).map(lambda p: (KIB << p[0], KIB << (p[0] + p[1])))


@settings(max_examples=12, deadline=None)
@given(capacities, st.sampled_from(LAYERS))
def test_a_bigger_filter_sram_keeps_every_tiling_a_smaller_one_allowed(pair, layer):
    """Every tiling that leaves filter_sram fewer than RUNG_TILES weight tiles (the space stops cutting the
    room there: smaller tiles only add refetches and per-tile latency)."""
    small, big = pair
    op = op_named(layer)
    extents = dict(op.loops)
    kept = {t for t in tilings(op, with_filter_sram(small))
            if math.prod(-(-extents[d] // tile) for d, tile in t[1][1][1]) < RUNG_TILES}
    assert kept <= tilings(op, with_filter_sram(big))


@settings(max_examples=6, deadline=None)
@given(capacities, st.sampled_from(LAYERS[:2]))
def test_the_pick_at_a_bigger_filter_sram_is_estimated_no_slower(pair, layer):
    small, big = pair
    op = op_named(layer)
    assert estimate(op, with_filter_sram(big)) <= estimate(op, with_filter_sram(small))


def test_a_4_mib_filter_sram_streams_layer4s_weights_as_a_64_kib_one_does():
    """The report's case: with 4 MiB the pick held half of layer4.0/conv2's 2.36 MB of weights per tile (2 tiles,
    the first one's fill under no compute), estimated at 137 k cycles against 101 k with 64 KiB."""
    op = op_named("layer4.0/conv2")
    at_64k, at_4m = with_filter_sram(64 * KIB), with_filter_sram(4096 * KIB)
    pick = map_op(op, at_4m, reporter(at_4m, [op]), cache=None)
    weight_tiles = 1
    for (d, extent), (_, tile) in zip(pick.loops, pick.levels[1].tile):
        weight_tiles *= -(-extent // tile) if d in ("k", "c", "r", "s") else 1
    assert weight_tiles >= 16
    assert estimate(op, at_4m) <= estimate(op, at_64k)


def test_resnet18s_last_stage_takes_no_longer_with_a_bigger_filter_sram():
    """End to end, in the tile engine, for the layers whose weights fill the SRAMs (layer4, 8.4 MB of ResNet-18's
    11.2 MB at 32 px): the whole model took 0.99, 1.05, 1.23 and 1.48 ms with 64 KiB, 256 KiB, 1 MiB and 4 MiB."""
    from accelsim.sim.build import build, narrow, simulate

    compiled = build("resnet18", "systolic_32x32", image=32, mapped=False)
    stage = [op for op in compiled.ir.ops if op.name.startswith("layer4.")]
    times = [simulate(narrow(replace(compiled, arch=with_filter_sram(kib * KIB)), stage)).seconds
             for kib in (64, 256, 1024, 4096)]
    assert all(later <= earlier for earlier, later in zip(times, times[1:])), times
    weights = sum(op.inputs[1].nbytes for op in stage if op.name.endswith(("conv1", "conv2", "downsample.0")))
    assert times[-1] < 1.1 * weights / 12.8e9          # DRAM-bound: within 10% of the weights' stream


SRAMS = ("filter_sram", "ifmap_sram", "ofmap_sram")


@cache
def with_srams(capacities: tuple[int, int, int]):
    arch = load_arch("systolic_32x32")
    sized = dict(zip(SRAMS, capacities))
    memory = tuple(replace(lv, capacity_bytes=sized[lv.name]) if lv.name in sized else lv for lv in arch.memory)
    return replace(arch, memory=memory)


def offered(op, capacities) -> bool:
    """Whether every SRAM is at least as big as the smallest room the space offers it: a RUNG_TILES-th (the filter
    SRAM) or an INNER_RUNG_TILES-th (the others) of what the whole op needs there double-buffered, halved."""
    arch = with_srams(capacities)
    sizes, extents = Footprints(op, arch), dict(op.loops)
    index = {lv.name: i for i, lv in enumerate(arch.memory)}
    for name, capacity, depth in zip(SRAMS, capacities, (RUNG_TILES, INNER_RUNG_TILES, INNER_RUNG_TILES)):
        whole = sum(n for _, n in sizes.need(index[name], extents, True))
        if capacity < whole and 2 * capacity * depth < whole:
            return False
    return True


# Each SRAM 4 KiB to 1 MiB, and a bigger design up to 16 times each of them
sram_sizes = st.tuples(*[st.integers(12, 20)] * 3, *[st.integers(0, 4)] * 3).map(
    lambda p: (tuple(1 << e for e in p[:3]), tuple(1 << (e + g) for e, g in zip(p[:3], p[3:]))))
SMALL_LAYERS = ("layer2.0/conv1", "layer3.0/downsample.0")      # 56 kB / 29 kB of inputs, 74 kB / 33 kB of weights


@settings(max_examples=10, deadline=None)
@given(sram_sizes, st.sampled_from(SMALL_LAYERS))
def test_bigger_srams_keep_every_tiling_smaller_ones_allowed(pair, layer):
    small, big = pair
    op = op_named(layer)
    assume(offered(op, small))
    assert tilings(op, with_srams(small)) <= tilings(op, with_srams(big))


@settings(max_examples=6, deadline=None)
@given(sram_sizes, st.sampled_from(SMALL_LAYERS))
def test_the_pick_with_bigger_srams_is_estimated_no_slower(pair, layer):
    small, big = pair
    op = op_named(layer)
    assert estimate(op, with_srams(big)) <= estimate(op, with_srams(small))


def test_a_64x64_arrays_layer1_conv_is_no_slower_with_bigger_srams():
    """ResNet-18's layer1.0/conv1 at 224 px in the tile engine, filter SRAM 256 KiB / 1 MiB / 4 MiB with ifmap and
    ofmap SRAMs half of it: 35.3 k, 41.3 k and 33.6 k cycles when only the filter SRAM's smaller tilings were kept
    (with 512 KiB the whole input was one ifmap tile, its 200 kB fill under no compute). Within 1%: the picks at
    256 KiB and 1 MiB are estimated 4 cycles apart, and a 128 KiB ofmap SRAM's steps are below the rungs a 512 KiB one
    is offered (compiler.map.space.INNER_RUNG_TILES)."""
    from accelsim.sim.build import build, narrow, simulate

    base = load_arch("systolic_32x32")
    unit = replace(base.compute[0], array=replace(base.compute[0].array, rows=64, cols=64),
                   per_cycle=tuple((dtype, 4096) for dtype, _ in base.compute[0].per_cycle))
    edges = {"filter_sram": (1, 32e9, 64), "ifmap_sram": (2, 32e9, 64), "ofmap_sram": (2, 128e9, 256)}

    def design(filter_kib):
        memory = tuple(replace(lv, capacity_bytes=filter_kib * KIB // edges[lv.name][0], bandwidth_bytes_per_s=
                               edges[lv.name][1], access_bytes=edges[lv.name][2]) if lv.name in edges else lv
                       for lv in base.memory)
        return replace(base, compute=(unit,) + base.compute[1:], memory=memory)

    compiled = build("resnet18", design(4096), image=224, mapped=False)
    conv = [op for op in compiled.ir.ops if op.name == "layer1.0/conv1"]
    cycles = [simulate(narrow(replace(compiled, arch=design(kib)), conv), memory=False).ops[0].cycles
              for kib in (256, 1024, 4096)]
    assert all(later <= 1.01 * earlier for earlier, later in zip(cycles, cycles[1:])), cycles
