"""Priced cycles never wrap: a count int64 cannot hold is an ArchError naming the file and key, not INT64_MIN
(numpy's cast of inf or of anything past 2^63, which made a DRAM of 1e-9 B/s faster than one of 34 GB/s)."""
from dataclasses import replace

import numpy as np
import pytest

from accelsim.arch import ArchError, load_arch
from accelsim.price.clock import CYCLE_LIMIT, to_arch_cycles, whole_cycles
from accelsim.price.compat import NATIVE
from accelsim.price.program import price
from accelsim.sim.build import mappings_for
from compiler.builder import Builder
from compiler.codegen import generate
from compiler.compile import Options, compile_graph
from compiler.program import COMPUTE


def test_whole_cycles_refuses_what_int64_cannot_hold():
    assert whole_cycles([0.2, 7.0, 2.0 ** 61], "x").tolist() == [1, 7, 2 ** 61]
    for bad in (np.inf, np.nan, 2.0 ** 62, 1e38):
        with pytest.raises(ArchError, match="memory.0..bandwidth: one tile would take"):
            whole_cycles([1.0, bad], "memory[0].bandwidth")


def _gemm_on(arch):
    b = Builder("gemm", dtype=arch.native_dtype)
    y = b.node("MatMul", [b.input("x", (64, 64)), b.weight("w", (64, 64))])
    ir = compile_graph(b.build([y]), Options(dtype=arch.native_dtype, arch=arch))
    return ir, generate(ir, arch, mappings_for(ir, arch))


def _with_dram(arch, bytes_per_s):
    return replace(arch, memory=(replace(arch.memory[0], bandwidth_bytes_per_s=bytes_per_s),) + arch.memory[1:])


def test_a_dram_of_1e_minus_9_bytes_per_second_is_refused_not_wrapped():
    # past the schema (which refuses it at load): 4,096 B at 1e-9 B/s on a 100 MHz clock is 4e20 cycles > 2^63
    arch = load_arch("systolic_8x8")
    ir, code = _gemm_on(arch)
    with pytest.raises(ArchError, match=r"systolic_8x8.yaml: memory\[0\].bandwidth \(dram\): .* at 1e-09 B/s"):
        price(ir, _with_dram(arch, 1e-9), code, NATIVE)


def test_rows_under_the_limit_that_add_up_past_it_are_refused():
    arch = load_arch("systolic_8x8")
    ir, code = _gemm_on(arch)
    program = code.program
    dram = (program["kind"] != COMPUTE) & (program["level"] == 0)
    assert dram.sum() >= 2
    # the largest DRAM transfer takes 0.9 x 2^62 cycles: every row fits, two of them together do not
    slow = arch.clock_hz * program["bytes"][dram].max() / (0.9 * CYCLE_LIMIT)
    with pytest.raises(ArchError, match=r"op 'matmul' would take .* cycles, more than the 2\^62"):
        price(ir, _with_dram(arch, slow), code, NATIVE)


def test_a_unit_clock_of_1e_minus_30_hz_is_refused_not_wrapped():
    arch = load_arch("tpu_v1")
    unit = replace(arch.matrix, clock_hz=1e-30)
    with pytest.raises(ArchError, match=r"tpu_v1.yaml: compute unit 'mxu' at 1e-30 Hz"):
        to_arch_cycles(np.array([256.0]), unit, arch)
    assert to_arch_cycles(np.array([256.0]), arch.matrix, arch).tolist() == [256]
