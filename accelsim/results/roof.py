"""Where each kernel sits under the machine's roofs: its arithmetic intensity (operations per byte crossing the
outermost memory level) and the roof that binds it there, compute or that level's bandwidth.

A kernel is an op and the ops fused into it (OpResult.kernel): its work is theirs summed, its bytes are the bytes
they move across the level together. Invariant: the roof is memory exactly when the intensity is below the
machine balance (the kernel's compute peak / the level's bandwidth), i.e. when its bytes at full bandwidth take
longer than its work at full peak. Both peaks and bandwidths come from the Result's arch (`peaks`, `bandwidths`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

# accelsim.results.result's OpResult and Result, named without importing them (even for the type checker): Result
# imports the table, which imports this, and the import graph has no cycles
OpResult: TypeAlias = Any
Result: TypeAlias = Any

COMPUTE = "compute"


def per_byte(value: float) -> str:
    """An intensity, 3 significant digits without an exponent: 0.667, 42.1, 1,560, 2,700."""
    return f"{float(f'{value:.3g}'):,.0f}" if value >= 100 else f"{value:.3g}"


def work(op: OpResult) -> int:
    """Operations a roofline counts: 2 per MAC, 1 per vector op."""
    return 2 * op.macs + op.ops


def peak_ops(op: OpResult, arch: dict) -> float | None:
    """Operations per second of the unit `op` ran on at its rate dtype (2 per MAC); None where the arch lacks it."""
    peak = arch.get("peaks", {}).get(f"{op.unit}:{op.rate_dtype}")
    return None if peak is None else peak * (2 if op.macs else 1)


@dataclass(frozen=True)
class Kernel:
    ops: tuple[OpResult, ...]       # the kernel's own op first, then those fused into it
    level: str                      # the outermost memory level
    work: int                       # operations, all its ops together
    bytes: int                      # bytes its ops move across `level`
    compute_s: float | None         # its work at peak: the slowest of its units (they run side by side)
    memory_s: float | None          # its bytes at the level's bandwidth

    @property
    def anchor(self) -> OpResult:
        return self.ops[0]

    @property
    def seconds(self) -> float:
        return sum(op.seconds for op in self.ops)

    def bytes_at(self, level: str) -> int:
        """Bytes its ops move across `level` together."""
        return sum(op.bytes_by_level.get(level, 0) for op in self.ops)

    @property
    def intensity(self) -> float | None:
        """Operations per byte across the level; None where no byte crosses it."""
        return self.work / self.bytes if self.bytes and self.work else None

    @property
    def balance(self) -> float | None:
        """The intensity at which compute and memory take equally long (peak / bandwidth)."""
        if not self.compute_s or not self.memory_s:
            return None
        return (self.work / self.compute_s) / (self.bytes / self.memory_s)

    @property
    def roof(self) -> str | None:
        """COMPUTE, or the level's name where its bytes at full bandwidth outlast its work at full peak."""
        if self.compute_s is None or self.memory_s is None or not self.work:
            return None
        return self.level if self.memory_s > self.compute_s else COMPUTE


def kernels(result: Result) -> list[Kernel]:
    """One per kernel in execution order; views (no work, no bytes) are left out."""
    levels = result.arch.get("memory_levels") or []
    level = levels[0] if levels else ""
    bandwidth = result.arch.get("bandwidths", {}).get(level)
    grouped: dict[str, list[OpResult]] = {}
    for op in result.ops:
        if op.bound != "view":
            grouped.setdefault(op.kernel or op.name, []).append(op)
    out = []
    for ops in grouped.values():
        moved = sum(op.bytes_by_level.get(level, 0) for op in ops)
        out.append(Kernel(tuple(ops), level, sum(work(op) for op in ops), moved, _at_peak(ops, result.arch),
                          moved / bandwidth if bandwidth else None))
    return out


def machine_balance(arch: dict) -> float | None:
    """FLOP per byte of the outermost level at which matrix work at peak and that level at full bandwidth take
    equally long (systolic_32x32: 2 x 512 G MAC/s over 12.8 GB/s = 80)."""
    levels = arch.get("memory_levels") or []
    bandwidth = arch.get("bandwidths", {}).get(levels[0]) if levels else None
    peak = arch.get("peak_macs_per_second")
    return 2 * peak / bandwidth if peak and bandwidth else None


def _at_peak(ops: list[OpResult], arch: dict) -> float | None:
    """Seconds the kernel's work takes at its units' peaks: the slowest unit's share, as its units run side by side
    (a conv on the PE array, its BatchNorm beside it); None where a peak is unknown (a Result from before peaks)."""
    per_unit: dict[str, float] = {}
    for op in ops:
        if work(op):
            peak = peak_ops(op, arch)
            if not peak:
                return None
            per_unit[op.unit] = per_unit.get(op.unit, 0.0) + work(op) / peak
    return max(per_unit.values(), default=0.0)


def why(kernel: Kernel) -> str | None:
    """Why the kernel's bound (its own op's, as the table and the time split show it) is not the roof that binds
    it; None where they agree or nothing is known."""
    roof, op = kernel.roof, kernel.anchor
    if roof is None or op.bound in (roof, "view"):
        return None
    if op.bound == "latency":
        return (f"bound by latency, not by its {roof} roof: its transfers are too small to fill the bandwidth, each "
                "waits the level's latency")
    if op.bound == "launch":
        return f"bound by its launch, not by its {roof} roof: the kernel is too short to hide the launch overhead"
    if op.bound == COMPUTE:
        return (f"memory-bound by roofline ({per_byte(kernel.intensity)} FLOP/B, under its balance of "
                f"{per_byte(kernel.balance)}), "
                f"but the unit ran at {op.utilisation:.0%} of its peak, and computing at that rate outlasts the "
                f"{kernel.level} transfers")
    if op.bound == kernel.level:
        return (f"compute-bound by roofline, but its {kernel.level} transfers take longer than its bytes at full "
                "bandwidth (per-transfer latency, or a channel shared with other traffic)")
    return f"waits on {op.bound}, an inner level the {kernel.level} roofline does not count"
