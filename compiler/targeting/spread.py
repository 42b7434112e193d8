"""How a mapped op spreads over a unit's instances (SMs, cores, MXUs): the "units" spatial factors of a Mapping.

Invariant: one instance holds its tile divided by the factors (ceil); a step is one tile per instance, side
by side, so an instance computes the smaller of its share and the step's clipped extent. Factors along reduced
dims (split-K) leave each instance the whole output tile, as partial sums.
"""
from __future__ import annotations

import math

import numpy as np

from compiler.hardware import ComputeUnit
from compiler.mapping import Mapping


def units_spread(mapping: Mapping) -> dict[str, int]:
    """{dim: instances the step is split over along it}: the product of the mapping's "units" factors per dim."""
    spread: dict[str, int] = {}
    for s in mapping.spatial:
        if s.axis == "units":
            spread[s.dim] = spread.get(s.dim, 1) * s.factor
    return spread


def per_instance(tile: dict[str, int], spread: dict[str, int]) -> dict[str, int]:
    """The share of a tile one instance holds when the step is split over units along `spread` dims."""
    return {d: -(-t // spread[d]) if d in spread else t for d, t in tile.items()}


def units_used(mapping: Mapping | None, unit: ComputeUnit) -> int:
    """Instances one instruction is dealt over: the mapping's spatial "units" factors, at most `count`;
    all of them where it names none (a GPU's block scheduler fills every SM unless told otherwise)."""
    spread = units_spread(mapping) if mapping is not None else {}
    return max(1, min(unit.count, math.prod(spread.values()))) if spread else unit.count


def k_split(mapping: Mapping | None) -> int:
    """Instances that share each output tile (split-K): the "units" factors along reduced (k) dims. Each holds
    partial sums of the whole output tile over its share of k, which the shared level beyond sums: an A100's
    weight gradient of 64 x 576 outputs over k = 100,352 fills 10 of 108 SMs unsplit, all of them split 10 ways."""
    parts = gemm_parts(mapping)
    if not parts or mapping is None:
        return 1
    return math.prod([f for d, f in units_spread(mapping).items() if parts.get(d) == "k"])


def gemm_parts(mapping: Mapping | None) -> dict[str, str] | None:
    """Each loop dim of a mapped Einsum as compiler.mapping.gemm_view classifies it ("b", "m", "n", "k");
    None for a mapping of another op kind."""
    return dict(mapping.parts) if mapping is not None and mapping.parts else None


def gemm_sizes(mapping: Mapping, tile: dict[str, int] | None = None) -> tuple[int, int, int] | None:
    """(m, n, k) of `tile` (dim -> extent; default the op's loops) in GEMM terms, b folded into m as in
    the Program; None if the mapping is not an Einsum's."""
    parts = gemm_parts(mapping)
    if parts is None:
        return None
    extent = dict(mapping.loops) | (tile or {})
    m, n, k = (math.prod(extent[d] for d in extent if parts[d] in group) for group in (("b", "m"), ("n",), ("k",)))
    return m, n, k


def instance_tile(mapping: Mapping | None, m: np.ndarray | int, n: np.ndarray | int,
                  k: np.ndarray | int) -> tuple[np.ndarray, ...] | None:
    """The tile one instance (SM, core) computes per step, clipped to the row's (m, n, k): the innermost
    level's tile split over the mapping's "units" (compiler.map: a step is one thread block or core
    block per instance, side by side); None without an Einsum mapping with levels."""
    if mapping is None or not mapping.levels:
        return None
    sizes = gemm_sizes(mapping, per_instance(dict(mapping.levels[-1].tile), units_spread(mapping)))
    return None if sizes is None else tuple(np.minimum(t, x) for t, x in zip(sizes, (m, n, k)))
