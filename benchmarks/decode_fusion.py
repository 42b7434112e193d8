"""One decode step of Llama-2-7B (fp16) and BitNet b1.58 3B (ternary weights, int8 activations) on the A100 and
H100 presets, priced as separate kernels launched one by one (before kernels were formed) and as runtimes run it:
kernels fused (`--fusion runtime`) and launched as one captured graph (`--launch graph`), side by side in one run;
then the published decode steps of validation/published/workloads.csv, before and now, beside their measurements.

Rerun: .venv/bin/python benchmarks/decode_fusion.py [--past 1024]
(each row is also one command: .venv/bin/accelsim run llama --arch h100 --dtype fp16 --opt mode=decode
 --opt past=1024 --fusion none --launch eager)
"""
from __future__ import annotations

import argparse

CASES = [("llama", "a100", "fp16"), ("llama", "h100", "fp16"), ("bitnet_b158", "a100", None),
         ("bitnet_b158", "h100", None)]
MODES = [("none", "eager"), ("runtime", "eager"), ("runtime", "graph")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--past", type=int, default=1024, help="tokens already in the KV cache (default 1024)")
    opts = parser.parse_args()
    from accelsim.sim.api import run

    header = f"{'model':12} {'arch':5} " + " ".join(f"{f + '/' + l:>16}" for f, l in MODES) + \
        f" {'kernels':>15} {'bytes/HBM':>10}"
    print(header)
    for model, arch, dtype in CASES:
        times, kernels = [], []
        for fusion, launch in MODES:
            result = run(model, arch=arch, dtype=dtype, mode="decode", past=opts.past, fuse=fusion, launch=launch)
            times.append(result.seconds)
            kernels.append(sum(1 for op in result.ops if not op.kernel and (op.macs or op.ops)))
        floor = bytes_floor(result)
        print(f"{model:12} {arch:5} " + " ".join(f"{t * 1e3:13.2f} ms" for t in times) +
              f" {kernels[0]:>6} -> {kernels[-1]:>5} {floor * 1e3:7.2f} ms")
    print("bytes/HBM: the step's DRAM bytes at the preset's full DRAM bandwidth (the floor a decode step nears)")
    published(run)


def published(run) -> None:
    """The decode steps others measured (validation/published/workloads.csv), predicted unfused and eager (before)
    and as runtimes run them (now), beside the measurement."""
    from accelsim.validate import published_workloads as pw

    rows = [r for r in pw.read() if r.kind == "decode" and r.scored]
    print(f"\npublished decode steps ({len(rows)} scored rows of validation/published/workloads.csv)")
    print(f"{'case':46} {'arch':5} {'measured':>11} {'before':>11} {'now':>11} {'now/measured':>12}")
    for r in rows:
        options = dict(r.workload.options)
        batch = options.pop("batch", 1)
        before = run(r.workload.model, arch=r.arch, dtype=r.workload.dtype, batch=batch, fuse="none", launch="eager",
                     **options).seconds
        now = run(r.workload.model, arch=r.arch, dtype=r.workload.dtype, batch=batch, **options).seconds
        print(f"{r.case:46} {r.arch:5} {r.measured_s * 1e3:8.2f} ms {before * 1e3:8.2f} ms {now * 1e3:8.2f} ms "
              f"{now / r.measured_s:>12.3f}")


def bytes_floor(result) -> float:
    from accelsim.sim.model import load_arch

    arch = load_arch(result.arch["name"])
    dram = arch.memory[0]
    return sum(op.bytes_by_level.get(dram.name, 0) for op in result.ops) / dram.bandwidth_total


if __name__ == "__main__":
    main()
