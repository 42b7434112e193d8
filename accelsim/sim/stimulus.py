"""What the systolic core is fed and what comes out, in one format for the RTL bench and the cycle-level model.

Invariant: a Stimulus fully decides a run: two queues of rows with their offer delays (docs/rtl.md, "Driving
it"); the core's handshake decides the rest. An Outcome records when each row was accepted and when and what
each output row was, so two runs compare row for row.
"""
from __future__ import annotations

from dataclasses import dataclass, field
import numpy as np

TERNARY_CODES = {0: 0, 1: 1, -1: 3}   # 2-bit weight codes on w_data (docs/rtl.md)
# How the cocotb bench (accelsim.rtl.bench) clocks the core, and so where the cycle-level model's waveform puts each
# cycle for the two to line up: a 10 ns clock (the teaching preset's 100 MHz) rising at time 0, rst high over
# RESET_CYCLES + 1 rising edges (0, 10 and 20 ns), lowered at the falling edge (25 ns) where cycle 0's inputs are driven
CLOCK_NS = 10
RESET_CYCLES = 2


@dataclass
class Stimulus:
    rows: int
    cols: int
    ternary: bool
    w_rows: np.ndarray      # int8 [NW, cols]; a tile is `rows` consecutive weight rows
    w_delay: np.ndarray     # int64 [NW]: idle cycles before the row is offered (after the previous one's acceptance)
    w_wait: np.ndarray      # int64 [NW]: output rows that must have appeared before the row is offered
    x_rows: np.ndarray      # int8 [NX, rows]
    x_last: np.ndarray      # uint8 [NX]
    x_acc: np.ndarray       # uint8 [NX]
    x_delay: np.ndarray     # int64 [NX]

    def __post_init__(self):
        self.w_rows = np.ascontiguousarray(self.w_rows, np.int8).reshape(-1, self.cols)
        self.x_rows = np.ascontiguousarray(self.x_rows, np.int8).reshape(-1, self.rows)
        for name in ("w_delay", "w_wait"):
            setattr(self, name, np.ascontiguousarray(getattr(self, name), np.int64))
        self.x_delay = np.ascontiguousarray(self.x_delay, np.int64)
        self.x_last = np.ascontiguousarray(self.x_last, np.uint8)
        self.x_acc = np.ascontiguousarray(self.x_acc, np.uint8)
        if len(self.w_rows) % self.rows:
            raise ValueError(f"{len(self.w_rows)} weight rows is not a whole number of {self.rows}-row tiles")
        if self.ternary and np.any(np.abs(self.w_rows.astype(np.int16)) > 1):
            raise ValueError("ternary weights must be -1, 0 or +1")

    @property
    def tiles(self) -> int:
        return len(self.w_rows) // self.rows

    def w_words(self) -> list[int]:
        """Each weight row packed as the integer on `w_data` (column c at bits c*W_BITS)."""
        bits = 2 if self.ternary else 8
        codes = self.w_rows.astype(np.int64)
        if self.ternary:
            codes = np.where(codes < 0, 3, codes)
        return [_pack(row, bits) for row in codes]

    def x_words(self) -> list[int]:
        return [_pack(row.astype(np.int64), 8) for row in self.x_rows]

    def save(self, path) -> None:
        np.savez(path, rows=self.rows, cols=self.cols, ternary=self.ternary, **{
            k: getattr(self, k) for k in ("w_rows", "w_delay", "w_wait", "x_rows", "x_last", "x_acc", "x_delay")})

    @classmethod
    def load(cls, path) -> Stimulus:
        with np.load(path) as z:
            return cls(int(z["rows"]), int(z["cols"]), bool(z["ternary"]),
                       *(z[k] for k in ("w_rows", "w_delay", "w_wait", "x_rows", "x_last", "x_acc", "x_delay")))


@dataclass
class Outcome:
    w_accept: np.ndarray    # int64 [NW]: cycle each weight row was accepted
    x_accept: np.ndarray    # int64 [NX]
    y_cycle: np.ndarray     # int64 [NX]: cycle each output row appeared
    y_data: np.ndarray      # int32 [NX, cols]
    y_last: np.ndarray      # uint8 [NX]
    cycles: int = 0         # cycles simulated

    def save(self, path) -> None:
        np.savez(path, cycles=self.cycles, **{k: getattr(self, k) for k in
                                              ("w_accept", "x_accept", "y_cycle", "y_data", "y_last")})

    @classmethod
    def load(cls, path) -> Outcome:
        with np.load(path) as z:
            return cls(*(z[k] for k in ("w_accept", "x_accept", "y_cycle", "y_data", "y_last")), int(z["cycles"]))


@dataclass
class Plan:
    """Where each tile's outputs go in the GEMM result: tile i covers rows m0[i]:m0[i]+t[i], columns n0[i]:...,
    and its outputs are final when final[i] (the last k fold of that block)."""
    m: int
    n: int
    m0: list = field(default_factory=list)
    t: list = field(default_factory=list)
    n0: list = field(default_factory=list)
    final: list = field(default_factory=list)


def expected_outputs(stim: Stimulus, acc_depth: int) -> np.ndarray:
    """The output rows the core must produce, from the spec's formula alone (int32, wrapping): numpy's answer."""
    out = np.zeros((len(stim.x_rows), stim.cols), np.int32)
    acc = np.zeros((acc_depth, stim.cols), np.int64)
    tile, t = 0, 0
    with np.errstate(over="ignore"):
        for i, x in enumerate(stim.x_rows.astype(np.int64)):
            w = stim.w_rows[tile * stim.rows:(tile + 1) * stim.rows].astype(np.int64)
            row = x @ w + (acc[t % acc_depth] if stim.x_acc[i] else 0)
            acc[t % acc_depth] = (row + 2**31) % 2**32 - 2**31
            out[i] = acc[t % acc_depth]
            t += 1
            if stim.x_last[i]:
                tile, t = tile + 1, 0
    return out


def gemm(a: np.ndarray, b: np.ndarray, rows: int, cols: int, acc_depth: int, ternary: bool = False):
    """(Stimulus, Plan) computing a[M, K] @ b[K, N] on a rows x cols core, back to back, no idle cycles.

    Order: for each column block of `cols` outputs, for each chunk of at most `acc_depth` rows, for each
    k fold of `rows`: one tile (weights zero-padded to rows x cols, activations to `rows` wide), the
    first fold overwriting the accumulator rows, the rest adding to them."""
    a = np.asarray(a, np.int8)
    b = np.asarray(b, np.int8)
    (m, k), n = a.shape, b.shape[1]
    if b.shape[0] != k:
        raise ValueError(f"a is {a.shape}, b is {b.shape}: inner extents differ")
    w_rows, x_rows, x_last, x_acc = [], [], [], []
    plan = Plan(m, n)
    for n0 in range(0, n, cols):
        for m0 in range(0, m, acc_depth):
            t = min(acc_depth, m - m0)
            for i, k0 in enumerate(range(0, k, rows)):
                w = np.zeros((rows, cols), np.int8)
                blk = b[k0:k0 + rows, n0:n0 + cols]
                w[:blk.shape[0], :blk.shape[1]] = blk
                x = np.zeros((t, rows), np.int8)
                xb = a[m0:m0 + t, k0:k0 + rows]
                x[:, :xb.shape[1]] = xb
                w_rows.append(w)
                x_rows.append(x)
                x_last.append(np.arange(t) == t - 1)
                x_acc.append(np.full(t, i > 0))
                plan.m0.append(m0), plan.t.append(t), plan.n0.append(n0), plan.final.append(k0 + rows >= k)
    nw, nx = len(w_rows) * rows, sum(len(x) for x in x_rows)
    stim = Stimulus(rows, cols, ternary, np.concatenate(w_rows), np.zeros(nw), np.zeros(nw),
                    np.concatenate(x_rows), np.concatenate(x_last), np.concatenate(x_acc), np.zeros(nx))
    return stim, plan


def assemble(plan: Plan, y_data: np.ndarray) -> np.ndarray:
    """The GEMM result [M, N] (int32) from the output rows of a run of `gemm`'s stimulus."""
    out = np.zeros((plan.m, plan.n), np.int32)
    row = 0
    for m0, t, n0, final in zip(plan.m0, plan.t, plan.n0, plan.final):
        if final:
            width = min(y_data.shape[1], plan.n - n0)
            out[m0:m0 + t, n0:n0 + width] = y_data[row:row + t, :width]
        row += t
    return out


def chain(parts: list[Stimulus], drain: bool = True) -> Stimulus:
    """Several stimuli one after another; with `drain`, each part's first weight row waits until every output
    of the parts before has appeared, so each part starts on an idle core (and its cycles are its own)."""
    first = parts[0]
    w_wait, outputs = [], 0
    for p in parts:
        wait = np.array(p.w_wait)
        if drain:
            wait[0] = max(wait[0], outputs)
        w_wait.append(wait)
        outputs += len(p.x_rows)
    cat = lambda name: np.concatenate([getattr(p, name) for p in parts])   # noqa: E731
    return Stimulus(first.rows, first.cols, first.ternary, cat("w_rows"), cat("w_delay"), np.concatenate(w_wait),
                    cat("x_rows"), cat("x_last"), cat("x_acc"), cat("x_delay"))


def with_gaps(stim: Stimulus, rng: np.random.Generator, p: float = 0.3, longest: int = 6) -> Stimulus:
    """The same rows with random idle gaps: each row offered after 1..longest idle cycles with probability p."""
    def gaps(n):
        return np.where(rng.random(n) < p, rng.integers(1, longest + 1, n), 0)
    return Stimulus(stim.rows, stim.cols, stim.ternary, stim.w_rows, stim.w_delay + gaps(len(stim.w_rows)),
                    stim.w_wait, stim.x_rows, stim.x_last, stim.x_acc, stim.x_delay + gaps(len(stim.x_rows)))


def _pack(values, bits: int) -> int:
    mask = (1 << bits) - 1
    word = 0
    for i, v in enumerate(values):
        word |= (int(v) & mask) << (i * bits)
    return word

