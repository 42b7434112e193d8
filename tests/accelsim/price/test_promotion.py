"""A block-scaled GEMM's promotion (each block's partial sums scaled and added on the vector unit's fp32 lanes):
after the block's MMAs on a GPU, beside the array on a systolic target, the bound where the lanes are few."""
import math

import numpy as np
import pytest

import accelsim
from accelsim.arch import load_arch
from accelsim.price.compute import with_promotion
from accelsim.validate.cases import parse
from compiler.dtypes import DType
from compiler.targeting import widen
from tests.compiler.ops.test_ops_block_scaled import _einsum


def test_promotion_cycles_by_hand():
    """16,896 x 128 outputs over one block of 128 k on all 132 SMs: 2,162,688 promotions on 132 x 128 fp32 lanes
    = 128 cycles of the 1,980 MHz CUDA cores = 118.3 cycles of the 1,830 MHz arch clock, so 119, after the
    tensor cores' 512; on TPU v4 (a systolic array, its vector unit beside) a row takes the longer of the two;
    an Einsum without scales is never touched."""
    arch = load_arch("h100")
    unit = arch.matrix_units[0]
    op = _einsum(16896, 128, 128, 128)
    rows = (np.array([16896]), np.array([128]), np.array([128]))
    assert with_promotion(np.array([512]), *rows, op, unit, arch, None).tolist() == [512 + 119]
    plain = accelsim.build(parse("gemm 64 64 64 fp8").graph(), "h100", dtype="fp8").ir.ops[0]
    assert plain.scale_block == 0
    assert with_promotion(np.array([100]), *rows, plain, unit, arch, None).tolist() == [100]
    tpu = load_arch("tpu_v4")
    lanes = tpu.vector
    share = 16896 * 128 / (lanes.count * lanes.peak_per_cycle(widen(lanes, DType.fp32)))
    promotion = math.ceil(share * tpu.clock_hz / lanes.clock_hz)
    mxu = tpu.matrix_units[0]
    assert with_promotion(np.array([1]), *rows, op, mxu, tpu, None).tolist() == [promotion]
    assert with_promotion(np.array([promotion + 5]), *rows, op, mxu, tpu, None).tolist() == [promotion + 5]


def _h100_with_lanes(tmp_path, lanes: int):
    text = (accelsim.arch.presets_dir() / "h100.yaml").read_text()
    text = text.replace("ops_per_cycle: {fp32: 128,", f"ops_per_cycle: {{fp32: {lanes},")
    text = text.replace("name: h100", "name: h100_lanes")
    path = tmp_path / "h100_lanes.yaml"
    path.write_text(text)
    return str(path)


def test_scaled_gemm_reads_its_scales_and_pays_its_promotion(tmp_path):
    """DeepSeek-V3's 64 x 7168 x 2048 projection, operands cold: DRAM carries the fp8 operands and both scales
    (64 x 16 and 16 x 7168 fp32); on H100 the promotion (64 x 7168 x 16 = 7.3 M) is short beside the weight's
    load; with one fp32 lane per SM it takes 7.3 M / 132 cycles of the CUDA cores at least, and the kernel is that
    long."""
    case = parse("scaledgemm 64 7168 2048 128 fp8")
    gemm = accelsim.run(case.graph(), arch="h100", dtype=case.dtype, caches="cold").ops[0]
    assert gemm.ops == 64 * 7168 * 16
    stored = 64 * 2048 + 2048 * 7168 + 4 * (64 * 16 + 16 * 7168)
    assert gemm.bytes_by_level["hbm3"] >= stored
    plain = accelsim.run(parse("gemm 64 7168 2048 fp8").graph(), arch="h100", dtype="fp8", caches="cold").ops[0]
    assert abs(gemm.seconds - plain.seconds) < 0.25 * plain.seconds
    slow = accelsim.run(case.graph(), arch=_h100_with_lanes(tmp_path, 1), dtype=case.dtype, caches="cold").ops[0]
    floor = 64 * 7168 * 16 / 132 / 1.98e9
    assert floor <= slow.seconds < floor * 1.3 + plain.seconds


def test_promotions_cost_the_vector_units_energy():
    """Each promotion is one fp32 fused multiply-add on the CUDA cores: 64 x 7168 x 16 of them at 0.51 pJ, in the
    tile engine's energy and the roofline's alike; a plain GEMM spends none there."""
    case = parse("scaledgemm 64 7168 2048 128 fp8")
    want = 64 * 7168 * 16 * 0.51e-12
    for fidelity in ("tile", "roofline"):
        gemm = accelsim.run(case.graph(), arch="h100", dtype=case.dtype, fidelity=fidelity).ops[0]
        assert gemm.energy_j["cuda_cores"] == pytest.approx(want, rel=1e-9), fidelity
    plain = accelsim.run(parse("gemm 64 7168 2048 fp8").graph(), arch="h100", dtype="fp8").ops[0]
    assert "cuda_cores" not in plain.energy_j
