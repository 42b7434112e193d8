"""Each kernel's arithmetic intensity and the roof that binds it, and why its bound differs where it does."""
import pytest

import accelsim
from accelsim.arch import load_arch
from accelsim.results import roof
from accelsim.results.result import OpResult, Result
from accelsim.results.table import render
from compiler.dtypes import DType

ARCH = {"name": "toy", "kind": "systolic", "memory_levels": ["dram", "sram"], "peak_macs_per_second": 1e9,
        "peaks": {"pe:int8": 1e9, "vec:int8": 1e6}, "bandwidths": {"dram": 1e9, "sram": 1e10}}


def op(name, bound, macs=0, ops=0, dram=0, unit="pe", kernel="", seconds=1e-6, utilisation=0.5):
    return OpResult(name=name, node=name, op="Conv" if macs else "Relu", kind="einsum" if macs else "map",
                    shape=(1,), dtype="int8", rate_dtype="int8", unit=unit, macs=macs, ops=ops, bytes=dram,
                    bytes_by_level={"dram": dram, "sram": 5 * dram} if dram else {}, compute_seconds=seconds,
                    level_seconds={}, latency_seconds=0.0, seconds=seconds, cycles=1, bound=bound,
                    utilisation=utilisation, energy_j={}, kernel=kernel)


def toy(*ops):
    return Result(model={"name": "m", "batch": 1, "dtype": "int8"}, arch=ARCH, fidelity="tile", ops=list(ops))


def test_a_fused_op_counts_in_its_kernel_work_bytes_and_slowest_unit():
    # conv: 2,000 FLOP over 100 B; its epilogue 500 ops over 400 B on a 1 M op/s unit beside it
    (kernel,) = roof.kernels(toy(op("conv", "compute", macs=1000, dram=100),
                                 op("relu", "latency", ops=500, dram=400, unit="vec", kernel="conv")))
    assert (kernel.work, kernel.bytes, kernel.intensity) == (2500, 500, 5.0)
    assert kernel.compute_s == pytest.approx(500 / 1e6)        # the epilogue's unit, not the array's 1 us
    assert kernel.memory_s == pytest.approx(500 / 1e9)
    assert kernel.roof == "compute" and roof.why(kernel) is None


def test_the_roof_is_memory_below_the_machine_balance_and_the_table_says_why_a_bound_differs():
    # 2 FLOP/B against a balance of 2e9 / 1e9 = 2: memory at 1.9, compute at 2.1
    low, high = op("low", "compute", macs=950, dram=1000), op("high", "dram", macs=1050, dram=1000)
    kernels = {k.anchor.name: k for k in roof.kernels(toy(low, high))}
    assert kernels["low"].balance == pytest.approx(2.0)
    assert (kernels["low"].roof, kernels["high"].roof) == ("dram", "compute")
    assert "ran at 50% of its peak" in roof.why(kernels["low"])
    assert "compute-bound by roofline, but its dram transfers take longer" in roof.why(kernels["high"])
    text = render(toy(low, high), width=None)
    row = next(line for line in text.splitlines() if line.startswith("│low"))
    assert "1.9" in row and "dram" in row and "compute" in row
    assert "2 bound by something else:" in text and "  low: memory-bound by roofline" in text


def test_a_result_without_peaks_shows_no_roof():
    before = {"name": "toy", "kind": "systolic", "memory_levels": ["dram"]}      # no peaks, no bandwidths
    old = Result(model={"name": "m", "batch": 1, "dtype": "int8"}, arch=before, fidelity="tile",
                 ops=[op("conv", "compute", macs=1000, dram=100)])
    assert roof.kernels(old)[0].roof is None
    assert "roof (" not in render(old, width=None)


def test_the_roof_agrees_with_the_arch_file():
    # a second source: each unit's peak and the DRAM bandwidth from tpu_v1.yaml, not from the Result
    result = accelsim.run("resnet18", arch="tpu_v1", image=32)
    arch = load_arch("tpu_v1")
    units, dram = {u.name: u for u in arch.compute}, arch.memory[0]
    judged = [k for k in roof.kernels(result) if k.work]
    assert len(judged) > 10
    for kernel in judged:
        at_peak: dict[str, float] = {}
        for o in kernel.ops:
            per_s = units[o.unit].peak_per_second(DType(o.rate_dtype)) * (2 if o.macs else 1)
            at_peak[o.unit] = at_peak.get(o.unit, 0.0) + (2 * o.macs + o.ops) / per_s
        memory_s = sum(o.bytes_by_level.get(dram.name, 0) for o in kernel.ops) / dram.bandwidth_total
        assert kernel.roof == (dram.name if memory_s > max(at_peak.values()) else "compute"), kernel.anchor.name
    assert {k.roof for k in judged} == {"compute", dram.name}
