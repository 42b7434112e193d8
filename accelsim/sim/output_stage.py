"""A systolic array's output stage: the fused epilogue (bias, BatchNorm, ReLU, requantisation Maps) runs on the
vector unit beside the array, each chunk of it as soon as the array has produced the outputs it reads.

Invariant: only the schedule changes (which rows issue when, and a dependency of each epilogue compute on the
producer's compute), never the rows, bytes or work; a kernel's ops charged together take what the kernel takes.
"""
from __future__ import annotations

import numpy as np

from compiler.ir import Einsum, IR
from compiler.program import LOAD, STORE
from compiler.hardware import Arch


def beside(ir: IR, arch: Arch, mappings: dict) -> np.ndarray:
    """bool[ops]: True where op o is a fused member of the kernel of op o - 1's (the anchor, an Einsum, or a
    member before it), on a unit the YAML calls an `output_stage` (TPU v1's activation pipeline after the
    accumulators, Jouppi et al. 2017, Figure 1): it runs beside op o - 1 rather than after it. A GPU's or CPU's
    epilogue runs on the cores that ran the GEMM (compiler.passes.fuse says which ops are fused on every kind)."""
    out = np.zeros(len(ir.ops), bool)
    stages = {u.name for u in arch.compute if u.output_stage}
    if not stages:
        return out
    anchor = None
    for o, op in enumerate(ir.ops):
        if isinstance(op, Einsum) and not op.kernel:
            anchor = op
            continue
        if anchor is None or op.kernel != anchor.name or (o and ir.ops[o - 1].name != anchor.name and not out[o - 1]):
            anchor = None
            continue
        mine, its = mappings.get(op.name), mappings.get(anchor.name)
        out[o] = mine is not None and its is not None and mine.unit in stages and mine.unit != its.unit
    return out


def pipeline(code, sides: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, dep, share) for `schedule`: the issue order of the Program's rows (each row of an op beside the
    op before it issues right after the producer compute whose output its chunk reads), and per row an extra
    dependency (-1: none) with the share of that producer compute's output it waits for.

    Chunk j of J reads the first (j + 1) / J of the producer's output, produced at an even pace over the
    producer's T computes (a worked example: T = 1, J = 4, the array's one tile streams its outputs row by row
    and the epilogue's 4 chunks wait for 1/4, 2/4, 3/4 and all of that tile's stream, plus its skew and drain)."""
    n = len(code.program)
    dep = np.full(n, -1, np.int64)
    share = np.zeros(n, np.float64)
    after: dict[int, list[int]] = {}
    before: dict[int, list[int]] = {}
    placed = np.zeros(n, bool)
    for o in np.flatnonzero(sides):
        producer, consumer = code.tiles[o - 1], code.tiles[o]
        if producer is None or consumer is None or not len(producer.rows) or not len(consumer.rows):
            continue
        p, c = producer.rows, consumer.rows
        at = (np.arange(1, len(c) + 1) / len(c)) * len(p)
        t = np.clip(np.ceil(at - 1e-9).astype(np.int64) - 1, 0, len(p) - 1)
        dep[c], share[c] = p[t], at - t
        # every row of the consumer issues with its chunk's compute: a load with the compute after it, a store
        # with the one before it
        lo, hi = code.op_rows[o], code.op_rows[o + 1]
        rows = np.arange(lo, hi)
        stores = code.program["kind"][lo:hi] == STORE
        chunk = np.where(stores, np.searchsorted(c, rows, side="right") - 1, np.searchsorted(c, rows))
        chunk = np.clip(chunk, 0, len(c) - 1)
        # a chunk that reads part of a producer compute's output runs under that compute, before its stores; one
        # that reads all of it, after them: an epilogue's stores never wait on a channel behind stores that
        # wait for it, nor the producer's behind the epilogue's
        whole = share[c] >= 1 - 1e-9
        at_rows = [_stored(code, o - 1, p, int(t[j])) if whole[j] else int(p[t[j]]) for j in range(len(c))]
        # a chunk's stores issue as late as they may: with the first chunk whose compute waits for them (its
        # buffer slot), else after the producer's last row; in a channel's queue they would otherwise hold the
        # producer's loads behind results the output stage has not made yet
        at_rows.append(int(code.op_rows[o]) - 1)
        needed = _needed_by(code.program["dep"], c, lo, hi, stores)
        kinds = code.program["kind"]
        deps = code.program["dep"][lo:hi]
        # a load that waits on nothing but loads (its own small operands: scale, shift, bias) can go first
        loads = (kinds[lo:hi] == LOAD) & np.all((deps < 0) | (kinds[np.maximum(deps, 0)] == LOAD), axis=1)
        anchor = int(o - 1 - np.argmin(sides[o - 1::-1])) if not sides[:o].all() else 0
        for r, j, is_store, is_load in zip(range(lo, hi), chunk, stores, loads):
            placed[r] = True
            if is_load:     # loaded before the kernel's first row
                before.setdefault(int(code.op_rows[anchor]), []).append(r)
                continue
            after.setdefault(at_rows[needed.get(r, len(c))] if is_store else at_rows[j], []).append(r)
    if not placed.any():
        return np.arange(n, dtype=np.int64), dep, share
    # the rows in program order, each preceded by the rows placed before it and followed by those placed after
    # it (and theirs)
    unplaced = np.flatnonzero(~placed)
    pieces, done = [], 0
    for r in sorted({a for a in (*after, *before) if not placed[a]}):
        upto = int(np.searchsorted(unplaced, r))
        ahead = [x for q in before.get(r, ()) for x in (q, *_followers(q, after))]
        pieces += [unplaced[done:upto], np.array(ahead + [r] + _followers(r, after), np.int64)]
        done = upto + 1
    pieces.append(unplaced[done:])
    return np.concatenate(pieces), dep, share


def _needed_by(dep: np.ndarray, computes: np.ndarray, lo: int, hi: int, stores: np.ndarray) -> dict[int, int]:
    """{store row of rows lo:hi: the first chunk whose compute depends on it}."""
    out: dict[int, int] = {}
    for j, row in enumerate(computes):
        for d in dep[row]:
            if lo <= d < hi and stores[d - lo] and int(d) not in out:
                out[int(d)] = j
    return out


def _stored(code, producer: int | np.integer, computes: np.ndarray, t: int) -> int:
    """The row after which the producer's compute t has issued its stores: an epilogue chunk issues there, so
    that its own stores never queue ahead of the producer's on a shared channel."""
    stop = computes[t + 1] if t + 1 < len(computes) else code.op_rows[producer + 1]
    stores = np.flatnonzero(code.program["kind"][computes[t] + 1:stop] == STORE)
    return int(computes[t] + 1 + stores[-1]) if len(stores) else int(computes[t])


def _followers(r: int, after: dict[int, list[int]]) -> list[int]:
    """The rows issued right after row r: each placed after it, followed by its own."""
    out = []
    for q in after.get(r, ()):
        out += [q, *_followers(q, after)]
    return out


def charged(span: np.ndarray, sides: np.ndarray, op_rows: np.ndarray, start: np.ndarray, end: np.ndarray
            ) -> np.ndarray:
    """Cycles per op that add up to the kernel's: the anchor from the kernel's first row (its epilogue's operands
    load ahead of it) to its own end, and an op beside the one before it only what it adds after everything
    before it in its kernel has ended (an epilogue the array outpaces: its last part)."""
    out = span.copy()
    reach = 0
    for o in range(len(span)):
        lo, hi = op_rows[o], op_rows[o + 1]
        if hi == lo:
            continue
        last = int(end[lo:hi].max())
        if sides[o]:
            out[o] = max(0, last - reach)
            reach = max(reach, last)
            continue
        stop = o + 1
        while stop < len(span) and sides[stop]:
            stop += 1
        if stop > o + 1:            # an anchor: its kernel begins with the first row of any of its ops
            out[o] = last - int(start[lo:op_rows[stop]].min())
        reach = last
    return out
