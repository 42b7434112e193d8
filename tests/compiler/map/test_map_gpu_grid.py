"""GPU GEMMs as a block scheduler runs them: the mapper spreads a step's thread blocks over m and n together so every
SM is busy (compiler.map.space._tiled), and accelsim.price.simt deals the whole grid over the SMs, so the steps of a
kernel cost together what the kernel costs as one row, whatever the steps' shape."""
import dataclasses
import math

import numpy as np
import pytest

from accelsim.arch import load_arch
from accelsim.price import simt
from accelsim.price.cost import reporter
from compiler.dtypes import DType
from compiler.map import map_op
from compiler.map.space import _tiled, candidates
from compiler.targeting import units_used
from tests.compiler.map.test_map import gemm


def test_tiled_busies_every_sm_with_the_fewest_steps():
    # 8192^3 in 256 x 128 blocks: 32 x 64 of them. Along m first gives 32 x 3 = 96 SMs; together, 108 = 12 x 9
    # (or another split of 108), each step 1/108 of the grid's width.
    groups = {"b": [], "m": ["m"], "n": ["n"], "k": ["k"]}
    extents = {"m": 8192, "n": 8192, "k": 8192}
    spread = _tiled(groups, extents, {"m": 256, "n": 128, "k": 32}, 108)
    assert math.prod(spread.values()) == 108
    steps = math.ceil(32 / spread.get("m", 1)) * math.ceil(64 / spread.get("n", 1))
    best = min(math.ceil(32 / fm) * math.ceil(64 / fn) for fm in range(1, 33) for fn in range(1, 65) if fm * fn == 108)
    assert steps == best
    # where the grid is smaller than the SMs, all of it
    assert _tiled(groups, {"m": 512, "n": 256, "k": 64}, {"m": 128, "n": 128, "k": 64}, 108) == {"m": 4, "n": 2}


@pytest.mark.parametrize("m, n, k", [(16384, 12288, 12288), (8192, 8192, 8192), (8192, 2048, 2048)])
def test_large_gemms_map_onto_every_sm(m, n, k):
    arch = load_arch("a100")
    op = gemm(m, n, k, DType.bf16)
    best = map_op(op, arch, reporter(arch, [op]), cache=None)
    assert units_used(best, arch.matrix) >= 104, best.text()


def test_a_kernels_steps_cost_what_the_kernel_does():
    """Priced step by step (the Program's rows) or as one row, a mapped GEMM's K loops sum to the same cycles: the
    grid is dealt over the SMs once, not per step (the launch, latency and epilogue are on the first row)."""
    arch = load_arch("a100")
    unit = arch.matrix
    for mapping in list(candidates(gemm(16384, 12288, 4096, DType.bf16), arch))[:6]:
        step = dict(mapping.levels[-1].tile)
        trips = [math.ceil(e / step[d]) for d, e in mapping.loops]
        rows = [np.array([min(step[d], e - i * step[d]) for i in range(t)], np.int64)
                for (d, e), t in zip(mapping.loops, trips)]
        m, n, k = np.meshgrid(*rows, indexing="ij")        # every step's (clipped) shape
        by_step = simt.kernel(m.ravel(), n.ravel(), k.ravel(), unit, arch, mapping, "bf16")
        whole = simt.kernel(16384, 12288, 4096, unit, arch, mapping, "bf16")
        # each row is rounded up to a whole cycle
        assert 0 <= by_step.cycles.sum() - whole.cycles.sum() <= m.size, mapping.text()


def test_dealing_the_grid_by_hand():
    # 16384 x 12288 x 4096 in 256 x 128 x 32 blocks: 64 x 96 = 6,144 blocks on 108 SMs, the busiest runs 57, one
    # at a time (256 x 128 fp32 accumulators take 512 threads of 96 registers: one block per SM): 57 x 128 K-tiles
    # of 256*128*32 / 1,024 = 1,024 cycles, however the mapping steps through them. Counted at the boost clock (the
    # clock under load only rescales them: tests/accelsim/price/test_compute_models.py).
    arch = load_arch("a100")
    arch = dataclasses.replace(arch, compute=tuple(dataclasses.replace(u, sustained_clock_hz=0.0)
                                                   for u in arch.compute))
    mapping = next(c for c in candidates(gemm(16384, 12288, 4096, DType.bf16), arch)
                   if simt.kernel(16384, 12288, 4096, arch.matrix, arch, c, "bf16").block == (256, 128, 32)
                   and units_used(c, arch.matrix) == 108)
    kernel = simt.kernel(16384, 12288, 4096, arch.matrix, arch, mapping, "bf16")
    assert kernel.occupancy == 1 and kernel.waves == 57
    loop = 57 * 128 * 1024
    exposed = 57 * (212 + 256 * 128 * 4 / (180.5e9 / 1.41e9))
    assert kernel.cycles[0] == math.ceil(loop + exposed) + arch.cycles(3e-6)


def test_a_weight_that_fits_l2_streams_through_it():
    """64 x 7168 x 2048 fp8 on an H100: the whole op fits the L2, and staged as one L2 tile its 14.7 MB of weight
    all arrived before the first multiply. The mapper is offered the L2 tile cut along k (`_streamed`) and takes
    it, so the SMs compute on the first part while DRAM streams the rest."""
    from accelsim.sim.api import run
    from accelsim.validate import cases
    from compiler.program import COMPUTE, LOAD

    arch = load_arch("h100")
    op = gemm(64, 7168, 2048, DType.fp8)
    whole = dict(op.loops)
    l2 = [c.levels[1] for c in candidates(op, arch)]
    assert {lv.level for lv in l2} == {"l2"} and any(dict(lv.tile) == whole for lv in l2)
    assert any(lv.extent("k") < 2048 and lv.extent("n") == 7168 for lv in l2)
    best = map_op(op, arch, reporter(arch, [op]), cache=None)
    assert best.levels[1].extent("k") < 2048, best.text()

    case = cases.parse("gemm 64 7168 2048 fp8")
    timeline = run(case.graph(), arch=arch, dtype=case.dtype, caches="cold", trace=True).timeline
    rows = timeline.code.program
    dram = [lv.name for lv in arch.memory].index("hbm3")
    loads = (rows["kind"] == LOAD) & (rows["level"] == dram)
    computes = rows["kind"] == COMPUTE
    assert timeline.start[computes].min() < 0.7 * timeline.end[loads].max()
