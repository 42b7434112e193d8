"""The simd preset `accelsim arch detect-host` writes from what accelsim.importers.host read: compute units, cache
levels and DRAM in the archs/*.yaml format, every figure tagged with its source ([M] measured, [A] assumed, or the
file it came from). Invariant: the text loads through accelsim.arch like any hand-written preset (it is built as
data and checked by the arch schema as it is written: accelsim.arch.write)."""
from __future__ import annotations

import re
from dataclasses import replace

from accelsim.arch.write import arch_yaml
from accelsim.importers.host import Host

# Figures no file on the host tells us: all [A], the energies copied from archs/xeon_spr.yaml.
FMA_PORTS = 2                       # AVX2 / AVX-512 cores issue two FMAs per cycle
DRAM_GBPS_PER_CORE, DRAM_GBPS_CAP = 12.8, 200.0
DRAM_LATENCY_NS = 100
L2_BYTES_PER_CYCLE, L3_BYTES_PER_CYCLE_PER_CORE = 64, 32
LATENCY_CYCLES = {"l1d": 5, "l2": 14, "llc": 50}
WATTS_PER_CORE = 10
LEVEL_ENERGY = {"dram": "10.24 nJ", "llc": "178 pJ", "l2": "178 pJ", "l1d": "35.6 pJ"}
MAC_ENERGY = {"fp32": "1.02 pJ", "fp64": "4.4 pJ", "bf16": "0.44 pJ", "int8": "0.067 pJ"}
OP_ENERGY = {"fp32": "1.02 pJ", "fp64": "4.4 pJ", "fp16": "0.33 pJ", "int32": "0.022 pJ", "int8": "0.0067 pJ"}


def vector_bytes(flags: frozenset) -> tuple[int, str]:
    """(register width in bytes, ISA name) of the widest SIMD the flags show."""
    if "avx512f" in flags:
        return 64, "avx512"
    if "avx2" in flags:
        return 32, "avx2"
    return 16, "sse"   # SSE2 is baseline on x86-64; a 128-bit NEON core reads the same [A]


def fp32_macs_per_cycle(flags: frozenset, pipe_bytes: int | None = None) -> int:
    """FMA ports x fp32 lanes: AVX2 + FMA 2 x 8 = 16, AVX-512 2 x 16 = 32; one port without FMA [A]. A pipe
    narrower than the registers (`pipe_bytes`, Zen 4's 32 B) sets the lanes: 2 x 8 = 16 with AVX-512."""
    width, _ = vector_bytes(flags)
    lanes = min(width, pipe_bytes or width) // 4
    return (FMA_PORTS if "fma" in flags or "avx512f" in flags else 1) * lanes


def _gbps(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e9:.1f} GB/s"


def _size_text(n: int) -> str:
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} B"


def _compute(host: Host, notes: dict[str, str]) -> list[dict]:
    width, isa = vector_bytes(host.flags)
    fp32 = fp32_macs_per_cycle(host.flags, host.fma_pipe_bytes)
    rows = 14 if width == 64 else 6   # accumulators: 14 x 2 of 32 zmm, 6 x 2 of 16 ymm/xmm
    n = host.cores
    units = [{"name": f"{isa}_fma", "role": "matrix", "count": n, "macs_per_cycle": {"fp32": fp32, "fp64": fp32 // 2},
              "micro_kernel": {"rows": rows, "cols": 2, "register_rows": 1, "register_bytes": f"{width} B"},
              "mac_energy": {"fp32": MAC_ENERGY["fp32"], "fp64": MAC_ENERGY["fp64"]}}]
    notes["compute[0]"] = "FP32/FP64 GEMMs as FMAs on the vector ports"
    amx = {d: m for d, m, flag in (("bf16", 512, "amx_bf16"), ("int8", 1024, "amx_int8")) if flag in host.flags}
    if "amx_tile" in host.flags and amx:
        notes[f"compute[{len(units)}]"] = "TMUL figures of archs/xeon_spr.yaml"
        units.append({"name": "amx", "role": "matrix", "count": n, "macs_per_cycle": amx,
                      "micro_kernel": {"rows": 2, "cols": 2, "register_rows": 16, "register_bytes": "64 B"},
                      "mac_energy": {d: MAC_ENERGY[d] for d in amx}})
    ops = {"fp32": fp32, "fp64": fp32 // 2, "fp16": 2 * fp32, "int32": fp32, "int8": 4 * fp32}
    units.append({"name": isa, "role": "vector", "count": n, "ops_per_cycle": ops,
                  "op_energy": {d: OP_ENERGY[d] for d in ops}})
    return units


def _level(name: str, capacity: str, bandwidth: str, latency: str, energy: str, instances: int = 1) -> dict:
    level = {"name": name, "capacity": capacity}
    if instances > 1:
        level["instances"] = instances
    return level | {"bandwidth": bandwidth, "latency": latency, "holds": ["weight", "input", "output"],
                    "access": "64 B", "read_energy": energy, "write_energy": energy}


def _memory(host: Host, notes: dict[str, str]) -> list[dict]:
    hz = host.clock_ghz * 1e9
    width, _ = vector_bytes(host.flags)
    width = min(width, host.fma_pipe_bytes or width)      # Zen 4 loads 2 x 32 B per cycle, not 2 x 64 B [A]
    dram = min(DRAM_GBPS_PER_CORE * host.cores, DRAM_GBPS_CAP) * 1e9
    levels = [_level("dram", _size_text(host.memory_bytes), _gbps(dram), f"{DRAM_LATENCY_NS} ns", LEVEL_ENERGY["dram"])]
    notes.update({"memory[0].capacity": "MemTotal", "memory[0].bandwidth": "[A]", "memory[0].latency": "[A]"})
    per_cycle = {"l3": L3_BYTES_PER_CYCLE_PER_CORE * host.cores, "l2": L2_BYTES_PER_CYCLE, "l1d": 2 * width}
    why = {"l3": f"{host.cores} x {L3_BYTES_PER_CYCLE_PER_CORE} B", "l2": f"{L2_BYTES_PER_CYCLE} B",
           "l1d": f"2 x {width} B"}
    for key, name in (("l3", "llc"), ("l2", "l2"), ("l1d", "l1d")):
        cache = host.caches.get(key)
        if cache is None:
            continue
        # The LLC is one shared level: its slices (one per CCX on EPYC) are summed, instances 1.
        total = key == "l3"
        capacity = cache.capacity_bytes * (cache.instances if total else 1)
        at = f"memory[{len(levels)}]"
        notes.update({f"{at}.bandwidth": f"{why[key]} x {host.clock_ghz:.2f} GHz [A]", f"{at}.latency": "[A]"})
        levels.append(_level(name, _size_text(capacity), _gbps(per_cycle[key] * hz), f"{LATENCY_CYCLES[name]} cycles",
                             LEVEL_ENERGY[name], 1 if total else cache.instances))
    return levels


def _header(host: Host) -> list[str]:
    width, isa = vector_bytes(host.flags)
    simd = sorted(host.flags & {"avx2", "fma", "avx512f", "avx512_bf16", "avx_vnni", "amx_tile", "amx_bf16",
                                "amx_int8"})
    caches = "; ".join(f"{k} {_size_text(c.capacity_bytes)} x {c.instances} ({c.source})"
                       for k, c in host.caches.items()) or "none found"
    simd_text = " ".join(simd) or "none of avx2/avx512f/amx"
    return [
        f"{host.model}: written by `accelsim arch detect-host` on the machine itself.",
        "Tags: [V] read from the machine, [M] measured on it, [D] derived, [A] assumption (nothing on the host"
        " says it).",
        f"  {host.cores} physical cores ({host.cores_source}) [V]",
        f"  clock {host.clock_ghz:.2f} GHz from {host.clock_source}",
        f"  SIMD flags (/proc/cpuinfo): {simd_text} -> {isa}, {width} B registers [V]",
        f"  {fp32_macs_per_cycle(host.flags, host.fma_pipe_bytes)} fp32 MACs per cycle per core = FMA ports x"
        f" {min(width, host.fma_pipe_bytes or width) // 4} lanes; {FMA_PORTS} FMA ports with FMA, else 1 [A]"
        + (f"; {host.fma_pipe_bytes} B FMA pipes on this CPU family (FMA_PIPE_BYTES) [A]" if host.fma_pipe_bytes
           else ""),
        f"  caches: {caches} [V]",
        "  the LLC's slices are summed into one shared level [D]",
        f"  DRAM capacity from /proc/meminfo MemTotal [V]; bandwidth {DRAM_GBPS_PER_CORE} GB/s per core capped at"
        f" {DRAM_GBPS_CAP:.0f} GB/s,",
        f"  latency {DRAM_LATENCY_NS} ns [A]. Cache bandwidths per cycle: L1 2 x register (or FMA pipe) width, L2"
        f" {L2_BYTES_PER_CYCLE} B, LLC {L3_BYTES_PER_CYCLE_PER_CORE} B per core [A];",
        f"  latencies L1 {LATENCY_CYCLES['l1d']}, L2 {LATENCY_CYCLES['l2']}, LLC {LATENCY_CYCLES['llc']} cycles"
        f" [A]. TDP {WATTS_PER_CORE} W per core [A].",
        "Energy: per-MAC, per-op and per-access figures copied from archs/xeon_spr.yaml (Horowitz 45 nm",
        "  scaled to 10 nm) [A]: they are not this chip's.",
    ]


def preset_name(model: str) -> str:
    """`Intel(R) Xeon(R) Platinum 8480+` -> `host_intel_xeon_platinum_8480`."""
    words = re.sub(r"\((R|TM|tm)\)|@.*$|\bCPU\b", " ", model)
    return "host_" + ("_".join(re.findall(r"[a-z0-9]+", words.lower())) or "cpu")


def preset_yaml(host: Host, cores: int | None = None) -> str:
    """The preset; `cores` models only that many of the host's cores (a run limited to N threads): the
    per-core units and caches count N, the shared LLC keeps its size, per-core bandwidths scale with N."""
    if cores is not None:
        per_core = {k: replace(c, instances=min(c.instances, cores)) if k != "l3" else c
                    for k, c in host.caches.items()}
        host = replace(host, cores=cores, cores_source=f"{cores} of {host.cores}: the threads used",
                       caches=per_core)
    notes = {"clock": host.clock_source, "power.tdp": f"{WATTS_PER_CORE} W per core [A]"}
    data = {"version": 1, "name": preset_name(host.model), "kind": "simd",
            "description": f"{host.model}, {host.cores} cores (detected on the host)",
            "clock": f"{host.clock_ghz:.2f} GHz", "compute": _compute(host, notes), "memory": _memory(host, notes),
            "power": {"tdp": f"{WATTS_PER_CORE * host.cores} W"}}
    return arch_yaml(data, _header(host), notes, shown="detect-host")
