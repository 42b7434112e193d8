"""Cycle-level runs of the systolic core of docs/rtl.md: check a Stimulus, hand it to the numba kernel
(accelsim/engine/cycle/systolic.py), pack its arrays into an Outcome and Waves (and, for teaching, a Probe of
every PE in every cycle), and write a VCD of the ports.

Invariant: `run` returns what the RTL bench records for the same Stimulus (accept cycles, output cycles and values),
all of it stepped by the kernel, or raises ValueError naming what is wrong with the stimulus.
`run_os` / `probe_os` step an output-stationary array (accelsim/engine/cycle/systolic_os.py; no RTL) the same way.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelsim.engine.cycle import systolic as kernel
from accelsim.engine.cycle import systolic_os as os_kernel
from accelsim.sim.stimulus import CLOCK_NS, RESET_CYCLES, Outcome, Stimulus
from accelsim.results.vcd import TIMESCALE, VcdWriter
from compiler import output

PORT_BITS = ("w_valid", "w_ready", "x_valid", "x_ready", "x_last", "x_acc", "y_valid", "y_last")
_NO_PROBE = np.zeros((0, 6, 1), np.int32)   # a probe of 0 cycles: the kernel records nothing


@dataclass(frozen=True)
class Waves:
    """Port values in every simulated cycle: the 1-bit ports (uint8 [cycles] each, named as in docs/rtl.md) and,
    for the buses, the index of the row on them (int64 [cycles], -1: none): `w_row` into stim.w_rows, `x_row` into
    stim.x_rows, `y_row` into outcome.y_data. x_last and x_acc are 0 while no activation row is offered."""
    w_valid: np.ndarray
    w_ready: np.ndarray
    x_valid: np.ndarray
    x_ready: np.ndarray
    x_last: np.ndarray
    x_acc: np.ndarray
    y_valid: np.ndarray
    y_last: np.ndarray
    w_row: np.ndarray
    x_row: np.ndarray
    y_row: np.ndarray

    @property
    def cycles(self) -> int:
        return len(self.w_row)


def run(stim: Stimulus, acc_depth: int = 512, waves: bool = False, values: bool = True):
    """Run `stim` on a core with `acc_depth` accumulator rows until every output row has appeared.

    With `values=False` only the timing is stepped (handshake, pointers, row tags: O(1) per cycle instead of
    O(ROWS * COLS)): w_accept, x_accept, y_cycle, y_last, cycles and the Waves are those of the full run, and
    y_data is all zeros.

    Returns the Outcome, or (Outcome, Waves) when `waves`. Raises ValueError for a malformed stimulus and for
    one that can never finish (e.g. a weight row waiting for an output that needs that very weight row)."""
    _check(stim, acc_depth)
    hint = len(stim.w_rows) + len(stim.x_rows) + int(stim.w_delay.sum() + stim.x_delay.sum()) + 2 * stim.rows
    status, cycles, w_accept, x_accept, y_cycle, y_data, y_last, wave_bits, wave_rows, stuck = kernel.step_grid(
        stim.rows, stim.cols, bool(stim.ternary), acc_depth, stim.w_rows, stim.w_delay, stim.w_wait, stim.x_rows,
        stim.x_last, stim.x_acc, stim.x_delay, waves, hint + stim.cols + 16, bool(values), _NO_PROBE)
    if status == kernel.STUCK:
        raise ValueError(_stuck_message(stim, *stuck))
    if not values:
        y_data = np.zeros((len(stim.x_rows), stim.cols), np.int32)   # (lazily zeroed pages, not a memset)
    outcome = Outcome(w_accept, x_accept, y_cycle, y_data, y_last, int(cycles))
    if not waves:
        return outcome
    bits = {name: (wave_bits >> i) & 1 for i, name in enumerate(PORT_BITS)}
    return outcome, Waves(**bits, w_row=wave_rows[:, 0].copy(), x_row=wave_rows[:, 1].copy(),
                          y_row=wave_rows[:, 2].copy())


@dataclass(frozen=True)
class Probe:
    """What every PE holds during every cycle, copied out of the kernel's registers (int32 [cycles, ROWS, COLS]
    each): the activation register (`value`; `bank`: the weight bank it multiplies with; `valid`), the psum
    register (`psum`: what the PE registered at the edge before, valid when `valid` was the cycle before) and the
    two weight registers (`w0`, `w1`)."""
    value: np.ndarray
    bank: np.ndarray
    valid: np.ndarray
    psum: np.ndarray
    w0: np.ndarray
    w1: np.ndarray


def probe(stim: Stimulus, acc_depth: int = 512):
    """`run(stim, acc_depth, waves=True)` that also records every PE in every cycle: (Outcome, Waves, Probe).
    The same kernel, the same results; for small arrays (it keeps 6 * ROWS * COLS values per cycle)."""
    cycles = run(stim, acc_depth, values=False).cycles         # timing only, to size the record exactly
    record = np.zeros((cycles, 6, stim.rows * stim.cols), np.int32)
    status, n, w_accept, x_accept, y_cycle, y_data, y_last, wave_bits, wave_rows, _ = kernel.step_grid(
        stim.rows, stim.cols, bool(stim.ternary), acc_depth, stim.w_rows, stim.w_delay, stim.w_wait, stim.x_rows,
        stim.x_last, stim.x_acc, stim.x_delay, True, cycles, True, record)
    assert status == kernel.DONE and n == cycles, (status, n, cycles)   # run() above finished in `cycles`
    bits = {name: (wave_bits >> i) & 1 for i, name in enumerate(PORT_BITS)}
    waves = Waves(**bits, w_row=wave_rows[:, 0].copy(), x_row=wave_rows[:, 1].copy(), y_row=wave_rows[:, 2].copy())
    grid = record.reshape(cycles, 6, stim.rows, stim.cols)
    fields = (kernel.P_VALUE, kernel.P_BANK, kernel.P_VALID, kernel.P_PSUM, kernel.P_W0, kernel.P_W1)
    return (Outcome(w_accept, x_accept, y_cycle, y_data, y_last, int(n)), waves,
            Probe(*(grid[:, f].copy() for f in fields)))


# The OS model in the closed form's terms (accelsim.price.systolic.native_cycles): two accumulator banks and
# 2 io registers. The same registers as the WS core's 3 (PE input register, PE sum register, output register)
# count as 2 here because the closed form's OS drain term X = ROWS already holds the cycle in which the first
# drained row leaves the grid, the cycle after the PE sum register takes its last MAC.
OS_BANKS = 2
OS_IO_REGISTERS = 2


@dataclass(frozen=True)
class OsRun:
    """An OS GEMM C[m, n] = A[m, k] @ B[k, n] on a ROWS x COLS array. Fold f computes the output tile at
    folds[f] = (i0, j0) (m-major); its k-steps are f * k .. f * k + k - 1, step s carrying A[i0:i0+ROWS, s] and
    B[s, j0:j0+COLS] (zero-padded past m and n). Output row y (y_cycle, y_data, in order of appearance) is tile
    row ROWS - 1 - y % ROWS of fold y // ROWS: each fold drains from its bottom row up."""
    rows: int
    cols: int
    banks: int
    k: int
    folds: tuple
    s_accept: np.ndarray     # int64 [folds * k]: the cycle each k-step was accepted
    y_cycle: np.ndarray      # int64 [folds * ROWS]
    y_data: np.ndarray       # int32 [folds * ROWS, COLS]
    cycles: int              # the last output appears in cycle cycles - 1

    def place(self, y: int):
        """(fold, tile row) of output row y."""
        return y // self.rows, self.rows - 1 - y % self.rows

    def product(self, m: int, n: int) -> np.ndarray:
        """C as the output rows left it (int32 [m, n])."""
        c = np.zeros((len(self.folds) * self.rows + m, n + self.cols), np.int32)
        for y, row in enumerate(self.y_data):
            f, r = self.place(y)
            i0, j0 = self.folds[f]
            c[i0 + r, j0:j0 + self.cols] = row
        return c[:m, :n]


@dataclass(frozen=True)
class OsProbe:
    """What every PE of the OS model holds during every cycle (int32 [cycles, ROWS, COLS] each): the A register
    (`a`, `a_valid`: passing east), the B register (`b`, `b_valid`: passing south), `bank`: the accumulator the
    pair in it adds into, and the accumulators (`acc0`, `acc1`; with one bank, acc1 is acc0)."""
    a: np.ndarray
    a_valid: np.ndarray
    b: np.ndarray
    b_valid: np.ndarray
    bank: np.ndarray
    acc0: np.ndarray
    acc1: np.ndarray


def run_os(a, b, rows: int, cols: int, banks: int = OS_BANKS) -> OsRun:
    """Run the int8 GEMM a @ b on an output-stationary rows x cols array with `banks` accumulators per PE.
    Raises ValueError for bad sizes or operands outside int8."""
    return _os(a, b, rows, cols, banks, 0)[0]


def probe_os(a, b, rows: int, cols: int, banks: int = OS_BANKS):
    """`run_os` that also records every PE in every cycle: (OsRun, OsProbe). The same kernel, the same results."""
    cycles = run_os(a, b, rows, cols, banks).cycles
    return _os(a, b, rows, cols, banks, cycles)


def _os(a, b, rows: int, cols: int, banks: int, probe_cycles: int):
    a, b = np.asarray(a), np.asarray(b)
    if rows < 1 or cols < 1:
        raise ValueError(f"the array must be at least 1 x 1, got {rows} x {cols}")
    if banks not in (1, 2):
        raise ValueError(f"banks must be 1 or 2, got {banks}")
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or 0 in a.shape + b.shape:
        raise ValueError(f"cannot multiply A {a.shape} by B {b.shape}: need non-empty [m, k] @ [k, n]")
    for name, x in (("A", a), ("B", b)):
        if x.min() < -128 or x.max() > 127:
            raise ValueError(f"{name} holds values outside int8 (-128..127)")
    (m, k), n = a.shape, b.shape[1]
    folds = tuple((i0, j0) for i0 in range(0, m, rows) for j0 in range(0, n, cols))
    a_pad = np.zeros((-(-m // rows) * rows, k), np.int8)
    b_pad = np.zeros((k, -(-n // cols) * cols), np.int8)
    a_pad[:m], b_pad[:, :n] = a, b
    a_steps = np.concatenate([a_pad[i0:i0 + rows].T for i0, _ in folds])          # [folds * k, rows]
    b_steps = np.concatenate([b_pad[:, j0:j0 + cols] for _, j0 in folds])         # [folds * k, cols]
    s_last = np.tile((np.arange(k) == k - 1).astype(np.uint8), len(folds))
    record = np.zeros((probe_cycles, os_kernel.PROBE_FIELDS, rows * cols), np.int32)
    cycles, s_accept, y_cycle, y_data = os_kernel.step_grid(rows, cols, banks, np.ascontiguousarray(a_steps),
                                                           np.ascontiguousarray(b_steps), s_last, record)
    if cycles < 0:
        raise RuntimeError("the OS model lost an output row "
                           "(a handshake defect in accelsim/engine/cycle/systolic_os.py)")
    run = OsRun(rows, cols, banks, k, folds, s_accept, y_cycle, y_data, int(cycles))
    if not probe_cycles:
        return run, None
    grid = record.reshape(probe_cycles, os_kernel.PROBE_FIELDS, rows, cols)
    return run, OsProbe(*(grid[:, f].copy() for f in range(os_kernel.PROBE_FIELDS)))


def write_vcd(path, stim: Stimulus, outcome: Outcome, waves: Waves, reset_cycles: int = RESET_CYCLES,
              inputs_at_fall: bool = True) -> None:
    """A VCD of the core's ports (scope `systolic_core`, names and widths of docs/rtl.md), 10 ns per cycle, on the
    RTL's waveform's timescale (accelsim.results.vcd.TIMESCALE): by default every edge at the time the cocotb bench puts
    it (stimulus.RESET_CYCLES), so the two files line up in a viewer.

    Cycle k starts with clk's rising edge at 10 * (reset_cycles + k) ns: the outputs (w_ready, x_ready, y_*)
    change there. The inputs (rst, w_valid, w_data, x_*) change at the falling edge 5 ns later, as the cocotb
    bench drives them, or with the outputs if not `inputs_at_fall`; either way they are sampled at the rising
    edge that ends the cycle. `reset_cycles` cycles with rst high come first, showing the ports' reset values.
    Buses: w_data and x_data carry the offered row and 0 while none is offered (the bench drives 0 when idle);
    y_data is the accumulator's output register: 0 after reset, then it holds the last output row while y_valid
    is low (the RTL does not reset it, so there it reads x until the first output)."""
    w_bits = 2 if stim.ternary else 8
    w_words, x_words = stim.w_words(), stim.x_words()
    y_words = [_pack32(row) for row in outcome.y_data]
    signals = [("clk", 1), ("rst", 1), ("w_valid", 1), ("w_ready", 1), ("w_data", stim.cols * w_bits),
               ("x_valid", 1), ("x_ready", 1), ("x_data", stim.rows * 8), ("x_last", 1), ("x_acc", 1),
               ("y_valid", 1), ("y_data", stim.cols * 32), ("y_last", 1)]
    half = CLOCK_NS // 2
    with output.replacing(path) as temporary, open(temporary, "w") as f:
        vcd = VcdWriter(f, "systolic_core", signals, timescale=TIMESCALE)
        y_word = 0
        for j in range(reset_cycles + waves.cycles):
            k = j - reset_cycles                                  # the spec's cycle number
            if k >= 0 and waves.y_row[k] >= 0:
                y_word = y_words[waves.y_row[k]]
            outputs = {"w_ready": 1, "x_ready": 0, "y_valid": 0, "y_data": 0, "y_last": 0} if k < 0 else {
                "w_ready": waves.w_ready[k], "x_ready": waves.x_ready[k], "y_valid": waves.y_valid[k],
                "y_data": y_word, "y_last": waves.y_last[k]}
            inputs = {"rst": 1, "w_valid": 0, "w_data": 0, "x_valid": 0, "x_data": 0, "x_last": 0, "x_acc": 0}
            if k >= 0:
                w, x = waves.w_row[k], waves.x_row[k]
                inputs = {"rst": 0, "w_valid": waves.w_valid[k], "w_data": w_words[w] if w >= 0 else 0,
                          "x_valid": waves.x_valid[k], "x_data": x_words[x] if x >= 0 else 0,
                          "x_last": waves.x_last[k], "x_acc": waves.x_acc[k]}
            vcd.at(j * CLOCK_NS)
            vcd.change("clk", 1)
            _set(vcd, outputs)
            if not inputs_at_fall or j == 0:      # (time 0 shows the inputs' reset values, not x)
                _set(vcd, inputs)
            vcd.at(j * CLOCK_NS + half)
            vcd.change("clk", 0)
            if inputs_at_fall:
                _set(vcd, inputs)
        vcd.at((reset_cycles + waves.cycles) * CLOCK_NS)        # the rising edge that ends the last cycle
        vcd.change("clk", 1)
        vcd.finish()


def _set(vcd: VcdWriter, values: dict) -> None:
    for name, value in values.items():
        vcd.change(name, int(value))


def _pack32(row) -> int:
    word = 0
    for c, v in enumerate(row):
        word |= (int(v) & 0xFFFFFFFF) << (32 * c)
    return word


def _check(stim: Stimulus, acc_depth: int) -> None:
    if stim.rows < 1 or stim.cols < 1:
        raise ValueError(f"the array must be at least 1 x 1, got {stim.rows} x {stim.cols}")
    if acc_depth < 1:
        raise ValueError(f"acc_depth must be >= 1, got {acc_depth}")
    nw, nx = len(stim.w_rows), len(stim.x_rows)
    for name, n in (("w_delay", nw), ("w_wait", nw), ("x_last", nx), ("x_acc", nx), ("x_delay", nx)):
        values = getattr(stim, name)
        if values.shape != (n,):
            raise ValueError(f"{name} has shape {values.shape}, expected ({n},): one entry per row")
        if values.size and values.min() < 0:
            raise ValueError(f"{name} must be >= 0; row {int(np.argmin(values))} has {int(values.min())}")
    for name in ("x_last", "x_acc"):
        if getattr(stim, name).size and getattr(stim, name).max() > 1:
            raise ValueError(f"{name} must be 0 or 1")
    if nx == 0:
        raise ValueError("the stimulus has no activation rows: every tile needs at least one")
    tiles = int(stim.x_last.sum())
    if not stim.x_last[-1]:
        raise ValueError(f"activation row {nx - 1}, the last, does not have x_last = 1: its tile never ends")
    if tiles != stim.tiles:
        raise ValueError(f"{stim.tiles} weight tiles ({nw} rows of {stim.rows}) but {tiles} activation tiles "
                         f"(rows with x_last = 1): every tile needs both")
    if stim.w_wait.size and stim.w_wait.max() > nx:
        i = int(np.argmax(stim.w_wait))
        raise ValueError(f"weight row {i} waits for {int(stim.w_wait[i])} output rows; there are only {nx}")


def _stuck_message(stim: Stimulus, cycle: int, wi: int, xi: int, outputs: int) -> str:
    why = []
    if wi < len(stim.w_rows):
        need = int(stim.w_wait[wi])
        why.append(f"weight row {wi} waits for {need} output rows" if need > outputs
                   else f"weight row {wi} is offered but no bank is free")
    if xi < len(stim.x_rows):
        why.append(f"activation row {xi} is offered but its tile's weights are not loaded")
    return (f"the stimulus cannot finish: from cycle {cycle} no row can be accepted and nothing is in flight "
            f"({outputs} of {len(stim.x_rows)} output rows appeared; {'; '.join(why)})")
