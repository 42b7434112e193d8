"""Hardware descriptions: every preset loads and hits its published peaks; every kind of mistake in a
file is an ArchError naming the file, the key path and the bad value."""
import dataclasses
from pathlib import Path

import pytest

from accelsim.arch import ArchError, Dataflow, ArchKind, UnitRole, load_arch, preset_names, presets_dir
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.ir import Role

PRESETS = sorted(presets_dir().glob("*.yaml"))
BASE = presets_dir() / "systolic_8x8.yaml"


def test_presets_found():
    names = {p.stem for p in PRESETS}
    assert {"xeon_spr", "gtx580", "v100", "a100", "h100", "h200", "tpu_v1", "tpu_v4",
            "fpga_ternary", "npu4", "systolic_8x8"} <= names
    assert preset_names() == sorted(names)


@pytest.mark.parametrize("path", PRESETS, ids=lambda p: p.stem)
def test_preset_loads(path):
    arch = load_arch(path.stem)
    assert arch == load_arch(path)  # by name and by path alike
    assert arch.name == path.stem
    assert arch.source_file == path.resolve()
    text = path.read_text()
    assert text.startswith("#") and "# Sources" in text.split("\nversion:")[0]  # sources cited up front
    assert arch.matrix.role is UnitRole.matrix and arch.vector.role is UnitRole.vector
    assert arch.native_dtype is arch.dtypes[0] and arch.matrix.supports(arch.native_dtype)
    for role in Role:
        assert arch.levels_holding(role), role
    assert arch.memory[0].capacity_total == max(level.capacity_total for level in arch.memory)
    if arch.kind in (ArchKind.systolic, ArchKind.ternary):
        assert arch.matrix.array is not None and arch.matrix.dataflows
    if arch.kind is ArchKind.simt:
        assert all(u.limits is not None for u in arch.matrix_units)


# (preset, dtype, published dense peak in TFLOPS or TOPS: 2 x MACs per second), REFERENCE.md
HEADLINES = [
    ("tpu_v1", DType.int8, 92), ("tpu_v4", DType.bf16, 275), ("tpu_v4", DType.int8, 275),
    ("h100", DType.bf16, 989.4), ("h100", DType.fp8, 1978.9), ("h100", DType.fp32, 66.9), ("h100", DType.fp64, 66.9),
    ("h200", DType.bf16, 989), ("a100", DType.bf16, 312), ("a100", DType.int8, 624), ("a100", DType.tf32, 156),
    ("a100", DType.fp32, 19.5), ("v100", DType.fp16, 125), ("v100", DType.fp32, 15.7), ("gtx580", DType.fp32, 1.58),
    ("npu4", DType.int8, 48), ("v100", DType.int8, 62),
    ("xeon_spr", DType.bf16, 115), ("xeon_spr", DType.int8, 229), ("xeon_spr", DType.fp32, 7.2),
]


@pytest.mark.parametrize("name, dtype, tera", HEADLINES, ids=lambda x: getattr(x, "value", str(x)))
def test_headline_peaks(name, dtype, tera):
    arch = load_arch(name)
    assert 2 * arch.matrix_for(dtype).peak_per_second(dtype) / 1e12 == pytest.approx(tera, rel=0.02)


def test_helpers_on_tpu_v1():
    arch = load_arch("tpu_v1")
    mxu = arch.matrix
    assert (mxu.array.rows, mxu.array.cols, mxu.array.weight_buffers) == (256, 256, 2)
    assert mxu.dataflows == (Dataflow.WS,)
    assert mxu.peak_per_cycle(DType.int8) == 65536
    assert mxu.energy_per_action(DType.int8) == pytest.approx(0.19e-12)
    assert arch.dtypes == (DType.int8, DType.int16)
    assert [l.name for l in arch.levels_holding(Role.weight)] == ["ddr3", "weight_fifo"]
    assert [l.name for l in arch.levels_holding(Role.output)] == ["unified_buffer", "accumulators"]
    assert arch.level("unified_buffer").capacity_total == 24 * 2**20
    assert arch.level("ddr3").bandwidth_total == 34e9
    assert arch.level("weight_fifo").latency_cycles == 1
    assert arch.interconnect.chip_to_chip is None and arch.power.tdp_w == 75
    with pytest.raises(ArchError, match="does not support fp32"):
        mxu.peak_per_cycle(DType.fp32)
    with pytest.raises(ArchError, match="no matrix unit supports bf16"):
        arch.matrix_for(DType.bf16)
    with pytest.raises(dataclasses.FrozenInstanceError):
        arch.clock_hz = 1.0


def test_helpers_on_h100():
    arch = load_arch("h100")
    assert arch.matrix_for(DType.fp32).clock_hz == 1980e6  # FP32 runs at the high-precision clock
    assert arch.matrix.clock_hz == 1830e6
    shared = arch.level("l1_shared")
    assert shared.instances == 132
    assert shared.capacity_total == 132 * 256 * 1024
    assert shared.bandwidth_total == pytest.approx(132 * 234.2e9)
    assert arch.level("l2").latency_s == pytest.approx(212 / 1830e6)
    assert arch.level("hbm3").latency_cycles == round(500e-9 * 1830e6)
    assert arch.matrix.limits.shared_memory_bytes == 228 * 1024
    assert arch.interconnect.chip_to_chip.links == 18


def test_unknown_preset_lists_presets():
    with pytest.raises(ArchError) as info:
        load_arch("tpu_v9")
    assert "'tpu_v9'" in str(info.value) and "tpu_v1" in str(info.value) and "h100" in str(info.value)
    assert isinstance(info.value, UserError)


def test_missing_file(tmp_path):
    with pytest.raises(ArchError, match="no such arch file"):
        load_arch(tmp_path / "nope.yaml")


def _message(tmp_path: Path, old: str, new: str, *more: str) -> str:
    """Load systolic_8x8 with `old` replaced by `new` (then more old/new pairs); return the error."""
    text = BASE.read_text()
    pairs = [(old, new), *zip(more[::2], more[1::2])]
    for a, b in pairs:
        assert a in text, a
        text = text.replace(a, b, 1)
    path = tmp_path / "broken_arch.yaml"
    path.write_text(text)
    with pytest.raises(ArchError) as info:
        load_arch(path)
    message = str(info.value)
    assert "broken_arch.yaml" in message
    return message


# (what to break, replaced by, fragments the message must contain: key path, bad value, hint)
MISTAKES = {
    "unknown key": ("macs_per_cycle:", "macs_per_cyle:", ["compute[0].macs_per_cyle", "did you mean 'macs_per_cycle'"]),
    "unknown top key": ("clock: 100 MHz", "clocks: 100 MHz", ["clocks", "did you mean 'clock'"]),
    "missing key": ("    bandwidth: 400 MB/s\n", "", ["memory[0].bandwidth", "missing key"]),
    "missing top key": ("power:\n  tdp: 0.5 W\n", "", ["power", "missing key"]),
    "bad unit": ("bandwidth: 400 MB/s", "bandwidth: 400 MB",
                 ["memory[0].bandwidth", "'400 MB'", "not a bandwidth", "GB/s"]),
    "missing unit": ("clock: 100 MHz", "clock: 100", ["clock", "100", "MHz"]),
    "size as bandwidth": ("bandwidth: 3.2 GB/s", "bandwidth: 3.2 GB", ["memory[3].bandwidth", "'3.2 GB'"]),
    "negative size": ("capacity: 16 KiB", "capacity: -16 KiB", ["memory[1].capacity", "'-16 KiB'", "negative"]),
    "zero size": ("capacity: 16 KiB", "capacity: 0 KiB", ["memory[1].capacity", "'0 KiB'", "greater than zero"]),
    "wrong type": ("count: 1", "count: '1'", ["compute[0].count", "'1'", "count"]),
    "float count": ("count: 1", "count: 1.5", ["compute[0].count", "1.5"]),
    "unknown kind": ("kind: systolic", "kind: sytolic", ["kind", "'sytolic'", "did you mean 'systolic'"]),
    "unknown dtype": ("{int8: 64}", "{int9: 64}", ["compute[0].macs_per_cycle.int9", "'int9'", "did you mean 'int8'"]),
    "unknown dataflow": ("dataflows: [ws]", "dataflows: [wx]", ["compute[0].dataflows[0]", "'wx'", "ws, os, is"]),
    "unknown role": ("holds: [weight]", "holds: [weights]",
                     ["memory[1].holds[0]", "'weights'", "did you mean 'weight'"]),
    "unknown unit role": ("role: vector", "role: vectr", ["compute[1].role", "'vectr'"]),
    "wrong version": ("version: 1", "version: 2", ["version", "2", "version 1"]),
    "systolic without array": ("    array: {rows: 8, cols: 8, accumulator_bits: 32, weight_buffers: 2, "
                               "io_registers: 3, accumulator_rows: 512}\n", "",
                               ["compute[0].array", "missing"]),
    "more MACs than PEs": ("macs_per_cycle: {int8: 64}", "macs_per_cycle: {int8: 128}",
                           ["compute[0].macs_per_cycle.int8", "128", "8x8 = 64 PEs"]),
    "array on simd": ("kind: systolic", "kind: simd", ["compute[0].array", "simd"]),
    "simt without limits": ("kind: systolic", "kind: simt", ["compute[0].limits", "missing", "simt"],
                            "    array: {rows: 8, cols: 8, accumulator_bits: 32, weight_buffers: 2, io_registers: 3, "
                            "accumulator_rows: 512}\n", "",
                            "    dataflows: [ws]\n", ""),
    "ternary without ternary": ("kind: systolic", "kind: ternary", ["compute", "ternary"]),
    "levels grow inward": ("capacity: 16 KiB", "capacity: 512 MiB",
                           ["memory[1].capacity", "'512 MiB'", "'256 MiB' of 'dram'"]),
    "no level holds outputs": ("holds: [output]", "holds: [input]", ["memory", "no level holds output"],
                               "holds: [weight, input, output]", "holds: [weight, input]"),
    "role twice": ("holds: [weight]", "holds: [weight, weight]", ["memory[1].holds", "twice"]),
    "energy dtypes differ": ("mac_energy: {int8: 0.3 pJ}", "mac_energy: {int16: 0.3 pJ}",
                             ["compute[0].mac_energy", "int16"]),
    "vector key on matrix": ("    mac_energy: {int8: 0.3 pJ}\n",
                             "    mac_energy: {int8: 0.3 pJ}\n    ops_per_cycle: {int8: 8}\n",
                             ["compute[0].ops_per_cycle", "matrix unit"]),
    "two vector units": ("memory:\n", "  - {name: vec2, role: vector, count: 1, ops_per_cycle: {int8: 8}, "
                         "op_energy: {int8: 0.03 pJ}}\nmemory:\n", ["compute", "exactly one vector unit"]),
    "no matrix unit": ("    macs_per_cycle: {int8: 64}\n", "", ["compute[0].macs_per_cycle", "missing"]),
    "duplicate level name": ("name: input_sram", "name: weight_sram", ["memory[2].name", "'weight_sram'", "twice"]),
    "idle above tdp": ("tdp: 0.5 W", "tdp: 0.5 W\n  idle: 2 W", ["power.idle", "'2 W'"]),
    "bad latency": ("latency: 100 ns", "latency: 100 clocks", ["memory[0].latency", "'100 clocks'", "cycles"]),
    "access beyond capacity": ("access: 32 B", "access: 32 KiB", ["memory[3].access", "'32 KiB'"]),
    "write port as wide as the level": ("bandwidth: 3.2 GB/s", "bandwidth: 3.2 GB/s\n    write_port: 3.2 GB/s",
                                        ["memory[3].write_port", "'3.2 GB/s'", "no bandwidth for reads"]),
    "write port without a unit": ("bandwidth: 3.2 GB/s", "bandwidth: 3.2 GB/s\n    write_port: 1.6",
                                  ["memory[3].write_port", "1.6"]),
    # systolic_8x8's 100 MHz clock: at most 2^32 arch cycles per byte or per unit cycle, i.e. at least
    # 1e8 / 2^32 = 0.0233 B/s and 0.0233 Hz (the int64 cycles of the engine wrapped far slower hardware into fast)
    "DRAM of 1e-9 B/s": ("bandwidth: 400 MB/s", "bandwidth: 1e-9 B/s",
                         ["memory[0].bandwidth", "'1e-9 B/s'", "1e+17 arch cycles per byte", "2^32"]),
    "DRAM just too slow": ("bandwidth: 400 MB/s", "bandwidth: 0.02 B/s", ["memory[0].bandwidth", "5e+09 arch cycles"]),
    "write port of 1e-300 B/s": ("bandwidth: 3.2 GB/s", "bandwidth: 3.2 GB/s\n    write_port: 1e-300 B/s",
                                 ["memory[3].write_port", "'1e-300 B/s'", "1e+308 arch cycles per byte"]),
    "write port of 1e-320 B/s": ("bandwidth: 3.2 GB/s", "bandwidth: 3.2 GB/s\n    write_port: 1e-320 B/s",
                                 ["memory[3].write_port", "inf arch cycles per byte"]),
    "unit clock of 1e-30 Hz": ("    count: 1\n", "    count: 1\n    clock: 1e-30 Hz\n",
                               ["compute[0].clock", "'1e-30 Hz'", "1e+38 arch cycles per cycle of the unit"]),
    "sustained clock of 1e-30 Hz": ("    count: 1\n", "    count: 1\n    sustained_clock: 1e-30 Hz\n",
                                    ["compute[0].sustained_clock", "'1e-30 Hz'", "1e+38 arch cycles"]),
    # a quantity whose number and unit are finite but whose product is not; waits past 2^32 arch cycles (42.9 s at
    # 100 MHz), which the engine's int64 cycles could not hold (1e300 s at 700 MHz is inf, 1e30 cycles wraps)
    "clock of 1e300 GHz": ("clock: 100 MHz", "clock: 1e300 GHz", ["clock", "'1e300 GHz'", "too large"]),
    "capacity of 1e300 TB": ("capacity: 16 KiB", "capacity: 1e300 TB", ["memory[1].capacity", "too large"]),
    "latency of 1e300 s": ("latency: 100 ns", "latency: 1e300 s",
                           ["memory[0].latency", "'1e300 s'", "1e+308 arch cycles", "2^32", "42.9 s"]),
    "latency of 1e30 cycles": ("latency: 100 ns", "latency: 1e30 cycles",
                               ["memory[0].latency", "'1e30 cycles'", "1e+30 arch cycles", "2^32"]),
    "latency just too long": ("latency: 100 ns", "latency: 43 s", ["memory[0].latency", "4.3e+09 arch cycles"]),
    "launch overhead of 1e300 s": ("    count: 1\n", "    count: 1\n    launch_overhead: 1e300 s\n",
                                   ["compute[0].launch_overhead", "'1e300 s'", "1e+308 arch cycles", "2^32"]),
    "unknown refill": ("bandwidth: 800 MB/s      # 8 B per cycle", "refill: tiles\n    bandwidth: 800 MB/s  #",
                       ["memory[1].refill", "'tiles'", "slot, tile"]),
    "output stage not a flag": ("ops_per_cycle: {int32: 8, int8: 8}\n    output_stage: true",
                                "ops_per_cycle: {int32: 8, int8: 8}\n    output_stage: yes please",
                                ["compute[1].output_stage", "'yes please'", "true or false"]),
    "output stage on the array": ("    mac_energy: {int8: 0.3 pJ}\n",
                                  "    mac_energy: {int8: 0.3 pJ}\n    output_stage: true\n",
                                  ["compute[0].output_stage", "systolic matrix unit"]),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_mistake_is_named(tmp_path, mistake):
    old, new, fragments, *more = MISTAKES[mistake]
    message = _message(tmp_path, old, new, *more)
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_syntax_error_names_line(tmp_path):
    message = _message(tmp_path, "clock: 100 MHz", "clock: [100 MHz")
    assert "YAML syntax error" in message and "line " in message


def test_empty_file(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing\n")
    with pytest.raises(ArchError, match=r"empty\.yaml: \(top level\): the document is not a mapping \(it is empty\)"):
        load_arch(path)


def test_arch_is_the_only_yaml_reader():
    root = presets_dir().parent
    sources = [p for folder in ("accelsim", "compiler") for p in (root / folder).rglob("*.py")]
    readers = [p.relative_to(root).as_posix() for p in sources if "import yaml" in p.read_text()]
    # Hardware YAML is read by accelsim/arch/load.py alone; the validation datasets' provenance (dataset.yaml, not a
    # hardware description) is written by validate/cpu.py and validate/cuda_dataset.py and read by
    # validate/sourced.py (settings, for score.py and the published readers); a sweep spec (axes over an arch, not
    # an arch) is read by sweep/spec.py, which takes the base arch's mapping from accelsim/arch/load.py
    # (arch_document) and hands every arch it derives back to it.
    assert sorted(readers) == ["accelsim/arch/load.py", "accelsim/sweep/spec.py", "accelsim/validate/cpu.py",
                               "accelsim/validate/cuda_dataset.py", "accelsim/validate/sourced.py"]
    for reader in readers:
        assert "yaml.load(" not in (root / reader).read_text()  # safe_load only


def test_an_array_beyond_any_chip_loads_with_a_warning(tmp_path, capsys):
    import warnings

    import yaml

    from accelsim.arch import arch_document
    from accelsim.arch.schema import ArchWarning
    from accelsim.cli import main

    doc = arch_document(load_arch("systolic_8x8"))
    doc["compute"][0]["array"] |= {"rows": 10**9, "cols": 10**9}
    doc["compute"][0]["macs_per_cycle"] = {k: 10**18 for k in doc["compute"][0]["macs_per_cycle"]}
    path = tmp_path / "giant.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.warns(ArchWarning, match=r"1,000,000,000 x 1,000,000,000 array is .* beyond any chip built"):
        assert load_arch(path).matrix.array.pes == 10**18
    assert main(["run", "resnet18", "--opt", "image=32", "--arch", str(path), "--fidelity", "roofline"]) == 0
    assert "accelsim: warning: " in capsys.readouterr().err
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_arch("tpu_v4")                        # a real chip: no warning


def test_the_slowest_rates_allowed_still_load(tmp_path):
    # 0.03 B/s and 0.03 Hz at a 100 MHz arch clock: 3.3e9 arch cycles per byte or unit cycle, under 2^32 = 4.3e9
    text = BASE.read_text().replace("bandwidth: 400 MB/s", "bandwidth: 0.03 B/s", 1)
    text = text.replace("    count: 1\n", "    count: 1\n    clock: 0.03 Hz\n    launch_overhead: 42 s\n", 1)
    text = text.replace("latency: 100 ns", "latency: 42 s", 1)      # 4.2e9 arch cycles, under 2^32
    (tmp_path / "slow.yaml").write_text(text)
    arch = load_arch(tmp_path / "slow.yaml")
    assert arch.memory[0].bandwidth_bytes_per_s == 0.03 and arch.compute[0].clock_hz == 0.03
    assert arch.memory[0].latency_cycles == 4_200_000_000 and arch.compute[0].launch_overhead_s == 42


def test_an_array_left_claiming_a_smaller_arrays_macs_loads_with_a_warning_naming_unit_key_and_both(tmp_path):
    import warnings

    from accelsim.arch.schema import ArchWarning

    grown = tmp_path / "sa_64x64.yaml"            # the 32x32 preset copied, its array grown, its MACs left as they were
    grown.write_text((presets_dir() / "systolic_32x32.yaml").read_text().replace("rows: 32, cols: 32",
                                                                                  "rows: 64, cols: 64"))
    with pytest.warns(ArchWarning, match=r"sa_64x64.yaml: compute\[0\].macs_per_cycle.int8: unit 'pe_array' claims "
                                         r"1,024 MACs per cycle, .* its 64x64 = 4,096 PEs; .* int8 should claim 4,096"):
        load_arch(grown)

    def with_int16(rate: int) -> Path:
        path = tmp_path / f"int16_{rate}.yaml"
        text = BASE.read_text().replace("macs_per_cycle: {int8: 64}", f"macs_per_cycle: {{int8: 64, int16: {rate}}}")
        path.write_text(text
                        .replace("mac_energy: {int8: 0.3 pJ}", "mac_energy: {int8: 0.3 pJ, int16: 1 pJ}"))
        return path

    with pytest.warns(ArchWarning, match=r"macs_per_cycle.int16: unit 'pe_array' claims 48 MACs .* int16 should "
                                         r"claim 64 divided by a power of two"):
        load_arch(with_int16(48))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in preset_names():            # every preset fills its array (TPU v1's int16 at 1/4, npu4's fp16 1/2)
            load_arch(name)
        load_arch(with_int16(16))              # a wider dtype at a power-of-two share: a PE's 4 cycles per MAC


@pytest.mark.parametrize("change, said", [
    (("{warp: 32, threads: 2048", "{warp: 4096, threads: 2048"), "limits.threads: 2048 resident threads are not a "
                                                                 "whole number of warps of 4096"),
    (("{warp: 32, threads: 2048", "{warp: 32, threads: 1"), "limits.threads: 1 resident threads are not a whole"),
    (("registers: 65536", "registers: 1"), "limits.registers: 1 registers cannot give each of the 2048")])
def test_simt_limits_that_contradict_each_other_are_refused(tmp_path, change, said):
    """They loaded and changed nothing (the H100 ran ResNet-18 in 117 us with a warp of 4096, one thread or one
    register per SM)."""
    path = tmp_path / "h100.yaml"
    path.write_text((presets_dir() / "h100.yaml").read_text().replace(*change))
    with pytest.raises(ArchError, match=said):
        load_arch(path)
