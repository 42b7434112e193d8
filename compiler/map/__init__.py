"""The mapper: for each IR op, the cheapest legal Mapping a budgeted search finds, cached by signature.

`report` is the cost model bound to the target (accelsim.price.cost.reporter); the compiler never imports it.
"""
from __future__ import annotations

from compiler.ir import IR, IROp
from compiler.errors import MappingError
from compiler.map.search import CACHE, DEFAULT_BUDGET, Cache, Report, arch_key, search
from compiler.map.space import candidates
from compiler.mapping import Mapping, op_signature

__all__ = ["map_op", "map_ir", "MappingError", "CACHE", "DEFAULT_BUDGET", "Cache"]


def map_op(op: IROp, arch, report: Report, budget: int = DEFAULT_BUDGET, cache: Cache | None = CACHE) -> Mapping:
    """The best of `budget` candidates for `op` on `arch` by `report`; `cache=None` always searches."""
    key = (op_signature(op), arch_key(arch), budget)
    found = cache.lookup(key, op.name) if cache is not None else None
    if found is not None:
        return found
    best = search(candidates(op, arch), report, budget)
    if cache is not None:
        cache.store(key, best)
    return best


def map_ir(ir: IR, arch, report: Report, budget: int = DEFAULT_BUDGET, cache: Cache | None = CACHE
           ) -> dict[str, Mapping]:
    """A Mapping per op name, in IR order."""
    return {op.name: map_op(op, arch, report, budget, cache) for op in ir.ops}
