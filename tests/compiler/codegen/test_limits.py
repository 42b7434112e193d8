"""Counts that do not fit are an error, never a wrapped number, and are refused before memory is spent on them."""
import tracemalloc

import numpy as np

import pytest

import accelsim
from compiler.dtypes import DType
from compiler.errors import UserError


def test_a_huge_gemm_is_refused_by_the_engine_and_priced_by_the_roofline(tmp_path):
    topology = tmp_path / "big.csv"
    # 1e8 x 1e8 outputs (3.2e17 bits, under the 2^62-bit tensor limit) over k = 1e9: 1e25 MACs
    topology.write_text("Layer,M,N,K,\nbig,100000000,100000000,1000000000,\n")
    tracemalloc.start()
    try:
        with pytest.raises(UserError, match=r"'big': its mapping walks [0-9,]+ tile steps .*at most 2,000,000 per op"):
            accelsim.run(topology, arch="systolic_32x32")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 << 20
    (op,) = accelsim.run(topology, arch="systolic_32x32", fidelity="roofline").ops
    assert op.macs == 10**25 and op.cycles > 0 and op.seconds > 0          # exact, not wrapped


def test_a_billion_cubed_gemm_is_refused_at_import_naming_its_output(tmp_path):
    topology = tmp_path / "big.csv"
    topology.write_text("Layer,M,N,K,\nbig,1000000000,1000000000,1000000000,\n")    # 1e18 fp32 outputs
    for fidelity in ("tile", "roofline"):
        with pytest.raises(UserError, match=r"output 'big' of shape \[1, 1000000000, 1000000000\] holds "
                                            r"1,000,000,000,000,000,000 fp32 elements"):
            accelsim.run(topology, arch="systolic_32x32", fidelity=fidelity)


def test_a_dimension_of_two_to_the_forty_is_refused_before_its_tiles_are_built():
    from compiler.builder import Builder

    b = Builder("huge")
    y = b.node("MatMul", [b.input("x", (1 << 40, 64)), b.weight("w", (64, 64))])
    tracemalloc.start()
    try:
        with pytest.raises(UserError, match="'matmul'.*does not fit"):
            accelsim.run(b.build([y]), arch="tpu_v1")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 << 20


def test_a_long_loop_of_identical_tiles_is_simulated_folded_and_a_third_long_one_refused():
    from compiler.builder import Builder

    b = Builder("huge")
    y = b.node("MatMul", [b.input("x", (1 << 40, 64)), b.weight("w", (64, 64))])
    tall = b.build([y])
    b = Builder("deep")
    y = b.node("MatMul", [b.input("x", (1 << 30, 1 << 26)), b.input("w", (1 << 26, 1 << 26))])
    deep = b.build([y])
    tracemalloc.start()
    try:
        # 2^40 rows of x in identical tiles: the outer loop folds (compiler.codegen.fold), the rest is 64 x 64
        (op,) = accelsim.run(tall, arch="h100").ops
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        # folded along x's rows and w's columns (compiler.codegen.fold.MAX_FOLDS), each tile still sums 2^26 terms
        with pytest.raises(UserError, match=r"'matmul': its mapping walks [\d,]+ tile steps \([\d,]+ with loops"):
            accelsim.run(deep, arch="h100")
        _, refused = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 << 20 and refused < 256 << 20
    assert op.macs == (1 << 40) * 64 * 64 <= op.work
    assert op.bytes_read_by_level["hbm3"] >= (1 << 40) * 64 * DType(op.dtype).bits // 8   # x leaves HBM once
    (bound,) = accelsim.run(tall, arch="h100", fidelity="roofline").ops
    assert op.cycles >= bound.cycles


def test_a_long_context_builds_shape_only_without_its_tables():
    # a 65,536-token causal mask is 32 GiB of float64: simulation needs only its shape
    tracemalloc.start()
    try:
        result = accelsim.run("gpt2", arch="h100", seq=65536, max_positions=65536, layers=1, fidelity="roofline")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.seconds > 0 and peak < 1 << 30
    _, out = accelsim.evaluate("gpt2", seq=8, layers=1)                # numerics still get the tables
    assert np.isfinite(out["logits"]).all()
