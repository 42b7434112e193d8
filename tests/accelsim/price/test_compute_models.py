"""SIMT, SIMD and vector compute models: cycle counts worked by hand, waves and tails, occupancy, and the
roofline floor over random shapes and mappings on every GPU and CPU preset."""
import dataclasses
import math
import re
import warnings

import numpy as np
import pytest

import accelsim
from accelsim.arch import ArchError, ArchKind, load_arch, preset_names
from accelsim.price import simd, simt
from accelsim.price.compute import matrix_cycles, vector_cycles
from compiler.targeting import gemm_parts, widen
from compiler.targeting import pick_unit
from compiler.builder import Builder
from compiler.dtypes import DType
from compiler.errors import MappingError
from compiler.ir import OpKind
from compiler.mapping import LevelTile, Mapping, Spatial, gemm_view
from compiler.compile import Options, compile_graph

GPUS = ["gtx580", "v100", "a100", "h100", "h200"]
LAUNCH = 3e-6  # the GPU presets' launch_overhead


def gemm_mapping(arch, m, n, k, dtype="bf16", block=None, units=None, buffered=True, level="l1_shared"):
    """A MatMul mapping as compiler.map draws one: the innermost tile is a step, `block` per instance
    side by side over the `units` factors ({dim: factor}, or an int on m)."""
    units = {"m": units} if isinstance(units, int) else units or {}
    levels = [LevelTile(arch.memory[0].name, (("m", m), ("n", n), ("k", k)), ("m", "n", "k"))]
    if block:
        step = tuple(min(e, t * units.get(d, 1)) for d, e, t in zip("mnk", (m, n, k), block))
        levels.append(LevelTile(level, tuple(zip("mnk", step)), ("m", "n", "k"), buffered))
    signature = (f"einsum|MatMul|input:{dtype}:{m}x{k};weight:{dtype}:{k}x{n}|{dtype}:{m}x{n}| [m,k] * [k,n]"
                 f"|m{m},n{n},k{k}")
    return Mapping(op="mm", signature=signature, unit="u", loops=(("m", m), ("n", n), ("k", k)),
                   levels=tuple(levels), spatial=tuple(Spatial(d, "units", f) for d, f in units.items()),
                   parts=(("m", "m"), ("n", "n"), ("k", "k")))


def peak_cycles(m, n, k, unit, arch, dtype):
    """The roofline's compute bound in arch cycles: MACs / (instances x MACs per cycle x the unit's clock under
    load)."""
    return m * n * k / unit.peak_per_second(DType(dtype)) * unit.clock_hz / unit.working_clock_hz * arch.clock_hz


def at_boost(name):
    """The preset with its units priced at their boost clocks: the worked examples below count cycles there (the
    clock under load, `sustained_clock`, only rescales them: test_sustained_clock_rescales_the_work)."""
    arch = load_arch(name)
    return dataclasses.replace(arch, compute=tuple(dataclasses.replace(u, sustained_clock_hz=0.0)
                                                   for u in arch.compute))


# -- SIMT, by hand ---------------------------------------------------------------------------------

def test_a100_worked_example():
    # 4096^3 bf16, default 128x128x32 blocks: 1,024 blocks over 108 SMs, 2 resident (96 regs x 256 threads:
    # 65,536 // 24,576 = 2), so 5 waves of 216, the busiest SM running 10 blocks: efficiency 1,024 / 1,080.
    arch = at_boost("a100")
    kernel = simt.kernel(4096, 4096, 4096, arch.matrix, arch, None, DType.bf16)
    assert kernel.block == (128, 128, 32) and (kernel.threads, kernel.registers) == (256, 96)
    assert (kernel.stages, kernel.shared_bytes, kernel.occupancy) == (3, 3 * 256 * 32 * 2, 2)
    assert kernel.waves == 5 and kernel.efficiency[0] == pytest.approx(0.948148, abs=1e-6)
    assert kernel.ideal[0] == 10 * 128 * 512      # 10 blocks x 128 K-tiles x 128*128*32 / 1,024 cycles
    # The K loop is compute-bound (max(2 x 512, (212 + 512) / 3) = 1,024 per step of 2 blocks); each of
    # the 5 waves exposes 212 cycles of L2 latency and one 128 x 128 fp32 epilogue through the 128.01
    # B/cycle shared port (511.94); launch 3 us = 4,230.
    exposed = 5 * (212 + 65536 / (180.5e9 / 1.41e9))
    assert kernel.cycles[0] == math.ceil(655_360 + exposed) + 4230 == 663_210


@pytest.mark.parametrize("name, dtype, expected", [
    # GTX 580 fp32 on CUDA cores at the 1,544 MHz hot clock: 4 blocks of 128x128x32, 1 per SM; a 32 KiB
    # stage leaves room for one in 48 KiB, so no overlap: 2 K-tiles x (400 + 16,384) hot cycles after the
    # 400-cycle L2 latency (200 core cycles), epilogue 65,536 B / 63.99 B = 1,024.2: 34,992.2 hot cycles
    # = 17,497 core cycles, plus 3 us = 2,316.
    ("gtx580", "fp32", 17_497 + 2_316),
    # V100 fp16: t_k = 128*128*32 / 512 = 1,024; 2 stages hide the 212-cycle latency ((212 + 1,024) / 2
    # = 618 < 1,024): 212 + 8 x 1,024 + 512.1 = 8,916.1 -> 8,917, plus 3 us = 4,590.
    ("v100", "fp16", 8_917 + 4_590),
    # H100 bf16: t_k = 256, 4 stages: 212 + 8 x max(256, 117) + 512.0 (65,536 B / 127.98 B) = 2,772.1,
    # plus 3 us = 5,490.
    ("h100", "bf16", 2_773 + 5_490),
    ("h200", "bf16", 2_773 + 5_490),
    # H100 fp32 on the 1,980 MHz CUDA cores: t_k = 4,096; latency 212 x 1,980 / 1,830 = 229.4; epilogue
    # 65,536 / 118.3 = 554.1: 33,551.4 unit cycles = 31,009.7 arch cycles -> 31,010, plus 5,490.
    ("h100", "fp32", 31_010 + 5_490),
])
def test_small_gemm_by_hand(name, dtype, expected):
    arch = at_boost(name)
    unit = arch.matrix_for(DType(dtype))
    assert matrix_cycles([256], [256], [256 if name != "gtx580" else 64], unit, arch, None, dtype)[0] == expected


def test_gtx580_runs_fma_on_cuda_cores():
    # No tensor cores: the only matrix unit is 32 FP32 FMAs per SM per hot clock; fp16 has no path.
    arch = load_arch("gtx580")
    (unit,) = arch.matrix_units
    assert unit.peak_per_cycle(DType.fp32) == 32 and unit.clock_hz == 2 * arch.clock_hz
    assert not unit.supports(DType.fp16)
    kernel = simt.kernel(128, 128, 32 * 64, unit, arch, None, "fp32")
    assert kernel.ideal[0] == 64 * 128 * 128 * 32 / 32   # 64 K-tiles of 16,384 FMA cycles each
    with pytest.raises(ArchError, match="does not support fp16"):
        simt.kernel(128, 128, 128, unit, arch, None, "fp16")


def test_fp8_doubles_bf16_on_h100():
    arch = load_arch("h100")
    bf16, fp8 = (simt.kernel(8192, 8192, 8192, arch.matrix, arch, None, d) for d in ("bf16", "fp8"))
    assert bf16.ideal[0] == 2 * fp8.ideal[0]
    assert 1.5 < bf16.cycles[0] / fp8.cycles[0] < 2    # latency, epilogue and launch do not halve


def test_tail_effect():
    # 108 blocks fill one wave of the A100; a 109th makes the busiest SM run two: nearly twice the time.
    arch = load_arch("a100")
    m = np.array([128 * 108, 128 * 109])
    kernel = simt.kernel(m, [128, 128], [4096, 4096], arch.matrix, arch, None, "bf16")
    assert list(kernel.blocks) == [108, 109] and list(kernel.efficiency) == [1.0, 109 / 216]
    assert kernel.ideal[1] == 2 * kernel.ideal[0]
    full, tail = (matrix_cycles([x], [128], [4096], arch.matrix, arch, None, "bf16")[0] for x in m)
    assert 1.9 < tail / full < 2


def test_a_clipped_away_step_costs_nothing_and_warns_nothing():
    # a ragged edge leaves rows with no columns (the loop nest is rectangular, the data is not)
    arch = load_arch("h100")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel = simt.kernel(np.array([4096, 4096]), np.array([512, 0]), np.array([32, 32]), arch.matrix, arch, None,
                             "bf16")
    assert list(kernel.blocks)[1] == 0 and kernel.efficiency[1] == 1.0 and kernel.ideal[1] == 0


def test_launch_paid_once_per_kernel():
    arch = at_boost("a100")
    one = matrix_cycles([1024], [1024], [1024], arch.matrix, arch, None, "bf16")
    two = matrix_cycles([1024, 1024], [1024] * 2, [1024] * 2, arch.matrix, arch, None, "bf16")
    # 64 then 128 blocks: one wave either way (2 per SM), paid with the launch on the first row.
    assert two[0] == one[0]
    assert two[1] == 32 * 512 and one[0] == 32 * 512 + math.ceil(212 + 65536 / (180.5e9 / 1.41e9)) + 4230


def test_shared_memory_hog_runs_one_block_per_sm():
    # 128x128x128 bf16: a 64 KiB stage; 3 stages would need 192 KiB > 164 KiB, so 2 are kept and the
    # 128 KiB block leaves room for no second one. Each block then exposes its own latency and epilogue.
    arch = at_boost("a100")
    m, n, k = 128 * 108 * 4, 128, 4096
    small = simt.kernel(m, n, k, arch.matrix, arch, gemm_mapping(arch, m, n, k, block=(128, 128, 32)), "bf16")
    hog = simt.kernel(m, n, k, arch.matrix, arch, gemm_mapping(arch, m, n, k, block=(128, 128, 128)), "bf16")
    assert (small.occupancy, hog.occupancy) == (2, 1) and (hog.stages, hog.shared_bytes) == (2, 128 * 1024)
    assert hog.ideal[0] == small.ideal[0]
    assert hog.cycles[0] > small.cycles[0]
    # The hog's 4 waves each pay 212 + 2 x 128 x 128 x 4 B / 128.01 B/cycle of latency and epilogue:
    exposed = 4 * (212 + 65536 / (180.5e9 / 1.41e9))
    assert hog.cycles[0] == math.ceil(hog.ideal[0] + exposed) + arch.cycles(LAUNCH)


def test_one_stage_exposes_latency_every_k_tile():
    # Not double-buffered: each K-tile waits the 212-cycle L2 latency, 128 K-tiles x (512 + 212) per block.
    arch = at_boost("a100")
    mapping = gemm_mapping(arch, 128, 128, 4096, block=(128, 128, 32), buffered=False)
    kernel = simt.kernel(128, 128, 4096, arch.matrix, arch, mapping, "bf16")
    assert kernel.stages == 1
    assert kernel.cycles[0] == math.ceil(212 + 128 * 724 + 65536 / (180.5e9 / 1.41e9)) + arch.cycles(LAUNCH)


def test_big_block_threads_and_registers():
    # 128 x 256: 32,768 outputs at 64 a thread = 512 threads of 96 registers, 49,152 per block: one fits.
    arch = load_arch("h100")
    mapping = gemm_mapping(arch, 4096, 4096, 4096, block=(128, 256, 64))
    kernel = simt.kernel(4096, 4096, 4096, arch.matrix, arch, mapping, "bf16")
    assert (kernel.block, kernel.threads, kernel.registers, kernel.occupancy) == ((128, 256, 64), 512, 96, 1)


def test_units_factor_limits_sms():
    # A step of 40 blocks side by side on m: 40 SMs of V100's 80 busy, 10 blocks of 8 K-tiles each.
    arch = load_arch("v100")
    mapping = gemm_mapping(arch, 5120, 1280, 256, "fp16", block=(128, 128, 32), units=40)
    kernel = simt.kernel(5120, 1280, 256, arch.matrix, arch, mapping, "fp16")
    assert kernel.block == (128, 128, 32) and kernel.sms == 40
    assert kernel.blocks[0] == 400 and kernel.ideal[0] == 10 * 8 * 1024


def test_gemm_parts_match_gemm_view():
    # The mapper records gemm_view's grouping: conv (grouped, in AlexNet), batched attention matmuls.
    from compiler.map import map_op

    arch = load_arch("a100")
    for model, options in (("alexnet", {}), ("bert_base", dict(layers=1, seq=16))):
        ir = compile_graph(accelsim.load_model(model, **options), Options(dtype=DType.bf16))
        for op in (op for op in ir.ops if op.kind == OpKind.einsum):
            mapping = map_op(op, arch, lambda m: 0.0, budget=1, cache=None)
            view = gemm_view(op)
            assert gemm_parts(mapping) == {d: p for p in "bmnk" for d in getattr(view, p)}


# -- SIMD, by hand ---------------------------------------------------------------------------------

def test_xeon_avx512_register_blocking():
    # 14 x 2 zmm accumulators of 16 fp32 lanes: mr x nr = 14 x 32. 100 rows pad to 112 on one core.
    arch = load_arch("xeon_spr")
    unit = arch.matrix_for(DType.fp32)
    blocking = simd.blocking(100, 64, 256, unit, arch, gemm_mapping(arch, 100, 64, 256, "fp32", units=1), "fp32")
    assert blocking.instruction == (1, 16, 1) and blocking.micro == (14, 32)
    assert blocking.cycles[0] == 112 * 64 * 256 // 32 == 57_344


def test_xeon_amx_tiles_pad_k():
    # A bf16 TMUL: C[16x16] += A[16x32] B[32x16]; 2 x 2 C tiles make a 32 x 32 micro-tile. K = 40 pads
    # to 64: 32 x 32 x 64 / 512 MACs per cycle = 128 cycles (peak would be 80). int8 tiles are 64 deep.
    arch = load_arch("xeon_spr")
    amx = arch.matrix_for(DType.bf16)
    one_core = gemm_mapping(arch, 32, 32, 40, units=1)
    assert simd.instruction_shape(amx, DType.bf16) == (16, 16, 32)
    assert simd.instruction_shape(amx, DType.int8) == (16, 16, 64)
    assert simd.matrix_cycles([32], [32], [40], amx, arch, one_core, "bf16")[0] == 128
    assert simd.matrix_cycles([32], [32], [40], amx, arch, one_core, "int8")[0] == 64


def test_xeon_whole_chip_at_peak():
    # 3,584^2 x 1,024 fp32 in 448 x 512 L2 blocks: 8 x 7 = 56 blocks, one per core, whole micro-tiles.
    arch = load_arch("xeon_spr")
    unit = arch.matrix_for(DType.fp32)
    mapping = gemm_mapping(arch, 3584, 3584, 1024, "fp32", block=(448, 512, 1024), units={"m": 8, "n": 7})
    cycles = simd.matrix_cycles([3584], [3584], [1024], unit, arch, mapping, "fp32")
    assert cycles[0] == 448 * 512 * 1024 // 32 == peak_cycles(3584, 3584, 1024, unit, arch, "fp32")
    # Half the cores: twice the time.
    half = dataclasses.replace(mapping, spatial=(Spatial("m", "units", 4), Spatial("n", "units", 7)))
    assert simd.matrix_cycles([3584], [3584], [1024], unit, arch, half, "fp32")[0] == 2 * cycles[0]


# -- vector units ----------------------------------------------------------------------------------

def test_vector_cycles_and_launch():
    # A100 ReLU over 2^20 bf16: 108 x 128 = 13,824 per cycle -> 75.85 -> 76, plus 3 us = 4,230 once.
    arch = load_arch("a100")
    assert list(vector_cycles([1 << 20, 1 << 20], arch.vector, DType.bf16, arch)) == [76 + 4230, 76]
    # H100's CUDA cores run at 1,980 MHz: 2^20 fp32 / (132 x 128) = 62.06 unit cycles = 57.36 arch cycles.
    h100 = load_arch("h100")
    assert vector_cycles([1 << 20], h100.vector, "fp32", h100)[0] == 58 + h100.cycles(LAUNCH)
    # No launch on a CPU; nothing to do costs nothing.
    xeon = load_arch("xeon_spr")
    assert vector_cycles([64 * 56 * 10], xeon.vector, "fp32", xeon)[0] == 20
    assert vector_cycles([0], arch.vector, "fp32", arch)[0] == 0


@pytest.mark.parametrize("name, dtype, widened", [
    ("gtx580", DType.fp16, DType.fp32),   # no half precision on Fermi's vector path
    ("a100", DType.int8, DType.fp16),     # the narrowest listed dtype at least as wide, first in file order
    ("tpu_v4", DType.int8, DType.bf16),
    ("xeon_spr", DType.bf16, DType.fp16),
    ("xeon_spr", DType.int8, DType.int8),
])
def test_vector_widening_rule(name, dtype, widened):
    arch = load_arch(name)
    assert widen(arch.vector, dtype) is widened
    b = Builder("relu")
    op = compile_graph(b.build([b.node("Relu", [b.input("x", (64,))])]), Options(dtype=dtype)).ops[0]
    assert pick_unit(op, arch) == (arch.vector, widened)   # the roofline uses the same rule
    per_cycle = arch.vector.count * arch.vector.peak_per_cycle(widened)
    assert vector_cycles([per_cycle * 7], arch.vector, dtype)[0] == 7 + round(
        arch.vector.launch_overhead_s * arch.vector.clock_hz)



def test_a_vector_unit_with_nothing_as_wide_refuses_the_dtype():
    # archs/npu4.yaml's shave lists fp16, fp32, int8, int32: fp64 would run at a rate it does not have
    npu4 = load_arch("npu4")
    with pytest.raises(MappingError, match=r"'shave' has no fp64 path and none as wide \(it computes fp16, "
                                           r"fp32, int8, int32\)"):
        widen(npu4.vector, DType.fp64)
    h100 = load_arch("h100")            # its CUDA cores list fp64 (33.5 TFLOPS, half the fp32 lanes)
    assert widen(h100.vector, DType.fp64) is DType.fp64
    tpu_v1 = load_arch("tpu_v1")        # activation: int32, int8
    assert widen(tpu_v1.vector, DType.fp8) is DType.int8      # as wide (8 bits): runs, with its note, as before
    # int64 index arithmetic (labels, positions) runs in the widest integer listed, as kernels index in 32 bits:
    # int32, not the narrowest dtype listed at all (H100's fp16, 4x the int32 rate)
    assert widen(tpu_v1.vector, DType.int64) is DType.int32 and widen(h100.vector, DType.int64) is DType.int32
    with pytest.raises(MappingError, match="'activation' has no fp64 path"):
        widen(tpu_v1.vector, DType.fp64)


def test_a_matmul_in_bool_is_refused_naming_the_dtypes_the_arch_computes():
    b = Builder("gemm", dtype=DType.bool)
    y = b.node("MatMul", [b.input("x", (8, 8)), b.weight("w", (8, 8))])
    op = compile_graph(b.build([y]), Options(dtype=DType.bool)).ops[0]
    with pytest.raises(MappingError, match=r"would multiply in bool.*tpu_v1 computes in int8, int16: run with "
                                           r"--dtype int8"):
        pick_unit(op, load_arch("tpu_v1"))


# -- the roofline floor, over random shapes and mappings -------------------------------------------

CPU_GPU = [name for name in preset_names() if load_arch(name).kind in (ArchKind.simt, ArchKind.simd)]


@pytest.mark.parametrize("name", CPU_GPU)
def test_never_faster_than_peak(name):
    arch = load_arch(name)
    rng = np.random.default_rng(7)
    model = simt if arch.kind is ArchKind.simt else simd
    for unit in arch.matrix_units:
        for dtype in unit.dtypes:
            for _ in range(20):
                m, n, k = (int(x) for x in rng.integers(1, 3000, 3))
                tile = tuple(int(rng.choice([16, 32, 64, 128, 256])) for _ in range(3))
                mapping = gemm_mapping(arch, m, n, k, dtype.value, block=tile,
                                       units=int(rng.integers(1, unit.count + 1)), buffered=bool(rng.integers(2)))
                for chosen in (mapping, None):
                    cycles = model.matrix_cycles(np.array([m]), np.array([n]), np.array([k]), unit, arch,
                                                 chosen, dtype)
                    assert cycles[0] >= peak_cycles(m, n, k, unit, arch, dtype) * (1 - 1e-9), (unit.name, m, n, k)


@pytest.mark.parametrize("name", GPUS)
def test_exact_tiles_without_overheads_meet_peak(name):
    # Zero latency, an unbounded shared port and no launch leave only the MMAs: full waves hit peak.
    arch = load_arch(name)
    memory = tuple(dataclasses.replace(lv, latency_cycles=0, bandwidth_bytes_per_s=math.inf) for lv in arch.memory)
    units = tuple(dataclasses.replace(u, launch_overhead_s=0.0) for u in arch.compute)
    ideal = dataclasses.replace(arch, memory=memory, compute=units)
    for unit in ideal.matrix_units:
        for dtype in unit.dtypes:
            m, n, k = 128 * unit.count * 2, 128, 32 * 16
            cycles = simt.matrix_cycles([m], [n], [k], unit, ideal, None, dtype)
            assert cycles[0] == math.ceil(peak_cycles(m, n, k, unit, ideal, dtype) - 1e-6), (unit.name, dtype)


def test_sustained_clock_rescales_the_work():
    """A unit's work is priced at its clock under load (the H100's tensor cores: 1,690 of 1,830 MHz), its peak
    quoted at its boost clock; the launch, a time, is not rescaled."""
    arch, boost = load_arch("h100"), at_boost("h100")
    assert arch.matrix.working_clock_hz == 1.69e9 and boost.matrix.working_clock_hz == 1.83e9
    assert arch.matrix.peak_per_second(DType.bf16) == boost.matrix.peak_per_second(DType.bf16)
    hot, cool = (simt.kernel(8192, 8192, 8192, a.matrix, a, None, "bf16") for a in (boost, arch))
    assert cool.ideal[0] == hot.ideal[0]                    # unit cycles: the same MMAs
    work = (cool.cycles[0] - arch.cycles(LAUNCH), hot.cycles[0] - boost.cycles(LAUNCH))
    assert work[0] / work[1] == pytest.approx(1830 / 1690, rel=1e-4)


def test_sustained_clock_above_the_clock_is_refused(tmp_path):
    text = load_arch("h100").source_file.read_text().replace("sustained_clock: 1690 MHz", "sustained_clock: 2 GHz")
    path = tmp_path / "hot.yaml"
    path.write_text(text)
    with pytest.raises(ArchError, match=r"compute\[0\]\.sustained_clock.*above the unit's clock \(1830 MHz\)"):
        load_arch(path)


# -- schema keys the models read -------------------------------------------------------------------

def test_schema_keys(tmp_path):
    assert load_arch("h100").matrix.pipeline_stages == 4 and load_arch("a100").matrix.launch_overhead_s == LAUNCH
    amx = load_arch("xeon_spr").matrix
    assert (amx.micro_kernel.rows, amx.micro_kernel.register_rows, amx.micro_kernel.register_bytes) == (2, 16, 64)
    text = (load_arch("xeon_spr").source_file).read_text()
    for old, new, fragment in (
            ("macs_per_cycle: {bf16: 512, int8: 1024}",
             "macs_per_cycle: {bf16: 512, int8: 1024}\n    pipeline_stages: 2",
             "compute[0].pipeline_stages: 2 makes no sense on a simd matrix unit"),
            ("register_rows: 16, register_bytes: 64 B", "register_rows: 16, register_bytes: 64 GB/s",
             "compute[0].micro_kernel.register_bytes"),
            ("register_rows: 16,", "register_rows: 0,", "compute[0].micro_kernel.register_rows"),
            ("    count: 56\n", "    count: 56\n    launch_overhead: soon\n", "compute[0].launch_overhead")):
        assert old in text
        path = tmp_path / "bad.yaml"
        path.write_text(text.replace(old, new, 1))
        with pytest.raises(ArchError, match=re.escape(fragment)):
            load_arch(path)
