"""Pipeline schedules: the order each stage runs its micro-batches' forward and backward passes, and when each
starts, given how long each takes and how long an activation (or its gradient) takes to reach the next stage.

GPipe runs every forward, then every backward (Huang et al. 2019); 1F1B runs pp - s - 1 forwards to fill the
pipeline, then alternates one forward and one backward, then drains (PipeDream-Flush, Narayanan et al. 2021); the
interleaved schedule gives each device `chunks` stages of the model, v = chunks apart, in Megatron-LM's order.
Invariant: a pass starts when its device is free and its input has arrived (a forward: the previous stage's
forward of that micro-batch; a backward: the next stage's backward, and this stage's own forward).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Timeline:
    """Per device: when it finished its last pass, how long it computed, and its idle share before that; per stage:
    when its last backward started (its gradients are final during that pass)."""

    end: list[float]
    busy: list[float]
    last_backward_start: list[float]
    passes: list[tuple] = ()          # (device, "F" or "B", micro-batch, stage, start, end), in the order run

    @property
    def seconds(self) -> float:
        return max(self.end)

    def bubble(self, device: int) -> float:
        """Time the device waits within the pipeline's span: its fill, drain and imbalance."""
        return self.seconds - self.busy[device]


def order(schedule: str, pp: int, m: int, chunks: int = 1) -> list[list[tuple[str, int, int]]]:
    """Per device, its passes in order: ("F" or "B", micro-batch, chunk)."""
    if schedule == "gpipe":
        return [[("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)] for _ in range(pp)]
    if schedule == "1f1b" or chunks == 1:
        plans = []
        for s in range(pp):
            warm = min(pp - s - 1, m)
            seq = [("F", i, 0) for i in range(warm)]
            f, b = warm, 0
            while b < m:
                if f < m:
                    seq.append(("F", f, 0))
                    f += 1
                seq.append(("B", b, 0))
                b += 1
            plans.append(seq)
        return plans
    return [_interleaved(s, pp, m, chunks) for s in range(pp)]


def _interleaved(s: int, pp: int, m: int, v: int) -> list[tuple[str, int, int]]:
    """Megatron-LM's interleaved 1F1B: micro-batches in groups of pp, each group through chunk 0, then chunk 1...
    Warm-up (pp - s - 1) x 2 + (v - 1) x pp forwards, then one forward one backward, then the rest backwards."""
    total = m * v

    def unit(k: int, forward: bool) -> tuple[str, int, int]:
        group, within = divmod(k, pp * v)
        chunk = within // pp
        if not forward:
            chunk = v - 1 - chunk
        return ("F" if forward else "B", group * pp + within % pp, chunk)
    warm = min((pp - s - 1) * 2 + (v - 1) * pp, total)
    seq = [unit(k, True) for k in range(warm)]
    f, b = warm, 0
    while b < total:
        if f < total:
            seq.append(unit(f, True))
            f += 1
        seq.append(unit(b, False))
        b += 1
    return seq


def run_schedule(forward: list[float], backward: list[float], hop: list[float], schedule: str, m: int,
             chunks: int = 1, back: list[float] | None = None) -> Timeline:
    """`forward[k]`, `backward[k]`: one micro-batch's passes through model stage k (pp x chunks of them, stage k on
    device k % pp); `hop[k]`: an activation's trip from stage k to k + 1; `back[k]`: its gradient's return (default:
    the same; inference sends nothing back)."""
    back = hop if back is None else back
    stages = len(forward)
    pp = stages // chunks
    plans = order(schedule, pp, m, chunks)
    done: dict[tuple[str, int, int], float] = {}
    clock, busy = [0.0] * pp, [0.0] * pp
    last_b = [0.0] * stages
    passes = []
    cursor = [0] * pp
    remaining = sum(len(p) for p in plans)
    while remaining:
        progressed = False
        for d in range(pp):
            while cursor[d] < len(plans[d]):
                kind, i, c = plans[d][cursor[d]]
                k = c * pp + d
                ready = _ready(kind, i, k, stages, done, hop if kind == "F" else back)
                if ready is None:
                    break
                start = max(clock[d], ready)
                length = forward[k] if kind == "F" else backward[k]
                done[(kind, i, k)] = clock[d] = start + length
                passes.append((d, kind, i, k, start, start + length))
                busy[d] += length
                if kind == "B" and i == m - 1:
                    last_b[k] = start
                cursor[d] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise RuntimeError(f"the {schedule} schedule deadlocked: a pass waits on one never run")
    return Timeline(end=clock, busy=busy, last_backward_start=last_b, passes=passes)


def _ready(kind: str, i: int, k: int, stages: int, done: dict, hop: list[float]) -> float | None:
    if kind == "F":
        if k == 0:
            return 0.0
        before = done.get(("F", i, k - 1))
        return None if before is None else before + hop[k - 1]
    own = done.get(("F", i, k))
    if own is None:
        return None
    if k == stages - 1:
        return own
    after = done.get(("B", i, k + 1))
    return None if after is None else max(own, after + hop[k])
