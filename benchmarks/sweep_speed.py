"""How fast a design-space sweep runs, and how much the adaptive strategy saves (issue 6's figures).

1. A 1,000-point grid of ResNet-18 (batch 1, 224x224, int8) on systolic variants (rows x cols x filter SRAM x
   DRAM bandwidth x dataflow, examples/sweep/systolic.yaml's derived keys) with the local pool, --jobs 2.
2. The speed-up from 1 to 2 Dask workers on a LocalCluster, on the same 200 points of that grid.
3. The adaptive strategy (Pareto local search) against the grid's Pareto front: evaluations until it holds every
   front point, per seed (replayed against the grid's rows: the same answers, nothing re-simulated), and one
   real adaptive run into a fresh store.
Run: .venv/bin/python benchmarks/sweep_speed.py [--points-dask 200] [--seeds 8] [--grid-db FILE] [--parts ...]
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelsim.sweep import load_spec, pareto, run_sweep, sweep_rows  # noqa: E402
from accelsim.sweep.strategies import Adaptive  # noqa: E402
from accelsim.sweep.tasks import tasks_for  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sweep" / "systolic.yaml"
AXES = {
    "compute.pe_array.array.rows": [8, 16, 32, 64, 128],
    "compute.pe_array.array.cols": [8, 16, 32, 64, 128],
    "memory.filter_sram.capacity": ["16 KiB", "32 KiB", "64 KiB", "128 KiB", "256 KiB"],
    "memory.dram.bandwidth": ["6.4 GB/s", "12.8 GB/s", "25.6 GB/s", "51.2 GB/s"],
    "compute.pe_array.dataflows": ["ws", "os"],
}


def spec_file(folder: Path, name: str, strategy: dict) -> Path:
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec.update(models=["resnet18"], axes=copy.deepcopy(AXES), strategy=strategy)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def grid_run(folder: Path, db: Path) -> tuple:
    spec = load_spec(spec_file(folder, "grid", {"kind": "grid"}))
    summary = run_sweep(spec, db, jobs=2)
    rows = sweep_rows(db, list(summary.keys), details=True)
    per_point = statistics.mean(r["eval_s"] for r in rows)
    if not summary.evaluated:
        print(f"1. grid: {summary.points} points, all already in {db} (delete it to time the sweep)")
        return spec, rows
    print(f"1. grid: {summary.points} points, {summary.evaluated} evaluated in {summary.seconds:.1f} s with the "
          f"local pool (--jobs 2): {summary.points / summary.seconds:.1f} points/s; mean evaluation "
          f"{per_point * 1e3:.0f} ms per point in a worker; {summary.not_ok} not ok")
    return spec, rows


def compile_cost() -> float:
    """What each point would pay without the per-worker IR cache: build and compile ResNet-18 once."""
    from accelsim.sim.model import load_model
    from compiler.dtypes import DType
    from compiler.compile import Options, compile_graph

    start = time.perf_counter()
    for _ in range(5):
        compile_graph(load_model("resnet18"), Options(dtype=DType.int8))
    return (time.perf_counter() - start) / 5


def dask_speedup(folder: Path, points: int) -> None:
    from distributed import LocalCluster

    spec = load_spec(spec_file(folder, "dask", {"kind": "random", "points": points, "seed": 1}))
    seconds = {}
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=50) as cluster:
            warm = run_sweep(load_spec(spec_file(folder, f"warm{workers}", {"kind": "random", "points": 2 * workers,
                                                                             "seed": 99})),
                             folder / f"warm{workers}.sqlite", scheduler=cluster.scheduler_address, progress=False)
            assert warm.evaluated   # numba loaded and the IR compiled in every worker before timing
            summary = run_sweep(spec, folder / f"dask{workers}.sqlite", scheduler=cluster.scheduler_address,
                                progress=False)
            seconds[workers] = summary.seconds
    print(f"2. Dask LocalCluster, the same {points} points: 1 worker {seconds[1]:.1f} s, 2 workers {seconds[2]:.1f} s:"
          f" speed-up {seconds[1] / seconds[2]:.2f}x")


def adaptive_replay(spec, rows: list[dict], seeds: int) -> None:
    objectives = list(spec.objectives)
    by_key = {r["key"]: r for r in rows}
    truth = {tuple(r[o] for o in objectives) for r in pareto(rows, objectives)}
    print(f"3. adaptive against the grid's front ({len(truth)} points of {spec.size}, objectives "
          f"{', '.join(objectives)}), {seeds} seeds:")
    for ranks in (2, 1):
        asked, reached, partial = [], [], []
        for seed in range(seeds):
            search, complete = Adaptive(spec.shape, seed, ranks=ranks), None
            while batch := search.ask():
                outcomes = {}
                for coord in batch:
                    row = by_key[tasks_for(spec, coord)[0].key]
                    outcomes[coord] = [tuple(row[o] for o in objectives) if row["status"] == "ok" else None]
                search.tell(outcomes)
                found = {search.results[c][0] for c in search.front()}
                if complete is None and truth <= found:
                    complete = len(search.asked)
            asked.append(len(search.asked))
            if complete:
                reached.append(complete)
            else:
                partial.append(len(truth & found))
        shown = f"seeds {', '.join(f'{n}' for n in asked)}"
        line = (f"   ranks {ranks}{' (default)' if ranks == 2 else ''}: {statistics.mean(asked):.0f} evaluations on "
                f"average ({shown}); the whole front in {len(reached)} of {seeds} seeds")
        if reached:
            mean = statistics.mean(reached)
            line += f", complete after {mean:.0f} evaluations on average: {spec.size / mean:.2f}x fewer than the grid"
        if partial:
            line += f"; the others found {', '.join(map(str, partial))} of {len(truth)}"
        print(line)


def adaptive_run(folder: Path) -> None:
    spec = load_spec(spec_file(folder, "adaptive", {"kind": "adaptive", "seed": 0}))
    summary = run_sweep(spec, folder / "adaptive.sqlite", jobs=2, progress=False)
    print(f"   a real adaptive run (seed 0, ranks 2, fresh store): {summary.evaluated} evaluations in "
          f"{summary.seconds:.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points-dask", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--grid-db", metavar="FILE", help="keep the grid's rows here (a second run reuses them)")
    parser.add_argument("--parts", default="grid,dask,adaptive", help="which of grid,dask,adaptive to run "
                        "(adaptive needs the grid's rows)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if parts & {"grid", "adaptive"}:
            spec, rows = grid_run(folder, Path(args.grid_db) if args.grid_db else folder / "grid.sqlite")
            print(f"   without the per-worker IR cache each point would also build and compile ResNet-18: "
                  f"{compile_cost() * 1e3:.1f} ms")
        if "dask" in parts:
            dask_speedup(folder, args.points_dask)
        if "adaptive" in parts:
            adaptive_replay(spec, rows, args.seeds)
            adaptive_run(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
