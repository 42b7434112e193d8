"""How fast `accelsim train` simulates a training step, warm, in process, and how much memory the simulator takes:
a GPT-2-small step (batch 8 x 1,024 tokens, AdamW, bf16) on the H100 (target under 2 s), a Llama-2-7B step (batch 1
x 4,096 tokens, AdamW, bf16) on the H100 (target under 5 s), AlexNet (batch 128, SGD, fp32) on the GTX 580; peak
memory is the process's high-water RSS (target under 500 MB).

Each workload runs once to warm numba's cached kernels, then is timed afresh (its mapping cache cleared) and once
more with the cache warm (what a second run of the same model costs).
Run: .venv/bin/python benchmarks/train_speed.py
"""
from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelsim.sim.train import train  # noqa: E402
from compiler.map import CACHE  # noqa: E402

WORKLOADS = {
    "gpt2 b8 x 1024, adamw, bf16 on h100": (dict(model="gpt2", arch="h100", batch=8, seq=1024, optimizer="adamw"), 2.0),
    "llama-2-7b b1 x 4096, adamw, bf16 on h100": (dict(model="llama", arch="h100", batch=1, seq=4096,
                                                       optimizer="adamw"), 5.0),
    "alexnet b128, sgd, fp32 on gtx580": (dict(model="alexnet", arch="gtx580", batch=128, optimizer="sgd"), None),
}


def main() -> int:
    train("gpt2", "h100", batch=1, seq=64, layers=1)       # warm numba's kernels once
    print(f"{'workload':<44} {'fresh s':>8} {'cached s':>9} {'target s':>9} {'step (sim)':>11}")
    for name, (kwargs, target) in WORKLOADS.items():
        CACHE.clear()
        start = time.perf_counter()
        result = train(**kwargs)
        fresh = time.perf_counter() - start
        start = time.perf_counter()
        train(**kwargs)
        cached = time.perf_counter() - start
        shown = f"{target:.1f}" if target else "-"
        print(f"{name:<44} {fresh:>8.2f} {cached:>9.2f} {shown:>9} {result.seconds * 1e3:>9.1f} ms")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory of the simulator: {peak:,.0f} MB (target 500 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
