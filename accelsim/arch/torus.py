"""Slices of a ring or torus, and where the ranks of a run sit in one.

A slice is a box of the machine's torus: AxBxC devices, each dimension at most as long as one of the machine's
(a slice may be turned, so its sorted dimensions fit the machine's sorted dimensions one by one). Rank r of a slice
AxBxC sits at x = r mod A, y = (r div A) mod B, z = r div AB: consecutive ranks are neighbours along x, then y,
then z. A parallel plan numbers its ranks tensor-parallel innermost, then data-parallel, then pipeline (as
Megatron-LM and MaxText do), so on 4x4x4 with tp=4, dp=16 each tensor-parallel group is one ring along x and each
data-parallel group the 4x4 torus along y and z.

Invariants: every shape `shapes` yields multiplies to its count and fits the machine; a group's `span` has as many
members as the group, and each of its dimensions is a whole number of members evenly spaced along one of the
slice's dimensions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import product
from typing import Callable, Iterator

SUGGEST_UP_TO = 1 << 16     # machines of at most this many devices: a refused count is told its nearest neighbours


def fits(shape: tuple[int, ...], machine: tuple[int, ...]) -> bool:
    """Whether a slice of `shape` fits in a torus of `machine`'s shape, turned as need be."""
    return len(shape) == len(machine) and all(s <= m for s, m in zip(sorted(shape), sorted(machine)))


def shapes(n: int, machine: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """Every slice shape (sorted, smallest first) of `n` devices that fits a torus of `machine`'s shape. The work is
    bounded by the divisors of n up to the longest dimension (found by trial division up to min(sqrt n, longest)),
    not by n: a machine of 10^18 devices is enumerated as quickly as its dimensions allow."""
    limits = tuple(sorted(machine))
    divisors = _divisors(n, limits[-1])
    if divisors is not None:
        yield from _sorted_shapes(n, limits, divisors, 1)


def _divisors(n: int, largest: int) -> list[int] | None:
    """The divisors of n up to `largest`, ascending; None when a prime factor of n is above `largest` (then no
    shape within the machine holds n)."""
    factors, rest, p = {}, n, 2
    while p * p <= rest and p <= largest:
        while rest % p == 0:
            factors[p] = factors.get(p, 0) + 1
            rest //= p
        p += 1 if p == 2 else 2
    if rest > largest:
        return None            # rest has no factor up to min(sqrt(rest), largest): a prime, or factors above largest
    if rest > 1:
        factors[rest] = factors.get(rest, 0) + 1
    out = [1]
    for prime, power in factors.items():
        out = [d * prime**k for d in out for k in range(power + 1) if d * prime**k <= largest]
    return sorted(out)


def _sorted_shapes(n: int, limits: tuple[int, ...], divisors: list[int], low: int) -> Iterator[tuple[int, ...]]:
    if len(limits) == 1:
        if low <= n <= limits[0]:
            yield (n,)
        return
    for d in divisors:
        if d > limits[0] or d ** len(limits) > n:
            break
        if d >= low and n % d == 0:
            for rest in _sorted_shapes(n // d, limits[1:], divisors, d):
                yield (d, *rest)


def balanced_shape(members: int, dims: int, wrap_multiple: int = 1,
                   machine: tuple[int, ...] | None = None) -> tuple[int, ...] | None:
    """The most cubic shape of `members` in `dims` dimensions that fits `machine` (any, when None), smallest first
    (4,096 in 3: 16x16x16), preferring dimensions that are multiples of `wrap_multiple` (those close into rings on
    TPU v4); None when there is none."""
    best = None
    for shape in shapes(members, machine or (members,) * dims):
        key = (max(shape), -sum(d % wrap_multiple == 0 for d in shape), shape)
        best = key if best is None or key < best else best
    return None if best is None else best[2]


def nearest_counts(n: int, machine: tuple[int, ...]) -> tuple[int | None, int | None]:
    """The largest device count below n and the smallest above it that form a slice of `machine` (None where there
    is none, or when the machine is too large to list its counts)."""
    if math.prod(machine) > SUGGEST_UP_TO:
        return None, None
    counts = sorted({math.prod(c) for c in product(*(range(1, m + 1) for m in machine))})
    below = [c for c in counts if c < n]
    above = [c for c in counts if c > n]
    return (below[-1] if below else None), (above[0] if above else None)


@dataclass(frozen=True)
class Span:
    """The part of a slice one group of ranks takes, per dimension of the slice: its `members` along it (1 where the
    group does not cross it), the `step` in links from one member to the next (the groups interleaved between them
    share those links), and whether its members there go round a ring (`closed`)."""

    members: tuple[int, ...]
    step: tuple[int, ...]
    closed: tuple[bool, ...]


def span(shape: tuple[int, ...], size: int, stride: int, wraps: Callable[[int], bool]) -> Span | None:
    """Where a group of `size` ranks `stride` apart (ranks filling x, then y, then z) lies in a slice of `shape`
    whose dimensions close into rings as `wraps` says; None when the group does not take an even share of every
    dimension it crosses (dp=24 at stride 2 on 3x4x4: x holds ranks 0, 1, 2, so a group would hold x = 0, 2, then
    1, ...)."""
    lo, hi = stride, stride * size
    members, step, closed = [], [], []
    unit = 1
    for length in shape:
        first, last = max(lo, unit), min(hi, unit * length)
        if last <= first:
            members.append(1), step.append(1), closed.append(False)
        elif last % first or first % unit:
            return None
        else:
            m, t = last // first, first // unit
            members.append(m), step.append(t), closed.append(m * t == length and wraps(length))
        unit *= length
    return Span(tuple(members), tuple(step), tuple(closed)) if math.prod(members) == size else None
