"""Systolic (and ternary) arrays: cycles of tile GEMMs (m x k) @ (k x n) on an R x C PE grid, in closed form.

Invariant: the native model and the SCALE-Sim way (SCALE-Sim v3's compute cycles, exactly) count the same
folds with the same per-fold terms; they differ only in what SCALE-Sim leaves out (overlap, slow dtypes)."""
from __future__ import annotations

import numpy as np

from accelsim.price.clock import to_arch_cycles
from compiler.dtypes import DType
from compiler.hardware import Arch, ComputeUnit
from compiler.mapping import Mapping
from compiler.targeting import instance_tile

DATAFLOWS = ("ws", "is", "os")


def matrix_cycles(m: np.ndarray, n: np.ndarray, k: np.ndarray, unit: ComputeUnit, arch: Arch, mapping: Mapping | None,
                  dtype: DType | None) -> np.ndarray:
    """Cycles of tile GEMMs (numpy arrays m, n, k), each from an idle array to its last output (the
    `matrix_split` docstring has the model)."""
    return matrix_split(m, n, k, unit, arch, mapping, dtype)[0]


def matrix_split(m: np.ndarray, n: np.ndarray, k: np.ndarray, unit: ComputeUnit, arch: Arch, mapping: Mapping | None,
                 dtype: DType | None) -> tuple[np.ndarray, np.ndarray]:
    """(cycles, tail) of tile GEMMs (numpy arrays m, n, k) on `unit.array` under `mapping.dataflow`, in arch cycles.

    The dataflow decides which operand stays in the PEs (the stationary tile, mapped rows x cols) and which
    streams through them, one vector per cycle:

        dataflow  stationary tile      rows  cols  streamed (T cycles)    folds
        WS        weights  w[k, n]     k     n     T = m input rows       ceil(k/R) * ceil(n/C)
        IS        inputs   x[m, k].T   k     m     T = n weight columns   ceil(k/R) * ceil(m/C)
        OS        outputs  o[m, n]     m     n     T = k (both operands)  ceil(m/R) * ceil(n/C)

    Per fold, every term in cycles (a ragged last fold costs a full one: the grid has fixed wiring):
        load  X = R   WS/IS: shift the stationary tile in from the top edge, one row per cycle, R rows (TPU v1:
                      a 64 KiB weight tile takes 256 cycles); OS: X = R as well, the drain of the R rows of
                      finished sums out of the PEs, one row per cycle (OS needs no preload).
        skew  R - 1   row r's operands enter r cycles after row 0's (the diagonal wavefront).
        stream T      one streamed vector per cycle, times `slow` = PEs / MACs-per-cycle of the dtype (TPU v1
                      runs 16-bit operands at a quarter of the int8 rate: slow = 4).
        drain C - 1   the last column sees its operands C - 1 cycles after the first; its sums leave then.

    Single-buffered (`array.weight_buffers == 1`): nothing overlaps.
        cycles = folds * (X + (R - 1) + T*slow + (C - 1))
    Double-buffered (>= 2 stationary buffers per PE; WS: weights, IS: inputs, OS: accumulators): fold i+1's
    load (OS: fold i's drain) runs under fold i's stream, so folds start max(T*slow, X) apart and the skew
    and drain are paid once, at the end:
        cycles = X + (folds - 1) * max(T*slow, X) + T*slow + (R - 1) + (C - 1)
    Worked example, TPU v1 (256 x 256, WS, double-buffered), a batch-1 FC layer m=1, k=n=2048:
    folds = 8 * 8 = 64; single-buffered 64 * (256 + 255 + 1 + 255) = 49,088 cycles; double-buffered
    256 + 63 * max(1, 256) + 1 + 255 + 255 = 16,895 cycles, against 64 at peak: the array waits on weight
    loads 99.6% of the time (load-bound; Jouppi et al. 2017 make the same point about MLPs). At m=256 the
    stream hides each load exactly: 256 + 63*256 + 256 + 510 = 17,150 cycles for 256x the work.

    The SCALE-Sim way: SCALE-Sim v3 builds per-fold demand matrices of 2R + C + T - 2 lines (WS, IS: the
    load X = R, skew, stream and drain above, with no overlap and slow = 1) and R + C + T - 2 lines (OS: no
    load, no drain of the finished sums), then reports "Total Cycles" as the index of the last line, i.e.
    the count minus one. Its "Stall Cycles" are memory waits on top; "Total Cycles" - "Stall Cycles" is what
    `compat_cycles` returns: the columns of COMPUTE_REPORT.csv we match (tests/golden/scalesim_v3.csv);
    `scalesim_split` prices rows that way (accelsim.price.compat.ScaleSim).

    tail: the part of `cycles` the array overlaps with the next GEMM it runs (`steady_and_tail`), which the
    engine charges as latency (it delays this GEMM's end, not the array); 0 the SCALE-Sim way.
    """
    array = unit.array
    assert array is not None, f"{unit.name}: a systolic unit has an array (the schema requires one)"
    dataflow = dataflow_of(unit, mapping)
    share = instance_tile(mapping, m, n, k) if getattr(mapping, "spatial", ()) else None
    if share is not None:
        m, n, k = share   # several arrays side by side (TPU v4's 8 MXUs): each runs its share at once
    per_cycle = dict(unit.per_cycle).get(dtype, array.pes) if dtype is not None else array.pes
    slow = -(-array.pes // per_cycle)
    args = (m, n, k, array.rows, array.cols, dataflow, array.weight_buffers, slow, array.io_registers)
    steady, tail = steady_and_tail(*args)   # native_cycles, split: computed once
    return _at_arch_clock(steady + tail, tail, unit, arch)


def scalesim_split(m: np.ndarray, n: np.ndarray, k: np.ndarray, unit: ComputeUnit, arch: Arch,
                   mapping: Mapping | None) -> tuple[np.ndarray, np.ndarray]:
    """(cycles, tail) of tile GEMMs as SCALE-Sim v3 counts them (`compat_cycles`): each row whole on one array,
    its folds and rows overlapping nothing (tail 0)."""
    assert unit.array is not None, f"{unit.name}: SCALE-Sim prices systolic arrays only"
    cycles = compat_cycles(m, n, k, unit.array.rows, unit.array.cols, dataflow_of(unit, mapping))
    return _at_arch_clock(cycles, np.zeros_like(cycles), unit, arch)


def _at_arch_clock(cycles: np.ndarray, tail: np.ndarray, unit: ComputeUnit,
                   arch: Arch) -> tuple[np.ndarray, np.ndarray]:
    if unit.clock_hz == arch.clock_hz:
        return cycles, tail
    whole = to_arch_cycles(cycles, unit, arch)
    return whole, whole - np.minimum(to_arch_cycles(cycles - tail, unit, arch), whole)


def folds_and_stream(m: np.ndarray | int, n: np.ndarray | int, k: np.ndarray | int, rows: int, cols: int,
                     dataflow: str) -> tuple[np.ndarray, np.ndarray]:
    """(folds, T): how many stationary tiles the GEMM takes and the streamed length per fold (table above)."""
    m, n, k = (np.asarray(x, np.int64) for x in (m, n, k))
    if dataflow == "ws":
        return _ceil(k, rows) * _ceil(n, cols), m
    if dataflow == "is":
        return _ceil(k, rows) * _ceil(m, cols), n
    if dataflow == "os":
        return _ceil(m, rows) * _ceil(n, cols), k
    raise ValueError(f"unknown dataflow {dataflow!r}; known: {', '.join(DATAFLOWS)}")


def native_cycles(m: np.ndarray | int, n: np.ndarray | int, k: np.ndarray | int, rows: int, cols: int, dataflow: str,
                  weight_buffers: int = 1, slow: int | np.ndarray = 1, io_registers: int = 0) -> np.ndarray:
    """accelsim's model: load, skew, stream, drain per fold; loads under streams when double-buffered.

    `io_registers` adds the pipeline registers a real core has beyond the PE grid. For rtl/systolic_core.v
    (docs/rtl.md: activation input, de-skew output and accumulator registers, 3) this is exactly the cycles
    from its first weight row to its last output row, equal to the RTL and the cycle-level model
    (accelsim/engine/cycle/systolic.py) for every tile GEMM run back to back from an idle core."""
    folds, stream = folds_and_stream(m, n, k, rows, cols, dataflow)
    # An empty GEMM (an extent 0) takes no time; a WS fold count does not see m = 0, so ask all three.
    empty = (np.asarray(m) == 0) | (np.asarray(n) == 0) | (np.asarray(k) == 0)
    stream = stream * slow
    load = rows
    pipeline = (rows - 1) + (cols - 1) + io_registers
    if weight_buffers >= 2:
        cycles = load + (folds - 1) * np.maximum(stream, load) + stream + pipeline
    else:
        cycles = folds * (load + stream + pipeline)
    return np.where(empty, 0, cycles).astype(np.int64)


def steady_and_tail(m: np.ndarray | int, n: np.ndarray | int, k: np.ndarray | int, rows: int, cols: int, dataflow: str,
                    weight_buffers: int = 1, slow: int | np.ndarray = 1,
                    io_registers: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`native_cycles` split as a stream of GEMMs pays it: (steady, tail), steady + tail = native_cycles.

    steady: cycles the GEMM holds the array, folds * max(T*slow, X); tail: min(T*slow, X) + skew + drain
    + io_registers, which the next GEMM on the array overlaps. Double-buffered, the next GEMM's first
    stationary tile loads while this one's last fold streams, its first vector follows this one's last, and
    this one's drain runs under it: rtl/systolic_core.v accepts tile i+1's first activation row max(T_i, R)
    cycles after tile i's (docs/rtl.md, weight banks: the load of tile i+1 waits only for bank i-1 to free),
    whatever the GEMM boundaries, so GEMMs issued back to back end where the cycle-level model's last output
    of the same tiles appears. Worked example, TPU v1, alexnet fc6 at batch 1 (m = 1, 576 tiles of one fold
    each): 576 x 767 = 441,792 cycles one by one; streamed 576 x 256 + (1 + 510) = 147,967, as the one
    GEMM of 576 folds the closed form prices. IS runs the same core; the OS model (no RTL) spaces folds by
    the next fold's k, so it agrees for GEMMs of equal k. Single-buffered the next load waits for this
    GEMM's bank, and the closed form overlaps nothing: tail 0."""
    cycles = native_cycles(m, n, k, rows, cols, dataflow, weight_buffers, slow, io_registers)
    if weight_buffers < 2:
        return cycles, np.zeros_like(cycles)
    folds, stream = folds_and_stream(m, n, k, rows, cols, dataflow)
    steady = np.where(cycles == 0, 0, folds * np.maximum(stream * slow, rows)).astype(np.int64)
    return steady, cycles - steady


def compat_cycles(m: np.ndarray | int, n: np.ndarray | int, k: np.ndarray | int, rows: int, cols: int,
                  dataflow: str) -> np.ndarray:
    """SCALE-Sim v3's "Total Cycles" - "Stall Cycles" for a layer it sees as this GEMM (module docstring)."""
    folds, stream = folds_and_stream(m, n, k, rows, cols, dataflow)
    per_fold = (rows if dataflow == "os" else 2 * rows) + cols + stream - 2
    cycles: np.ndarray = np.maximum(folds * per_fold - 1, 0).astype(np.int64)
    return cycles


def dataflow_of(unit: ComputeUnit, mapping: Mapping | None) -> str:
    """The mapping's dataflow, else the unit's first listed one (a preset lists its native dataflow first)."""
    chosen: object = getattr(mapping, "dataflow", None)
    if chosen is None:
        chosen = unit.dataflows[0] if unit.dataflows else "ws"
    return str(getattr(chosen, "value", chosen)).lower()


def _ceil(a: np.ndarray, b: int) -> np.ndarray:
    return -(-a // b)
