"""Buffers refilled tile by tile on a systolic array: a load that fills a slot with several of the tiles the level
below takes from it (TPU v1's weight FIFO, 4 tiles deep, kept as two slots of two tiles) lands them in order, each
into the place the previous occupant's tile of the same rank left, and each is read on as soon as it has landed.

Invariant: only dependencies change (what a load waits for, how early, and for what share of an outer load); the
rows, bytes and occupancies stay codegen's and the pricing's. A load whose tiles are not distinct parts of it (a
tile read twice) keeps codegen's whole-slot dependencies.
"""
from __future__ import annotations

import numpy as np

from compiler.errors import UserError
from compiler.program import COMPUTE, LOAD, MAX_DEPS, MAX_ROWS
from compiler.hardware import Arch


def refill(arch: Arch, program: np.ndarray, dep: np.ndarray, occupancy: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(dep, on_release, share, lead) for `schedule`: `dep` with extra columns, and per dependency whether it waits
    only for the compute's release, the share of an outer load it waits for (0: all) and how many cycles early
    the row may start. Only a level the YAML marks `refill: tile` (TPU v1's weight FIFO) is refilled by parts;
    without one, share and lead are None (all 0), which the tile engine's common path takes without the memory."""
    n, width = dep.shape
    kind = program["kind"]
    on_release = np.zeros(dep.shape, bool)
    loads = np.flatnonzero(kind == LOAD)
    waits = dep[loads]
    on_release[loads] = (waits >= 0) & (kind[np.maximum(waits, 0)] == COMPUTE)
    fifo = np.array([lv.refill_per_tile for lv in arch.memory] + [False])    # level -1: none
    if n == 0 or not fifo.any():
        return dep, on_release, None, None             # nothing refilled by parts: no shares, nothing early
    share = np.zeros(dep.shape)
    lead = np.zeros(dep.shape, np.int64)
    parts, reader = _parts(program, dep, fifo)
    added: list[tuple[int, int, int]] = []            # (row, compute it waits to release, cycles early)
    for outer, tiles in parts.items():
        count = len(tiles)
        for j, inner in enumerate(tiles[:-1]):        # tile j is there once its share of the load has landed
            share[inner, dep[inner] == outer] = (j + 1) / count
        for col in np.flatnonzero(on_release[outer]):
            before = _previous(program, dep, parts, int(dep[outer, col]), outer)
            if before is None or len(before) != count:
                continue
            # part j lands j/count of the way through: the old tile of rank j must have been taken by then
            free = [reader.get(t, -1) for t in before]
            if min(free) < 0:
                continue
            early = [int(j * occupancy[outer] // count) for j in range(count)]
            dep[outer, col], lead[outer, col] = free[-1], early[-1]
            added += [(outer, free[j], early[j]) for j in range(count - 1)]
    if not added:
        return dep, on_release, share, lead
    rows = np.array([a[0] for a in added])
    slot = np.zeros(n, np.int64)
    column = np.empty(len(rows), np.int64)
    for k, r in enumerate(rows):
        column[k] = slot[r]
        slot[r] += 1
    extra = int(slot.max())
    _bounded(arch, n, width + extra)
    more = np.full((n, extra), -1, np.int64)
    more[rows, column] = [a[1] for a in added]
    early = np.zeros((n, extra), np.int64)
    early[rows, column] = [a[2] for a in added]
    return (np.hstack([dep, more]), np.hstack([on_release, more >= 0]), np.hstack([share, np.zeros(more.shape)]),
            np.hstack([lead, early]))


# the most dependency cells (rows x columns) the tile engine takes: as many as a Program of MAX_ROWS rows has; a
# refilled level on an 8x8 array (ResNet-18 at 32x32 on TPU v1's memories) needs 51 M, a 1x1 array 6,000 M (150 GB)
MAX_CELLS = MAX_ROWS * MAX_DEPS


def _bounded(arch: Arch, rows: int, columns: int) -> None:
    """Refuse, before allocating it, a dependency matrix past MAX_CELLS: a load refilled in thousands of parts waits
    on thousands of computes, and every row gets that many columns."""
    if rows * columns > MAX_CELLS:
        levels = ", ".join(lv.name for lv in arch.memory if lv.refill_per_tile)
        raise UserError(f"{arch.name}: {levels} (refill: tile) is refilled in so many parts that {rows:,} Program rows "
                        f"would wait on up to {columns:,} rows each, {rows * columns:,} dependencies; the tile engine "
                        f"takes at most {MAX_CELLS:,} (a larger array takes fewer parts; --fidelity roofline prices "
                        f"any size)")


def _parts(program: np.ndarray, dep: np.ndarray, fifo: np.ndarray) -> tuple[dict[int, list[int]], dict[int, int]]:
    """({outer load: the inner loads that take its distinct parts from a `refill: tile` level, in order}, {load: the
    last compute reading it}); only outer loads of two or more parts whose bytes add up to the load's."""
    kind, operand, nbytes, level = program["kind"], program["operand"], program["bytes"], program["level"]
    row, col = np.nonzero(dep >= 0)
    d = dep[row, col]
    taken = (kind[row] == LOAD) & (kind[d] == LOAD) & (operand[row] == operand[d]) & (operand[row] >= 0) \
        & fifo[level[row]]
    inner, outer = row[taken], d[taken]
    by = np.lexsort((inner, outer))
    inner, outer = inner[by], outer[by]
    loads, first, count = np.unique(outer, return_index=True, return_counts=True)
    total = np.add.reduceat(nbytes[inner].astype(np.int64), first) if len(first) else np.zeros(0, np.int64)
    whole = (count >= 2) & (total == nbytes[loads])
    parts = {int(o): inner[f:f + c].tolist() for o, f, c in zip(loads[whole], first[whole], count[whole])}
    read = (kind[row] == COMPUTE) & (kind[d] == LOAD)
    last = np.full(len(program), -1, np.int64)
    np.maximum.at(last, d[read], row[read])
    reader = {int(x): int(last[x]) for part in parts.values() for x in part}
    return parts, reader


def _previous(program: np.ndarray, dep: np.ndarray, parts: dict, compute: int, outer: int) -> list[int] | None:
    """The parts of the load that last filled the slot `outer` refills: the one whose part `compute` read."""
    level, operand = program["level"], program["operand"]
    for inner in dep[compute][dep[compute] >= 0]:
        for before in dep[inner][dep[inner] >= 0]:
            if before in parts and before != outer and operand[before] == operand[outer] \
                    and level[before] == level[outer]:
                return parts[int(before)]
    return None
