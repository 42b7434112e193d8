"""Run SCALE-Sim v3 beside accelsim: regenerate the golden compute-cycle table, or time both on one GEMM.

SCALE-Sim lives in its own throwaway venv (it pins numpy < 2.4); this script drives it in a child process
and never imports it. Setup:
  python3 -m venv /tmp/scalesim-venv && /tmp/scalesim-venv/bin/pip install scalesim 'numpy<2.4'
  .venv/bin/python benchmarks/scalesim_compare.py golden   # rewrites tests/golden/scalesim_v3*.csv
  .venv/bin/python benchmarks/scalesim_compare.py files    # only scalesim_v3_files.csv (SCALE-Sim's files)
  .venv/bin/python benchmarks/scalesim_compare.py check    # our compat cycles against that table
  .venv/bin/python benchmarks/scalesim_compare.py speed    # 1024^3 GEMM, 32x32 WS: wall time and peak RSS, both
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "scalesim_v3.csv"
# SCALE-Sim's own files as users hand them over: topologies (conv with a depthwise "DP" row, a `#dw`
# comment and a stride that does not divide; GEMM) on .cfg files, one per dataflow. Its per-layer report
# lands in FILES_GOLDEN, a depthwise layer as one row per channel (`<name>Channel_<i>`), as SCALE-Sim names them.
FILES = [(topo, f"scalesim_16x8_{df}.cfg") for df in ("os", "ws", "is")
         for topo in ("scalesim_conv.csv", "scalesim_gemm.csv")]
FILES_GOLDEN = ROOT / "tests" / "golden" / "scalesim_v3_files.csv"
COLUMNS = ["form", "name", "ifmap_h", "ifmap_w", "filter_h", "filter_w", "channels", "num_filter", "stride",
           "rows", "cols", "dataflow", "bandwidth", "total_cycles", "stall_cycles", "compute_cycles"]

# Workloads: GEMMs (M, N, K) and convs (H, W, R, S, C, K, stride), ragged on purpose (17, 13, 65 ...),
# degenerate (1s), one fold and many; each on square, non-square and odd arrays, in all three dataflows.
GEMMS = [(8, 8, 8), (20, 13, 17), (5, 30, 9), (1, 64, 64), (64, 1, 64), (64, 64, 1), (33, 17, 65),
         (100, 7, 3), (128, 128, 128), (1, 1, 1), (3, 250, 40)]
CONVS = [(14, 14, 3, 3, 16, 32, 1), (15, 15, 3, 3, 8, 12, 2), (8, 8, 1, 1, 64, 10, 1), (28, 28, 5, 5, 3, 6, 1),
         (13, 11, 3, 5, 7, 9, 2), (32, 32, 7, 7, 3, 16, 2), (9, 9, 9, 9, 2, 3, 1)]
ARRAYS = [(8, 8), (4, 16), (16, 4), (32, 32), (7, 5)]
DATAFLOWS = ["os", "ws", "is"]
# A few runs with a finite DRAM bandwidth (words per cycle), so that SCALE-Sim stalls: total minus stall
# cycles must not change with the bandwidth.
STALLED = [((8, 8), "ws", 2), ((16, 4), "os", 1), ((4, 16), "is", 3)]

CFG = """[general]
run_name = run

[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: 64
FilterSramSzkB: 64
OfmapSramSzkB: 64
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Dataflow: {dataflow}
Bandwidth: {bandwidth}
ReadRequestBuffer: 128
WriteRequestBuffer: 128

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport: false
SparseRep: ellpack_block
OptimizedMapping: false
BlockSize: 8
RandomNumberGeneratorSeed: 40

[run_presets]
InterfaceBandwidth: {mode}
UseRamulatorTrace: False
"""

# Runs inside the SCALE-Sim venv: one scalesim run per group (one array, dataflow, form), all of the
# group's layers in one topology file; prints the COMPUTE_REPORT rows as JSON.
DRIVER = r"""
import json, os, sys, tempfile
from scalesim.scale_sim import scalesim
groups = json.load(sys.stdin)
out = []
for g in groups:
    d = tempfile.mkdtemp()
    open(os.path.join(d, "run.cfg"), "w").write(g["cfg"])
    open(os.path.join(d, "topo.csv"), "w").write(g["topology"])
    open(os.path.join(d, "layout.csv"), "w").write("Layer name,\n")
    sim = scalesim(save_disk_space=True, verbose=False, config=os.path.join(d, "run.cfg"),
                   topology=os.path.join(d, "topo.csv"), layout=os.path.join(d, "layout.csv"),
                   input_type_gemm=g["gemm"])
    sim.run_scale(top_path=os.path.join(d, "out"))
    report = os.path.join(d, "out", sim.config.get_run_name(), "COMPUTE_REPORT.csv")
    lines = open(report).read().strip().splitlines()[1:]
    out.append([[float(x) for x in line.split(",")[:4]] for line in lines])
json.dump(out, sys.stdout)
"""


def topology(form: str, layers: list[tuple]) -> str:
    """A SCALE-Sim topology file: its header spellings, and the trailing comma it needs on every row."""
    if form == "gemm":
        rows = ["Layer,M,N,K,"] + [f"g{i},{m},{n},{k}," for i, (m, n, k) in enumerate(layers)]
    else:
        rows = ["Layer name,IFMAP Height,IFMAP Width,Filter Height,Filter Width,Channels,Num Filter,Strides,"]
        rows += [f"c{i}," + ",".join(map(str, layer)) + "," for i, layer in enumerate(layers)]
    return "\n".join(rows) + "\n"


def run_scalesim(venv: Path, groups: list[dict]) -> list[list[list[float]]]:
    python = venv / "bin" / "python"
    if not python.exists():
        sys.exit(f"{python} not found; create it: python3 -m venv {venv} && {venv}/bin/pip install scalesim "
                 f"'numpy<2.4'")
    proc = subprocess.run([str(python), "-c", DRIVER], input=json.dumps(groups), capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr)
    return json.loads(proc.stdout)


def golden(venv: Path, out: Path) -> None:
    plans = [((r, c), df, None) for r, c in ARRAYS for df in DATAFLOWS] + STALLED
    groups, meta = [], []
    for (r, c), df, bandwidth in plans:
        for form, layers in (("gemm", GEMMS), ("conv", CONVS)):
            cfg = CFG.format(rows=r, cols=c, dataflow=df, bandwidth=bandwidth or 10,
                             mode="USER" if bandwidth else "CALC")
            groups.append({"cfg": cfg, "topology": topology(form, layers), "gemm": form == "gemm"})
            meta.append((form, layers, r, c, df, bandwidth or "calc"))
    reports = run_scalesim(venv, groups)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for (form, layers, r, c, df, bw), report in zip(meta, reports):
            for i, (layer, (_, _, total, stall)) in enumerate(zip(layers, report)):
                if form == "gemm":
                    # SCALE-Sim reads a GEMM row as a conv of an M x K ifmap with 1 x K filters, N of them.
                    m, n, k = layer
                    shape = (m, k, 1, k, 1, n, 1)
                else:
                    shape = layer
                writer.writerow([form, f"{form[0]}{i}", *shape, r, c, df, bw, int(total), int(stall),
                                 int(total) - int(stall)])
    print(f"wrote {out}: {sum(len(m[1]) for m in meta)} rows")
    golden_files(venv)


def golden_files(venv: Path) -> None:
    folder = FILES_GOLDEN.parent
    groups = [{"cfg": (folder / cfg).read_text(), "topology": (folder / topo).read_text(), "gemm": "gemm" in topo}
              for topo, cfg in FILES]
    reports = run_scalesim(venv, groups)
    with FILES_GOLDEN.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["topology", "cfg", "layer_id", "layer", "total_cycles", "stall_cycles", "compute_cycles"])
        count = 0
        for (topo, cfg), report in zip(FILES, reports):
            names = _layer_names(folder / topo)
            assert len(names) == len(report), (topo, names, len(report))
            for i, (name, (_, _, total, stall)) in enumerate(zip(names, report)):
                writer.writerow([topo, cfg, i, name, int(total), int(stall), int(total) - int(stall)])
                count += 1
    print(f"wrote {FILES_GOLDEN}: {count} rows")


def _layer_names(topology_file: Path) -> list[str]:
    """SCALE-Sim's layers in report order: a name containing "DP" expands to one layer per channel."""
    names = []
    for line in topology_file.read_text().splitlines()[1:]:
        cells = [c.strip() for c in line.split(",")]
        if not cells[0]:
            continue
        channels = int(cells[5]) if "DP" in cells[0] else 1
        names += [f"{cells[0]}Channel_{i}" for i in range(channels)] if "DP" in cells[0] else [cells[0]]
    return names

def check(path: Path) -> int:
    sys.path.insert(0, str(ROOT))
    from accelsim.price.compat import compat_layer_cycles

    bad = 0
    rows = list(csv.DictReader(path.open()))
    for row in rows:
        ours = compat_layer_cycles(*(int(row[k]) for k in COLUMNS[2:9]), int(row["rows"]), int(row["cols"]),
                                   row["dataflow"])
        if ours != int(row["compute_cycles"]):
            bad += 1
            print(f"MISMATCH {row}: ours {ours}")
    print(f"{len(rows) - bad}/{len(rows)} rows equal")
    return 1 if bad else 0


def speed(venv: Path, size: int) -> None:
    """One GEMM on a 32x32 WS array, SCALE-Sim in a child process: wall time and peak RSS of each."""
    import resource

    cfg = CFG.format(rows=32, cols=32, dataflow="ws", bandwidth=10, mode="CALC")
    groups = [{"cfg": cfg, "topology": topology("gemm", [(size, size, size)]), "gemm": True}]
    start = time.perf_counter()
    report = run_scalesim(venv, groups)[0][0]
    theirs = time.perf_counter() - start
    their_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024   # the only child: SCALE-Sim
    sys.path.insert(0, str(ROOT))
    from accelsim.price.compat import compat_layer_cycles

    start = time.perf_counter()
    ours = compat_layer_cycles(size, size, 1, size, 1, size, 1, 32, 32, "ws")
    mine = time.perf_counter() - start
    our_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"GEMM {size}^3 on 32x32 WS, compute cycles: SCALE-Sim {int(report[2] - report[3])}, accelsim {ours}")
    print(f"SCALE-Sim {theirs:.1f} s, peak {their_peak:.0f} MiB; accelsim compat {mine * 1e3:.3f} ms, "
          f"peak {our_peak:.0f} MiB (whole process); ratio {theirs / max(mine, 1e-9):,.0f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["golden", "files", "check", "speed"])
    parser.add_argument("--venv", type=Path, default=Path("/tmp/scalesim-venv"))
    parser.add_argument("--out", type=Path, default=GOLDEN)
    parser.add_argument("--size", type=int, default=1024, help="GEMM size for `speed`")
    args = parser.parse_args()
    if args.what == "golden":
        golden(args.venv, args.out)
    elif args.what == "files":
        golden_files(args.venv)
    elif args.what == "check":
        sys.exit(check(args.out))
    else:
        speed(args.venv, args.size)


if __name__ == "__main__":
    main()
