"""Where a plan's groups sit on a system, and what a collective among one group's devices costs.

A group is `size` devices `stride` apart in rank order (tensor: stride 1; data: tp; pipeline neighbours: tp x dp).
All groups of a kind run their collectives at once, alike, so one group is priced on the system as that group
sees it: inside a node when size x stride fits one (a non-blocking switch serves every group at full rate); across
nodes with node / stride members per node when the stride splits a node (the others' groups use the other
devices' links and NICs at the same time); one member per node when the stride is a whole node or more.
Invariant: a group's collective is timed by accelsim.comm on the link engine, never by a formula here.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from accelsim.arch.system import System
from accelsim.comm import collective
from accelsim.comm.result import CollectiveResult


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


def as_seen(system: System, group: Group) -> System:
    """The system a group's collective runs on: its innermost level cut to the members one node holds."""
    inner = system.levels[0].devices
    if inner is None or group.size * group.stride <= inner or len(system.levels) == 1:
        return system
    members = max(1, inner // group.stride)
    if members == 1:
        return replace(system, levels=system.levels[1:])
    return replace(system, levels=(replace(system.levels[0], devices=members),) + system.levels[1:])


def level_name(system: System, group: Group) -> str:
    """The outermost level the group's traffic crosses."""
    seen = as_seen(system, group)
    if group.size * group.stride <= (system.levels[0].devices or 0) or len(seen.levels) == 1:
        return seen.levels[0].name
    return seen.levels[1].name if seen.levels[0].devices else seen.levels[0].name


def cost(system: System, group: Group, op: str, nbytes: int) -> CollectiveResult | None:
    """One collective of `nbytes` (nccl-tests' size) among the group; None when there is nothing to move."""
    if group.trivial or nbytes <= 0:
        return None
    key = (system.name, str(system.source_file), group, op, int(nbytes))
    if key not in _COSTS:
        if len(_COSTS) > 65536:
            _COSTS.clear()
        _COSTS[key] = _cost(system, group, op, int(nbytes))
    return _COSTS[key]


_COSTS: dict[tuple, CollectiveResult] = {}     # a step asks for the same few sizes many times


def _cost(system: System, group: Group, op: str, nbytes: int) -> CollectiveResult:
    seen = as_seen(system, group)
    if op == "sendrecv":     # a pipeline hop: two neighbouring stages, as the group's placement has them
        pair = Group(group.kind, 2, group.stride)
        seen = as_seen(system, pair)
        return collective("sendrecv", seen, devices=2, size=nbytes)
    return collective(op, seen, devices=group.size, size=nbytes)
