"""SIMT (GPU) GEMM kernels: thread blocks over SMs in waves, occupancy, a pipelined K loop, launch overhead.

Invariant: cycles >= MACs / peak (all SMs at the unit's rate), with equality for whole waves of exact
tiles and no latency, epilogue or launch; memory bandwidth is the engine's, not counted here.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from compiler.dtypes import DType
from accelsim.price.clock import to_arch_cycles
from compiler.targeting import gemm_sizes, instance_tile, k_split, units_used
from compiler.hardware import Arch, ComputeUnit, MemoryLevel
from compiler.mapping import Mapping

# Without a mapping a kernel uses CUTLASS's common 128 x 128 x 32 thread block; with one, a block is
# the mapping's step per SM (compiler.map: the innermost tile split over the "units" factors).
DEFAULT_BLOCK = (128, 128, 32)
# A thread holds 64 accumulators (an 8 x 8 thread tile, the classic SGEMM register blocking; also
# CUTLASS's 128 x 128 block over 8 warps); registers beyond the accumulators hold A/B fragments,
# addresses and loop counters, about 32 in compiled GEMM kernels.
OUTPUTS_PER_THREAD = 64
EXTRA_REGISTERS = 32
MAX_REGISTERS_PER_THREAD = 255   # the ISA's limit since Kepler; more spill to local memory
MAX_THREADS_PER_BLOCK = 1024     # CUDA's limit since Fermi


@dataclass(frozen=True)
class Kernel:
    """One SIMT GEMM kernel, per compute row (arrays) where it varies: the quantities a student checks."""

    block: tuple[int, int, int]        # thread-block tile (BM, BN, BK): the mapping step per SM
    threads: int                        # per block
    registers: int                      # per thread
    shared_bytes: int                   # per block: `stages` K-tiles of A and B
    stages: int                         # K-tiles in flight (the YAML's depth, cut to what fits)
    occupancy: int                      # resident blocks per SM
    sms: int                            # SMs the blocks are dealt over
    blocks: np.ndarray                  # thread blocks per row
    waves: int                          # of the whole kernel: ceil(busiest SM's blocks / occupancy)
    efficiency: np.ndarray              # blocks / (sms x busiest SM's blocks): the tail effect
    ideal: np.ndarray                   # unit cycles at peak for the busiest SM's padded MACs
    cycles: np.ndarray                  # arch cycles, launch included


def matrix_cycles(m: np.ndarray, n: np.ndarray, k: np.ndarray, unit: ComputeUnit, arch: Arch, mapping: Mapping | None,
                  dtype: DType | str) -> np.ndarray:
    """Compute cycles at the arch clock of GEMM rows (m, n, k) on a SIMT matrix unit; the rows passed
    together are one kernel (a whole GEMM, or the steps compiler.map cut it into).

    Worked example, A100 4096^3 bf16 with 128 x 128 x 32 blocks: 32 x 32 = 1,024 blocks over 108 SMs;
    at 2 blocks per SM (96 registers x 256 threads each) that is 5 waves of 216, the last 160 full: the
    busiest SM runs 10 blocks where 9.48 is the average, efficiency 1,024 / 1,080 = 0.948. Each block
    takes 128 K-tiles of 128*128*32 / 1,024 = 512 cycles: 10 x 128 x 512 = 655,360 on the busiest SM,
    then once per wave the L2 latency before the first MMA (212) and the last block's epilogue (128 x
    128 fp32 through the 128 B/cycle shared-memory port: 512), plus the 3 us launch: 663,210 cycles.
    """
    return kernel(m, n, k, unit, arch, mapping, dtype).cycles


def kernel(m: np.ndarray, n: np.ndarray, k: np.ndarray, unit: ComputeUnit, arch: Arch, mapping: Mapping | None,
           dtype: DType | str) -> Kernel:
    m, n, k = (np.atleast_1d(np.asarray(x, np.int64)) for x in (m, n, k))
    dtype = DType(dtype)
    limits = unit.limits
    assert limits is not None, f"{unit.name}: a SIMT unit has limits (the schema requires them)"
    shared, outside = _levels(arch, unit)
    tile = instance_tile(mapping, m, n, k)
    bm, bn, bk = (np.maximum(np.asarray(t, np.int64), 1) for t in
                  (tile or (np.minimum(d, x) for d, x in zip(DEFAULT_BLOCK, (m, n, k)))))
    BM, BN, BK = int(bm.max()), int(bn.max()), int(bk.max())
    in_bytes, acc_words = max(dtype.bits, 8) // 8, 2 if dtype is DType.fp64 else 1

    # Occupancy. Threads: OUTPUTS_PER_THREAD accumulators each, whole warps; shared memory: each stage
    # holds an A (BM x BK) and a B (BK x BN) K-tile. A deeper pipeline than fits is cut, as kernel
    # writers do (H100: 4 stages of 256 x 256 x 64 bf16, 64 KiB each, exceed 228 KiB: 3 are kept).
    warps = -(-BM * BN // (OUTPUTS_PER_THREAD * limits.warp))
    threads = min(warps * limits.warp, MAX_THREADS_PER_BLOCK, limits.threads)
    regs = min(-(-BM * BN // threads) * acc_words + EXTRA_REGISTERS, MAX_REGISTERS_PER_THREAD)
    stage_bytes = (BM + BN) * BK * in_bytes
    stages = unit.pipeline_stages if _double_buffered(mapping, shared) else 1
    stages = max(1, min(stages, limits.shared_memory_bytes // stage_bytes))
    smem = stages * stage_bytes
    occupancy = max(1, min(limits.blocks, limits.threads // threads, limits.registers // (regs * threads),
                           limits.shared_memory_bytes // smem))

    # Waves: blocks are dealt round-robin over the SMs, so the busiest SM runs ceil(blocks / sms) of them,
    # `occupancy` at a time. Split-K (the mapping spreads k over SMs) makes each share of k a block of its own.
    sms = units_used(mapping, unit)
    splits = np.maximum(-(-k // bk), 1) if k_split(mapping) > 1 else 1
    blocks = -(-m // bm) * -(-n // bn) * splits
    k_tiles = -(-k // (bk * splits))
    busiest = -(-blocks // sms)
    groups = -(-busiest // occupancy)
    last = busiest - (groups - 1) * occupancy

    # K loop: a block's K-tile takes t_k = BM*BN*BK / peak cycles with the SM to itself; r resident
    # blocks share the tensor cores (r * t_k per step), and each block keeps at most `stages` K-tiles
    # waiting or in use, so by Little's law a step takes at least (latency + t_k) / stages. A100, r = 2,
    # 3 stages: max(2 x 512, (212 + 512) / 3) = 1,024: compute-bound; one stage: 724 per block.
    t_k = (bm * bn * bk) / unit.peak_per_cycle(dtype)
    latency = outside.latency_cycles * unit.clock_hz / arch.clock_hz if outside is not None else 0.0
    def step(resident: int | np.ndarray, t: np.ndarray | float = t_k) -> np.ndarray:
        return np.maximum(resident * t, (latency + t) / stages)

    whole = gemm_sizes(mapping) if tile and mapping is not None else None
    if whole:
        t_block = BM * BN * BK / unit.peak_per_cycle(dtype)     # a whole block's K-tile: the grid's blocks are whole
        loop = _dealt(whole, (BM, BN, BK), k_split(mapping), sms, occupancy, lambda r: step(r, t_block), (m, n, k))
    else:
        loop = (groups - 1) * k_tiles * step(occupancy) + k_tiles * step(last)

    # Once per wave of the whole kernel: the first K-tile's latency before any MMA, and the epilogue of
    # the last block to finish (C leaves through the shared-memory port; co-resident blocks hide the
    # others'). With one block per SM every block is a wave and pays both: occupancy matters.
    port = shared.bandwidth_bytes_per_s / unit.clock_hz if shared is not None else np.inf
    epilogue = BM * BN * acc_words * 4 / port
    total_blocks = -(-whole[0] // BM) * -(-whole[1] // BN) * k_split(mapping) if whole else int(blocks.sum())
    per_sm = -(-total_blocks // sms)
    waves = -(-per_sm // occupancy)
    unit_cycles = loop.astype(np.float64)
    if unit_cycles.size:
        unit_cycles[0] += waves * (latency + epilogue)
    cycles = to_arch_cycles(unit_cycles, unit, arch)
    if cycles.size:
        cycles[0] += arch.cycles(unit.launch_overhead_s)
    return Kernel(block=(BM, BN, BK), threads=threads, registers=regs, shared_bytes=smem, stages=stages,
                  occupancy=occupancy, sms=sms, blocks=blocks, waves=waves,
                  efficiency=_share(blocks, sms * busiest), ideal=busiest * k_tiles * t_k, cycles=cycles)


def _dealt(whole: tuple[int, int, int], block: tuple[int, int, int], splits: int, sms: int, occupancy: int,
           step: Callable[[int], np.ndarray], rows: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """Unit cycles of each row's K loop where the rows are parts of one kernel (a mapping's steps): the block
    scheduler deals the whole grid over the SMs as they free up, so the kernel takes its busiest SM's time
    (ceil(grid / SMs) blocks, `occupancy` at a time, each the whole K loop), and each row its share of that by
    the block K-tiles it holds. A step is not a wave: 16384 x 12288 bf16 in 256 x 128 blocks is a grid of
    6,144, 57 rounds of 108 SMs, where steps of 64 blocks along m would take 96 rounds on 64 SMs."""
    (M, N, K), (BM, BN, BK) = whole, block
    grid = -(-M // BM) * -(-N // BN) * splits
    k_tiles = -(-K // (BK * splits))
    busiest = -(-grid // sms)
    groups = -(-busiest // occupancy)
    last = busiest - (groups - 1) * occupancy
    total = k_tiles * ((groups - 1) * step(occupancy) + step(last))
    m, n, k = rows
    held = -(-m // BM) * -(-n // BN) * -(-k // BK)
    cycles: np.ndarray = total * held.astype(np.float64) / (-(-M // BM) * -(-N // BN) * -(-K // BK))
    return cycles


def _share(blocks: np.ndarray, slots: np.ndarray | int) -> np.ndarray:
    """Blocks over the slots they occupy; 1 for an empty step (a ragged edge's clipped-away tile has no blocks)."""
    blocks, slots = np.asarray(blocks, np.float64), np.asarray(slots, np.float64)
    share: np.ndarray = np.divide(blocks, slots, out=np.ones(np.broadcast(blocks, slots).shape), where=slots > 0)
    return share


def _levels(arch: Arch, unit: ComputeUnit) -> tuple[MemoryLevel | None, MemoryLevel | None]:
    """(shared memory, the level it fills from): the per-SM levels have one instance per SM, the
    outermost of them is shared memory (inside it, the register file)."""
    per_sm = [i for i, lv in enumerate(arch.memory) if lv.instances == unit.count]
    if not per_sm:
        return None, None
    return arch.memory[per_sm[0]], arch.memory[per_sm[0] - 1] if per_sm[0] > 0 else None


def _double_buffered(mapping: Mapping | None, level: MemoryLevel | None) -> bool:
    """Stage K-tiles only if the mapping budgeted shared memory for more than one (or gave no tile)."""
    if mapping is None or level is None:
        return True
    held = next((lv for lv in mapping.levels if lv.level == level.name), None)
    return held is None or held.double_buffered
