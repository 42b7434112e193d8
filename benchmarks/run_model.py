"""Time `accelsim run` end to end (start-up, model build or ONNX import, lowering, roofline, table)
and its peak memory, each run in a fresh process.

Rerun: .venv/bin/python benchmarks/run_model.py [MODEL] [--arch ARCH] [--repeat N] [-- extra accelsim args]
e.g.   .venv/bin/python benchmarks/run_model.py resnet50 --arch tpu_v1
       .venv/bin/python benchmarks/run_model.py gpt2.onnx --arch h100   (an exported file: import included)
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ACCELSIM = Path(sys.executable).with_name("accelsim")
# The child reports its own peak (VmHWM) on exit; ru_maxrss of children would include other children.
PEAK = "import atexit, sys\natexit.register(lambda: sys.stderr.write(next(l for l in open('/proc/self/status') " \
       "if l.startswith('VmHWM'))))\nfrom accelsim.cli import main\nsys.exit(main(sys.argv[1:]))"


def measure(args: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", PEAK, *args], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        sys.exit(proc.stderr)
    peak_kib = int(proc.stderr.strip().splitlines()[-1].split()[1])
    return wall, peak_kib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="resnet50")
    parser.add_argument("--arch", default="tpu_v1")
    parser.add_argument("--repeat", type=int, default=5)
    opts, extra = parser.parse_known_args()
    args = ["run", opts.model, "--arch", opts.arch, "--json", os.devnull, *[a for a in extra if a != "--"]]
    measure(args)  # warm the file cache and Python's bytecode cache
    runs = [measure(args) for _ in range(opts.repeat)]
    walls = [w for w, _ in runs]
    print(f"accelsim {' '.join(args)}")
    print(f"wall: median {statistics.median(walls):.2f} s (min {min(walls):.2f}, max {max(walls):.2f}) "
          f"over {opts.repeat} runs; peak RSS {max(p for _, p in runs) / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
