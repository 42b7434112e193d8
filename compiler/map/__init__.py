"""The mapper owns every op's Mapping: for an Einsum the cheapest legal one a budgeted search finds, cached by
signature (in memory, and for the process-wide CACHE on disk too: compiler.map.disk); for a Map, Reduce or Move
its chunk plan (compiler.map.vector), which codegen executes.

`report` is the cost model bound to the target (accelsim.price.cost.reporter); the compiler never imports it.
"""
from __future__ import annotations

from compiler.ir import IR, Einsum, IROp
from compiler.errors import MappingError
from compiler.map import disk
from compiler.map.search import CACHE, DEFAULT_BUDGET, Cache, Report, search
from compiler.targeting.identity import arch_key
from compiler.map.space import candidates, smaller_buffers
from compiler.map.vector import plan
from compiler.mapping import Mapping, op_signature
from compiler.hardware import Arch

__all__ = ["map_op", "map_ir", "MappingError", "CACHE", "DEFAULT_BUDGET", "Cache"]


def map_op(op: IROp, arch: Arch, report: Report, budget: int = DEFAULT_BUDGET, cache: Cache | None = CACHE) -> Mapping:
    """The best of `budget` candidates for an Einsum on `arch` by `report` (`cache=None` always searches; the
    process-wide CACHE also keeps searches on disk, a Cache of the caller's own only in memory); a vector op's one
    chunk plan, which needs no search (cached too: a decoder repeats its norms 32 times)."""
    einsum = op if isinstance(op, Einsum) else None
    signature = op_signature(op)
    # The cost model's binding is in the key: a SCALE-Sim-priced search may pick other tiles than a native one.
    # A vector plan depends on the reduced axes and on whether the op is a view, which signatures leave out.
    key = (signature, arch_key(arch), budget, disk.cost_model(report)) if einsum is not None else \
        (signature, getattr(op, "axes", None), bool(getattr(op, "view", False)), arch_key(arch))
    found = cache.lookup(key, op.name) if cache is not None else None
    if found is not None:
        return found
    if einsum is None:
        best = plan(op, arch)
    else:
        stored = disk.key(signature, arch, budget, report) if cache is CACHE else None
        loaded = disk.load(stored, einsum, arch) if stored is not None else None
        best = loaded if loaded is not None else search(candidates(einsum, arch), report, budget,
                                                        every_tiling=smaller_buffers(einsum, arch))
        if loaded is None and stored is not None:
            disk.store(stored, best, einsum, arch)
    if cache is not None:
        cache.store(key, best)
    return best


def map_ir(ir: IR, arch: Arch, report: Report, budget: int = DEFAULT_BUDGET, cache: Cache | None = CACHE
           ) -> dict[str, Mapping]:
    """A Mapping per op name, in IR order."""
    return {op.name: map_op(op, arch, report, budget, cache) for op in ir.ops}
