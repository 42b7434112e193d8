"""SCALE-Sim's .cfg files as arch YAML (its topology .csv files are compiler.topology's; its way of counting
compute cycles is accelsim.price.compat's).

Invariant: a converted .cfg loads through accelsim.arch (the only YAML reader) like any preset.
"""
from __future__ import annotations

import configparser
import os
from dataclasses import dataclass
from pathlib import Path

from accelsim.arch import Arch, ArchError, load_arch_text
from accelsim.arch.write import arch_yaml
from compiler.errors import read_text

# SCALE-Sim counts cycles only; a clock turns its words per cycle into bytes per second. At 1 GHz and its
# 1-byte words (single_layer_sim: word_size = 1), 10 words/cycle is 10 GB/s.
CLOCK_HZ = 1e9
DEFAULT_WORDS_PER_CYCLE = 10   # what SCALE-Sim itself assumes for ifmap/filter DRAM in CALC mode
DATAFLOWS = ("os", "ws", "is")


class CfgError(ArchError):
    """A SCALE-Sim .cfg that cannot be read: names the file, the section and the key."""


@dataclass(frozen=True)
class ScaleSimConfig:
    run_name: str
    rows: int                  # ArrayHeight
    cols: int                  # ArrayWidth
    ifmap_kb: int              # IfmapSramSzkB (SCALE-Sim: 1024 x this many bytes)
    filter_kb: int             # FilterSramSzkB
    ofmap_kb: int              # OfmapSramSzkB
    dataflow: str              # os, ws or is
    words_per_cycle: int       # Bandwidth (its first value), or the CALC-mode default
    user_bandwidth: bool       # [run_presets] InterfaceBandwidth: USER (True) or CALC


def read_cfg(path: str | os.PathLike) -> ScaleSimConfig:
    """Parse a SCALE-Sim .cfg as SCALE-Sim does (configparser: `key: value` or `key = value`, keys in any
    case); only the keys that shape the hardware are required."""
    path = Path(path)
    parser = configparser.ConfigParser(interpolation=None)   # values literally: a "%" is text, not a reference
    text = read_text(path, CfgError)
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as error:
        raise CfgError(f"{path}: not a SCALE-Sim .cfg: {' '.join(str(error).split())}") from None

    def get(section: str, key: str, default: str | None = None) -> str:
        if not parser.has_section(section):
            if default is not None:
                return default
            raise CfgError(f"{path}: [{section}]: missing section (SCALE-Sim's .cfg has [general], "
                           f"[architecture_presets] and [run_presets])")
        value = parser.get(section, key, fallback=default)
        if value is None:
            raise CfgError(f"{path}: [{section}] {key}: missing key")
        return value.strip()

    def count(key: str) -> int:
        text = get("architecture_presets", key)
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise CfgError(f"{path}: [architecture_presets] {key}: {text!r} is not a positive integer")
        return value

    dataflow = get("architecture_presets", "Dataflow").lower()
    if dataflow not in DATAFLOWS:
        raise CfgError(f"{path}: [architecture_presets] Dataflow: {dataflow!r}; SCALE-Sim knows os, ws, is")
    mode = get("run_presets", "InterfaceBandwidth", "CALC").upper()
    if mode not in ("USER", "CALC"):
        raise CfgError(f"{path}: [run_presets] InterfaceBandwidth: {mode!r}; expected USER or CALC")
    bandwidth = get("architecture_presets", "Bandwidth", str(DEFAULT_WORDS_PER_CYCLE)).split(",")[0].strip()
    if not bandwidth.isdigit() or int(bandwidth) < 1:
        raise CfgError(f"{path}: [architecture_presets] Bandwidth: {bandwidth!r} is not a positive integer "
                       f"(words per cycle)")
    name = "".join(ch if ch.isalnum() or ch in "_-." else "_" for ch in get("general", "run_name", path.stem))
    return ScaleSimConfig(run_name=name or path.stem, rows=count("ArrayHeight"), cols=count("ArrayWidth"),
                          ifmap_kb=count("IfmapSramSzkB"), filter_kb=count("FilterSramSzkB"),
                          ofmap_kb=count("OfmapSramSzkB"), dataflow=dataflow, words_per_cycle=int(bandwidth),
                          user_bandwidth=mode == "USER")


def to_arch(cfg: ScaleSimConfig, source: str) -> tuple[dict, list[str], dict[str, str]]:
    """(the arch document equivalent to `cfg`, header lines, notes by key path): its assumptions in comments."""
    r, c = cfg.rows, cfg.cols
    gbps = cfg.words_per_cycle * CLOCK_HZ / 1e9
    mode = ("InterfaceBandwidth USER: SCALE-Sim stalls on it" if cfg.user_bandwidth else
            "InterfaceBandwidth CALC: SCALE-Sim would assume whatever bandwidth avoids stalls; we use Bandwidth")
    header = [
        f"Converted from the SCALE-Sim config {source} by `accelsim arch convert`.",
        f"[A] assumptions SCALE-Sim does not make: a {CLOCK_HZ / 1e9:g} GHz clock (SCALE-Sim counts cycles only),",
        f"so its {cfg.words_per_cycle} words/cycle of DRAM bandwidth, 1-byte words, is {gbps:g} GB/s ({mode});",
        "int8 MACs with 32-bit sums; energies from Horowitz ISSCC 2014, 45 nm (MAC 0.3 pJ, SRAM 10 pJ",
        f"per 8 B, DRAM 1.3 nJ per 8 B); DRAM 4 GiB, 100 ns; a {c}-lane output stage; 1 W.",
        "Not represented: address offsets, request buffers, banks, layouts, sparsity, Ramulator traces.",
        "Weights are single-buffered: SCALE-Sim's folds never overlap a weight load with a stream.",
    ]

    def sram(name: str, kb: int, holds: str, words: int) -> dict:
        access = min(words, kb * 1024)
        return {"name": name, "capacity": f"{kb} KiB", "bandwidth": f"{words * CLOCK_HZ / 1e9:g} GB/s",
                "latency": "1 cycle", "holds": [holds], "access": f"{access} B",
                "read_energy": f"{access * 10 / 8:g} pJ", "write_energy": f"{access * 10 / 8:g} pJ"}

    data = {
        "version": 1, "name": cfg.run_name, "kind": "systolic",
        "description": f"{r}x{c} {cfg.dataflow.upper()} systolic array from SCALE-Sim config {source}",
        "clock": f"{CLOCK_HZ / 1e9:g} GHz",
        "compute": [
            {"name": "pe_array", "role": "matrix", "count": 1, "macs_per_cycle": {"int8": r * c},
             "array": {"rows": r, "cols": c, "accumulator_bits": 32, "weight_buffers": 1},
             "dataflows": [cfg.dataflow], "mac_energy": {"int8": "0.3 pJ"}},
            {"name": "output_stage", "role": "vector", "count": 1, "ops_per_cycle": {"int32": c, "int8": c},
             "op_energy": {"int32": "0.1 pJ", "int8": "0.03 pJ"}},
        ],
        "memory": [
            {"name": "dram", "capacity": "4 GiB", "bandwidth": f"{gbps:g} GB/s", "latency": "100 ns",
             "holds": ["weight", "input", "output"], "access": "64 B", "read_energy": "10.4 nJ",
             "write_energy": "10.4 nJ"},
            sram("ifmap_sram", cfg.ifmap_kb, "input", r),
            sram("filter_sram", cfg.filter_kb, "weight", c),
            sram("ofmap_sram", cfg.ofmap_kb, "output", c),
        ],
        "power": {"tdp": "1 W"},
    }
    notes = {"memory[1].bandwidth": "one word per array row per cycle",
             "memory[2].bandwidth": "one word per array column per cycle",
             "memory[3].bandwidth": "one word per array column per cycle"}
    return data, header, notes


def convert(path: str | os.PathLike) -> str:
    """`accelsim arch convert`: the YAML text for a .cfg file, checked by the arch schema as it is written."""
    data, header, notes = to_arch(read_cfg(path), Path(path).name)
    return arch_yaml(data, header, notes, shown=str(path))


def load_cfg(path: str | os.PathLike) -> Arch:
    """A .cfg file as an Arch, converted in memory and checked by the arch loader."""
    path = Path(path)
    if not path.is_file():
        raise CfgError(f"{path}: no such SCALE-Sim config file")
    return load_arch_text(convert(path), str(path), path.resolve())
