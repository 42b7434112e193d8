"""An output-stationary (OS) systolic array stepped cycle by cycle: C[i, j] accumulates in place in PE(i, j)'s
accumulator while A's columns enter the west edge (skewed by row) and B's rows the north edge (skewed by column),
one k-step per cycle; a fold's finished sums then drain south down each column, one row per cycle, through a
de-skew into an output register.

There is no OS RTL: rtl/ is weight-stationary and the RTL invariant (docs/rtl.md) is WS only. This model keeps the
WS core's register conventions (accelsim/engine/cycle/systolic.py: operands registered in the PEs from the edge
that accepts them, a de-skew, one output register) so that both price against the same closed form.
Invariant: values come out of the registers, never from a closed form. One loop iteration is one cycle: what is
visible during it, then the edge that ends it, computed from the registers as they were during it. A probe
(teaching, `accelsim explain systolic --dataflow os`) only copies registers out.
"""
import numpy as np
from numba import njit

from accelsim.engine.arrays import Int8s, Int32s, Ints, UInt8s

# fields of an A register (PE grid, west skew): the value and the control bits that travel with it
A_VALUE, A_VALID, A_BANK, A_FIRST, A_LAST = range(5)
# fields of a B register (PE grid, north skew)
B_VALUE, B_VALID = range(2)
# fields of a probe snapshot: what each PE holds during one cycle (see _probe)
P_A, P_A_VALID, P_B, P_B_VALID, P_BANK, P_ACC0, P_ACC1 = range(7)
PROBE_FIELDS = 7


@njit(cache=True, inline='always')
def _skew_in(west: Int32s, ring: Int32s, slot: int, values: Int8s, taken: bool, ctrl: Int32s) -> None:
    """The skew of one edge (west: A by row, north: B by column), for the edge ending cycle k (slot = k % N):
    lane r's input is what was accepted in cycle k - r (lane 0: the port itself); then this cycle's vector and
    its control bits go to `slot`. ring[s, :N] holds values, ring[s, N:] the control fields after VALUE."""
    lanes = west.shape[1]
    fields = west.shape[0]
    west[0, 0] = values[0] if taken else 0
    for f in range(1, fields):
        west[f, 0] = ctrl[f - 1]
    for r in range(1, lanes):
        s = slot - r if slot >= r else slot - r + lanes
        west[0, r] = ring[s, r]
        for f in range(1, fields):
            west[f, r] = ring[s, lanes + f - 1]
    for f in range(1, fields):
        ring[slot, lanes + f - 1] = ctrl[f - 1]
    if taken:
        for r in range(lanes):
            ring[slot, r] = values[r]


@njit(cache=True, inline='always')
def _drain(acc: Int32s, left: Ints, bank: Ints, dsk: Int32s, ds: int) -> None:
    """The edge for the drains: during cycle k a draining column c puts its bottom PE's sum on the bottom edge
    (into de-skew slot (k + COLS - 1 - c) % COLS: column c waits COLS - 1 - c cycles, ds = k % COLS) and every
    PE(r, c) below the drain front (r > j, the rows shifted so far) takes the sum of PE(r - 1, c) above it."""
    rows, cols = acc.shape[1], acc.shape[2]
    for c in range(cols):
        s = ds + cols - 1 - c
        s = s - cols if s >= cols else s
        if left[c] == 0:
            dsk[s, c] = 0
            continue
        b = bank[c]
        dsk[s, c] = acc[b, rows - 1, c]
        j = rows - left[c]
        for r in range(rows - 1, j, -1):
            acc[b, r, c] = acc[b, r - 1, c]
        left[c] -= 1


@njit(cache=True, inline='always')
def _step_grid(a_reg: Int32s, b_reg: Int32s, acc: Int32s, west: Int32s, north: Int32s, left: Ints, bank: Ints) -> None:
    """The edge for the PE grid: every PE with a valid operand pair registers acc[bank] = (FIRST ? 0 : acc[bank])
    + a * b (wrapping at 32 bits); a pair with LAST in the bottom row starts its column's drain (ROWS cycles from
    the next); then A moves one PE east (column 0 takes the west input) and B one PE south (row 0: the north)."""
    rows, cols = acc.shape[1], acc.shape[2]
    for r in range(rows):
        for c in range(cols):
            if a_reg[A_VALID, r, c] and b_reg[B_VALID, r, c]:
                k = a_reg[A_BANK, r, c]
                v = np.int64(a_reg[A_VALUE, r, c]) * b_reg[B_VALUE, r, c]
                if not a_reg[A_FIRST, r, c]:
                    v += acc[k, r, c]
                acc[k, r, c] = ((v + 2147483648) & 4294967295) - 2147483648
                if a_reg[A_LAST, r, c] and r == rows - 1:
                    left[c] = rows
                    bank[c] = k
    for r in range(rows):
        for c in range(cols - 1, 0, -1):
            for f in range(a_reg.shape[0]):
                a_reg[f, r, c] = a_reg[f, r, c - 1]
        for f in range(a_reg.shape[0]):
            a_reg[f, r, 0] = west[f, r]
    for c in range(cols):
        for r in range(rows - 1, 0, -1):
            for f in range(b_reg.shape[0]):
                b_reg[f, r, c] = b_reg[f, r - 1, c]
        for f in range(b_reg.shape[0]):
            b_reg[f, 0, c] = north[f, c]


@njit(cache=True)   # not inlined: the stepping loop stays as small as without a probe
def _probe(probe: Int32s, k: int, a_reg: Int32s, b_reg: Int32s, acc: Int32s) -> None:
    """Copy what PE(r, c) (i = r * COLS + c) holds during cycle k into probe[k, :, i]. Read-only."""
    rows, cols = acc.shape[1], acc.shape[2]
    for r in range(rows):
        for c in range(cols):
            i = r * cols + c
            probe[k, P_A, i] = a_reg[A_VALUE, r, c]
            probe[k, P_A_VALID, i] = a_reg[A_VALID, r, c]
            probe[k, P_B, i] = b_reg[B_VALUE, r, c]
            probe[k, P_B_VALID, i] = b_reg[B_VALID, r, c]
            probe[k, P_BANK, i] = a_reg[A_BANK, r, c]
            probe[k, P_ACC0, i] = acc[0, r, c]
            probe[k, P_ACC1, i] = acc[acc.shape[0] - 1, r, c]


@njit(cache=True)
def step_grid(rows: int, cols: int, banks: int, a_steps: Int8s, b_steps: Int8s, s_last: UInt8s,
              probe: Int32s) -> tuple[int, Ints, Ints, Int32s]:
    """rows, cols: int; banks: accumulators per PE (1, or 2: a fold accumulates while the one before drains);
    a_steps int8[S, rows] (k-step s: A's column for the fold's rows), b_steps int8[S, cols] (B's row for the
    fold's columns), s_last uint8[S] (1: the last k-step of its fold; the next step starts a fold). The steps
    are offered back to back from cycle 0, each valid until accepted. probe: int32[P, PROBE_FIELDS, rows * cols],
    filled for cycles k < P (P = 0: nothing recorded).

    Handshake (ready from registers and the offered step's FIRST / LAST bits): a fold's last step is accepted at
    least ROWS cycles after the previous fold's last (each column's drain takes ROWS cycles, one output row per
    cycle, and the next drain may start the cycle after); a fold's first step at least ROWS cycles after the
    last step of the fold before it in the same bank (its wavefront reaches PE(r, c) at the edge where PE(r, c)'s
    drained sum leaves it, never before). With two banks the first-step rule never binds. Both are tight: one
    cycle less corrupts sums or loses output rows (docs/rtl.md, "An output-stationary model").

    Returns (cycles, s_accept int64[S], y_cycle int64[Y], y_data int32[Y, cols]): Y = folds * rows output rows in
    the order they appear, fold by fold, each fold's rows from the bottom (ROWS - 1) up; the last output appears
    in cycle cycles - 1. cycles = -1: the outputs never all appeared (a defect of the handshake, e.g. one drain
    overrunning another), stopped instead of looping."""
    n_steps = a_steps.shape[0]
    n_out = 0
    for s in range(n_steps):
        n_out += s_last[s]
    n_out *= rows
    # ---- registers
    a_reg = np.zeros((5, rows, cols), np.int32)         # PE A registers {VALUE, VALID, BANK, FIRST, LAST}
    b_reg = np.zeros((2, rows, cols), np.int32)         # PE B registers {VALUE, VALID}
    acc = np.zeros((banks, rows, cols), np.int32)       # the accumulators
    west = np.zeros((5, rows), np.int32)                # the grid's west inputs at this edge
    north = np.zeros((2, cols), np.int32)               # and its north inputs
    ask = np.zeros((rows, rows + 4), np.int32)          # A skew: slot k % ROWS = {A[r].., VALID, BANK, FIRST, LAST}
    bsk = np.zeros((cols, cols + 1), np.int32)          # B skew: slot k % COLS = {B[c].., VALID}
    dsk = np.zeros((cols, cols), np.int32)              # de-skew: slot = (cycle the column is aligned in) % COLS
    left = np.zeros(cols, np.int64)                     # per column: drain cycles left (0: not draining)
    bank = np.zeros(cols, np.int64)                     # per column: the bank it drains
    y_reg = np.zeros(cols, np.int32)                    # the output register
    y_valid_reg = 0
    ptr = 0                                             # the bank the next fold accumulates in
    bank_free = np.zeros(banks, np.int64)               # first cycle a fold may start in each bank
    drain_free = 0                                      # first cycle a fold's last step may be accepted
    a_ctrl = np.zeros(4, np.int32)
    b_ctrl = np.zeros(1, np.int32)
    # ---- results
    s_accept = np.full(n_steps, -1, np.int64)
    y_cycle = np.full(n_out, -1, np.int64)
    y_data = np.zeros((n_out, cols), np.int32)
    probing = probe.shape[0] > 0
    limit = n_steps * (rows + 1) + 2 * rows + cols + 4  # no step waits more than ROWS cycles for its ready
    s, outs, k = 0, 0, 0
    xs, cs = 0, 0                                       # k % ROWS, k % COLS
    while True:
        # ---------------- during cycle k: the output, the offer, ready
        if y_valid_reg:
            y_cycle[outs] = k
            for c in range(cols):
                y_data[outs, c] = y_reg[c]
            outs += 1
        if probing and k < probe.shape[0]:
            _probe(probe, k, a_reg, b_reg, acc)
        if outs == n_out:
            break
        if k > limit:                                    # an output row was lost: a handshake defect, not a run
            return -1, s_accept, y_cycle, y_data
        first = s < n_steps and (s == 0 or s_last[s - 1] == 1)
        last = s < n_steps and s_last[s] == 1
        take = s < n_steps and (not first or k >= bank_free[ptr]) and (not last or k >= drain_free)
        # ---------------- the edge that ends cycle k
        y_valid_reg = 1 if left[cols - 1] > 0 else 0     # column COLS - 1 waits 0 cycles: it tags the row
        _drain(acc, left, bank, dsk, cs)
        for c in range(cols):                            # the row aligned in this cycle (slot k % COLS)
            y_reg[c] = dsk[cs, c]
        a_ctrl[0], a_ctrl[1], a_ctrl[2], a_ctrl[3] = int(take), ptr, int(first), int(last)
        b_ctrl[0] = int(take)
        _skew_in(west, ask, xs, a_steps[min(s, n_steps - 1)], take, a_ctrl)
        _skew_in(north, bsk, cs, b_steps[min(s, n_steps - 1)], take, b_ctrl)
        _step_grid(a_reg, b_reg, acc, west, north, left, bank)
        if take:
            s_accept[s] = k
            if last:
                bank_free[ptr] = k + rows
                drain_free = k + rows
                ptr = ptr + 1 if ptr + 1 < banks else 0
            s += 1
        k += 1
        xs = xs + 1 if xs + 1 < rows else 0
        cs = cs + 1 if cs + 1 < cols else 0
    return k + 1, s_accept, y_cycle, y_data
