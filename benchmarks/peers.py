"""accelsim beside its peers, ZigZag and SCALE-Sim, in one run on the same workloads: time, peak memory, ratios.

Each tool runs in a fresh child process: accelsim from .venv, each peer from its own throwaway venv (nothing of
theirs is imported here or kept in the repository; their inputs are written to a temp dir at run time).
  python3 -m venv /tmp/zigzag-venv && /tmp/zigzag-venv/bin/pip install zigzag-dse six        (3.9.1 here)
  python3 -m venv /tmp/scalesim-venv && /tmp/scalesim-venv/bin/pip install scalesim 'numpy<2.4'
  .venv/bin/python benchmarks/peers.py [--quick] [--skip-zigzag] [--skip-scalesim] [--limit S] [--keep]
wall s: the child process from start to exit (interpreter, imports, file parsing, search, simulation, its
output files); core s: the tool's own call inside it (accelsim.sim.api.run, ZigZag's get_hardware_performance_zigzag,
SCALE-Sim's run_scale); peak MiB: the child's high-water RSS (os.wait4). The speed-up is the peer's time over
the accelsim row it is set against ("vs"), wall / core. accelsim's numba cache is warmed by one untimed run first.
Workloads: ResNet-18 b1 as accelsim exports it to ONNX (ZigZag: a 32x32 int8 WS array with the preset's SRAM
and DRAM sizes and per-cycle bandwidths, mapping K x C on the array; BatchNorm/Relu/Add/pools are ZigZag
DummyNodes, free); ResNet-18's 20 convs and its fc as a SCALE-Sim conv topology (padded input sizes chosen so
the output sizes and MACs equal the ONNX model's) on a 32x32 WS .cfg, SCALE-Sim against accelsim
--compat scalesim, whose compute cycles must equal SCALE-Sim's total minus stall, layer by layer; a 1024^3
GEMM, both ways.

Measured on 2026-11-30, this 2-core machine (accelsim at ab3d2ec..6a8313d, the same cycles at both; ZigZag 3.9.1,
SCALE-Sim 3.0.0; other sessions' jobs running beside it): .venv/bin/python benchmarks/peers.py
  workload              tool              wall s   core s  2nd s peak MiB      cycles compute cyc speed-up wall / core
  resnet18 b1 onnx      accelsim            1.86    0.856  0.239      262   5,948,679   3,978,322
  resnet18 b1 onnx      ZigZag            113.74  111.158      -      248   2,953,980   2,885,632 61.2x / 130x vs accelsim
  resnet18 21 convs csv accelsim compat     1.90    0.868  0.195      203   6,618,144   2,855,031
  resnet18 21 convs csv SCALE-Sim         707.16  706.617      -     6189   2,855,031   2,855,031 373x / 814x vs compat
  gemm 1024^3           accelsim            1.82    0.932  0.029      171   1,736,306   1,241,088
  gemm 1024^3           accelsim compat     1.67    0.775  0.021      165  18,106,003   1,144,831
  gemm 1024^3           ZigZag              7.94    5.245      -      169   1,059,644   1,048,576 4.4x / 5.6x vs accelsim
  gemm 1024^3           SCALE-Sim         403.13  402.854      -     3478   1,144,831   1,144,831 241x / 520x vs compat
  resnet18 21 convs csv: compute cycles accelsim compat 2,855,031 vs SCALE-Sim 2,855,031, 21/21 layers equal: equal
  gemm 1024^3: compute cycles accelsim compat 1,144,831 vs SCALE-Sim 1,144,831, 1/1 layers equal: equal
accelsim's core s includes loading numba's cached kernels (about 0.6 s, once per process); 2nd s is the warm
figure the speed targets mean. The cycles differ by model, not by error: ZigZag prices only Conv/Gemm (the rest
are free DummyNodes), has no DRAM latency, and its compute cycles (ideal_temporal_cycle) are MACs over the
spatially used PEs, without fill, drain or weight loads; accelsim costs every op, vector ones included, with
fill/skew/drain, weight loading and 100 ns DRAM. SCALE-Sim's total (its .cfg: 10 words per cycle, CALC
interface) and accelsim compat's total differ as their memory models do; only the compute cycles must agree.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scalesim_compare as sc  # noqa: E402  (standard library only: CFG, topology(), DRIVER)

ROOT = sc.ROOT
ACCELSIM_PY = ROOT / ".venv" / "bin" / "python"

# Runs in .venv: exports the workloads and lists ResNet-18's convs (and fc) as SCALE-Sim layers,
# (H, W, R, S, C, K, stride) with H = (out - 1) * stride + R, so SCALE-Sim's out = ceil((H - R + s) / s) is ONNX's.
SETUP = r"""
import json, sys
from accelsim.sim.model import load_model
from compiler.builder import Builder
from compiler.export import save_onnx
folder, size = sys.argv[1], int(sys.argv[2])
save_onnx(load_model("resnet18", batch=1, weights=True), folder + "/resnet18.onnx")
b = Builder("gemm")
save_onnx(b.build([b.node("MatMul", [b.input("x", (size, size)), b.weight("w", (size, size))])]), folder + "/gemm.onnx")
g = load_model("resnet18", batch=1)
layers = []
for n in g.nodes:
    if n.op == "Conv":
        (_, c, _, _), (k, _, r, s), (_, _, p, q) = (g.tensors[t].shape for t in (*n.inputs[:2], n.outputs[0]))
        st = n.attr("strides")[0]
        layers.append([(p - 1) * st + r, (q - 1) * st + s, r, s, c, k, st])
    elif n.op == "Gemm":
        k, c = g.tensors[n.inputs[1]].shape
        layers.append([1, 1, 1, 1, c, k, 1])
print(json.dumps(layers))
"""

ACCELSIM = r"""
import json, sys, time
from accelsim.sim.api import run
model, arch, compat = sys.argv[1:4]
start = time.perf_counter()
result = run(model, arch=arch, compat=compat or None)
core = time.perf_counter() - start
from compiler.map.search import CACHE
CACHE.clear()                                # the same run again in this process: mappings searched afresh
start = time.perf_counter()
run(model, arch=arch, compat=compat or None)
again = time.perf_counter() - start
totals = result.totals()
print(json.dumps({"core": core, "again": again, "cycles": totals["cycles"], "compute": totals.get("compute_cycles"),
                  "layers": [op.compute_cycles for op in result.ops if op.kind == "einsum"]}))
"""

ZIGZAG = r"""
import json, logging, sys, time
logging.basicConfig(level=logging.WARNING)   # ZigZag's own INFO log stays off (its basicConfig is then a no-op)
from zigzag.api import get_hardware_performance_zigzag
model, hardware, mapping, dump = sys.argv[1:5]
start = time.perf_counter()
energy, latency, cmes = get_hardware_performance_zigzag(model, hardware, mapping, opt="latency", dump_folder=dump,
                                                        loma_show_progress_bar=False)
core = time.perf_counter() - start
print(json.dumps({"core": core, "cycles": latency, "compute": cmes[0][0].ideal_temporal_cycle}))
"""

# SCALE-Sim's driver from scalesim_compare (its COMPUTE_REPORT rows as JSON on stdout), run_scale timed around it.
SCALESIM_PRE = r"""
import sys, time
import scalesim.scale_sim as _module
_run, _core = _module.scalesim.run_scale, [0.0]
def _timed(self, *args, **kwargs):
    start = time.perf_counter()
    try:
        return _run(self, *args, **kwargs)
    finally:
        _core[0] += time.perf_counter() - start
        print("core", _core[0], file=sys.stderr, flush=True)
_module.scalesim.run_scale = _timed
"""

# systolic_32x32.yaml in ZigZag's format, written as JSON (which its YAML reader takes): sizes in bits, bandwidths
# in bits per cycle at 500 MHz, energies in pJ per access. Per PE: two weight registers (weights double-buffered)
# and a 32-bit accumulator; 64 KiB filter and ifmap SRAMs of 32 B/cycle, a 64 KiB ofmap SRAM of 128 B/cycle;
# 1 GiB DRAM at 12.8 GB/s = 204.8 -> 205 bits/cycle (ZigZag has no DRAM latency: 1 cycle).
MEMORIES = [  # name, operands, bits, bits per cycle, pJ per access, served dimensions
    ("rf_w", ["I2"], 16, 8, 0.01, []), ("rf_o", ["O"], 32, 32, 0.02, []),
    ("filter_sram", ["I2"], 64 * 8192, 256, 80.0, ["D1", "D2"]),
    ("ifmap_sram", ["I1"], 64 * 8192, 256, 80.0, ["D1", "D2"]),
    ("ofmap_sram", ["O"], 64 * 8192, 1024, 320.0, ["D1", "D2"]),
    ("dram", ["I1", "I2", "O"], 8 * 2**30, 205, round(10400 * 205 / 512, 1), ["D1", "D2"])]
MAPPING = [{"name": "default", "spatial_mapping": {"D1": ["K, 32"], "D2": ["C, 32"]},
            "memory_operand_links": {"O": "O", "W": "I2", "I": "I1"}}]


def hardware() -> dict:
    def port(name: str, kind: str, bandwidth: int, allocation: list[str]) -> dict:
        return {"name": name, "type": kind, "bandwidth_min": bandwidth, "bandwidth_max": bandwidth,
                "allocation": allocation}

    memories = {}
    for name, operands, bits, bandwidth, pj, served in MEMORIES:
        if len(operands) > 1:
            ports = [port("rw_port_1", "read_write", bandwidth, [f"{o}, {d}" for o in operands for d in ("fh", "tl")]
                          + ["O, fl", "O, th"])]
        elif name == "rf_o":   # an accumulator: partial sums in and out in one cycle, as in ZigZag's examples
            ports = [port(f"{kind[0]}_port_{i + 1}", kind, bandwidth, [f"O, {d}"])
                     for kind, ways in (("read", ("tl", "th")), ("write", ("fh", "fl"))) for i, d in enumerate(ways)]
        elif operands == ["O"]:
            ports = [port("r_port_1", "read", bandwidth, ["O, tl", "O, th"]),
                     port("w_port_1", "write", bandwidth, ["O, fh", "O, fl"])]
        else:
            ports = [port("r_port_1", "read", bandwidth, [f"{operands[0]}, tl"]),
                     port("w_port_1", "write", bandwidth, [f"{operands[0]}, fh"])]
        memories[name] = {"size": bits, "r_cost": pj, "w_cost": pj, "area": 0.0, "latency": 1, "operands": operands,
                          "ports": ports, "served_dimensions": served}
    return {"name": "systolic_32x32", "memories": memories,
            "operational_array": {"unit_energy": 0.3, "unit_area": 1.0, "dimensions": ["D1", "D2"],
                                  "sizes": [32, 32], "systolic_dimensions": ["D1", "D2"]}}


def measure(command: list[str], limit: float, stdin: str = "", cwd: Path = ROOT) -> dict:
    """Run a child to completion or `limit` seconds: wall time, its own peak RSS, stdout and stderr."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=cwd,
                                 start_new_session=True)
        timer = threading.Timer(limit, lambda: os.killpg(child.pid, signal.SIGKILL))
        timer.start()
        child.stdin.write(stdin.encode())
        child.stdin.close()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        timer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        text, errors = out.read().decode(), err.read().decode()
    over = child.returncode == -signal.SIGKILL and wall >= limit
    if child.returncode and not over:
        sys.exit(f"{command[0]} failed ({child.returncode}):\n{errors[-3000:]}")
    return {"wall": wall, "peak": usage.ru_maxrss / 1024, "over": over, "out": text, "err": errors}


def accelsim(model: Path | str, arch: Path | str, limit: float, compat: str = "") -> dict:
    run = measure([str(ACCELSIM_PY), "-c", ACCELSIM, str(model), str(arch), compat], limit)
    return {**run, **({} if run["over"] else json.loads(run["out"].splitlines()[-1]))}


def zigzag(venv: Path, model: Path, folder: Path, limit: float) -> dict:
    run = measure([str(venv / "bin" / "python"), "-c", ZIGZAG, str(model), str(folder / "zz_hw.yaml"),
                   str(folder / "zz_map.yaml"), str(folder / f"zz_out_{model.stem}")], limit, cwd=folder)
    return {**run, **({} if run["over"] else json.loads(run["out"].splitlines()[-1]))}


def scalesim(venv: Path, cfg: str, topology: str, gemm: bool, limit: float) -> dict:
    group = [{"cfg": cfg, "topology": topology, "gemm": gemm}]
    run = measure([str(venv / "bin" / "python"), "-c", SCALESIM_PRE + sc.DRIVER], limit, json.dumps(group))
    cores = [float(line.split()[1]) for line in run["err"].splitlines() if line.startswith("core ")]
    run["core"] = cores[-1] if cores else None
    if not run["over"]:
        report = json.loads(run["out"])[0]
        run["layers"] = [int(total - stall) for _, _, total, stall in report]
        run["compute"], run["cycles"] = sum(run["layers"]), int(sum(row[2] for row in report))
    return run


def ratio(theirs: float, ours: float) -> str:
    x = theirs / ours
    return f"{x:,.0f}x" if x >= 100 else f"{x:.2g}x" if x < 1 else f"{x:.1f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small workloads; peer runs stop after 60 s")
    parser.add_argument("--skip-zigzag", action="store_true")
    parser.add_argument("--skip-scalesim", action="store_true")
    parser.add_argument("--limit", type=float, help="seconds per peer run (default 900, --quick 60)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir of inputs and peer outputs")
    parser.add_argument("--zigzag-venv", type=Path, default=Path("/tmp/zigzag-venv"))
    parser.add_argument("--scalesim-venv", type=Path, default=Path("/tmp/scalesim-venv"))
    args = parser.parse_args()
    limit = args.limit or (60.0 if args.quick else 900.0)
    size = 256 if args.quick else 1024
    for skip, venv in ((args.skip_zigzag, args.zigzag_venv), (args.skip_scalesim, args.scalesim_venv)):
        if not skip and not (venv / "bin" / "python").exists():
            sys.exit(f"{venv} is missing; create it (see the docstring) or pass --skip-{venv.name.split('-')[0]}")
    folder = Path(tempfile.mkdtemp(prefix="accelsim-peers-"))
    layers = json.loads(measure([str(ACCELSIM_PY), "-c", SETUP, str(folder), str(size)], 600)["out"])
    if args.quick:   # the small layers: the three 1x1 downsamples and the fc
        layers = [layer for layer in layers if layer[2] == 1]
    (folder / "zz_hw.yaml").write_text(json.dumps(hardware(), indent=1))
    (folder / "zz_map.yaml").write_text(json.dumps(MAPPING, indent=1))
    cfg = sc.CFG.format(rows=32, cols=32, dataflow="ws", bandwidth=10, mode="CALC")
    (folder / "ws32.cfg").write_text(cfg)
    (folder / "convs.csv").write_text(sc.topology("conv", [tuple(layer) for layer in layers]))
    (folder / "gemm.csv").write_text(sc.topology("gemm", [(size, size, size)]))
    onnx18, onnx_gemm, preset = folder / "resnet18.onnx", folder / "gemm.onnx", ROOT / "archs" / "systolic_32x32.yaml"
    accelsim(onnx_gemm, preset, 600)   # warms numba's on-disk cache; not timed

    # (workload, tool, thunk, the accelsim row a peer is set against)
    convs, gemm, ws32 = f"resnet18 {len(layers)} convs csv", f"gemm {size}^3", folder / "ws32.cfg"
    plan = [("resnet18 b1 onnx", "accelsim", lambda: accelsim(onnx18, preset, 600), None),
            ("resnet18 b1 onnx", "ZigZag", lambda: zigzag(args.zigzag_venv, onnx18, folder, limit), "accelsim"),
            (convs, "accelsim compat", lambda: accelsim(folder / "convs.csv", ws32, 600, "scalesim"), None),
            (convs, "SCALE-Sim", lambda: scalesim(args.scalesim_venv, cfg, (folder / "convs.csv").read_text(), False,
                                                  limit), "accelsim compat"),
            (gemm, "accelsim", lambda: accelsim(onnx_gemm, preset, 600), None),
            (gemm, "accelsim compat", lambda: accelsim(folder / "gemm.csv", ws32, 600, "scalesim"), None),
            (gemm, "ZigZag", lambda: zigzag(args.zigzag_venv, onnx_gemm, folder, limit), "accelsim"),
            (gemm, "SCALE-Sim", lambda: scalesim(args.scalesim_venv, cfg, (folder / "gemm.csv").read_text(), True,
                                                 limit), "accelsim compat")]
    if args.quick:   # ZigZag takes about 2 minutes on ResNet-18
        plan = [row for row in plan if "onnx" not in row[0]]
    skip = {"ZigZag": args.skip_zigzag, "SCALE-Sim": args.skip_scalesim}
    plan = [row for row in plan if not skip.get(row[1])]

    print("all on a 32x32 int8 weight-stationary array; 2nd s: accelsim's run again in its process, mappings "
          "searched afresh")
    print(f"{'workload':21} {'tool':15} {'wall s':>8} {'core s':>8} {'2nd s':>6} {'peak MiB':>8} {'cycles':>11} "
          f"{'compute cyc':>11} speed-up wall / core", flush=True)
    results: dict[tuple[str, str], dict] = {}
    for workload, tool, thunk, versus in plan:
        r = results[workload, tool] = thunk()

        def number(key: str, width: int, form: str, r: dict = r) -> str:
            return (format(r[key], form) if r.get(key) is not None else "-").rjust(width)

        speedup = ""
        if versus:
            ours = results[workload, versus]
            speedup = (f"{'> ' if r['over'] else ''}{ratio(r['wall'], ours['wall'])} / "
                       + (ratio(r["core"], ours["core"]) if r.get("core") else "-") + f" vs {versus.split()[-1]}")
        wall = ("> " if r["over"] else "") + f"{r['wall']:.2f}"
        print(f"{workload:21} {tool:15} {wall:>8} {number('core', 8, '.3f')} {number('again', 6, '.3f')} "
              f"{r['peak']:8.0f} {number('cycles', 11, ',.0f')} {number('compute', 11, ',.0f')} {speedup}".rstrip(),
              flush=True)
    print()
    for (workload, tool), theirs in results.items():
        ours = results.get((workload, "accelsim compat"))
        if tool == "SCALE-Sim" and ours and "layers" in theirs:
            equal = sum(a == b for a, b in zip(ours["layers"], theirs["layers"]))
            verdict = "equal" if ours["layers"] == theirs["layers"] else "DIFFERENT"
            print(f"{workload}: compute cycles accelsim compat {ours['compute']:,} vs SCALE-Sim {theirs['compute']:,}, "
                  f"{equal}/{len(theirs['layers'])} layers equal: {verdict}")
    if args.keep:
        print(f"inputs and ZigZag's outputs in {folder}")
    else:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
