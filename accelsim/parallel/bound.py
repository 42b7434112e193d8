"""Branch and bound over the plans that fit: simulate at tile fidelity only the plans that could be among the best
`top` or on the Pareto front of time and memory.

Each plan comes with a lower bound on its step time (the same step at roofline fidelity: every op's tile time is at
least its roofline time, and a step's time never falls when an op's time rises: sums of ops, the pipeline's
max-plus schedule, the data-parallel reduction exposed past the last backward pass) and its memory, which liveness
gives exactly before anything is simulated. Plans are simulated in rounds, lowest bound first; a plan is left
unsimulated once `top` simulated plans are faster than its bound and one of them is also no larger.
Invariant: a plan left unsimulated is slower than `top` simulated plans and dominated by one of them, so the best
`top` plans and the Pareto front are those an exhaustive search finds (tests/accelsim/parallel/test_plan_bound.py).
"""
from __future__ import annotations

from typing import Callable, Hashable

PER_WORKER = 4        # plans a round takes per worker, with every waiting plan that shares their stage programs


def rounds(indices: list[int], lower: dict[int, float], peak: dict[int, int], top: int, workers: int,
           program: Callable[[int], Hashable], run: Callable[[list[int]], dict],
           stop: Callable[[dict, list[int]], bool] = lambda scored, waiting: False) -> tuple[dict, list[int]]:
    """(simulated plans by index, the indices left unsimulated, lowest bound first). `run(indices)` simulates plans
    and returns {index: Scored} (those it had time for); `program(i)` names the stage programs plan i simulates (plans
    sharing them are simulated together: once one is, the others cost only their schedule). `stop(scored, waiting)`,
    asked before each round, ends the rounds early (a time limit): plans still needed are then left unsimulated too."""
    order = sorted(indices, key=lambda i: (lower[i], i))
    scored: dict[int, object] = {}
    while True:
        waiting = [i for i in order if i not in scored and needed(lower[i], peak[i], scored.values(), top)]
        if stop(scored, waiting) or not waiting:
            break
        shared = {program(i) for i in waiting[:PER_WORKER * max(workers, 1)]}
        scored.update(run([i for i in waiting if program(i) in shared]))
    return scored, [i for i in order if i not in scored]


def ahead(order: list[int], lower: dict[int, float], peak: dict[int, int], scored: dict, busy: set[int], top: int,
          workers: int, program: Callable[[int], Hashable]) -> list[int]:
    """The plans the next round takes if the plans in `busy` (being simulated) leave the others needed: what a worker
    that would sit idle until its round ends can simulate ahead (`order`: lowest bound first, as `rounds` orders)."""
    waiting = [i for i in order
               if i not in scored and i not in busy and needed(lower[i], peak[i], scored.values(), top)]
    shared = {program(i) for i in waiting[:PER_WORKER * max(workers, 1)]}
    return [i for i in waiting if program(i) in shared]


def needed(lower: float, peak: int, scored, top: int) -> bool:
    """Whether a plan bounded below by `lower` seconds and holding `peak` bytes could still be among the best `top`
    or on the Pareto front, given the plans simulated so far."""
    faster = [s for s in scored if s.seconds < lower]
    return len(faster) < top or not any(s.memory["peak"] <= peak for s in faster)
