"""The budgeted search (it sees only `report(mapping) -> cost`) and its in-memory cache (a compiler.memo.Memo), keyed
by op signature, arch name and file hash, and budget. Deterministic: candidates come in a fixed order and a
tie keeps the earlier one; on a PE array every tiling is reported (`search`'s every_tiling)."""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable

from compiler.errors import UserError
from compiler.frozen import but
from compiler.mapping import Mapping
from compiler.memo import Memo

DEFAULT_BUDGET = 24      # reports per op; ResNet-18 maps in well under 0.3 s (tests/compiler/map/test_map.py)

Report = Callable[[Mapping], float]


def search(candidates: Iterable[Mapping], report: Report, budget: int = DEFAULT_BUDGET,
           every_tiling: bool = False) -> Mapping:
    """The cheapest of the first `budget` candidates by `report`, the earlier one on a tie. With `every_tiling` (a
    space that also holds the tilings smaller buffers give, compiler.map.space._smaller_buffers): each tiling's
    first candidate (its best-guess loop order), then `budget` - 1 more, the other loop orders of the tilings
    that did best, so a bigger buffer never loses to the budget the tiling that won with a smaller one."""
    if budget < 1:
        raise UserError(f"mapping budget {budget}: must be at least 1")
    space = list(candidates) if every_tiling else list(itertools.islice(candidates, budget))
    if not space:
        raise UserError("the mapper was given no candidates")
    if not every_tiling:
        found = {i: report(mapping) for i, mapping in enumerate(space)}
        return space[min(found, key=lambda i: (found[i], i))]
    keys = [tiling(mapping) for mapping in space]
    firsts: dict[tuple[Any, ...], int] = {}
    for index, key in enumerate(keys):
        firsts.setdefault(key, index)
    found = {i: report(space[i]) for i in firsts.values()}
    others = sorted((i for i in range(len(space)) if i not in found), key=lambda i: (found[firsts[keys[i]]], i))
    found.update({i: report(space[i]) for i in others[:budget - 1]})
    return space[min(found, key=lambda i: (found[i], i))]


def tiling(mapping: Mapping) -> tuple[Any, ...]:
    """What a candidate's loop orders share: its unit, dataflow, tiles per level and spatial loops."""
    return (mapping.unit, mapping.dataflow, tuple((lv.level, lv.tile) for lv in mapping.levels), mapping.spatial)


MAPPINGS = 65536      # best mappings kept per process: a few hundred bytes each, a model has a few hundred shapes


class Cache(Memo[tuple[Any, ...], Mapping]):
    """Best mappings per key, the least recently used going first past `size`, with hit and miss counts (tests and
    `accelsim map` read them)."""

    def __init__(self, size: int = MAPPINGS, name: str = "compiler.map: best mappings") -> None:
        super().__init__(name, size)

    def lookup(self, key: tuple[Any, ...], op_name: str) -> Mapping | None:
        found = self.get(key)
        if found is None:
            return None
        # The same op gets the very object back; a twin op (same shapes, other name) a renamed copy.
        return found if found.op == op_name else but(found, op=op_name)

    def store(self, key: tuple[Any, ...], mapping: Mapping) -> None:
        self[key] = mapping


CACHE = Cache()


