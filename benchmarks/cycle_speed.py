"""Simulated PE-cycles per second on one workload: the numba cycle-level model against the RTL under Verilator and
Icarus (each driven by the cocotb bench, as `accelsim cosim` and the RTL tests run it), side by side in one run.

    .venv/bin/python benchmarks/cycle_speed.py [--rows 16] [--cols 16] [--m 256] [--k 256] [--n 256]

The workload is one int8 GEMM (m x k) @ (k x n), tiled onto the array back to back; every model sees the same
Stimulus and must produce the same outputs in the same cycles (checked here too). Builds are done (and cached)
before timing; the RTL times are the simulator runs only, the model's the best of 5 warm runs. A third RTL run
compiles the core with a free-running Verilog testbench (benchmarks/verilator_raw.py): Verilator with no Python
in the loop, to show what the cocotb bench costs. `--sims ""` skips the cocotb runs.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from accelsim.sim import cycle
from accelsim.rtl import runner
from accelsim.sim.stimulus import gemm

import verilator_raw


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("rows", 16), ("cols", 16), ("m", 256), ("k", 256), ("n", 256)):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--sims", default="verilator,icarus")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (args.m, args.k)).astype(np.int8)
    b = rng.integers(-128, 128, (args.k, args.n)).astype(np.int8)
    stim, _ = gemm(a, b, args.rows, args.cols, acc_depth=512)
    pes = args.rows * args.cols
    cycle.run(stim)                               # compile / load the numba cache
    best = min(_timed(lambda: cycle.run(stim)) for _ in range(5))
    model = cycle.run(stim)
    print(f"workload: {args.m}x{args.k} @ {args.k}x{args.n} on {args.rows}x{args.cols}, {stim.tiles} tiles, "
          f"{model.cycles:,} cycles, {model.cycles * pes / 1e6:,.1f} M PE-cycles")
    rates = {"numba cycle model": model.cycles * pes / best}
    print(f"{'numba cycle model':<22} {best:>9.3f} s {rates['numba cycle model'] / 1e6:>12,.1f} M PE-cycles/s")
    cycle.run(stim, values=False)
    timing = min(_timed(lambda: cycle.run(stim, values=False)) for _ in range(5))
    print(f"{'numba timing only':<22} {timing:>9.3f} s {model.cycles * pes / timing / 1e6:>12,.1f} M PE-cycles/s  "
          f"({best / timing:,.1f}x the full model)")
    binary = verilator_raw.build(stim, verilator_raw.workdir())
    seconds = _timed(lambda: _check_raw(verilator_raw.run(binary), model))
    rates["raw"] = model.cycles * pes / seconds
    print(f"{'verilator, no Python':<22} {seconds:>9.3f} s {rates['raw'] / 1e6:>12,.1f} M PE-cycles/s  "
          f"(model {rates['numba cycle model'] / rates['raw']:,.2f}x, timing only "
          f"{best / timing * rates['numba cycle model'] / rates['raw']:,.1f}x)")
    for sim in filter(None, args.sims.split(",")):
        runner.run_rtl(gemm(a[:1, :args.rows], b[:args.rows, :args.cols], args.rows, args.cols, 512)[0], sim)
        seconds = _timed(lambda sim=sim: _check(runner.run_rtl(stim, sim).outcome, model))
        rates[sim] = model.cycles * pes / seconds
        print(f"{sim + ' + cocotb':<22} {seconds:>9.3f} s {rates[sim] / 1e6:>12,.3f} M PE-cycles/s  "
              f"(model {rates['numba cycle model'] / rates[sim]:,.0f}x faster)")


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _check_raw(result, model) -> None:
    """The free-running testbench's last output cycle and checksum against the model's."""
    last, checksum = result
    expected = 0
    for row in model.y_data.astype(np.int64) & 0xFFFFFFFF:
        for value in row:
            expected = (expected * 31 + int(value)) & 0xFFFFFFFF
    if last != model.cycles - 1 or checksum != expected:
        raise SystemExit(f"raw Verilator: last output in cycle {last} (model {model.cycles - 1}), checksum "
                         f"{checksum} (model {expected})")


def _check(outcome, model) -> None:
    if not (np.array_equal(outcome.y_cycle, model.y_cycle) and np.array_equal(outcome.y_data, model.y_data)):
        raise SystemExit("the RTL and the cycle-level model disagree on this workload")


if __name__ == "__main__":
    main()
