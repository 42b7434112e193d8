"""The collective algorithms by name. Each registers what it runs and where: over a whole slice (`slice_wide`: the
collectives it expands, why it cannot run on a slice) and/or as one level's pass of a per-level list (`per_level`:
the collectives, why it cannot run at a level). The tuner, the CLI's allowed values and the names a system file's
`algorithms:` may use all come from here; the modules that register are imported by accelsim.comm.algorithms.

Invariant: `names()` lists every registered algorithm simplest first (lowest rank): the tuner keeps an earlier one
unless a later one is clearly faster, and errors list them in that order.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

# The algorithms' modules import this one to register: the Job (accelsim.comm.rings) and Network
# (accelsim.comm.network) an algorithm is handed are named here in words, not imported, so no cycle forms.
Job: TypeAlias = Any
Network: TypeAlias = Any

OPS = ("allreduce", "reducescatter", "allgather", "alltoall", "broadcast", "sendrecv")
AUTO = "auto"     # a per-level list's entry that lets the tuner pick that level's algorithm


def _runs_anywhere(*_) -> str | None:
    return None


@dataclass(frozen=True)
class SliceWide:
    """An algorithm over the whole slice: `expand(job)` writes its transfers; `unavailable(net)` says why it
    cannot run on the slice (None: it can)."""

    name: str
    rank: int
    ops: tuple[str, ...]
    expand: Callable[[Job], None]
    unavailable: Callable[[Network], str | None]


@dataclass(frozen=True)
class PerLevel:
    """One level's reduce-scatter ("rs") or all-gather ("ag") pass in a per-level list (reduce-scatter inner to
    outer, all-gather back): `run(job, level, kind, full, after, pieces)` writes the pass's transfers for a buffer
    of `full` bytes per piece after `after` and returns what the next pass waits for. `whole_piece`: the pass
    moves whole pieces through the switch (not 1/n of one), so a list starting with it cuts the buffer finer, and
    the switch's start-up is paid once before any piece moves."""

    name: str
    rank: int
    ops: tuple[str, ...]
    run: Callable
    unavailable: Callable[[Network, int], str | None]
    whole_piece: bool = False


SLICE_WIDE: dict[str, SliceWide] = {}
PER_LEVEL: dict[str, PerLevel] = {}


def slice_wide(name: str, rank: int, ops: tuple[str, ...],
               unavailable: Callable[[Network], str | None] = _runs_anywhere):
    """Register the decorated `expand(job)` as algorithm `name` over a whole slice."""
    def register(expand: Callable[[Job], None]) -> Callable[[Job], None]:
        _check(name, rank, ops, SLICE_WIDE, PER_LEVEL)
        SLICE_WIDE[name] = SliceWide(name, rank, ops, expand, unavailable)
        return expand
    return register


def per_level(name: str, rank: int, ops: tuple[str, ...],
              unavailable: Callable[[Network, int], str | None] = _runs_anywhere, whole_piece: bool = False):
    """Register the decorated pass `run(job, level, kind, full, after, pieces)` as algorithm `name` at one level."""
    def register(run: Callable) -> Callable:
        _check(name, rank, ops, PER_LEVEL, SLICE_WIDE)
        PER_LEVEL[name] = PerLevel(name, rank, ops, run, unavailable, whole_piece)
        return run
    return register


def _check(name: str, rank: int, ops: tuple[str, ...], same: dict[str, Any], other: dict[str, Any]) -> None:
    assert name not in same and name != AUTO, f"collective algorithm {name!r} is registered twice"
    assert set(ops) <= set(OPS), f"{name}: unknown collectives {set(ops) - set(OPS)}"
    if name in other:     # one name, one place among the others, in both roles
        assert other[name].rank == rank, f"{name}: slice-wide and per-level ranks differ"
    taken: list[SliceWide | PerLevel] = [*same.values(), *other.values()]
    assert all(a.rank != rank or a.name == name for a in taken), f"{name}: rank {rank} is taken"


def names() -> tuple[str, ...]:
    """Every registered algorithm, slice-wide or per level, simplest first."""
    every = {a.name: a.rank for a in SLICE_WIDE.values()} | {a.name: a.rank for a in PER_LEVEL.values()}
    return tuple(sorted(every, key=every.__getitem__))


def slice_wide_for(op: str) -> tuple[str, ...]:
    """The slice-wide algorithms that run `op`, simplest first."""
    return tuple(a.name for a in sorted(SLICE_WIDE.values(), key=lambda a: a.rank) if op in a.ops)


def per_level_for(op: str) -> tuple[str, ...]:
    """The per-level algorithms that run `op`, simplest first."""
    return tuple(a.name for a in sorted(PER_LEVEL.values(), key=lambda a: a.rank) if op in a.ops)


def per_level_names() -> tuple[str, ...]:
    """Every per-level algorithm, simplest first."""
    return tuple(a.name for a in sorted(PER_LEVEL.values(), key=lambda a: a.rank))
