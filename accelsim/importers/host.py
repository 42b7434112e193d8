"""`accelsim arch detect-host`, first half: what the machine is (cores, clock, SIMD flags, caches, memory);
accelsim.importers.host_preset writes the simd preset from it. Reads (lscpu, /proc, sysfs, and a timed clock probe where
sysfs has no cpufreq) are kept apart from parsing, so tests feed recorded texts; every figure keeps its source."""
from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from compiler.errors import UserError
from compiler.memo import memo

SYSFS_CPU = Path("/sys/devices/system/cpu")
CACHE_FILES = ("level", "type", "size", "shared_cpu_list")

# FMA pipes narrower than the registers, by (vendor, CPU family): AMD family 19h (Zen 3, Zen 4) has two
# 256-bit FMA pipes, and Zen 4 runs a 512-bit FMA as two 256-bit halves (AMD's Zen 4 software optimization
# guide, 57647) [A]: 16 fp32 MACs per cycle, as with AVX2, not the 32 of two 512-bit pipes.
FMA_PIPE_BYTES = {("AuthenticAMD", "25"): 32}
# The clock probe, where sysfs has no cpufreq (a KVM guest): a chain of dependent integer adds and xors, one
# cycle each on the x86-64 and Arm cores we know of, so CHAIN_OPS x iterations / seconds is the clock the core
# runs at. On a 2-vCPU Zen 4 guest it read 3.65-3.68 GHz (BogoMIPS / 2: 2.60), and GEMMs priced at it came
# within 10% of the least disturbed of three measured runs.
CHAIN_OPS = 4
PROBE_ITERATIONS = 5_000_000        # 20 M cycles: about 6 ms at 3.5 GHz
PROBE_RUNS = 7


@dataclass(frozen=True)
class Cache:
    capacity_bytes: int      # one instance
    instances: int
    source: str


@dataclass(frozen=True)
class Host:
    model: str
    cores: int
    cores_source: str
    clock_ghz: float
    clock_source: str
    flags: frozenset
    caches: dict             # "l1d" / "l2" / "l3" -> Cache
    memory_bytes: int
    fma_pipe_bytes: int | None = None    # an FMA pipe narrower than the registers (FMA_PIPE_BYTES)


# ---- parsing: text in, figures out ---------------------------------------------------------------

def parse_lscpu(text: str) -> dict[str, str]:
    """`lscpu -J` JSON or plain `lscpu` text -> {field without colon: value}."""
    if text.lstrip().startswith("{"):
        try:
            rows = json.loads(text)["lscpu"]
        except (ValueError, KeyError, TypeError) as error:
            raise UserError(f"lscpu -J: cannot read its JSON ({error})") from None
        fields = {}
        for row in rows:   # util-linux >= 2.38 nests rows under "children"
            rows.extend(row.get("children", []))
            fields[row["field"].rstrip(":").strip()] = str(row.get("data") or "")
        return fields
    return {k.strip(): v.strip() for k, sep, v in (line.partition(":") for line in text.splitlines()) if sep}


def parse_cpuinfo(text: str) -> dict[str, str]:
    """The first processor's block of /proc/cpuinfo -> {key: value}."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() and fields:
            break
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def parse_meminfo(text: str) -> int:
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, flags=re.M)
    if not match:
        raise UserError("/proc/meminfo: no 'MemTotal: N kB' line")
    return int(match.group(1)) * 1024


def _size(text: str) -> int:
    """`32K`, `32768K`, `48 KiB`, `2 MiB` -> bytes (sysfs and lscpu both mean powers of 1024)."""
    match = re.fullmatch(r"\s*([\d.]+)\s*([KMGT]?)(i?B)?\s*", text)
    if not match:
        raise UserError(f"cache size {text!r}: expected e.g. 32K or 48 KiB")
    return round(float(match.group(1)) * 1024 ** " KMGT".index(match.group(2) or " "))


def parse_sysfs_caches(records: list[dict[str, str]]) -> dict[str, Cache]:
    """Records of cpu*/cache/index*/{level,type,size,shared_cpu_list} -> one Cache per level.

    A cache shared by CPUs 0-1 appears under both; distinct shared_cpu_lists count the instances.
    """
    found: dict[str, dict[str, int]] = {}
    for r in records:
        if r["type"] == "Instruction":
            continue
        name = {"1": "l1d", "2": "l2", "3": "l3"}.get(r["level"].strip())
        if name:
            found.setdefault(name, {})[r["shared_cpu_list"].strip()] = _size(r["size"])
    return {name: Cache(max(sizes.values()), len(sizes), "sysfs") for name, sizes in found.items()}


def parse_lscpu_caches(fields: dict[str, str]) -> dict[str, Cache]:
    """`L2 cache: 112 MiB (56 instances)` -> Cache(2 MiB, 56); lscpu gives totals over instances."""
    caches = {}
    for name, field in (("l1d", "L1d cache"), ("l2", "L2 cache"), ("l3", "L3 cache")):
        match = re.fullmatch(r"(.+?)\s*(?:\((\d+) instances?\))?", fields.get(field, ""))
        if match and match.group(1):
            n = int(match.group(2) or 1)
            # `2.6 MiB (56 instances)` is rounded: 2.6 MiB / 56 = 47.5 KiB, taken to the nearest KiB (48)
            caches[name] = Cache(round(_size(match.group(1)) / n / 1024) * 1024, n, "lscpu")
    return caches


def parse_cores(lscpu: dict[str, str]) -> int:
    try:
        cores = int(lscpu["Core(s) per socket"]) * int(lscpu.get("Socket(s)", "1"))
    except (KeyError, ValueError):
        raise UserError("lscpu: no physical core count found (need 'Core(s) per socket' and 'Socket(s)')") from None
    if cores < 1:
        raise UserError(f"lscpu: {cores} cores found")
    return cores


def parse_clock(lscpu: dict[str, str], cpuinfo: dict[str, str], max_freq_khz: str | None,
                measured_ghz: float | None = None) -> tuple[float, str]:
    """(GHz, source): cpufreq's max, then the clock the probe measured (`measure_clock_ghz`), the model name's
    `@ 2.00GHz`, lscpu's max MHz, BogoMIPS / 2. A KVM guest has no cpufreq and its BogoMIPS are the host's
    TSC: 2.45 GHz on an EPYC whose cores ran 1024^3 fp32 GEMMs at 44.8 GMAC/s, above 16 MACs x 2.45 GHz."""
    if max_freq_khz and max_freq_khz.strip().isdigit():
        return int(max_freq_khz) / 1e6, "sysfs cpufreq cpuinfo_max_freq"
    if measured_ghz:
        return measured_ghz, (f"a timed chain of dependent 1-cycle integer ops, fastest of {PROBE_RUNS} runs"
                              " (no cpufreq in sysfs) [M]")
    model = lscpu.get("Model name") or cpuinfo.get("model name", "")
    match = re.search(r"@\s*([\d.]+)\s*GHz", model)
    if match:
        return float(match.group(1)), "model name"
    for field in ("CPU max MHz",):
        if _number(lscpu.get(field)):
            return _number(lscpu[field]) / 1e3, f"lscpu {field}"
    bogomips = _number(lscpu.get("BogoMIPS") or cpuinfo.get("bogomips"))
    if bogomips:
        return bogomips / 2e3, "BogoMIPS / 2 [A]"
    raise UserError("no clock found (no cpufreq, no '@ x GHz' in the model name, no lscpu 'CPU max MHz' or BogoMIPS)")


def _number(text: str | None) -> float:
    try:
        return float(text) if text else 0.0
    except ValueError:
        return 0.0


def parse_host(lscpu_text: str, cpuinfo_text: str, meminfo_text: str, cache_records: list[dict[str, str]],
               max_freq_khz: str | None = None, measured_ghz: float | None = None) -> Host:
    lscpu, cpuinfo = parse_lscpu(lscpu_text), parse_cpuinfo(cpuinfo_text)
    cores = parse_cores(lscpu)
    flags = frozenset((cpuinfo.get("flags") or lscpu.get("Flags", "")).split())
    caches = parse_sysfs_caches(cache_records) or parse_lscpu_caches(lscpu)
    clock_ghz, clock_source = parse_clock(lscpu, cpuinfo, max_freq_khz, measured_ghz)
    clock_ghz = round(clock_ghz, 2)   # the figure the YAML shows is the one every bandwidth uses
    model = lscpu.get("Model name") or cpuinfo.get("model name") or "unknown CPU"
    family = (cpuinfo.get("vendor_id") or lscpu.get("Vendor ID", ""), cpuinfo.get("cpu family") or lscpu.get(
        "CPU family", ""))
    return Host(model, cores, "lscpu Core(s) per socket x Socket(s)", clock_ghz, clock_source,
                flags, caches, parse_meminfo(meminfo_text), FMA_PIPE_BYTES.get(family))


# ---- reading: the live machine -------------------------------------------------------------------

def _lscpu_text() -> str:
    for argv in (["lscpu", "-J"], ["lscpu"]):
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout
    raise UserError("lscpu: not found or failed; it is needed for the core count (util-linux)")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as error:
        raise UserError(f"{path}: cannot read ({error.strerror})") from None


def read_cache_records(root: Path = SYSFS_CPU) -> list[dict[str, str]]:
    return [{name: (index / name).read_text().strip() for name in CACHE_FILES}
            for index in sorted(root.glob("cpu[0-9]*/cache/index[0-9]*"))
            if all((index / name).is_file() for name in CACHE_FILES)]


def read_host() -> Host:
    freq = SYSFS_CPU / "cpu0/cpufreq/cpuinfo_max_freq"
    max_freq = freq.read_text() if freq.is_file() else None
    return parse_host(_lscpu_text(), _read(Path("/proc/cpuinfo")), _read(Path("/proc/meminfo")),
                      read_cache_records(), max_freq, None if max_freq else measure_clock_ghz())


# ---- the clock probe: the one jitted kernel here, plain ints in and out ---------------------------

@memo(size=4)
def measure_clock_ghz(iterations: int = PROBE_ITERATIONS, runs: int = PROBE_RUNS) -> float | None:
    """GHz the core runs the probe's chain at (CHAIN_OPS dependent 1-cycle ops per iteration), the fastest of
    `runs`: another tenant or an interrupt only ever slows a run down. Once per process, so a preset and its
    dataset's provenance carry the same figure; None if the figure is implausible (then BogoMIPS)."""
    from accelsim.engine.probe import chain

    chain(16, 1, 3)                     # compile (or load the cached machine code) outside the timing
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        chain(iterations, 12345, 7)
        best = min(best, time.perf_counter() - start)
    ghz = CHAIN_OPS * iterations / best / 1e9
    return ghz if 0.5 <= ghz <= 7.0 else None
