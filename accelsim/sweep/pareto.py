"""Pareto fronts: the rows no other row beats on every objective at once (all objectives are minimised).

Invariant: a row is on the front iff no row of the same model is <= on every objective and < on one; rows
with equal objectives are all kept. Only rows with status ok and every objective present take part.
"""
from __future__ import annotations

from typing import Sequence


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """a is no worse than b everywhere and better somewhere."""
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def front(vectors: Sequence[Sequence[float]]) -> list[int]:
    """Indices of the non-dominated vectors, in input order. Sorted sweep: a vector can only be dominated by
    one that sorts before it, so each is compared with the front found so far."""
    order = sorted(range(len(vectors)), key=lambda i: tuple(vectors[i]))
    kept: list[int] = []
    for i in order:
        if not any(dominates(vectors[j], vectors[i]) for j in kept):
            kept.append(i)
    return sorted(kept)


def pareto(rows: list[dict], objectives: Sequence[str]) -> list[dict]:
    """The Pareto-optimal rows for `objectives` (e.g. ["latency", "energy"]), per model: rows are grouped by
    their `model` label and each group's front is kept; the result is ordered by model, then objectives."""
    if not objectives:
        raise ValueError("pareto needs at least one objective")
    groups: dict[str, list[dict]] = {}
    for row in rows:
        if row.get("status") == "ok" and all(row.get(name) is not None for name in objectives):
            groups.setdefault(row["model"], []).append(row)
    out = []
    for model in sorted(groups):
        group = groups[model]
        vectors = [tuple(float(row[name]) for name in objectives) for row in group]
        kept = [group[i] for i in front(vectors)]
        out += sorted(kept, key=lambda row: tuple(row[name] for name in objectives))
    return out
