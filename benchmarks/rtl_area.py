"""Cell counts of rtl/systolic_core.v from Yosys generic synthesis, written to accelsim/data/rtl_area.json.

Runs rtl/synth/core_area.ys (`synth -flatten`, ACC_DEPTH = 1) for int8 and ternary weights at several array
sizes and records total cells, cells by type, flip-flops, the exact script, the Yosys version and its wall time;
accelsim/arch/area.py fits the totals. Run from anywhere: .venv/bin/python benchmarks/rtl_area.py
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from string import Template

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "rtl" / "synth" / "core_area.ys"
OUTPUT = ROOT / "accelsim" / "data" / "rtl_area.json"
VARIANTS = {"int8": 0, "ternary": 1}                                  # variant -> TERNARY parameter
SIZES = ((2, 2), (4, 4), (8, 8), (16, 16), (4, 8), (8, 4))           # (rows, cols)
ACC_DEPTHS = (1, 2, 4)                                                # accumulator rows, on a 4x4 int8 core
MODULE = "systolic_core"


def yosys_version() -> str:
    return subprocess.run(["yosys", "-V"], capture_output=True, text=True, check=True).stdout.strip()


def script(variant: str, rows: int, cols: int, acc_depth: int = 1) -> str:
    """The Yosys script for one synthesis; RTL paths are relative to the repository root (Yosys runs there)."""
    return Template(TEMPLATE.read_text()).substitute(
        rtl="rtl", rows=rows, cols=cols, ternary=VARIANTS[variant], acc_depth=acc_depth)


def parse_stat(log: str) -> tuple[int, dict[str, int]]:
    """(total cells, cells by type) from the last `stat` report of the top module in a Yosys log."""
    section = log.rsplit(f"=== {MODULE} ===", 1)[-1]
    total = int(re.search(r"Number of cells:\s+(\d+)", section).group(1))
    by_type = {name: int(count) for name, count in re.findall(r"^\s+(\$\S+)\s+(\d+)\s*$", section, re.M)}
    if sum(by_type.values()) != total:
        raise RuntimeError(f"cell types add up to {sum(by_type.values())}, not the {total} cells Yosys reports")
    return total, by_type


def synth(variant: str, rows: int, cols: int, acc_depth: int = 1) -> dict:
    """Synthesize one core and return its entry for the JSON file."""
    text = script(variant, rows, cols, acc_depth)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "core_area.ys"
        path.write_text(text)
        start = time.perf_counter()
        run = subprocess.run(["yosys", "-s", str(path)], cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - start
    if run.returncode != 0:
        raise RuntimeError(f"yosys failed on {variant} {rows}x{cols}:\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
    total, by_type = parse_stat(run.stdout)
    return {"variant": variant, "rows": rows, "cols": cols, "acc_depth": acc_depth, "module": MODULE,
            "cells": total, "flip_flops": sum(n for name, n in by_type.items() if "DFF" in name),
            "cells_by_type": by_type, "yosys_command": "yosys -s core_area.ys", "yosys_script": text,
            "yosys_seconds": round(seconds, 2)}


def main() -> None:
    if shutil.which("yosys") is None:
        sys.exit("yosys is not on PATH")
    arrays = []
    for variant in VARIANTS:
        for rows, cols in SIZES:
            entry = synth(variant, rows, cols)
            arrays.append(entry)
            print(f"{variant:8} {rows:3}x{cols:<3} {entry['cells']:8,} cells {entry['flip_flops']:7,} FFs "
                  f"{entry['yosys_seconds']:7.1f} s", flush=True)
    accumulator = [synth("int8", 4, 4, depth) for depth in ACC_DEPTHS]
    per_row = (accumulator[-1]["cells"] - accumulator[0]["cells"]) / (ACC_DEPTHS[-1] - ACC_DEPTHS[0])
    print(f"accumulator, 4x4 int8: {per_row:.0f} cells per accumulator row (flip-flops and multiplexers)")
    OUTPUT.parent.mkdir(exist_ok=True)
    OUTPUT.write_text(json.dumps({
        "yosys_version": yosys_version(),
        "flow": "rtl/synth/core_area.ys (Yosys generic synth -flatten; cells are Yosys internal gates)",
        "counted": f"{MODULE} at ACC_DEPTH=1: PE array, skew, de-skew, handshake and one accumulator row; "
                   "the accumulator memory is left out (an SRAM in a real chip), see accumulator",
        "arrays": arrays,
        "accumulator": {"note": "4x4 int8 core at several ACC_DEPTH, to price an accumulator row built of gates",
                        "cells_per_row": per_row, "entries": accumulator},
    }, indent=1) + "\n")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
