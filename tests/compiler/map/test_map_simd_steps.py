"""SIMD (CPU) steps: a step too big for l1d gives up n, then m, down to one micro-tile before k
(compiler.map.targets.SIMD_SHRINK), as a BLAS keeps C's micro-tile in registers and a k x nr sliver of B in L1.

The micro-tiles and the l1d size are worked out here by hand from the arch files, not read from the mapper.
Before the rule, 2048^3 fp32 on the EPYC host walked 2.3 M steps of k = 1 (11.5 M Program rows, 3.9 GB).
"""
import pytest

from accelsim.arch import load_arch
from accelsim.sim.build import build
from accelsim.validate.cases import parse
from compiler.codegen.nest import Nest

EPYC = "validation/cpu/host_amd_epyc/arch.yaml"   # l1d 32 KiB; avx2_fma: 6 rows x 2 cols of 32 B registers
L1D_BYTES = 32 * 1024


def step_of(key: str, arch):
    case = parse(key)
    compiled = build(case.graph(), arch, dtype=case.dtype)
    (mapping,) = [m for m in compiled.mappings.values() if m.signature != "vector"]
    return mapping, dict(mapping.levels[-1].tile)


@pytest.mark.parametrize("key, micro_m, micro_n, element_bytes", [
    ("gemm 2048 2048 2048 fp32", 6, 2 * 32 // 4, 4),      # 6 x 16: 2 registers of 8 fp32 accumulators
    ("gemm 1024 1024 1024 fp32", 6, 2 * 32 // 4, 4),
    ("gemm 1024 1024 1024 fp64", 6, 2 * 32 // 8, 8),      # 6 x 8: 2 registers of 4 fp64 accumulators
    ("gemm 4096 256 256 fp32", 6, 2 * 32 // 4, 4),
])
def test_epyc_steps_keep_whole_micro_tiles_and_a_deep_k(key, micro_m, micro_n, element_bytes):
    mapping, step = step_of(key, load_arch(EPYC))
    m, n, k = step["m"], step["n"], step["k"]
    assert m % micro_m == 0 and n % micro_n == 0, step
    assert k >= 16, f"{key}: a step of k = {k} (the l1d holds far more)"
    # the step fits l1d: A and B double-buffered, C's partial sums accumulating in place
    assert (2 * (m * k + k * n) + m * n) * element_bytes <= L1D_BYTES, step
    # a few hundred thousand steps at most (ragged outer tiles add a few): k = 1 walked millions
    size = dict(mapping.loops)
    assert Nest(mapping).steps <= 1.1 * -(-size["m"] // m) * -(-size["n"] // n) * -(-size["k"] // k)


def test_a_micro_tile_goes_only_when_nothing_else_fits():
    """fp64 on the EPYC host: the step is 6 rows by 8 columns at least; a 2 x 2 fp32 GEMM is smaller than one
    micro-tile and is mapped whole."""
    _, step = step_of("gemm 512 512 512 fp64", load_arch(EPYC))
    assert step["m"] >= 6 and step["n"] >= 8, step
    _, small = step_of("gemm 2 2 2 fp32", load_arch(EPYC))
    assert small == {"m": 2, "n": 2, "k": 2}
