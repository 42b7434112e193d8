"""A Mapping's loop nest flattened into arrays: the steps (innermost tiles), when each tile changes, its extents.

Invariant: the tile an operand holds at mapping level i changes exactly when a loop at a level <= i that
indexes the operand advances; loops it does not depend on, inside that loop, reuse the tile. Ragged edges
clip the tile (bytes and useful work) while the step still counts the full tile as padded work.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from compiler.errors import UserError
from compiler.mapping import Mapping
from compiler.program import MAX_ROWS

# Steps one op may walk, checked before any tile array is built: a step is a compute row and the loads and stores
# around it, 3 to 7 rows of the Program (compiler.program.MAX_ROWS bounds those). ResNet-50 on TPU v1 is 925 in all.
MAX_STEPS = MAX_ROWS // 4


@dataclass(frozen=True)
class Fold:
    """Loop `loop` of a nest (its index in loop_nest, outermost first) runs `trips` times; the Program keeps its
    first `head` iterations and its last (compiler.codegen.fold says which loop may fold)."""

    loop: int
    trips: int
    head: int

    @property
    def left_out(self) -> int:
        return self.trips - self.head - 1

    def with_head(self, head: int) -> Fold:
        return Fold(self.loop, self.trips, head)


@dataclass(frozen=True)
class Runs:
    """The steps at which a tile (of an operand, at one level) is first used, and what came before."""

    starts: np.ndarray          # first step of each run, ascending
    length: int                 # steps per run (the stride of the innermost relevant loop)
    first: np.ndarray           # bool: no earlier run held this tile (no partial sums to reload)
    last: np.ndarray            # bool: no later run holds it (the reduction is complete)


class Nest:
    def __init__(self, mapping: Mapping, folds: tuple[Fold, ...] = ()):
        """`folds`: walk only the iterations of each folded loop that compiler.codegen.fold keeps (its first `head`
        and its last), each at its place in the op: the steps are those iterations', the tiles and flags the op's
        own."""
        self.dims = tuple(d for d, _ in mapping.loops)
        self.extents = np.array([e for _, e in mapping.loops], np.int64)
        position = {d: i for i, d in enumerate(self.dims)}
        self.tiles = [np.array([dict(lv.tile).get(d, e) for d, e in mapping.loops], np.int64)
                      for lv in mapping.levels]
        self.double_buffered = [lv.double_buffered for lv in mapping.levels]
        self.names = [lv.level for lv in mapping.levels]
        # (dim index, trips, mapping level), outermost first
        self.loops = loops = [(position[d], trips, level) for d, trips, level in loop_nest(mapping)]
        trips = [int(t) for _, t, _ in loops]
        self.real_trips = np.array(trips, np.int64)   # each loop's own trip count (a folded one's too)
        self.folds = {fold.loop: fold for fold in folds}
        steps = math.prod(trips)          # Python ints: a 10^9-cubed GEMM must not wrap around int64
        for fold in folds:
            trips[fold.loop] = fold.head + 1
        walked = math.prod(trips)
        if walked > MAX_STEPS:
            folded = f" ({walked:,} with loops of identical tiles folded)" if folds else ""
            raise UserError(f"op {mapping.op!r}: its mapping walks {steps:,} tile steps{folded}; the tile engine "
                            f"simulates at most {MAX_STEPS:,} per op (--fidelity roofline prices any size)")
        steps = walked
        self.trips = np.array(trips, np.int64)
        self.strides = np.array([math.prod(trips[j + 1:]) for j in range(len(loops))], np.int64)
        self.steps = steps

    def level_of(self, name: str, fallback: int) -> int:
        """Mapping level holding arch level `name`; a level the mapping skips streams the next inner tile."""
        return self.names.index(name) if name in self.names else fallback

    def index(self, j: int, steps: np.ndarray) -> np.ndarray:
        """Iteration of loop j at each step: of the op's loop, where a fold maps its last kept one to the last."""
        at: np.ndarray = (steps // self.strides[j]) % self.trips[j]
        fold = self.folds.get(j)
        if fold is not None:
            at = np.where(at < fold.head, at, fold.trips - 1)
        return at

    def runs(self, relevant: set[str], level: int) -> Runs:
        """Runs of the tile held at mapping `level` of an operand indexed by the `relevant` dims."""
        inside = [j for j, (d, _, lv) in enumerate(self.loops) if lv <= level]
        indexing = [j for j in inside if self.dims[self.loops[j][0]] in relevant]
        if not indexing:
            one = np.ones(1, bool)
            return Runs(np.zeros(1, np.int64), self.steps, one, one)
        jmax = max(indexing)
        length = int(self.strides[jmax])
        starts = np.arange(0, self.steps, length, dtype=np.int64)
        first = np.ones(len(starts), bool)
        last = np.ones(len(starts), bool)
        # An outer loop the operand ignores (k around an output tile) brings the same tile back later.
        for j in range(jmax):
            if self.dims[self.loops[j][0]] not in relevant:
                idx = self.index(j, starts)
                first &= idx == 0
                last &= idx == self.real_trips[j] - 1
        return Runs(starts, length, first, last)

    def tile(self, level: int, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(start, extent) per dim, shape (dims, len(steps)), of the tile at mapping `level` at `steps`."""
        n = len(steps)
        start = np.zeros((len(self.dims), n), np.int64)
        extent = np.repeat(self.extents[:, None], n, axis=1)
        loops_at: dict[int, list[tuple[int, int]]] = {}
        for j, (d, _, lv) in enumerate(self.loops):
            loops_at.setdefault(lv, []).append((j, d))
        for lv in range(level + 1):
            tile = self.tiles[lv]
            end = start + extent
            new_start = start.copy()
            for j, d in loops_at.get(lv, ()):
                new_start[d] += self.index(j, steps) * tile[d]
            # an inner tile past a ragged outer edge is all padding: extent 0 (no bytes, no useful MACs)
            extent = np.maximum(0, np.minimum(tile[:, None], end - new_start))
            start = new_start
        return start, extent


def loop_nest(mapping: Mapping) -> list[tuple[str, int, int]]:
    """(dim, trips, mapping level) of every loop with more than one trip, outermost first: the walk the engine
    runs and the cost model prices. A dim the mapper left out of `order` is still walked: innermost, in loop
    order."""
    loops = []
    for i, level in enumerate(mapping.levels):
        trips = mapping.trips(i)
        order = list(level.order) + [d for d, _ in mapping.loops if d not in level.order]
        loops += [(d, trips[d], i) for d in order if trips[d] > 1]
    return loops


def clipped_segments(mapping: Mapping, level: int) -> dict[str, Counter[int]]:
    """Per dim, {extent: tiles} of the tiles mapping level `level` holds as the nest walks the op. A ragged outer
    edge clips the tiles inside it, and inner tiles wholly past it are empty: the engine moves and computes
    nothing there (Nest.tile), so 1024 in l2 tiles of 496 and steps of 16 is 64 steps of work,
    not 3 x 31 = 93."""
    out: dict[str, Counter[int]] = {}
    for d, extent in mapping.loops:
        segments, outer = Counter({extent: 1}), extent
        for lv in mapping.levels[:level + 1]:
            tile = lv.extent(d)
            trips = math.ceil(outer / tile)
            inner: Counter[int] = Counter()
            for length, count in segments.items():
                whole = min(trips, length // tile)
                inner[tile] += whole * count
                if whole < trips and length > whole * tile:
                    inner[length - whole * tile] += count
            segments, outer = +inner, tile
        out[d] = segments
    return out


def clipped_shapes(segments: dict[str, Counter[int]], dims: Iterable[str]) -> Counter[tuple[int, ...]]:
    """{clipped tile over `dims` (extents in that order): tiles with it}."""
    shapes: Counter[tuple[int, ...]] = Counter({(): 1})
    for d in dims:
        shapes = Counter({shape + (length,): n * m for shape, n in shapes.items() for length, m in segments[d].items()})
    return shapes
