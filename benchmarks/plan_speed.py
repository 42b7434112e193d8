"""How fast the planner and one parallel training step run, and how much memory they take: GPT-3 175B (96 layers,
hidden 12,288, 96 heads, sequence 2,048, the vocabulary padded to 51,200 as Megatron-LM pads it; the zoo's gpt2
builder) on 1,024 A100s of DGX A100 nodes, batch 1,536, AdamW.

1. One step under tp=8, pp=16, dp=8, mb=192, ZeRO 1, full recomputation (train_parallel, warm, in this process):
   target under 2 s; then the same step again, its stage programs cached (accelsim.parallel.train.simulate_stage),
   as a planner meets it.
2. `accelsim plan` over every candidate plan (8,940: dp x tp x pp, micro-batches, 1F1B or interleaved, three
   recomputation modes, ZeRO 0-3) with --workers (default 2): target under 60 s; its CPU seconds, workers included;
   with --exhaustive, every plan that fits simulated too (none pruned by its lower bound), for comparison.
3. The README's plan, as a user runs it: `accelsim plan gpt2 --system dgx_a100 --devices 16 --batch 64 --seq 1024
   --train --optimizer adamw --recompute none --zero 0,1`, cold (ACCELSIM_CACHE=off: no mapping from disk), its
   default workers: target under 10 s wall on 2 cores; its CPU seconds, workers included, and its peak RSS.
Peak memory is the high-water RSS of this process (target under 500 MB) and of the largest worker.
Run: .venv/bin/python benchmarks/plan_speed.py [--workers 2] [--skip-step] [--skip-plan] [--skip-readme]
     [--exhaustive] [--repeat N]
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelsim.parallel import train as parallel_train  # noqa: E402
from accelsim.parallel.search import search  # noqa: E402
from accelsim.parallel.train import train_parallel  # noqa: E402

# vocabulary padded
GPT3 = dict(layers=96, hidden=12288, heads=96, mlp=49152, vocab=51200, max_positions=2048, seq=2048)
PLAN = "dp=8,tp=8,pp=16,mb=192,zero=1"                  # as docs/multidevice.md, section 2


def step() -> None:
    train_parallel("gpt2", "dgx_a100", devices=16, parallel="tp=8,pp=2,mb=2", batch=4, optimizer="adamw",
                   **{**GPT3, "layers": 2, "seq": 128})             # numba's kernels and the link engine, warm
    parallel_train._STAGES.clear()
    start = time.perf_counter()
    result = train_parallel("gpt2", "dgx_a100", devices=1024, parallel=PLAN, batch=1536, optimizer="adamw",
                            recompute="full", **GPT3)
    fresh = time.perf_counter() - start
    start = time.perf_counter()
    train_parallel("gpt2", "dgx_a100", devices=1024, parallel=PLAN, batch=1536, optimizer="adamw", recompute="full",
                   **GPT3)
    cached = time.perf_counter() - start
    print(f"one step, {PLAN}: {fresh:.2f} s warm (target 2 s), {cached:.2f} s with its stage programs cached; "
          f"the step {result.seconds:.2f} s, MFU {result.mfu():.1%}, {result.memory['peak'] / 2**30:.1f} GiB at "
          f"the fullest device")


def plan(workers: int, exhaustive: bool) -> None:
    start, cpu = time.perf_counter(), time.process_time()
    found = search("gpt2", "dgx_a100", devices=1024, batch=1536, optimizer="adamw", workers=workers,
                   exhaustive=exhaustive, **GPT3)
    wall = time.perf_counter() - start
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = time.process_time() - cpu + children.ru_utime + children.ru_stime
    best = found.best
    print(f"plan: {found.candidates:,} candidates, {len(found.ranked) + len(found.pruned):,} fit "
          f"({len(found.ranked):,} "
          f"simulated, {len(found.pruned):,} pruned by their bound), {len(found.discarded):,} discarded "
          f"{found.reasons()}; {wall:.1f} s on {found.workers} workers (target 60 s), {used:.0f} CPU s; largest "
          f"worker {children.ru_maxrss / 1024:,.0f} MB")
    print(f"best: {best.text}: step {best.seconds:.2f} s, MFU {best.mfu:.1%}, {best.memory['peak'] / 2**30:.1f} GiB; "
          f"{best.bottleneck}")


README = ["plan", "gpt2", "--system", "dgx_a100", "--devices", "16", "--batch", "64", "--seq", "1024", "--train",
          "--optimizer", "adamw", "--recompute", "none", "--zero", "0,1"]


def readme(repeat: int) -> None:
    """The README's plan from the command line, cold, `repeat` times: each run's wall and CPU seconds."""
    runs = []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "accelsim.cli", *README, "--quiet"], capture_output=True,
                              text=True, env={**os.environ, "ACCELSIM_CACHE": "off"})
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode:
            raise SystemExit(f"accelsim {' '.join(README)} failed ({done.returncode}): {done.stderr}")
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        runs.append((wall, cpu))
    best = min(runs)
    print(f"README plan (GPT-2, 16 A100s, cold): {best[0]:.1f} s wall (target 10 s), {best[1]:.1f} CPU s, workers "
          f"included, best of {repeat} (each: {', '.join(f'{w:.1f} s' for w, _ in runs)}); "
          f"{done.stdout.splitlines()[0]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip-step", action="store_true")
    parser.add_argument("--skip-plan", action="store_true")
    parser.add_argument("--skip-readme", action="store_true")
    parser.add_argument("--exhaustive", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the README's plan (its best is reported)")
    args = parser.parse_args()
    if not args.skip_step:
        step()
    if not args.skip_plan:
        plan(args.workers, args.exhaustive)
    if not args.skip_readme:
        readme(args.repeat)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory of this process: {peak:,.0f} MB (target 500 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
