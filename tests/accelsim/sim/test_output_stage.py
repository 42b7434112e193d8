"""TPU v1's output path in the tile engine: a fused epilogue beside the array (accelsim.sim.output_stage), the
weight FIFO refilled tile by tile (accelsim.sim.refill) and the Unified Buffer's write port, each against a
second source: the cycle-level model's output rows, the array's closed form, the DRAM's bytes over its bandwidth."""
from dataclasses import replace

import numpy as np
import pytest

import accelsim
from accelsim.arch import load_arch
from accelsim.engine.tile import schedule
from accelsim.price.systolic import steady_and_tail
from accelsim.sim.cycle import run
from accelsim.sim.stimulus import gemm
from accelsim.sim.tile import run_tiles
from compiler.program import LOAD, STORE

FC6_BYTES = 9216 * 4096          # alexnet fc6's int8 weights, each used once at batch 1


@pytest.mark.parametrize("m, k, n", [(64, 8, 8), (40, 5, 7), (12, 8, 8)])
@pytest.mark.parametrize("chunks", [1, 4])
def test_an_epilogue_chunk_starts_the_cycle_after_the_cycle_model_puts_out_its_rows(m, k, n, chunks):
    """One tile GEMM on the 8x8 core, its epilogue in `chunks` parts on a unit of its own, each part reading an
    even share of the output rows: each part starts the cycle after the cycle-level model's last row of its share
    appears, or when the part before it ends (the output stage takes one part at a time)."""
    rng = np.random.default_rng(m * k * n)
    stim, _ = gemm(rng.integers(-128, 128, (m, k)), rng.integers(-128, 128, (k, n)), 8, 8, acc_depth=64)
    rows_out = run(stim, 64).y_cycle
    steady, tail = steady_and_tail(np.array([m]), np.array([n]), np.array([k]), 8, 8, "ws", 2, 1, 3)
    part_cycles = 5
    count = 1 + chunks
    dep = np.full((count, 1), -1, np.int64)
    dep[1:, 0] = 0
    share = np.zeros((count, 1))
    share[1:, 0] = np.arange(1, chunks + 1) / chunks
    start, end = schedule(np.array([0] + [1] * chunks, np.int64),
                          np.array([steady[0]] + [part_cycles] * chunks, np.int64),
                          np.array([tail[0]] + [0] * chunks, np.int64), dep,
                          np.array([0] + [1] * chunks, np.int64), 2, None, share, np.array([False, True]))
    free = 0
    for j in range(chunks):
        last_row = -(-(j + 1) * m // chunks) - 1
        expected = max(free, rows_out[last_row] + 1)
        assert start[1 + j] == expected, j
        free = expected + part_cycles


def kernel_cycles(arch, ops, mappings) -> int:
    results, _ = run_tiles(ops, arch, mappings)
    return sum(r.cycles for r in results)


def test_a_convolutions_epilogue_runs_beside_the_array_on_tpu_v1():
    """resnet18's conv1 with its BatchNorm and ReLU: the activation pipeline works on conv1's results as they
    leave the array, so the kernel takes less than the ops one after another, and no less than either the array
    alone or the epilogue's element ops at 256 per cycle."""
    compiled = accelsim.build("resnet18", "tpu_v1", image=64)
    ir = compiled.ir
    members = [op for op in ir.ops if op.kernel == "conv1"]
    group = replace(ir, ops=[ir.ops[0], *members])
    assert group.ops[0].name == "conv1" and members
    arch = compiled.arch
    after = replace(arch, compute=tuple(replace(u, output_stage=False) for u in arch.compute))
    beside = kernel_cycles(arch, group, compiled.mappings)
    one_after_another = kernel_cycles(after, group, compiled.mappings)
    array_alone = kernel_cycles(arch, replace(ir, ops=[ir.ops[0]]), compiled.mappings)
    element_ops = sum(op.ops for op in members)
    assert max(array_alone, element_ops / 256) <= beside < one_after_another
    assert beside <= array_alone + 0.25 * element_ops / 256 + 100     # at most the last part of the epilogue


@pytest.mark.parametrize("arch_name", ["tpu_v1", "systolic_8x8", "systolic_32x32"])
def test_no_kernel_takes_longer_with_its_epilogue_beside_the_array(arch_name):
    """Running the epilogue beside the array only overlaps work: each of resnet18's kernels takes at most what
    it takes with the epilogue after the array's last tile (its stores never hold the array's loads back)."""
    compiled = accelsim.build("resnet18", arch_name, image=32)
    arch, ir = compiled.arch, compiled.ir
    after = replace(arch, compute=tuple(replace(u, output_stage=False) for u in arch.compute))
    overlapped = 0
    for i, op in enumerate(ir.ops):
        members = [m for m in ir.ops[i + 1:] if m.kernel == op.name]
        if not members:
            continue
        group = replace(ir, ops=[op, *members])
        beside = kernel_cycles(arch, group, compiled.mappings)
        one_after_another = kernel_cycles(after, group, compiled.mappings)
        assert beside <= one_after_another, op.name
        overlapped += beside < one_after_another
    assert overlapped


def fc6(arch) -> int:
    """Cycles of alexnet fc6's kernel at batch 1: the GEMM with its bias and ReLU beside it."""
    result = accelsim.run("alexnet", arch=arch, batch=1)
    return sum(op.cycles for op in result.ops if "fc6" in (op.name, op.kernel))


def with_dram(arch, bandwidth: float, **fifo):
    levels = list(arch.memory)
    levels[0] = replace(levels[0], bandwidth_bytes_per_s=bandwidth)
    levels[1] = replace(levels[1], **fifo)
    return replace(arch, memory=tuple(levels))


def test_the_weight_fifo_refills_a_tile_as_soon_as_one_is_taken():
    """TPU v1 with GDDR5 (180 GB/s, examples/archs/tpu_v1_gddr5.yaml): fc6's 576 weight tiles then arrive about as
    fast as the array shifts them in, and refilled tile by tile the layer takes about the array's own closed form,
    576 x 256 + 1 + 510 = 147,967 cycles; refilled only once both tiles of a half are taken, a quarter more."""
    arch = load_arch("tpu_v1")
    assert arch.memory[1].refill_per_tile
    array_floor = 576 * 256 + 1 + 510
    per_tile = fc6(with_dram(arch, 180e9))
    per_slot = fc6(with_dram(arch, 180e9, refill_per_tile=False))
    assert array_floor <= per_tile <= 1.01 * array_floor
    assert per_slot > 1.2 * per_tile


def test_fc6_at_batch_1_on_ddr3_ends_a_last_tile_after_its_last_weight_byte():
    """On DDR3 fc6 is its weights and bias over 34 GB/s; after the last byte lands only the last tile remains: its
    shift into the array (256), stream (1), skew and drain (510), the DRAM latency (70), the output's store and
    epilogue; and each of the 288 weight loads rounds up to a whole cycle."""
    floor = (FC6_BYTES + 4096) / (34e9 / 700e6)
    cycles = fc6(load_arch("tpu_v1"))
    assert floor < cycles < floor + 256 + 1 + 510 + 70 + 288 + 400


def overtaken(arch, ir, mappings) -> list[int]:
    """The Unified Buffer stores that a load issued after them starts before (each load at 256 B per cycle)."""
    _, timeline = run_tiles(ir, arch, mappings)
    program = timeline.code.program
    on_buffer = program["level"] == 2
    loads = np.flatnonzero(on_buffer & (program["kind"] == LOAD))
    stores = np.flatnonzero(on_buffer & (program["kind"] == STORE))
    np.testing.assert_array_equal(timeline.busy[loads], np.ceil(program["bytes"][loads] / 256))
    return [s for s in stores if any(timeline.start[i] < timeline.start[s] for i in loads if i > s)]


def test_a_store_on_the_write_port_leaves_the_next_loads_alone():
    """TPU v1's Unified Buffer reads a row and writes a row per cycle (256 B each at 700 MHz): its stores hold a
    write port of their own at 256 B per cycle and its loads the read side, so a load issued after a store that
    waits for its compute may start first (resnet18's maxpool, chunk by chunk); on one shared channel at the
    level's 512 B per cycle, never."""
    compiled = accelsim.build("resnet18", "tpu_v1", image=32)
    ir = replace(compiled.ir, ops=[op for op in compiled.ir.ops if op.name == "maxpool"])
    arch = compiled.arch
    assert arch.memory[2].write_port_bytes_per_s == 179.2e9
    assert overtaken(arch, ir, compiled.mappings)
    levels = list(arch.memory)
    levels[2] = replace(levels[2], write_port_bytes_per_s=0.0, bandwidth_bytes_per_s=179.2e9)
    assert not overtaken(replace(arch, memory=tuple(levels)), ir, compiled.mappings)
