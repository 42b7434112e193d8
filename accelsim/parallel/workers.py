"""The planner's worker processes, each fed its own tasks: a task names the work it shares with earlier tasks (`near`:
the stage programs of a tensor split, of a tensor split and micro-batch), and goes to the worker that did that work
when it is free, else to any free worker; so a stage built for a plan's memory or its lower bound is simulated in the
process that built it, not built again in another.
Invariant: every task submitted runs once, in one worker, and its result (or its exception) comes back to its own
Task, whatever order the tasks finish in; a worker runs one task at a time.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Hashable, Iterator


class Task:
    """A task's result once a worker sends it; result() waits for it, keeping the other workers fed meanwhile."""

    def __init__(self, workers: Workers, call: tuple, near: tuple[Hashable, ...]):
        self._workers, self.call, self.near = workers, call, near
        self.done, self._value, self._error = False, None, None

    def result(self) -> Any:
        while not self.done:
            self._workers.pump()
        if self._error is not None:
            raise self._error
        return self._value


class Workers:
    """`count` processes started now (by `method`, as multiprocessing names it), each running `start(*start_args)`
    first, then `run(*call)` for each task it is given."""

    def __init__(self, count: int, method: str, run: Callable, start: Callable, start_args: tuple):
        context: Any = multiprocessing.get_context(method)     # a fork or spawn context: both have Process
        self._conns: list[Connection] = []
        self._procs = []
        for _ in range(count):
            mine, theirs = context.Pipe()
            proc = context.Process(target=_serve, args=(theirs, run, start, start_args), daemon=True)
            proc.start()
            theirs.close()
            self._conns.append(mine)
            self._procs.append(proc)
        self._busy: list[Task | None] = [None] * count
        self._queue: list[Task] = []
        self._home: dict[Hashable, int] = {}        # what a worker built -> that worker

    def submit(self, *call, near: tuple[Hashable, ...] = ()) -> Task:
        """A Task running `run(*call)` in a worker: the one that ran a task near the same first key of `near` if it is
        free when the task's turn comes, else the first free one."""
        task = Task(self, call, near)
        self._queue.append(task)
        self._dispatch()
        return task

    def as_completed(self, tasks: list[Task]) -> Iterator[Task]:
        """`tasks` as they finish."""
        left = list(tasks)
        while left:
            finished = [t for t in left if t.done]
            if not finished:
                self.pump()
                continue
            for task in finished:
                left.remove(task)
                yield task

    def idle(self) -> bool:
        """Whether a worker is free with no task waiting for it."""
        return not self._queue and None in self._busy

    def pump(self) -> None:
        """Wait for a worker to finish its task, take its result and give it the next."""
        busy = [self._conns[w] for w, task in enumerate(self._busy) if task is not None]
        if not busy:
            raise RuntimeError("no task is running to wait for")
        ready = wait(busy)
        for w, conn in enumerate(self._conns):
            task = self._busy[w]
            if task is None or conn not in ready:
                continue
            try:
                ok, value = conn.recv()
            except (EOFError, OSError):
                raise BrokenProcessPool("a planner worker process ended abruptly") from None
            self._busy[w] = None
            task._value, task._error = (value, None) if ok else (None, value)
            task.done = True
        self._dispatch()

    def close(self) -> None:
        for conn in self._conns:
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        for proc, task in zip(self._procs, self._busy):
            if task is not None:          # interrupted: its task's result is not wanted
                proc.terminate()
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
        for conn in self._conns:
            conn.close()

    def _dispatch(self) -> None:
        while self._queue and None in self._busy:
            free = [w for w, task in enumerate(self._busy) if task is None]
            pick = next(((t, self._home[t.near[0]]) for t in self._queue
                         if t.near and self._home.get(t.near[0]) in free), None)
            task, w = pick or (self._queue[0], self._near_free(self._queue[0], free))
            self._queue.remove(task)
            for key in task.near:
                self._home.setdefault(key, w)
            self._busy[w] = task
            self._conns[w].send(task.call)

    def _near_free(self, task: Task, free: list[int]) -> int:
        """The free worker that built the most of what `task` shares (a later key of its `near`), else the first."""
        return next((self._home[k] for k in task.near[1:] if self._home.get(k) in free), free[0])


def _serve(conn: Connection, run: Callable, start: Callable, start_args: tuple) -> None:
    start(*start_args)
    while True:
        try:
            call = conn.recv()
        except (EOFError, OSError):
            break
        if call is None:
            break
        try:
            reply = (True, run(*call))
        except BaseException as error:          # noqa: BLE001 -- sent back to be raised where the result is asked
            reply = (False, error)
        try:
            conn.send(reply)
        except Exception as error:              # noqa: BLE001 -- an unpicklable result or exception
            conn.send((False, RuntimeError(f"a planner task's result could not be sent back: {error!r}")))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)          # no teardown of the caches, object by object: seconds the search would wait for
