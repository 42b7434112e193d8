"""Mapping-target generators, one per kind of matrix unit: the compute steps an Einsum's space starts from (a PE-array
fold per dataflow, a GPU's thread-block tiles, a CPU's register blocks) and how the space grows from them, registered
by the name an arch kind's profile gives (compiler.hardware.profiles). A name not here is an error naming it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from compiler.hardware import Arch, ComputeUnit
from compiler.hardware.profiles import Registry, profile
from compiler.ir import Einsum

# (dataflow, step size per group for one instance, groups to shrink first when it does not fit)
Target = tuple[str | None, dict[str, int | None], tuple[str, ...]]

# Which GEMM group a systolic array lays on its rows, its columns, and streams through in time
# (SCALE-Sim's definitions). WS: weights k x n stay in the PEs, activations stream m rows east.
# OS: each PE accumulates one output of an m x n block while k streams. IS: inputs k x m stay, n streams.
SYSTOLIC = {"ws": ("k", "n", "m"), "os": ("m", "n", "k"), "is": ("k", "m", "n")}
# Thread-block tiles (m, n, k) a GPU GEMM library would try first; CPU register/L1 blocks likewise.
SIMT_BLOCKS = ((128, 128, 32), (128, 64, 32), (64, 128, 32), (64, 64, 64), (256, 128, 32), (64, 64, 32),
               (32, 32, 32))  # the small ones for small L2s and register files (GTX 580)
SIMD_BLOCKS = ((64, 64, 64), (32, 64, 128), (128, 64, 32))
# A CPU BLAS keeps C's micro-tile in registers and a k x nr sliver of B in L1 that the rows of A stream past
# (BLIS's loop order), so a SIMD step too big for l1d gives up n, then m, down to one micro-tile before k:
# shrinking k first (as a GPU's thread block does) left 2048^3 fp32 on a 32 KiB l1d with steps of k = 1.
SIMD_SHRINK = ("n", "m", "k")
# Steps of several array folds along k, tried after the one-fold step (`pe_array`): 8 folds of 8 rows fill
# a 3x3 conv's c*r*s as 7*3*3 = 63 of 64 rows. Larger steps gain little and leave the levels outside them
# few tiles to pipeline, which the cost model underrates (systolic_32x32, ResNet-18's layer4 3x3 convs as
# one step of 18 folds: estimated 124 k cycles, 152 k in the tile engine; steps of 2 folds: 120 k).
FOLD_STEPS = (2, 8)


@dataclass(frozen=True)
class Targets:
    """A kind's mapping targets: `steps(unit, op, output_path)` yields Targets, largest first (compiler.map.space
    adds the last resort, one MAC per step); `dealt`: a block scheduler deals the steps over the unit's instances (a
    GPU's SMs), so they are also spread over m and n together; `streamed`: a level that holds the whole op is also
    offered cut along k, as a GPU's SMs read through its L2 as they go; `smaller_buffers`: the space also holds the
    tilings smaller buffers give (a PE array's SRAMs, which a DMA fills tile by tile)."""

    steps: Callable[[ComputeUnit, Einsum, list[int]], Iterator[Target]]
    dealt: bool = False
    streamed: bool = False
    smaller_buffers: bool = False


def pe_array(unit: ComputeUnit, op: Einsum, output_path: list[int]) -> Iterator[Target]:
    """A systolic step is one fold of the array, then (WS, IS: k on the array's rows) steps of FOLD_STEPS folds
    along k: the array accumulates each fold's partial sums onto the last (rtl/systolic_core.v adds a tile's
    rows into its accumulators), so the output tile is the one-fold step's, and accelsim.price.systolic
    prices the folds back to back, each fold's load under the last one's stream, as the cycle-level model
    runs them. A conv's k = c*r*s fills 8 rows as 2*1*3 = 6 in one fold (75%), 64 as 7*3*3 = 63 in 8 folds
    (98%). Only where an on-chip level holds the output (the accumulators), and OS needs none: its step
    streams all of k already."""
    array = unit.array
    assert array is not None, f"{unit.name}: a PE-array target needs an array (accelsim.arch.schema requires one)"
    accumulates = bool(output_path) and output_path[-1] > 0
    for flow in unit.dataflows:
        rows, cols, stream = SYSTOLIC[flow.value]
        # A WS tile streams its rows into accumulators of `accumulator_rows` rows (rtl/systolic_core.v).
        depth = array.accumulator_rows if flow.value == "ws" and array.accumulator_rows else None
        fold = {"b": 1, rows: array.rows, cols: array.cols, stream: depth}
        yield flow.value, fold, (stream, "b")
        if rows == "k" and accumulates:
            for folds in FOLD_STEPS:
                yield flow.value, fold | {"k": folds * array.rows}, ("k", stream, "b")


def thread_blocks(unit: ComputeUnit, op: Einsum, output_path: list[int]) -> Iterator[Target]:
    """A GPU GEMM library's thread-block tiles, k shrunk first."""
    for m, n, k in SIMT_BLOCKS:
        yield None, {"b": 1, "m": m, "n": n, "k": k}, ("k", "m", "n")


def register_blocks(unit: ComputeUnit, op: Einsum, output_path: list[int]) -> Iterator[Target]:
    """A CPU BLAS's register and L1 blocks, shrunk as SIMD_SHRINK says."""
    for m, n, k in SIMD_BLOCKS:
        yield None, {"b": 1, "m": m, "n": n, "k": k}, SIMD_SHRINK


TARGETS: Registry[Targets] = Registry("mapping-target generator", {
    "pe_array": Targets(pe_array, smaller_buffers=True),
    "thread_blocks": Targets(thread_blocks, dealt=True, streamed=True),
    "register_blocks": Targets(register_blocks),
})


def targets(arch: Arch) -> Targets:
    """The mapping targets of `arch`'s kind: the generator its profile names."""
    return TARGETS[profile(arch.kind).targets]
