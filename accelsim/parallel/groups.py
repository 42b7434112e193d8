"""Where a plan's groups sit on a system, and what a collective among one group's devices costs.

A group is `size` devices `stride` apart in rank order (tensor: stride 1; data: tp; pipeline neighbours: tp x dp).
All groups of a kind run their collectives at once, alike, so one group is priced on the system as that group
sees it: inside a node when size x stride fits one (a non-blocking switch serves every group at full rate); across
nodes with node / stride members per node when the stride splits a node (the others' groups use the other
devices' links and NICs at the same time); one member per node when the stride is a whole node or more. On a ring
or torus, the system is the run's slice (System.sliced) and ranks fill its x, then y, then z (accelsim.arch.torus):
a group is priced on the dimensions it spans, its members as far apart as they are (tp=4, dp=16 on 4x4x4: tp a
ring along x, dp the 4x4 torus along y and z; on a 64-long ring, dp's members are 4 links apart, sharing each link
with the 3 groups between them).
Invariant: a group's collective is timed by accelsim.comm on the link engine, never by a formula here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import permutations

from accelsim.arch.system import Slice, System
from accelsim.arch.torus import span
from accelsim.comm import collective
from accelsim.comm.result import CollectiveResult
from compiler.errors import UserError
from compiler.memo import Memo


@dataclass(frozen=True)
class Group:
    kind: str          # tp, dp or pp
    size: int
    stride: int

    @property
    def trivial(self) -> bool:
        return self.size == 1


def groups(tp: int, dp: int, pp: int) -> dict[str, Group]:
    return {"tp": Group("tp", tp, 1), "dp": Group("dp", dp, tp), "pp": Group("pp", pp, tp * dp)}


def groups_on(system: System, tp: int, dp: int, pp: int) -> dict[str, Group]:
    """`groups(tp, dp, pp)` once each is known to sit on the system: on a torus slice, whole dimensions or an even
    share of one (UserError naming the group otherwise, before anything is simulated, with the slice's dimensions
    in an order that would place every group, when there is one)."""
    by_kind = groups(tp, dp, pp)
    level = system.levels[0]
    placed = [g for g in by_kind.values() if not g.trivial and _in_torus(system, g)]
    for group in placed:
        if span(level.shape, group.size, group.stride, level.wraps) is None:
            turns = [t for t in sorted(set(permutations(level.shape)))
                     if all(span(t, g.size, g.stride, level.wraps) for g in placed)]
            hint = f"; --slice {_text(turns[0])} places every group" if turns else ""
            raise UserError(_misfit(system, group) + hint)
    return by_kind


def as_seen(system: System, group: Group) -> System:
    """The system a group's collective runs on: its innermost level cut to the members one node holds."""
    inner = system.levels[0].devices
    if inner is None or group.size * group.stride <= inner or len(system.levels) == 1:
        return system
    members = max(1, inner // group.stride)
    if members == 1:
        return replace(system, levels=system.levels[1:])
    return replace(system, levels=(replace(system.levels[0], devices=members),) + system.levels[1:])


def on_torus(system: System, group: Group) -> Slice | None:
    """The part of the run's slice the group takes, when the system's innermost level is a ring or torus that holds
    it (None otherwise: a switched level, `as_seen`); UserError when the group does not take an even share of each
    dimension it crosses."""
    if not _in_torus(system, group):
        return None
    level = system.levels[0]
    where = span(level.shape, group.size, group.stride, level.wraps)
    if where is None:
        raise UserError(_misfit(system, group))
    rest = len(system.levels) - 1
    return Slice(group.size, (group.size,) + (1,) * rest, (where.members,) + ((),) * rest,
                 (where.step,) + ((),) * rest, (where.closed,) + ((),) * rest)


def _in_torus(system: System, group: Group) -> bool:
    level = system.levels[0]
    return bool(level.topology.dims and level.shape and group.size * group.stride <= math.prod(level.shape))


def _misfit(system: System, group: Group) -> str:
    shape = _text(system.levels[0].shape)
    return (f"{system.name}: {group.kind}={group.size} with ranks {group.stride} apart does not take whole dimensions, "
            f"or an even share of one, of the {shape} slice (ranks fill x, then y, then z; tp innermost, then dp, "
            f"then pp): choose degrees that split {shape} dimension by dimension")


def _text(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def level_name(system: System, group: Group) -> str:
    """The outermost level the group's traffic crosses; on a ring or torus, with the dimensions it spans (`ici
    y,z`)."""
    cut = None if group.trivial else on_torus(system, group)
    if cut is not None:
        axes = ",".join(axis for axis, m in zip("xyz", cut.shape[0]) if m > 1)
        return f"{system.levels[0].name} {axes}" if system.levels[0].topology.dims > 1 else system.levels[0].name
    seen = as_seen(system, group)
    if group.size * group.stride <= (system.levels[0].devices or 0) or len(seen.levels) == 1:
        return seen.levels[0].name
    return seen.levels[1].name if seen.levels[0].devices else seen.levels[0].name


def cost(system: System, group: Group, op: str, nbytes: int) -> CollectiveResult | None:
    """One collective of `nbytes` (nccl-tests' size) among the group; None when there is nothing to move."""
    if group.trivial or nbytes <= 0:
        return None
    key = (system.name, str(system.source_file), tuple(level.shape for level in system.levels), group, op, int(nbytes))
    return _COSTS.recall(key, lambda: _cost(system, group, op, int(nbytes)))


_COSTS: Memo[tuple, CollectiveResult] = Memo("accelsim.parallel.groups.cost", 65536)    # a step asks for a few sizes


def _cost(system: System, group: Group, op: str, nbytes: int) -> CollectiveResult:
    if op == "sendrecv":     # a pipeline hop: two neighbouring stages, as the group's placement has them
        pair = Group(group.kind, 2, group.stride)
        cut = on_torus(system, pair)
        if cut is not None:
            return collective("sendrecv", system, size=nbytes, slice=cut)
        return collective("sendrecv", as_seen(system, pair), devices=2, size=nbytes)
    cut = on_torus(system, group)
    if cut is not None:
        return collective(op, system, size=nbytes, slice=cut)
    return collective(op, as_seen(system, group), devices=group.size, size=nbytes)
