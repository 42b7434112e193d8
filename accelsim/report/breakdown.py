"""The numbers every report draws, derived from a Result: where each op's time went (computing, or waiting
on a memory level), its roofline point, and the ceilings it sits under.

Invariant: an op's time split adds up to its seconds. At tile fidelity it is the engine's own account,
cycles = compute_cycles + stall_cycles_by_level + `other`; at roofline fidelity the bound is all there is, so
the time beyond compute is blamed on the bound. `other` is idle time whose last dependency is a compute, not a
transfer (an epilogue beside the array waiting for its results; a kernel's rows issued before its first op's): a
small share. A wait on a level keeps that level even where the op is charged only part of its run
(accelsim.sim.tile.charged_stalls).
"""
from __future__ import annotations

from dataclasses import dataclass

from accelsim.arch import Arch
from accelsim.results.result import OpResult, Result
from accelsim.results.roof import kernels, work

COMPUTE = "compute"      # the key of the time spent computing, beside the level names
OTHER = "other"          # tile: idle time waiting on a compute (see the module docstring)


def time_split(op: OpResult) -> dict[str, float]:
    """Seconds computing and waiting on each level; an op that takes no time (a view) has none."""
    if op.seconds <= 0:
        return {}
    if op.compute_cycles is not None and op.cycles:
        per_cycle = op.seconds / op.cycles
        split = {COMPUTE: op.compute_cycles * per_cycle}
        split.update({level: n * per_cycle for level, n in op.stall_cycles_by_level.items() if n})
        unexplained = (op.stall_cycles or 0) - sum(op.stall_cycles_by_level.values())
        if unexplained > 0:
            split[OTHER] = unexplained * per_cycle
        return split
    compute = min(op.compute_seconds, op.seconds)
    split = {COMPUTE: compute}
    if op.seconds > compute:   # a roofline op bound by compute takes exactly its compute time
        split[op.bound] = op.seconds - compute
    return split


def time_shares(op: OpResult) -> dict[str, float]:
    """time_split as shares of the op's time (they sum to 1)."""
    return {part: s / op.seconds for part, s in time_split(op).items()}


def total_split(result: Result) -> dict[str, float]:
    """Seconds per part over the whole model."""
    total: dict[str, float] = {}
    for op in result.ops:
        for part, s in time_split(op).items():
            total[part] = total.get(part, 0.0) + s
    return total


def levels(results: list[Result]) -> list[str]:
    """Every arch's level names, outermost first, by position: tpu_v1's ddr3 and its GDDR5 twin's gddr5
    (both level 0) come before either's weight_fifo."""
    position: dict[str, int] = {}
    for result in results:
        for i, level in enumerate(result.arch.get("memory_levels", [])):
            position.setdefault(level, i)
    return sorted(position, key=lambda level: position[level])   # stable: first seen first among equals


def parts(results: list[Result]) -> list[str]:
    """The time-split parts in drawing order: compute, then each level outermost first, then the rest."""
    order = [COMPUTE] + levels(results)
    found = {p for r in results for p in total_split(r)}
    return [p for p in order if p in found] + sorted(found - set(order))


@dataclass(frozen=True)
class Layer:
    """A graph node and what its ops (conv1, conv1:bias, ...) took together."""

    node: str
    seconds: float
    split: dict[str, float]
    energy_j: float


def layers(result: Result) -> list[Layer]:
    """One per graph node, in execution order."""
    grouped: dict[str, list[OpResult]] = {}
    for op in result.ops:
        grouped.setdefault(op.node or op.name, []).append(op)
    out = []
    for node, ops in grouped.items():
        split: dict[str, float] = {}
        for op in ops:
            for part, s in time_split(op).items():
                split[part] = split.get(part, 0.0) + s
        out.append(Layer(node, sum(op.seconds for op in ops), split,
                         sum(sum(op.energy_j.values()) for op in ops)))
    return out


@dataclass(frozen=True)
class Ceilings:
    """A roofline's roofs: peak operations per second per compute kind, bytes per second per level."""

    peaks: dict[str, float]          # "matrix (int8)": 2 x MACs/s; "vector": ops/s
    bandwidths: dict[str, float]     # level name -> B/s over all its instances


def ceilings(result: Result, arch: Arch) -> Ceilings:
    peaks = {f"matrix peak ({result.model['dtype']})": 2 * result.arch["peak_macs_per_second"]}
    vectors = [u for u in arch.compute if u.role.value == "vector"]
    if vectors:
        peaks["vector peak"] = max(u.peak_per_second(d) for u in vectors for d in u.dtypes)
    return Ceilings(peaks, {lv.name: lv.bandwidth_total for lv in arch.memory})


def roofline_points(result: Result, level: str) -> list[tuple[float, float]]:
    """One point per kernel that moves bytes across `level`: x its operations per byte there, y the operations per
    second it attained. An op fused into another's kernel (an epilogue) is part of that kernel's point, its work
    added to the kernel's and its bytes to the kernel's bytes, never a point of its own: alone, a BatchNorm folded
    into a conv's output stage moves only its parameters and would sit far right of where its kernel runs."""
    points = []
    for kernel in kernels(result):
        moved = kernel.bytes_at(level)
        if kernel.work and moved and kernel.seconds > 0:
            points.append((kernel.work / moved, kernel.work / kernel.seconds))
    return points


def attained(op: OpResult) -> float:
    """Operations per second the op sustained (0 for an op that takes no time)."""
    return work(op) / op.seconds if op.seconds > 0 else 0.0


def intensity(op: OpResult, level: str) -> float | None:
    """Operations per byte crossing `level`; None where no byte crosses it (no point to draw)."""
    moved = op.bytes_by_level.get(level, 0)
    return work(op) / moved if moved and work(op) else None
