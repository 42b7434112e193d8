"""Cycle-level runs of the systolic core of docs/rtl.md: check a Stimulus, hand it to the numba kernel
(accelsim/engine/systolic_cycle.py), pack its arrays into an Outcome and Waves, and write a VCD of the ports.

Invariant: `run` returns what the RTL bench records for the same Stimulus (accept cycles, output cycles and values),
all of it stepped by the kernel, or raises ValueError naming what is wrong with the stimulus.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelsim.engine import systolic_cycle as kernel
from accelsim.rtl.stimulus import Outcome, Stimulus
from accelsim.vcd import VcdWriter

PORT_BITS = ("w_valid", "w_ready", "x_valid", "x_ready", "x_last", "x_acc", "y_valid", "y_last")
CLOCK_NS = 10           # the 100 MHz teaching clock: one cycle is 10 ns, clk rises at its start


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
    status, cycles, w_accept, x_accept, y_cycle, y_data, y_last, wave_bits, wave_rows, stuck = kernel.simulate(
        stim.rows, stim.cols, bool(stim.ternary), acc_depth, stim.w_rows, stim.w_delay, stim.w_wait, stim.x_rows,
        stim.x_last, stim.x_acc, stim.x_delay, waves, hint + stim.cols + 16, bool(values))
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


def write_vcd(path, stim: Stimulus, outcome: Outcome, waves: Waves, reset_cycles: int = 1,
              inputs_at_fall: bool = True) -> None:
    """A VCD of the core's ports (scope `systolic_core`, names and widths of docs/rtl.md), 10 ns per cycle.

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
    with open(path, "w") as f:
        vcd = VcdWriter(f, "systolic_core", signals, timescale="1ns")
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
