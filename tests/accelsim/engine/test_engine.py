"""The numba kernels on tiny hand-made programs: contention, pipelined latency, dependencies, the op
barrier, stall attribution; and double buffering through codegen."""

import numpy as np

from accelsim.arch import load_arch
from accelsim.engine.tile import attribute, schedule
from accelsim.sim.tile import run_tiles
from compiler.builder import Builder
from compiler.dtypes import DType
from compiler.mapping import LevelTile, Mapping
from compiler.compile import Options, compile_graph
from compiler.program import COMPUTE, LOAD, MAX_DEPS, STORE

I = np.int64


def run(resource, occupancy, latency, deps, op=None, n_resources=3):
    n = len(resource)
    dep = np.full((n, MAX_DEPS), -1, I)
    for row, ds in enumerate(deps):
        dep[row, :len(ds)] = ds
    op = np.zeros(n, I) if op is None else np.array(op, I)
    start, end = schedule(np.array(resource, I), np.array(occupancy, I), np.array(latency, I), dep, op, n_resources)
    return start.tolist(), end.tolist(), dep


def test_one_channel_serves_one_transfer_at_a_time():
    start, end, _ = run([0, 0, 1], [10, 10, 10], [0, 0, 0], [[], [], []])
    assert start == [0, 10, 0] and end == [10, 20, 10]     # the second load on channel 0 waits; channel 1 does not


def test_latency_is_pipelined_not_serialised():
    start, end, _ = run([0, 0], [10, 10], [5, 5], [[], []])
    assert start == [0, 10] and end == [15, 25]            # the channel frees after 10 cycles, data lands 5 later


def test_compute_waits_for_its_data_and_its_unit():
    # rows: load a (ch 0), load b (ch 0), compute on a (unit 2), compute on b (unit 2)
    start, end, _ = run([0, 0, 2, 2], [10, 10, 30, 30], [2, 2, 0, 0], [[], [], [0], [1]])
    assert start == [0, 10, 12, 42] and end == [12, 22, 42, 72]


def test_a_missing_dependency_in_the_middle_skips_to_the_next():
    # row 2 names no dependency in slot 0 and row 1 in slot 1: -1 means "none here", not "no more"
    start, end, _ = run([0, 1, 2], [10, 30, 5], [0, 0, 0], [[], [], [-1, 1]])
    assert start[2] == 30 and end[2] == 35


def test_ops_run_one_after_another():
    start, end, _ = run([0, 1], [10, 5], [0, 0], [[], []], op=[0, 1])
    assert start[1] == 10                                   # op 1 has no dependency, yet waits for op 0


def test_stalls_blame_the_level_at_the_root_of_the_wait():
    # DRAM (ch 0) -> SRAM (ch 1) -> compute: the SRAM copy only relays a late DRAM tile, so DRAM is blamed.
    kind = np.array([LOAD, LOAD, COMPUTE, STORE], I)
    level = np.array([0, 1, -1, 1], I)
    start, end, dep = run([0, 1, 2, 1], [100, 4, 20, 4], [0, 0, 0, 0], [[], [0], [1], [2]])
    span, busy, other, stall = attribute(kind, level, np.array(start, I), np.array(end, I), dep,
                                         np.array([0, 4], I), 2)
    assert span[0] == 128 and busy[0] == 20 and other[0] == 0
    # the 104-cycle wait before the compute is DRAM's (the SRAM copy started the moment DRAM delivered);
    # the 4-cycle tail after it is the store into SRAM
    assert stall[0].tolist() == [104, 4]
    assert busy[0] + stall[0].sum() + other[0] == span[0]


def stalls(kind, level, resource, occupancy, deps):
    start, end, dep = run(resource, occupancy, [0] * len(kind), deps)
    span, busy, other, stall = attribute(np.array(kind, I), np.array(level, I), np.array(start, I), np.array(end, I),
                                         dep, np.array([0, len(kind)], I), 2)
    assert busy[0] + stall[0].sum() + other[0] == span[0]
    return stall[0].tolist(), int(other[0])


def test_the_dependency_that_ended_last_is_blamed_wherever_it_is_listed():
    # row 0 (DRAM, ends at 100) is listed before row 1 (SRAM, ends at 30): the wait is DRAM's
    assert stalls([LOAD, LOAD, COMPUTE], [0, 1, -1], [0, 1, 2], [100, 30, 10], [[], [], [0, 1]]) == ([100, 0], 0)
    # and listed after it
    assert stalls([LOAD, LOAD, COMPUTE], [1, 0, -1], [1, 0, 2], [30, 100, 10], [[], [], [0, 1]]) == ([100, 0], 0)


def test_a_tie_is_blamed_on_the_dependency_listed_first():
    assert stalls([LOAD, LOAD, COMPUTE], [1, 0, -1], [1, 0, 2], [40, 40, 10], [[], [], [0, 1]]) == ([0, 40], 0)
    assert stalls([LOAD, LOAD, COMPUTE], [0, 1, -1], [0, 1, 2], [40, 40, 10], [[], [], [0, 1]]) == ([40, 0], 0)


def test_a_tail_store_into_dram_is_dram_s_stall():
    assert stalls([LOAD, COMPUTE, STORE], [1, -1, 0], [1, 2, 0], [5, 10, 25], [[], [0], [1]]) == ([25, 5], 0)


def gemm_on_tpu(double: bool):
    b = Builder("gemm")
    y = b.node("MatMul", [b.input("x", (256, 2048)), b.weight("w", (2048, 256))])
    arch = load_arch("tpu_v1")
    ir = compile_graph(b.build([y]), Options(dtype=DType.int8))
    op = ir.ops[0]
    full = op.loops
    step = (("m", 256), ("n", 256), ("k", 256))
    mapping = Mapping(op=op.name, signature="", unit="mxu", loops=full, dataflow="ws", levels=(
        LevelTile("ddr3", full, ()), LevelTile("weight_fifo", step, ("k",), double_buffered=double),
        LevelTile("accumulators", step, (), double_buffered=double)))
    (result,), timeline = run_tiles(ir, arch, {op.name: mapping})
    return result, timeline


def test_double_buffering_overlaps_loading_with_computing():
    single, _ = gemm_on_tpu(double=False)
    double, timeline = gemm_on_tpu(double=True)
    assert single.bytes_by_level == double.bytes_by_level   # the same bytes, moved at different times
    dram = double.level_seconds["ddr3"] * 700e6
    # double-buffered: DRAM streams the next weight tile while the array computes this one
    assert double.cycles < dram + double.compute_cycles
    assert single.cycles > double.cycles
    # single-buffered: each tile's DRAM load waits for the array to take the tile before (256 cycles of its
    # 1,022); only that compute's skew and drain (766) run under the load, and the last tile's after it
    assert single.cycles >= dram + 8 * 256 + 766


def test_partial_sums_spill_when_k_is_split_outside_the_output_tile():
    b = Builder("gemm")
    y = b.node("MatMul", [b.input("x", (512, 512)), b.weight("w", (512, 512))])
    arch = load_arch("tpu_v1")
    ir = compile_graph(b.build([y]), Options(dtype=DType.int8))
    op = ir.ops[0]
    step = (("m", 256), ("n", 256), ("k", 256))

    def traffic(order):
        mapping = Mapping(op=op.name, signature="", unit="mxu", loops=op.loops, dataflow="ws", levels=(
            LevelTile("ddr3", op.loops, ()), LevelTile("accumulators", step, order)))
        (result,), timeline = run_tiles(ir, arch, {op.name: mapping})
        program = timeline.code.program
        reloads = program[(program["kind"] == LOAD) & (program["operand"] == -2)]
        return result, int(reloads["bytes"].sum())

    (stationary, none), (spilling, reloaded) = traffic(("m", "n", "k")), traffic(("k", "m", "n"))
    out = 512 * 512                                         # int8 outputs
    assert stationary.bytes_written_by_level["unified_buffer"] == out and none == 0
    # k outermost: the first k half writes int32 partial sums out, the second half reads them back
    assert spilling.bytes_written_by_level["unified_buffer"] == out + 4 * out
    assert reloaded == 2 * 4 * out            # read back out of the Unified Buffer and of the accumulators
    assert spilling.cycles > stationary.cycles
