"""cocotb bench for rtl/systolic_core.v: drives a Stimulus through the core exactly as docs/rtl.md's driver does,
records the Outcome and, when asked, checks every output row as it appears against numpy and the cycle-level model.

Runs inside the simulator (Icarus or Verilator, started by accelsim.rtl.runner). Inputs are driven and outputs
sampled at the falling edge, so that the cycle numbering is the spec's: cycle 0 is the first with `rst` low.
Environment: ACCELSIM_STIMULUS (npz in), ACCELSIM_OUTCOME (npz out), ACCELSIM_ACC_DEPTH, ACCELSIM_CHECK (0/1).
"""
from __future__ import annotations

import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

from accelsim.sim.stimulus import CLOCK_NS, RESET_CYCLES, Outcome, Stimulus, expected_outputs


class Queue:
    """One of the driver's two row queues: row i is offered from cycle max(accept[i-1] + 1, after its wait) +
    delay[i]."""

    def __init__(self, words, delay, wait=None):
        self.words, self.delay = words, delay
        self.wait = wait if wait is not None else np.zeros(len(words), np.int64)
        self.accept = np.full(len(words), -1, np.int64)
        self.next, self.ready_from = 0, None

    def offer(self, cycle: int, y_cycle: list[int]):
        """The index of the row offered in `cycle`, or None."""
        i = self.next
        if i >= len(self.words):
            return None
        if self.ready_from is None:
            start = self.accept[i - 1] + 1 if i else 0
            need = int(self.wait[i])
            if need:
                if len(y_cycle) < need:
                    return None
                start = max(start, y_cycle[need - 1] + 1)
            self.ready_from = start + int(self.delay[i])
        return i if cycle >= self.ready_from else None

    def take(self, cycle: int):
        self.accept[self.next] = cycle
        self.next += 1
        self.ready_from = None


@cocotb.test()
async def run_stimulus(dut):
    stim = Stimulus.load(os.environ["ACCELSIM_STIMULUS"])
    acc_depth = int(os.environ.get("ACCELSIM_ACC_DEPTH", "512"))
    check = os.environ.get("ACCELSIM_CHECK", "0") == "1"
    expected = model = None
    if check:
        from accelsim.sim import cycle

        expected = expected_outputs(stim, acc_depth)
        model = cycle.run(stim, acc_depth=acc_depth)
    weights = Queue(stim.w_words(), stim.w_delay, stim.w_wait)
    acts = Queue(stim.x_words(), stim.x_delay)
    y_cycle, y_rows, y_last = [], [], []
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    for name in ("w_valid", "w_data", "x_valid", "x_data", "x_last", "x_acc"):
        getattr(dut, name).value = 0
    dut.rst.value = 1
    for _ in range(RESET_CYCLES + 1):       # the first at time 0, where the clock starts high
        await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    n_out = len(stim.x_rows)
    limit = _cycle_limit(stim)
    cycle_now = 0
    while len(y_cycle) < n_out:
        if cycle_now > limit:
            raise AssertionError(f"hang: {len(y_cycle)} of {n_out} output rows after {cycle_now} cycles")
        if int(dut.y_valid.value):
            word = dut.y_data.value.to_unsigned()
            row = _unpack32(word, stim.cols)
            i = len(y_cycle)
            if check:
                _check_row(i, cycle_now, row, expected, model)
            y_cycle.append(cycle_now), y_rows.append(row), y_last.append(int(dut.y_last.value))
        _drive(dut, weights, acts, stim, cycle_now, y_cycle)
        await FallingEdge(dut.clk)
        cycle_now += 1
    outcome = Outcome(weights.accept, acts.accept, np.array(y_cycle, np.int64), np.array(y_rows, np.int32),
                      np.array(y_last, np.uint8), cycle_now)
    outcome.save(os.environ["ACCELSIM_OUTCOME"])
    if check:
        assert np.array_equal(outcome.w_accept, model.w_accept), "weight rows accepted in other cycles than the model's"
        assert np.array_equal(outcome.x_accept, model.x_accept), \
            "activation rows accepted in other cycles than the model's"


def _drive(dut, weights: Queue, acts: Queue, stim: Stimulus, cycle: int, y_cycle: list[int]) -> None:
    """Set this cycle's inputs; a row driven while its ready is high is accepted at the coming edge."""
    i = weights.offer(cycle, y_cycle)
    dut.w_valid.value = int(i is not None)
    dut.w_data.value = weights.words[i] if i is not None else 0
    if i is not None and int(dut.w_ready.value):
        weights.take(cycle)
    j = acts.offer(cycle, y_cycle)
    dut.x_valid.value = int(j is not None)
    dut.x_data.value = acts.words[j] if j is not None else 0
    dut.x_last.value = int(stim.x_last[j]) if j is not None else 0
    dut.x_acc.value = int(stim.x_acc[j]) if j is not None else 0
    if j is not None and int(dut.x_ready.value):
        acts.take(cycle)


def _check_row(i: int, cycle: int, row: np.ndarray, expected: np.ndarray, model) -> None:
    if i >= len(expected):
        raise AssertionError(f"output row {i} in cycle {cycle}: more outputs than activation rows ({len(expected)})")
    bad = np.flatnonzero(row != expected[i])
    if bad.size:
        c = bad[0]
        raise AssertionError(f"output row {i}, cycle {cycle}, column {c}: RTL {row[c]}, numpy {expected[i][c]}")
    if cycle != model.y_cycle[i]:
        raise AssertionError(f"output row {i} appeared in cycle {cycle}; the cycle-level model says {model.y_cycle[i]}")


def _unpack32(word: int, cols: int) -> np.ndarray:
    values = [(word >> (32 * c)) & 0xFFFFFFFF for c in range(cols)]
    return np.array(values, np.uint32).view(np.int32)


def _cycle_limit(stim: Stimulus) -> int:
    """More cycles than any correct core needs: every row's delay plus a full load, stream and drain per tile."""
    per_tile = 2 * stim.rows + stim.cols + 8
    return int(stim.w_delay.sum() + stim.x_delay.sum() + len(stim.x_rows) + (stim.tiles + 1) * per_tile) + 100
