"""Which points of the grid to evaluate: grid (all), random (a seeded sample), adaptive (Pareto local search).

A strategy sees only coordinates and objective vectors (search separate from model, as Timeloop's mapper):
`ask()` gives the next batch of coordinates (empty: done), `tell(outcomes)` reports each one's objective vector
per model (None where the point is invalid). Invariant: every strategy is deterministic for its seed and never
asks for a point twice, so a resumed sweep asks exactly what the interrupted one asked.
"""
from __future__ import annotations

import itertools
import math
import random
from typing import Sequence

from accelsim.sweep.pareto import front
from accelsim.sweep.spec import Spec

Coord = tuple[int, ...]
Outcomes = dict[Coord, list[tuple[float, ...] | None]]   # per model, in the spec's model order
GRID_BATCH = 4096   # coordinates per ask: a million-point grid is never held at once


class Grid:
    def __init__(self, shape: Sequence[int]):
        self._coords = itertools.product(*(range(n) for n in shape))
        self.planned = math.prod(shape)        # points it will ask, in all: what progress counts against

    def ask(self) -> list[Coord]:
        return list(itertools.islice(self._coords, GRID_BATCH))

    def tell(self, outcomes: Outcomes) -> None:
        pass


class RandomSample:
    """`points` distinct coordinates drawn without replacement (random.Random(seed)), all in one batch."""

    def __init__(self, shape: Sequence[int], points: int, seed: int):
        size = math.prod(shape)
        self._batch = [unravel(i, shape) for i in random.Random(seed).sample(range(size), points)]
        self.planned = points

    def ask(self) -> list[Coord]:
        batch, self._batch = self._batch, []
        return batch

    def tell(self, outcomes: Outcomes) -> None:
        pass


class Adaptive:
    """Pareto local search (Paquete et al. 2004): start from a seeded random sample, then repeatedly evaluate
    the unevaluated neighbours of the best points so far until none is left or the budget is spent.

    A point's neighbours differ from it in one axis, at any of that axis's values (a line through the point
    along each axis: 16 on a 5 x 5 x 5 x 4 x 2 grid). The best points are the first `ranks` non-dominated
    layers of each model's evaluated points: layer 1 is the front so far; layer 2, what the front alone
    dominates. Hardware objectives are mostly monotone along an axis, so the front is connected by such lines
    and the search walks along it without visiting the dominated bulk of the grid; walking layer 2 as well
    reaches the front points a mapper's choice leaves isolated (a WS point starved of DRAM bandwidth that
    spends less energy than its neighbours), which ranks=1 misses now and then (benchmarks/sweep_speed.py).
    """

    def __init__(self, shape: Sequence[int], seed: int, initial: int | None = None, budget: int | None = None,
                 ranks: int = 2):
        self.shape = tuple(shape)
        self.size = math.prod(shape)
        self.budget = min(budget or self.size, self.size)
        self.planned = self.budget            # at most: the search may stop sooner
        self.initial = min(initial or default_initial(self.size, len(shape)), self.budget)
        self.ranks = ranks
        self._rng = random.Random(seed)
        self.asked: set[Coord] = set()
        self.results: Outcomes = {}

    def ask(self) -> list[Coord]:
        room = self.budget - len(self.asked)
        if room <= 0:
            return []
        best = self.layers(self.ranks)
        if not self.asked or not best:
            batch = self._sample(min(self.initial, room))   # nothing to walk from yet: sample (more)
        else:
            batch = sorted({n for c in sorted(best) for n in self.neighbours(c) if n not in self.asked})[:room]
        self.asked.update(batch)
        return batch

    def tell(self, outcomes: Outcomes) -> None:
        self.results.update(outcomes)

    def front(self) -> set[Coord]:
        """Coordinates on some model's front among the points evaluated so far."""
        return self.layers(1)

    def layers(self, depth: int) -> set[Coord]:
        """Coordinates in the first `depth` non-dominated layers of some model's evaluated points."""
        models = max((len(v) for v in self.results.values()), default=0)
        out: set[Coord] = set()
        for m in range(models):
            left = [(c, v[m]) for c, v in self.results.items() if m < len(v) and v[m] is not None]
            for _ in range(depth):
                kept = set(front([vector for _, vector in left]))
                out.update(left[i][0] for i in kept)
                left = [item for i, item in enumerate(left) if i not in kept]
        return out

    def neighbours(self, coord: Coord) -> list[Coord]:
        return [coord[:axis] + (j,) + coord[axis + 1:]
                for axis, (i, n) in enumerate(zip(coord, self.shape)) for j in range(n) if j != i]

    def _sample(self, count: int) -> list[Coord]:
        free = self.size - len(self.asked)
        if free <= 0 or count <= 0:
            return []
        if free > 4 * count:   # sparse: draw until enough new ones (never materialises a big grid)
            picked: list[Coord] = []
            while len(picked) < count:
                coord = unravel(self._rng.randrange(self.size), self.shape)
                if coord not in self.asked and coord not in picked:
                    picked.append(coord)
            return picked
        rest = [c for c in itertools.product(*(range(n) for n in self.shape)) if c not in self.asked]
        return self._rng.sample(rest, min(count, len(rest)))


def default_initial(size: int, axes: int) -> int:
    """Seeded starting points: about sqrt(size), at least 2 per axis, so each axis is seen at a few values."""
    return min(size, max(2 * axes + 2, round(math.sqrt(size))))


def unravel(index: int, shape: Sequence[int]) -> Coord:
    coord = []
    for n in reversed(shape):
        index, i = divmod(index, n)
        coord.append(i)
    return tuple(reversed(coord))


def strategy_for(spec: Spec):
    s = spec.strategy
    if s.kind == "grid":
        return Grid(spec.shape)
    if s.kind == "random":
        return RandomSample(spec.shape, s.points, s.seed)
    return Adaptive(spec.shape, s.seed, s.initial, s.points, s.ranks)
