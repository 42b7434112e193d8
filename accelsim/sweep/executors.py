"""Where tasks are evaluated: in this process (--jobs 1), a local process pool (--jobs N), or a Dask cluster.

Each executor's run(tasks) yields one row per task, in completion order. Invariant: a worker that dies does not
end the sweep: the pool is rebuilt and the tasks it held run again, alone, so the one that kills its worker is
found and, after MAX_CRASHES deaths, recorded as `crashed`; Dask retries on other workers (its retries= and the
scheduler's allowed-failures) and a task that keeps killing workers is recorded the same way.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Iterator

from compiler.errors import UserError
from accelsim.sweep.evaluate import evaluate, identity
from accelsim.sweep.tasks import Task

MAX_CRASHES = 3   # deaths of a worker running one task alone before the task is recorded as crashed
DASK_RETRIES = 2  # Dask's retries= per task (exceptions); worker deaths count against allowed-failures
WATCH_S = 0.5     # how often a pool worker checks that its driver is alive
DASK_RESUBMITS = 1  # submissions after Dask gave a task up (KilledWorker) before it is recorded as crashed


def crashed_row(task: Task, reason: str) -> dict:
    return {**identity(task), "status": "crashed", "reason": reason}


class InProcess:
    workers = 1

    def run(self, tasks: list[Task]) -> Iterator[dict]:
        for task in tasks:
            yield evaluate(task)

    def close(self) -> None:
        pass


def _worker_start(driver: int) -> None:
    """Pool workers leave Ctrl-C to the driving process, which stops the pool (no traceback per worker), and die
    with it: a driver killed by SIGTERM or SIGKILL runs no cleanup, so each worker watches for being handed to
    another parent and then exits (within WATCH_S), rather than running on, orphaned, for minutes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == driver:
            time.sleep(WATCH_S)
        os._exit(1)

    threading.Thread(target=watch, name="accelsim-driver-watch", daemon=True).start()


class LocalPool:
    """A spawn-started ProcessPoolExecutor; at most 2 tasks per worker in flight, so Ctrl-C stops quickly."""

    def __init__(self, jobs: int):
        self.workers = jobs
        self._pool = self._start()

    def _start(self) -> ProcessPoolExecutor:
        # spawn, not fork: the driving process runs a progress thread, and forking a threaded process can hang
        return ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_worker_start, initargs=(os.getpid(),))

    def _restart(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._start()

    def run(self, tasks: list[Task]) -> Iterator[dict]:
        pending, suspects = deque(tasks), deque()
        deaths: dict[str, int] = {}
        flight: dict = {}
        finished = crashed = 0
        try:
            while pending or suspects or flight:
                # after a death, run each task that was in flight alone until the culprit is known
                source, limit = (suspects, 1) if suspects else (pending, 2 * self.workers)
                while source and len(flight) < limit:
                    task = source.popleft()
                    try:
                        flight[self._pool.submit(evaluate, task)] = task
                    except BrokenProcessPool:    # a worker died since the last wait: its futures, below, say which
                        source.appendleft(task)
                        break
                if not flight:                   # broken with nothing in flight to blame: a fresh pool
                    self._restart()
                    continue
                done, _ = wait(flight, return_when=FIRST_COMPLETED)
                lost = []
                for future in done:
                    task = flight.pop(future)
                    try:
                        row = future.result()
                    except BrokenProcessPool:
                        lost.append(task)
                    else:
                        finished += 1
                        yield row
                if not lost:
                    continue
                lost += flight.values()
                alone = len(lost) == 1
                flight.clear()
                self._restart()
                for task in lost:
                    if alone:
                        deaths[task.key] = deaths.get(task.key, 0) + 1
                    if deaths.get(task.key, 0) >= MAX_CRASHES:
                        crashed += 1
                        if crashed >= 2 and not finished:   # not these points: the workers cannot run at all
                            raise UserError("every worker process died before finishing a point; run with "
                                            "--jobs 1 to see why")
                        yield crashed_row(task, f"its worker process died {MAX_CRASHES} times while evaluating it")
                    else:
                        suspects.append(task)
        finally:
            for future in flight:
                future.cancel()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class DaskCluster:
    """Tasks submitted to a Dask distributed scheduler; rows come back here, the only writer of the store."""

    def __init__(self, address: str):
        try:
            from distributed import Client
        except ImportError:
            raise UserError("--scheduler needs the `distributed` package: pip install 'accelsim[dask]'") from None
        try:
            self.client = Client(address, timeout="10s")
        except (OSError, TimeoutError, ValueError) as error:
            raise UserError(f"--scheduler {address}: cannot reach a Dask scheduler ({error})") from None
        self.workers = max(1, len(self.client.scheduler_info().get("workers", {})))

    def run(self, tasks: list[Task]) -> Iterator[dict]:
        from distributed import as_completed
        from distributed.scheduler import KilledWorker

        futures = {self._submit(task, 0): task for task in tasks}
        attempts: dict[str, int] = {}
        pending = as_completed(list(futures))
        try:
            for future in pending:
                task = futures.pop(future)
                try:
                    yield future.result()
                except KilledWorker as error:
                    # Dask blames every task a dying worker held; a task queued beside the culprit gets
                    # one more go of its own before it is recorded
                    attempts[task.key] = attempts.get(task.key, 0) + 1
                    if attempts[task.key] <= DASK_RESUBMITS:
                        again = self._submit(task, attempts[task.key])
                        futures[again] = task
                        pending.add(again)
                    else:
                        yield crashed_row(task, f"Dask workers died evaluating it ({error})")
                except Exception as error:   # the worker could not run evaluate at all (say, no accelsim there)
                    yield {**crashed_row(task, f"{type(error).__name__}: {error}"), "status": "error"}
        finally:
            self.client.cancel([f for f in futures if not f.done()])

    def _submit(self, task: Task, attempt: int):
        return self.client.submit(evaluate, task, key=f"accelsim-sweep-{task.key}-{attempt}", retries=DASK_RETRIES,
                                  pure=False)

    def close(self) -> None:
        self.client.close()


def executor_for(jobs: int, scheduler: str | None):
    if scheduler:
        return DaskCluster(scheduler)
    return InProcess() if jobs == 1 else LocalPool(jobs)
