"""A small GEMM C = A @ B through the systolic core of docs/rtl.md, cycle by cycle: the frames that
`accelsim explain systolic` draws (as text, HTML or GIF). WS and IS run the core's cycle-level model; OS runs the
output-stationary one (accelsim/engine/cycle/systolic_os.py, no RTL), named in accelsim/explain/systolic_os.py;
the frames themselves are accelsim.explain.film's.

Invariant: every number in a frame is a register of the cycle-level model (accelsim.sim.cycle.probe: the kernel's
weight, activation and psum registers; probe_os: its A, B and accumulator registers) or an output row it
produced; this module only names them (which element of A, B or C a value is), from the cycles in which the
model accepted each row.
"""
from __future__ import annotations

import numpy as np

from accelsim.arch import Dataflow
from accelsim.explain.film import IO_REGISTERS, PAD, Cell, Film, Frame
from accelsim.explain.systolic_os import os_frames
from accelsim.price.systolic import folds_and_stream, native_cycles
from accelsim.sim.stimulus import gemm
from accelsim.sim import cycle
from compiler.errors import UserError

MAX_PES_SIDE = 16       # an animation of more PEs is unreadable
MAX_EXTENT = 64         # m, k, n
MAX_CYCLES = 600        # frames
ACC_DEPTH = 512         # the core's default accumulator (docs/rtl.md); m, n <= 64 stream as one chunk
VALUES = (-4, 4)        # operand range: small numbers fit in a PE's box


def explain(rows: int, cols: int, m: int, k: int | None = None, n: int | None = None, dataflow: str = "ws",
            seed: int = 0) -> Film:
    """Run a seeded random int GEMM (m x k) @ (k x n) on a rows x cols core and name what each PE holds in each
    cycle. k defaults to rows, n to cols (one tile). Raises UserError for sizes or a dataflow it cannot show."""
    k = rows if k is None else k
    n = cols if n is None else n
    flow = _dataflow(dataflow)
    _check_sizes(rows, cols, m, k, n)
    rng = np.random.default_rng(seed)
    a = rng.integers(VALUES[0], VALUES[1] + 1, (m, k))
    b = rng.integers(VALUES[0], VALUES[1] + 1, (k, n))
    folds, stream = (int(v) for v in folds_and_stream(m, n, k, rows, cols, flow.value))
    io = cycle.OS_IO_REGISTERS if flow is Dataflow.OS else IO_REGISTERS
    closed = int(native_cycles(m, n, k, rows, cols, flow.value, 2, 1, io))
    if closed > MAX_CYCLES:
        raise UserError(f"this GEMM takes {closed} cycles on a {rows} x {cols} array; an animation shows at most "
                        f"{MAX_CYCLES}: use a smaller --m, --k or --n, or a larger array")
    if flow is Dataflow.OS:
        run, probe = cycle.probe_os(a, b, rows, cols, cycle.OS_BANKS)
        film = Film(flow, rows, cols, a, b, "C", "A and B", folds, stream, run.cycles, closed,
                    int(probe.a_valid.sum()), os_frames(run, probe, m, n))
        return _checked(film)
    # IS runs the same core with the roles swapped: C.T = B.T @ A.T, A.T stays in the PEs, B's columns stream
    swap = flow is Dataflow.IS
    xs, ws = (b.T, a.T) if swap else (a, b)
    stim, _ = gemm(xs, ws, rows, cols, ACC_DEPTH)
    outcome, waves, probe = cycle.probe(stim, ACC_DEPTH)
    names = ("B", "A") if swap else ("A", "B")
    frames = _frames(stim, outcome, waves, probe, xs.shape[0], ws.shape[1], k, swap, names)
    return _checked(Film(flow, rows, cols, a, b, names[1], names[0], folds, stream, outcome.cycles, closed,
                         int(probe.valid.sum()), frames))


def _checked(film: Film) -> Film:
    last = film.frames[-1]
    final = np.array([[v if v is not None else 0 for v in row] for row in last.out])
    if not (np.array_equal(final, film.a @ film.b) and all(all(row) for row in last.out_final)):
        raise RuntimeError("the cycle-level model's outputs differ from numpy's A @ B")
    return film


def _dataflow(text: str) -> Dataflow:
    try:
        return Dataflow(text.lower())
    except ValueError:
        raise UserError(f"--dataflow {text!r}: expected ws, os or is") from None


def _check_sizes(rows: int, cols: int, m: int, k: int, n: int) -> None:
    for name, value, top in (("rows", rows, MAX_PES_SIDE), ("cols", cols, MAX_PES_SIDE), ("m", m, MAX_EXTENT),
                             ("k", k, MAX_EXTENT), ("n", n, MAX_EXTENT)):
        if value < 1:
            raise UserError(f"--{name} {value}: must be at least 1")
        if value > top:
            what = "PEs per side" if name in ("rows", "cols") else f"for the GEMM's {name} extent"
            raise UserError(f"--{name} {value}: an animation shows at most {top} {what}; it is for small examples")


def _frames(stim, outcome, waves, probe, mx: int, nw: int, k: int, swap: bool, names) -> tuple:
    """One Frame per cycle, every value read from `probe` (the PEs) and `outcome` (the output rows)."""
    names = _Names(stim, outcome, mx, nw, k, swap, names)
    m, n = (nw, mx) if swap else (mx, nw)
    out = [[None] * n for _ in range(m)]
    final = [[False] * n for _ in range(m)]
    frames = []
    for now in range(outcome.cycles):
        grid = tuple(tuple(names.cell(probe, now, r, c) for c in range(stim.cols)) for r in range(stim.rows))
        new, y_out = [], ""
        y = int(waves.y_row[now])
        if y >= 0:                                           # an output row appears: C fills in
            (n0, k0), t = names.tiles[y // mx], y % mx
            for c in range(min(stim.cols, nw - n0)):
                i, j = names.coords(t, n0 + c)
                out[i][j], final[i][j] = int(outcome.y_data[y, c]), k0 + stim.rows >= k
                new.append((i, j))
            done = "final" if k0 + stim.rows >= k else f"partial, k<{k0 + stim.rows}"
            y_out = f"C {'column' if swap else 'row'} {t} ({done})"
        w_in, x_in = names.ports(now)
        frames.append(Frame(now, grid, w_in, x_in, y_out, tuple(map(tuple, out)), tuple(map(tuple, final)),
                            tuple(new)))
    return tuple(frames)


class _Names:
    """Which element of A, B or C a register holds. The core ran X[mx, k] @ W[k, nw] (WS: A @ B; IS: B.T @ A.T)
    as `gemm` tiles it: for each block of COLS output columns n0, for each fold of ROWS k values k0, one tile of
    ROWS weight rows and mx streamed rows. The streamed row accepted in cycle a is in PE(r, c) during cycle
    a + 1 + r + c, and its partial sum there one cycle later; weight row r of a tile, accepted in cycle a,
    is in PE(r, c)'s register from cycle a + 1 + c (docs/rtl.md, "Cycles")."""

    def __init__(self, stim, outcome, mx: int, nw: int, k: int, swap: bool, names):
        self.rows, self.cols, self.mx, self.nw, self.k, self.swap = stim.rows, stim.cols, mx, nw, k, swap
        self.x_name, self.w_name = names
        self.tiles = [(n0, k0) for n0 in range(0, nw, self.cols) for k0 in range(0, k, self.rows)]
        self.accepted = np.full(outcome.cycles + 1, -1, np.int64)     # streamed row accepted in each cycle
        self.accepted[outcome.x_accept] = np.arange(len(outcome.x_accept))
        self.w_taken = np.full(outcome.cycles + 1, -1, np.int64)      # weight row accepted in each cycle
        self.w_taken[outcome.w_accept] = np.arange(len(outcome.w_accept))
        self.reach = (outcome.w_accept.reshape(len(self.tiles), self.rows)[:, :, None] + 1
                      + np.arange(self.cols)[None, None, :])          # [tile, r, c]: first cycle in the PE

    def coords(self, t: int, j: int):
        """Where output (t, j) of X @ W sits in C."""
        return (j, t) if self.swap else (t, j)

    def _element(self, name: str, i: int, j: int) -> str:
        return f"{name}[{j},{i}]" if self.swap else f"{name}[{i},{j}]"

    def _row_at(self, cycle: int):
        """(tile, t) of the streamed row accepted in `cycle`, or None."""
        xi = self.accepted[cycle] if cycle >= 0 else -1
        return (int(xi // self.mx), int(xi % self.mx)) if xi >= 0 else None

    def cell(self, probe, now: int, r: int, c: int) -> Cell:
        here = self._row_at(now - 1 - r - c) if probe.valid[now, r, c] else None
        before = self._row_at(now - 2 - r - c) if now and probe.valid[now - 1, r, c] else None
        banks = {int(i) % 2: int(i) for i in np.flatnonzero(self.reach[:, r, c] <= now)}   # latest tile per bank
        use = here[0] % 2 if here else (max(banks.items(), key=lambda kv: kv[1])[0] if banks else None)
        regs = (int(probe.w0[now, r, c]), int(probe.w1[now, r, c]))
        w, w_label = self._weight(regs, banks, use, r, c)
        spare, spare_label = self._weight(regs, banks, None if use is None else 1 - use, r, c)
        new = use in banks and self.reach[banks[use], r, c] == now
        x, x_label, psum, psum_label = None, "", None, ""
        if here:
            kk = self.tiles[here[0]][1] + r
            x, x_label = int(probe.value[now, r, c]), self._element(self.x_name, here[1], kk) if kk < self.k else PAD
        if before:
            (n0, k0), t = self.tiles[before[0]], before[1]
            last = min(k0 + r, self.k - 1)
            i, j = self.coords(t, n0 + c)
            psum = int(probe.psum[now, r, c])
            psum_label = PAD if n0 + c >= self.nw else f"C[{i},{j}] k={k0}" + (f"..{last}" if last > k0 else "")
        return Cell(w, w_label, bool(new), spare, spare_label, x, x_label, psum, psum_label)

    def _weight(self, regs, banks: dict, bank, r: int, c: int):
        if bank is None or bank not in banks:
            return None, ""
        n0, k0 = self.tiles[banks[bank]]
        inside = k0 + r < self.k and n0 + c < self.nw
        return regs[bank], self._element(self.w_name, k0 + r, n0 + c) if inside else PAD

    def ports(self, now: int):
        """What the weight port and the streaming port accepted in cycle `now` (text; "" for nothing)."""
        w_in = x_in = ""
        axis = "column" if self.swap else "row"
        if self.w_taken[now] >= 0:
            (n0, k0), r = self.tiles[self.w_taken[now] // self.rows], int(self.w_taken[now] % self.rows)
            across = f"{'m' if self.swap else 'n'}={n0}..{min(n0 + self.cols, self.nw) - 1}"
            w_in = (f"{self.w_name} {axis} k={k0 + r}, {across}" if k0 + r < self.k else "a zero row (pad)") \
                + f" -> PE row {r}"
        if self.accepted[now] >= 0:
            (n0, k0), t = self.tiles[self.accepted[now] // self.mx], int(self.accepted[now] % self.mx)
            x_in = f"{self.x_name} {axis} {t}, k={k0}..{min(k0 + self.rows, self.k) - 1}"
        return w_in, x_in
