"""The frames of `accelsim explain systolic --dataflow os`: a GEMM on the output-stationary cycle-level model
(accelsim.sim.cycle.probe_os, accelsim/engine/cycle/systolic_os.py), each PE's A, B and accumulator registers named.

Invariant: every number is a register of the model or an output row it produced; the names come only from the
cycles in which the model accepted each k-step and the timing of docs/rtl.md ("An output-stationary model"),
never from the values.
"""
from __future__ import annotations

import numpy as np

from accelsim.sim.cycle import OsProbe, OsRun
from accelsim.explain.film import PAD, Cell, Frame


def os_frames(run: OsRun, probe: OsProbe, m: int, n: int) -> tuple:
    """One Frame per cycle of `run` (C[m, n] = A @ B), every value read from `probe` and the output rows."""
    names = _Names(run, m, n)
    out = [[None] * n for _ in range(m)]
    final = [[False] * n for _ in range(m)]
    appears = {int(cycle): y for y, cycle in enumerate(run.y_cycle)}
    frames = []
    for now in range(run.cycles):
        grid = tuple(tuple(names.cell(probe, now, r, c) for c in range(run.cols)) for r in range(run.rows))
        new, y_out = [], ""
        if now in appears:                                   # an output row appears: C fills in
            y = appears[now]
            f, r = run.place(y)
            (i0, j0) = run.folds[f]
            i = i0 + r
            if i < m:
                for c in range(min(run.cols, n - j0)):
                    out[i][j0 + c], final[i][j0 + c] = int(run.y_data[y, c]), True
                    new.append((i, j0 + c))
                y_out = f"C row {i}, n={j0}..{min(j0 + run.cols, n) - 1} (final)"
            else:
                y_out = f"a pad row (PE row {r}: zeros, past m)"
        w_in, x_in = names.ports(now)
        frames.append(Frame(now, grid, w_in, x_in, y_out, tuple(map(tuple, out)), tuple(map(tuple, final)),
                            tuple(new)))
    return tuple(frames)


class _Names:
    """Which element of A, B or C a register holds. Fold f (output tile folds[f], accumulator bank f % banks)
    is k-steps f*k .. f*k + k - 1; step s accepted in cycle a is in PE(r, c)'s A and B registers during
    a + 1 + r + c and in its accumulator from a + 2 + r + c. The fold whose last step was accepted in cycle L
    drains column c from d = L + 1 + ROWS + c: during d + j, PE(r, c) holds the finished sum of tile row r - j
    (j <= r; after that, nothing an output reads) and the bottom edge carries tile row ROWS - 1 - j."""

    def __init__(self, run: OsRun, m: int, n: int):
        self.run, self.m, self.n = run, m, n
        self.accepted = np.full(run.cycles + 1, -1, np.int64)        # the k-step accepted in each cycle
        self.accepted[run.s_accept] = np.arange(len(run.s_accept))
        self.steps = run.s_accept.reshape(len(run.folds), run.k)       # [fold, kk]: acceptance cycles

    def _step_at(self, cycle: int):
        """(fold, kk) of the k-step accepted in `cycle`, or None."""
        s = self.accepted[cycle] if cycle >= 0 else -1
        return divmod(int(s), self.run.k) if s >= 0 else None

    def cell(self, probe: OsProbe, now: int, r: int, c: int) -> Cell:
        run = self.run
        here = self._step_at(now - 1 - r - c)
        x, x_label, w, w_label = None, "", None, ""
        if probe.a_valid[now, r, c]:
            (i0, _), kk = run.folds[here[0]], here[1]
            x, x_label = int(probe.a[now, r, c]), f"A[{i0 + r},{kk}]" if i0 + r < self.m else PAD
        if probe.b_valid[now, r, c]:
            (_, j0), kk = run.folds[here[0]], here[1]
            w, w_label = int(probe.b[now, r, c]), f"B[{kk},{j0 + c}]" if j0 + c < self.n else PAD
        held = {b: self._held(b, now, r, c) for b in range(run.banks)}
        held = {b: h for b, h in held.items() if h is not None}
        order = sorted(held, key=lambda b: held[b][0], reverse=True)    # the latest fold's bank first
        regs = (probe.acc0, probe.acc1)
        psum, psum_label, spare, spare_label = None, "", None, ""
        if order:
            psum, psum_label = int(regs[order[0]][now, r, c]), held[order[0]][1]
        if len(order) > 1:
            spare, spare_label = int(regs[order[1]][now, r, c]), held[order[1]][1]
        return Cell(w, w_label, False, spare, spare_label, x, x_label, psum, psum_label)

    def _held(self, bank: int, now: int, r: int, c: int):
        """(fold, label) of what accumulator `bank` of PE(r, c) holds during `now`, or None."""
        run = self.run
        started = [f for f in range(bank, len(run.folds), run.banks) if self.steps[f, 0] + 2 + r + c <= now]
        if not started:
            return None
        f = started[-1]                                  # the handshake: an earlier fold here has drained
        drain = self.steps[f, -1] + 1 + run.rows + c
        if now < drain:
            row, done = r, int(np.searchsorted(self.steps[f], now - 2 - r - c, side="right"))
        elif now - drain <= r:
            row, done = r - (now - drain), run.k
        else:
            return None
        i, j = run.folds[f][0] + row, run.folds[f][1] + c
        if i >= self.m or j >= self.n:
            return f, PAD
        return f, f"C[{i},{j}] k=0" + (f"..{done - 1}" if done > 1 else "")

    def ports(self, now: int):
        """What the B port and the A port accepted in cycle `now` (text; "" for nothing)."""
        step = self._step_at(now)
        if step is None:
            return "", ""
        (i0, j0), kk = self.run.folds[step[0]], step[1]
        last_i, last_j = min(i0 + self.run.rows, self.m) - 1, min(j0 + self.run.cols, self.n) - 1
        return f"B row k={kk}, n={j0}..{last_j}", f"A column k={kk}, m={i0}..{last_i}"
