"""The systolic core of docs/rtl.md stepped cycle by cycle: weight banks, skews, PE activation and psum registers,
de-skew, accumulator and handshake each take their next value at every clock edge, driven by the stimulus.

Invariant: values come out of the registers, never from a closed form. One loop iteration is one cycle: what is
visible during it (ports, outputs), then the edge that ends it, computed from the registers as they were during it.
A delay line of depth D is a ring of D slots indexed by cycle % D: what D chained registers do, without the copying.
A probe (teaching, `accelsim explain systolic`) only copies registers out; it never changes what is stepped.
"""
import numpy as np
from numba import njit

from accelsim.engine.arrays import Int8s, Int32s, Ints, UInt8s

DONE = 0        # every output row appeared
STUCK = 1       # no row can ever be accepted again and nothing is in flight (stimulus cannot finish)

# per-cycle port bits, as packed into `wave_bits` (bit i of each byte)
W_VALID, W_READY, X_VALID, X_READY, X_LAST, X_ACC, Y_VALID, Y_LAST = range(8)
# fields of a register holding an activation (PE activation registers, the row skew, the grid's west inputs)
VALUE, BANK, VALID = range(3)
# fields of a weight skew stage and of a row tag
WS_ROW, WS_BANK, WS_VALID = range(3)
T_VALID, T_ROW, T_ACC, T_LAST = range(4)
# fields of a probe snapshot: what each PE holds during one cycle (see _probe)
P_VALUE, P_BANK, P_VALID, P_PSUM, P_W0, P_W1 = range(6)


@njit(cache=True, inline='always')
def _step_array(act: Int32s, p: np.uint64, psum: Int32s, now: np.uint64, nxt: np.uint64, wbank: Int32s, ternary: bool,
                west: Int32s, cols: np.uint64) -> np.uint64:
    """The edge for the PE grid: PE(r, c) registers psum(r-1, c) + X * W[bank] and passes its activation east.

    Flat layout, i = r * COLS + c, N = ROWS * COLS. psum holds two copies of the psum registers, at offsets
    `now` (this cycle) and `nxt` (the next): psum[now + COLS + i] is PE(r, c)'s, psum[now:now + COLS] the zeros
    above the top row. The activation registers are a shift register kept as a ring: PE(r, c) holds
    act[:, p + i], so the shift east is p -= 1; the ring is stored twice (act[:, j] = act[:, j + N]) so that
    p + i never wraps. p, now, nxt, cols are uint64: numba adds no negative-index check to unsigned indices, and
    the loop vectorises. As in the RTL's PE, every PE adds every cycle: one holding no valid activation makes a
    sum that no valid output reads (the sums of different rows never mix). Returns the new p."""
    n = np.uint64(wbank.shape[1])
    one = np.uint64(1)
    below = nxt + cols
    if ternary:                         # add / subtract / skip: no multiplier
        for i in range(n):
            w = wbank[1, i] if act[BANK, p + i] else wbank[0, i]
            x = act[VALUE, p + i]
            psum[below + i] = psum[now + i] + (x if w > 0 else (-x if w < 0 else 0))
    else:
        for i in range(n):
            b = act[BANK, p + i]
            w = wbank[0, i] + b * (wbank[1, i] - wbank[0, i])
            psum[below + i] = psum[now + i] + act[VALUE, p + i] * w
    p = p - one if p > 0 else n - one
    for r in range(n // cols):          # column 0 takes the west input; the old east column falls off
        j = p + r * cols
        m = j - n if j >= n else j + n
        for f in range(3):
            act[f, j] = west[f, r]
            act[f, m] = west[f, r]
    return p


@njit(cache=True, inline='always')
def _skew_in(west: Int32s, xsk: Int32s, xs: int, x_rows: Int8s, xi: int, x_take: bool, bank: int) -> None:
    """The activation row skew for the edge ending cycle k (xs = k % ROWS): row r's west input is the row
    accepted in cycle k - r (row 0: x_data itself); then this cycle's row is stored in slot xs."""
    rows = west.shape[1]
    west[VALUE, 0] = x_rows[xi, 0] if x_take else 0
    west[BANK, 0] = bank
    west[VALID, 0] = x_take
    for r in range(1, rows):
        s = xs - r if xs >= r else xs - r + rows
        west[VALUE, r] = xsk[s, r]
        west[BANK, r] = xsk[s, rows + BANK]
        west[VALID, r] = xsk[s, rows + VALID]
    xsk[xs, rows + VALID] = x_take
    if x_take:
        for r in range(rows):
            xsk[xs, r] = x_rows[xi, r]
        xsk[xs, rows + BANK] = bank


@njit(cache=True, inline='always')
def _write_weights(wbank: Int32s, wsk: Ints, ws: int, w_rows: Int8s, wi: int, w_take: bool, r: int, bank: int) -> None:
    """The weight column skew for the edge ending cycle k (ws = k % COLS): column c is written with the row
    accepted in cycle k - c (column 0 straight from w_data); then this cycle's row is stored in slot ws."""
    cols = w_rows.shape[1]
    if w_take:
        wbank[bank, r * cols] = w_rows[wi, 0]
    for c in range(1, cols):
        s = ws - c if ws >= c else ws - c + cols
        if wsk[s, cols + WS_VALID]:
            wbank[wsk[s, cols + WS_BANK], wsk[s, cols + WS_ROW] * cols + c] = wsk[s, c]
    wsk[ws, cols + WS_VALID] = w_take
    if w_take:
        for c in range(cols):
            wsk[ws, c] = w_rows[wi, c]
        wsk[ws, cols + WS_ROW] = r
        wsk[ws, cols + WS_BANK] = bank


@njit(cache=True, inline='always')
def _deskew_accumulate(dsk: Int32s, ds: int, psum: Int32s, bottom: np.int64, acc: Int32s, tags: Ints, tag: int,
                       y_reg: Int32s) -> None:
    """Column c of the bottom psums (psum[bottom + c]) waits COLS - 1 - c cycles: it goes to the slot read in
    cycle k + COLS - 1 - c (ds = k % COLS), so slot ds is the row aligned in cycle k (column COLS - 1: no delay).
    With a valid tags[tag]: acc[t] = y = wrap32((x_acc ? acc[t] : 0) + aligned row)."""
    cols = dsk.shape[0]
    for c in range(cols):
        s = ds + cols - 1 - c
        dsk[s - cols if s >= cols else s, c] = psum[bottom + c]
    if tags[tag, T_VALID]:
        t = tags[tag, T_ROW]
        for c in range(cols):
            v = np.int64(dsk[ds, c]) + (acc[t, c] if tags[tag, T_ACC] else 0)
            v = ((v + 2147483648) & 4294967295) - 2147483648
            acc[t, c] = v
            y_reg[c] = v


@njit(cache=True)   # not inlined: the stepping loop stays as small as without a probe
def _probe(probe: Int32s, k: int, act: Int32s, p: np.uint64, psum: Int32s, now: np.uint64, wbank: Int32s,
           cols: np.uint64) -> None:
    """Copy what PE(r, c) (i = r * COLS + c) holds during cycle k into probe[k, :, i]: its activation register
    {VALUE, BANK, VALID}, its psum register and its two weight registers. Read-only: no register changes."""
    for i in range(np.uint64(wbank.shape[1])):   # uint64, as p: no mixed-sign index arithmetic
        probe[k, P_VALUE, i] = act[VALUE, p + i]
        probe[k, P_BANK, i] = act[BANK, p + i]
        probe[k, P_VALID, i] = act[VALID, p + i]
        probe[k, P_PSUM, i] = psum[now + cols + i]
        probe[k, P_W0, i] = wbank[0, i]
        probe[k, P_W1, i] = wbank[1, i]


@njit(cache=True)
def _grow(wave_bits: UInt8s, wave_rows: Ints) -> tuple[UInt8s, Ints]:
    cap = wave_bits.shape[0]
    bits = np.zeros(2 * cap, np.uint8)
    rows = np.full((2 * cap, 3), -1, np.int64)
    bits[:cap] = wave_bits
    rows[:cap] = wave_rows
    return bits, rows


@njit(cache=True)
def step_grid(rows: int, cols: int, ternary: bool, acc_depth: int, w_rows: Int8s, w_delay: Ints, w_wait: Ints,
              x_rows: Int8s, x_last: UInt8s, x_acc: UInt8s, x_delay: Ints, waves: bool, wave_capacity: int,
              values: bool, probe: Int32s
              ) -> tuple[int, int, Ints, Ints, Ints, Int32s, UInt8s, UInt8s, Ints, Ints]:
    """rows, cols, acc_depth: int; ternary, waves, values: bool; w_rows int8[NW, cols]; w_delay, w_wait int64[NW];
    x_rows int8[NX, rows]; x_last, x_acc uint8[NX]; x_delay int64[NX]; wave_capacity: first size of the wave
    arrays (they double when full). Not `values`: timing only, O(1) per cycle: the datapath registers (weight
    banks and skew data, activation registers and skew, psums, de-skew, accumulator) are never stepped, only the
    handshake, pointers, counters, row tags and driver, which alone decide every cycle; y_data has no rows.
    probe: int32[P, 6, rows * cols], filled for cycles k < P with what every PE holds during cycle k (_probe);
    P = 0 (the usual case) records nothing. Only meaningful with `values`.

    Returns (status, cycles, w_accept, x_accept, y_cycle, y_data, y_last, wave_bits, wave_rows, stuck):
    status DONE or STUCK; cycles simulated (DONE: the last output appears in cycle cycles - 1); accept cycles
    int64[NW], int64[NX] (-1: never); y_cycle int64[NX], y_data int32[NX, cols], y_last uint8[NX];
    wave_bits uint8[cycles] (bit W_VALID .. Y_LAST) and wave_rows int64[cycles, 3] (the weight row offered on
    w_data, the activation row on x_data, the output row on y_data; -1: none), empty unless `waves`;
    stuck int64[4] = (cycle, next weight row, next activation row, outputs so far) when STUCK."""
    nw, nx = w_rows.shape[0], x_rows.shape[0]
    n_pe = rows * cols
    lat = rows + cols + 1
    # ---- registers
    wbank = np.zeros((2, n_pe), np.int32)               # the two weight banks of every PE (i = r * COLS + c)
    act = np.zeros((3, 2 * n_pe), np.int32)             # PE activation registers {VALUE, BANK, VALID}: a ring
    p = np.uint64(0)
    # PE psum registers, now and next (see _step_array). |psum| <= ROWS * 2^14 never wraps in int32 for
    # ROWS < 2^17, so the sum computed in int64 and stored is the 32-bit register's value
    psum = np.zeros(2 * (rows + 1) * cols, np.int32)
    now, nxt = np.uint64(0), np.uint64((rows + 1) * cols)
    west = np.zeros((3, rows), np.int32)                # the grid's west inputs at this edge
    xsk = np.zeros((rows, rows + 3), np.int32)          # row skew: slot k % ROWS = {X[r].., -, BANK, VALID}
    wsk = np.zeros((cols, cols + 3), np.int64)          # weight column skew: slot k % COLS = {W[c].., ROW, ..}
    dsk = np.zeros((cols, cols), np.int32)              # de-skew: slot = (cycle the column is aligned in) % COLS
    tags = np.zeros((lat, 4), np.int64)                 # row tag {VALID, ROW t, ACC, LAST}: ROWS + COLS stages
    acc = np.zeros((acc_depth, cols), np.int32)         # output accumulator
    y_reg = np.zeros(cols, np.int32)                    # y_data register
    y_valid_reg, y_last_reg = 0, 0
    full = np.zeros(2, np.uint8)                        # bank FULL bits
    load_ptr, stream_ptr, w_count, x_count = 0, 0, 0, 0
    # ---- results
    w_accept = np.full(nw, -1, np.int64)
    x_accept = np.full(nx, -1, np.int64)
    y_cycle = np.full(nx, -1, np.int64)
    y_data = np.zeros((nx if values else 0, cols), np.int32)     # timing only: the caller's zeros
    y_last = np.zeros(nx, np.uint8)
    cap = max(wave_capacity, 16) if waves else 0
    wave_bits = np.zeros(cap, np.uint8)
    wave_rows = np.full((cap, 3), -1, np.int64)
    stuck = np.full(4, -1, np.int64)
    # ---- driver
    wi, xi = 0, 0               # next row of each queue
    w_base, x_base = 0, 0       # cycle after the previous row's acceptance (0 for the first row)
    w_offer, x_offer = -1, -1   # cycle the next row is first offered (-1: not known yet)
    n_out = 0
    last_w_take, last_x_take = -lat, -lat   # cycles of the latest acceptances
    xs, cs, ts = 0, 0, 0        # k % ROWS, k % COLS, k % LAT
    status = DONE
    probing = values and probe.shape[0] > 0
    k = 0
    while True:
        # ---------------- during cycle k: outputs, offers, readies
        y_now = -1
        if y_valid_reg:
            y_cycle[n_out] = k
            if values:
                for c in range(cols):
                    y_data[n_out, c] = y_reg[c]
            y_last[n_out] = y_last_reg
            y_now = n_out
            n_out += 1
        if wi < nw and w_offer < 0:
            need = w_wait[wi]
            if need == 0:
                w_offer = w_base + w_delay[wi]
            elif n_out >= need:
                w_offer = max(w_base, y_cycle[need - 1] + 1) + w_delay[wi]
        if xi < nx and x_offer < 0:
            x_offer = x_base + x_delay[xi]
        w_valid = wi < nw and w_offer >= 0 and k >= w_offer
        x_valid = xi < nx and k >= x_offer
        w_ready = full[load_ptr] == 0
        x_ready = full[stream_ptr] == 1
        w_take = w_valid and w_ready
        x_take = x_valid and x_ready
        if waves:
            if k == wave_bits.shape[0]:
                wave_bits, wave_rows = _grow(wave_bits, wave_rows)
            bits = (int(w_valid) << W_VALID | int(w_ready) << W_READY | int(x_valid) << X_VALID
                    | int(x_ready) << X_READY | int(y_valid_reg) << Y_VALID | int(y_last_reg) << Y_LAST)
            if x_valid:
                bits |= int(x_last[xi]) << X_LAST | int(x_acc[xi]) << X_ACC
            wave_bits[k] = bits
            wave_rows[k, 0] = wi if w_valid else -1
            wave_rows[k, 1] = xi if x_valid else -1
            wave_rows[k, 2] = y_now
        if probing and k < probe.shape[0]:
            _probe(probe, k, act, p, psum, now, wbank, np.uint64(cols))
        if n_out == nx:
            break
        # ---------------- the edge that ends cycle k, from the registers as they are during cycle k
        t_out = ts + 1 if ts + 1 < lat else 0     # the tag of the row accepted in cycle k - ROWS - COLS
        y_valid_reg = tags[t_out, T_VALID]
        y_last_reg = tags[t_out, T_VALID] & tags[t_out, T_LAST]
        # the grid, skew and de-skew hold nothing valid from ROWS + COLS cycles after the last activation row
        if values and (x_take or k <= last_x_take + rows + cols):
            _deskew_accumulate(dsk, cs, psum, np.int64(now) + n_pe, acc, tags, t_out, y_reg)
            _skew_in(west, xsk, xs, x_rows, xi, x_take, stream_ptr)
            p = _step_array(act, p, psum, now, nxt, wbank, ternary, west, np.uint64(cols))
            now, nxt = nxt, now
        # weights after the grid: a PE multiplies with its old weight in the cycle the new one is written.
        # The skew has written its last row and cleared every slot COLS cycles after the last weight row.
        if values and (w_take or k <= last_w_take + cols):
            _write_weights(wbank, wsk, cs, w_rows, wi, w_take, w_count, load_ptr)
        tags[ts, T_VALID] = x_take
        # handshake (never the same bank: w_take needs its bank FREE, an x_last take needs its bank FULL)
        if w_take:
            w_accept[wi] = k
            last_w_take = k
            wi += 1
            w_base, w_offer = k + 1, -1
            if w_count == rows - 1:
                full[load_ptr] = 1
                load_ptr ^= 1
                w_count = 0
            else:
                w_count += 1
        if x_take:
            tags[ts, T_ROW] = x_count
            tags[ts, T_ACC] = x_acc[xi]
            tags[ts, T_LAST] = x_last[xi]
            x_accept[xi] = k
            last_x_take = k
            if x_last[xi]:
                full[stream_ptr] = 0
                stream_ptr ^= 1
                x_count = 0
            else:
                x_count = x_count + 1 if x_count + 1 < acc_depth else 0
            xi += 1
            x_base, x_offer = k + 1, -1
        # nothing accepted, nothing in flight, no offer still to come: every later cycle is this one again
        if not (w_take or x_take) and xi == n_out:
            if not ((wi < nw and w_offer > k) or (xi < nx and x_offer > k)):
                status = STUCK
                stuck[0], stuck[1], stuck[2], stuck[3] = k, wi, xi, n_out
                k += 1
                break
        k += 1
        xs = xs + 1 if xs + 1 < rows else 0
        cs = cs + 1 if cs + 1 < cols else 0
        ts = ts + 1 if ts + 1 < lat else 0
    cycles = k + 1 if status == DONE else k
    return (status, cycles, w_accept, x_accept, y_cycle, y_data, y_last, wave_bits[:cycles], wave_rows[:cycles],
            stuck)
