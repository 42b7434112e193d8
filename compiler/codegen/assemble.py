"""Streams of tile transfers plus one compute per step -> Program rows in issue order, with dependencies.

Invariant: every dependency points to an earlier row (checked). Per step: loads (the streams marked `first` before the
rest, each operand's outer levels first; with `ahead`, a GPU's double-buffered loads one step early), the compute,
then stores (inner levels first). Data: a compute waits for its operands' innermost loads, an inner load for
the outer load it copies from, a store for the compute (or inner store) that produced it. Buffers: a load
into a double-buffered slot waits for the last compute that used the tile two loads back (one back if single).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.codegen.nest import Runs
from compiler.errors import UserError
from compiler.program import COMPUTE, LOAD, MAX_DEPS, MAX_ROWS, ROW_BYTES_SIMULATED, STORE, empty

OUTPUT = -2


@dataclass
class Stream:
    """One operand crossing one memory level: loads read `level` (stores write it) once per run."""

    operand: int                  # input index, or OUTPUT
    level: int                    # arch memory level index: the channel
    pos: int                      # position on the operand's path, 0 = where it is served from
    runs: Runs
    nbytes: np.ndarray            # per run: the tile's bytes (final output bytes for the output)
    partial_bytes: np.ndarray     # per run, output only: partial sums (accumulator dtype)
    double_buffered: bool
    first: bool = False           # loaded before the others at its step and level: a block-scaled GEMM's scales


def _latest(steps: np.ndarray, at: np.ndarray, strict: bool = False) -> np.ndarray:
    """Index of the last event with step <= at (< at if strict); -1 where none."""
    return np.searchsorted(steps, at, side="left" if strict else "right") - 1


def assemble(streams: list[Stream], steps: int, compute: dict[str, np.ndarray], op: int, unit: int,
             ahead: bool = False, name: str = "") -> tuple[np.ndarray, np.ndarray]:
    """(Program rows of one op, the compute rows among them). `ahead` issues each double-buffered input's loads one
    step early, before the compute and stores of the step before theirs, as a GPU's copy engines (TMA, cp.async)
    fetch the next tile while the current one is computed and stored: on a channel that loads and stores share, a
    tile's load is then not queued behind the previous tile's store. An inner load moves only where the load it
    copies from moves."""
    inputs = [s for s in streams if s.operand != OUTPUT]
    outputs = sorted((s for s in streams if s.operand == OUTPUT), key=lambda s: s.pos)
    early = set()     # the input streams issued a step ahead: each with every stream outside it on its path
    for s in sorted(inputs, key=lambda s: s.pos):
        outer = [o for o in inputs if o.operand == s.operand and o.pos == s.pos - 1]
        if ahead and s.double_buffered and (not outer or id(outer[0]) in early):
            early.add(id(s))
    # -- events: (step, phase, order) keys; rows filled after sorting --------------------------------
    events = []   # (kind, stream, step array, bytes array)
    for s in inputs:
        events.append((LOAD, s, s.runs.starts, s.nbytes))
    for s in outputs:
        revisit = ~s.runs.first
        events.append((LOAD, s, s.runs.starts[revisit], s.partial_bytes[revisit]))
        ends = s.runs.starts + s.runs.length - 1
        events.append((STORE, s, ends, np.where(s.runs.last, s.nbytes, s.partial_bytes)))
    n_rows = steps + sum(len(e[2]) for e in events)
    if n_rows > MAX_ROWS:
        raise UserError(f"op {name or op!r}: its Program would hold {n_rows:,} rows; the tile engine simulates at most "
                        f"{MAX_ROWS:,} per op (about {MAX_ROWS * ROW_BYTES_SIMULATED / 2**30:.1f} GiB of host memory "
                        f"while simulated; --fidelity roofline prices any size)")
    key_step = np.empty(n_rows, np.int64)
    key_phase = np.empty(n_rows, np.int8)
    key_order = np.empty(n_rows, np.int32)
    key_step[:steps], key_phase[:steps], key_order[:steps] = np.arange(steps), 1, 0
    spans = []
    at = steps
    for kind, s, st, _ in events:
        n = len(st)
        key_step[at:at + n] = st - 1 if kind == LOAD and id(s) in early else st
        key_phase[at:at + n] = 0 if kind == LOAD else 2
        # loads: the operands marked `first` before the rest (what the first compute needs is not queued behind a
        # weight streaming on the same channel), then outer levels first, inputs before output reloads; stores:
        # inner levels first
        key_order[at:at + n] = (0 if s.first else 512) + s.pos * 16 + s.operand % 16 if kind == LOAD else -s.pos
        spans.append((at, at + n))
        at += n
    # (step, phase, order) packed into one int64: a stable argsort of it is lexsort's order, 9x faster on 1.5 M rows
    low = int(key_order.min()) if n_rows else 0
    span = int(key_order.max()) - low + 1 if n_rows else 1
    order = np.argsort((key_step * 3 + key_phase) * span + (key_order - low), kind="stable")
    row_of = np.empty(n_rows, np.int64)
    row_of[order] = np.arange(n_rows)
    rows = empty(n_rows)
    compute_row = row_of[:steps]
    rows["op"] = op
    deps = np.full((n_rows, MAX_DEPS), -1, np.int32)     # the Program's width: 2 M rows take 64 MB, not 128
    fill = np.zeros(n_rows, np.int8)

    def add(where: np.ndarray, dep: np.ndarray) -> None:
        ok = dep >= 0
        where, dep = where[ok], dep[ok]
        if len(where) == 0:
            return
        if np.any(fill[where] >= MAX_DEPS):
            raise ValueError(f"op {op}: an instruction needs more than {MAX_DEPS} dependencies")
        deps[where, fill[where]] = dep
        fill[where] += 1

    c = compute_row
    rows["kind"][c] = COMPUTE
    rows["unit"][c] = unit
    for field in ("m", "n", "k", "work", "useful"):
        rows[field][c] = compute[field]
    by_stream = {}
    for (kind, s, st, nbytes), (lo, hi) in zip(events, spans):
        r = row_of[lo:hi]
        rows["kind"][r] = kind
        rows["level"][r] = s.level
        rows["operand"][r] = s.operand
        rows["bytes"][r] = nbytes
        by_stream[(kind, id(s))] = (st, r)
    innermost = {}
    for s in inputs:
        st, r = by_stream[(LOAD, id(s))]
        outer = [o for o in inputs if o.operand == s.operand and o.pos == s.pos - 1]
        if outer:
            ost, orow = by_stream[(LOAD, id(outer[0]))]
            add(r, np.where(_latest(ost, st) >= 0, orow[np.maximum(_latest(ost, st), 0)], -1))
        # buffer reuse: the slot this load fills last served the tile `back` loads earlier
        back = 2 if s.double_buffered else 1
        slot = np.arange(len(st))
        prior = slot - back + 1
        last_use = np.where(prior >= 1, st[np.maximum(prior, 0)] - 1, -1)
        add(r, np.where(last_use >= 0, c[np.maximum(last_use, 0)], -1))
        if not any(o.operand == s.operand and o.pos > s.pos for o in inputs):
            innermost[s.operand] = (st, r)
    steps_all = np.arange(steps)
    for st, r in innermost.values():
        add(c, r[_latest(st, steps_all)])
    for i, s in enumerate(outputs):
        sst, srow = by_stream[(STORE, id(s))]
        lst, lrow = by_stream[(LOAD, id(s))]
        if i == len(outputs) - 1:
            add(srow, c[sst])
            # the compute that opens a new output tile reloads its partial sums, and needs a free slot
            hit = np.searchsorted(lst, steps_all)
            found = (hit < len(lst)) & (lst[np.minimum(hit, max(len(lst) - 1, 0))] == steps_all) if len(lst) else \
                np.zeros(steps, bool)
            add(c[found], lrow[hit[found]])
            back = 2 if s.double_buffered else 1
            starts = s.runs.starts
            nth = np.arange(len(starts))
            add(c[starts[nth >= back]], srow[nth[nth >= back] - back])
        else:
            ist, irow = by_stream[(STORE, id(outputs[i + 1]))]
            add(srow, irow[_latest(ist, sst)])
        if len(lst):
            add(lrow, np.where(_latest(sst, lst, strict=True) >= 0, srow[np.maximum(_latest(sst, lst, True), 0)], -1))
            if i > 0:
                pst, prow = by_stream[(LOAD, id(outputs[i - 1]))]
                if len(pst):
                    j = _latest(pst, lst)
                    add(lrow, np.where(j >= 0, prow[np.maximum(j, 0)], -1))
    if early and np.any(deps >= np.arange(n_rows)[:, None]):     # only moving loads ahead can break the order
        raise ValueError(f"op {op}: an instruction depends on one issued after it")
    rows["dep"] = deps
    return rows, compute_row
