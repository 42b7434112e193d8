"""Drive a sweep: the strategy asks for points, the store answers what it already holds, the executor evaluates
the rest, and every row is committed the moment it comes back.

Invariant: the runner never evaluates a task whose row is finished in the store, so running a sweep again
(after Ctrl-C, a kill, a crash) evaluates only what is missing and ends with the same rows.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from accelsim.collector import running
from accelsim.sweep.evaluate import code_fingerprint
from accelsim.sweep.executors import executor_for
from accelsim.sweep.progress import Progress
from accelsim.sweep.spec import Spec
from accelsim.sweep.store import Store
from accelsim.sweep.strategies import strategy_for
from accelsim.sweep.tasks import tasks_for


@dataclass(frozen=True)
class Summary:
    db: Path
    keys: tuple[str, ...]      # the rows of this sweep, in the order they were asked
    points: int                # grid points asked (each has one row per model)
    evaluated: int             # rows evaluated by this run
    reused: int                # rows found finished in the store
    not_ok: int                # rows that are invalid, error or crashed
    stale: int                 # reused rows that other simulator code computed (evaluate.code_fingerprint)
    seconds: float
    workers: int


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def run_sweep(spec: Spec, db: str | Path, jobs: int | None = None, scheduler: str | None = None,
              progress: bool = True) -> Summary:
    """Run (or resume) `spec`, storing rows in `db`; returns what was done. Ctrl-C leaves every finished row."""
    with running():          # points are many models: their cycles are freed point by point, in forked workers too
        return _run(spec, db, jobs, scheduler, progress)


def _run(spec: Spec, db: str | Path, jobs: int | None, scheduler: str | None, progress: bool) -> Summary:
    start = time.monotonic()
    strategy = strategy_for(spec)
    executor = executor_for(jobs or default_jobs(), scheduler)
    bar = Progress(f"sweep {spec.path.name}", enabled=progress, planned=strategy.planned * len(spec.models))
    keys: list[str] = []
    points = evaluated = reused = not_ok = stale = 0
    code = code_fingerprint()
    try:
        with Store(db) as store:
            while batch := strategy.ask():
                points += len(batch)
                tasks = [task for coord in batch for task in tasks_for(spec, coord)]
                rows = store.finished([task.key for task in tasks])
                todo = list({task.key: task for task in tasks if task.key not in rows}.values())
                bar.add(len(tasks), len(tasks) - len(todo), sum(r["status"] != "ok" for r in rows.values()))
                reused += len(rows)
                stale += sum(row["code"] != code for row in rows.values())
                for row in executor.run(todo):
                    store.put(row)
                    rows[row["key"]] = row
                    evaluated += 1
                    bar.advance(row)
                keys += [task.key for task in tasks]
                not_ok += sum(1 for task in tasks if rows.get(task.key, {}).get("status") != "ok")
                strategy.tell(_outcomes(spec, batch, tasks, rows))
    finally:
        bar.close()
        executor.close()
    return Summary(Path(db), tuple(dict.fromkeys(keys)), points, evaluated, reused, not_ok, stale,
                   time.monotonic() - start, executor.workers)


def _outcomes(spec: Spec, batch, tasks, rows: dict) -> dict:
    """Per coordinate, per model: the objective vector, or None where the row is not ok."""
    out = {coord: [] for coord in batch}
    for task in tasks:
        row = rows.get(task.key)
        vector = None
        if row is not None and row["status"] == "ok" and all(row.get(o) is not None for o in spec.objectives):
            vector = tuple(float(row[o]) for o in spec.objectives)
        out[task.coord].append(vector)
    return out
