"""How fast the `accelsim` command starts: whole-process medians of 5 (warm caches) for the listing commands, the
help pages and `run resnet50 --arch tpu_v1`, and the in-process `accelsim.run("resnet50", "tpu_v1")`: its first
call in a fresh process (imports done; the run, or where a tree has no run cache its mappings, read from the on-disk
cache an earlier process wrote: compiler.map.disk, accelsim.sim.cache) and a warm one.

Targets: models, archs and every --help under 0.3 s; `run resnet50 --arch tpu_v1` under 1.0 s; the first call
under 50 ms. Every run shares one fresh ACCELSIM_CACHE folder (compiler.map.disk), removed afterwards.
Each row is measured with bytecode caching off (PYTHONDONTWRITEBYTECODE=1, as this environment sets it) and on (as
users have it: the .pyc files written by a first run, then read). `--before REV` measures REV side by side, checked
out into a temporary `git worktree` under /tmp that is removed afterwards. `--clock cpu` counts the processes' CPU
seconds (user + system) instead of wall seconds: steadier where other work shares the cores.
Run: .venv/bin/python benchmarks/cli_speed.py [--before REV] [--repeats 5] [--pyc off|on|both] [--clock wall|cpu]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = [["models"], ["archs"], ["--help"], ["run", "--help"], ["run", "resnet50", "--arch", "tpu_v1"]]
# What the `accelsim` console script runs; -c puts the working directory (the tree measured) first on sys.path.
ENTRY = "import sys; from accelsim.cli import main; sys.exit(main())"
# argv[1] names the clock: time.perf_counter (wall) or time.process_time (CPU)
FIRST_CALL = """
import sys, time
import accelsim, accelsim.sim.api
clock = getattr(time, sys.argv[1])
start = clock()
accelsim.run("resnet50", "tpu_v1")                 # read back whole (older trees: numba loads, the model builds)
print(clock() - start)
"""
IN_PROCESS = """
import statistics, sys, time
import accelsim
clock = getattr(time, sys.argv[1])
accelsim.run("resnet50", "tpu_v1")                 # the first call, as above
seconds = []
for _ in range(int(sys.argv[2])):
    start = clock()
    accelsim.run("resnet50", "tpu_v1")
    seconds.append(clock() - start)
print(statistics.median(seconds))
"""
CLOCKS = {"wall": "perf_counter", "cpu": "process_time"}


CACHE = tempfile.mkdtemp(prefix="accelsim-cache-")


def elapsed(clock: str) -> float:
    """Now, on `clock`: wall seconds, or the CPU seconds (user + system) of every child process waited for so far."""
    if clock == "wall":
        return time.perf_counter()
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def environment(pyc: bool) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["ACCELSIM_CACHE"] = CACHE
    if not pyc:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def whole_process(tree: Path, argv: list[str], repeats: int, pyc: bool, clock: str) -> float:
    """Median seconds on `clock` of `accelsim ARGV` run from `tree`, after one unmeasured run that warms the caches."""
    command = [sys.executable, "-c", ENTRY, *argv]
    env = environment(pyc)
    seconds = []
    for i in range(repeats + 1):
        start = elapsed(clock)
        done = subprocess.run(command, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if done.returncode != 0:
            raise SystemExit(f"accelsim {' '.join(argv)} in {tree} failed:\n{done.stderr.decode()}")
        if i:
            seconds.append(elapsed(clock) - start)
    return statistics.median(seconds)


def in_process(tree: Path, repeats: int, pyc: bool, clock: str) -> float:
    """Median seconds of a warm `accelsim.run("resnet50", "tpu_v1")` (every call after the first)."""
    done = subprocess.run([sys.executable, "-c", IN_PROCESS, CLOCKS[clock], str(repeats)], cwd=tree,
                          env=environment(pyc), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"accelsim.run in {tree} failed:\n{done.stderr}")
    return float(done.stdout.split()[-1])


def first_call(tree: Path, repeats: int, pyc: bool, clock: str) -> float:
    """Median seconds of the first `accelsim.run("resnet50", "tpu_v1")` in a fresh process (after `run resnet50`
    above has filled the on-disk cache, where the tree has one)."""
    seconds = []
    for _ in range(repeats):
        done = subprocess.run([sys.executable, "-c", FIRST_CALL, CLOCKS[clock]], cwd=tree, env=environment(pyc),
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"accelsim.run in {tree} failed:\n{done.stderr}")
        seconds.append(float(done.stdout.split()[-1]))
    return statistics.median(seconds)


def measure(tree: Path, repeats: int, pyc: bool, clock: str) -> list[float]:
    return [whole_process(tree, argv, repeats, pyc, clock) for argv in COMMANDS] + [
        first_call(tree, repeats, pyc, clock), in_process(tree, repeats, pyc, clock)]


def worktree(rev: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="accelsim-before-")) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(folder), rev], check=True)
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="REV", help="a git revision to measure beside the working tree")
    parser.add_argument("--repeats", type=int, default=5, help="runs per row, median kept (default 5)")
    parser.add_argument("--pyc", choices=["off", "on", "both"], default="both",
                        help="bytecode caching: off (PYTHONDONTWRITEBYTECODE=1), on, or both (default)")
    parser.add_argument("--clock", choices=list(CLOCKS), default="wall",
                        help="wall seconds (default) or the processes' CPU seconds, steadier on shared cores")
    args = parser.parse_args()
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.pyc]
    labels = [f"accelsim {' '.join(argv)}" for argv in COMMANDS] + ['accelsim.run("resnet50", "tpu_v1") first',
                                                                    'accelsim.run("resnet50", "tpu_v1") warm']
    columns: dict[str, list[float]] = {}
    before = worktree(args.before) if args.before else None
    try:
        for pyc in modes:
            suffix = "pyc" if pyc else "no pyc"
            if before:
                columns[f"before {suffix}"] = measure(before, args.repeats, pyc, args.clock)
            columns[f"after {suffix}" if before else suffix] = measure(ROOT, args.repeats, pyc, args.clock)
    finally:
        shutil.rmtree(CACHE, ignore_errors=True)
        if before:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)], check=True)
            before.parent.rmdir()
    width = max(map(len, labels))
    heading = f"{args.clock} seconds, median of {args.repeats}"
    print(f"{heading:{width}}  " + "  ".join(f"{c:>13}" for c in columns))
    for row, label in enumerate(labels):
        print(f"{label:{width}}  " + "  ".join(f"{values[row]:13.3f}" for values in columns.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
