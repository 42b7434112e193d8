"""The typed, frozen objects a system description becomes: devices plus levels of links, innermost first.

A System is what archs/systems/*.yaml says; a Slice is the part of it one run uses (`--devices 16`,
`--slice 4x4x4`), a box of a torus level that fits in the machine's torus (accelsim.arch.torus); `sliced` gives the
system as that run sees it, its torus the slice. Invariant: a Slice's participants per level multiply to its device
count, and a torus level's shape multiplies to that level's participants.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace
from pathlib import Path

from compiler.hardware import Arch
from accelsim.arch.torus import balanced_shape, fits, nearest_counts
from compiler.errors import UserError


class Topology(enum.Enum):
    """How one level's links join the groups of the level below."""

    pcie = "pcie"           # point to point through a host bridge (root complex)
    switch = "switch"       # a non-blocking switch (NVSwitch): any pair at full link rate
    fat_tree = "fat_tree"   # a full-bisection switched network (InfiniBand), reached through NICs
    ring = "ring"           # each member linked to two neighbours, closed
    torus2d = "torus2d"     # neighbours in 2 dimensions, with or without wrap-around links
    torus3d = "torus3d"     # neighbours in 3 dimensions (TPU v4's ICI)

    @property
    def dims(self) -> int:
        """Dimensions of a ring or torus (0 for a switched level)."""
        return {Topology.ring: 1, Topology.torus2d: 2, Topology.torus3d: 3}.get(self, 0)


@dataclass(frozen=True)
class LinkLevel:
    """One level of the interconnect. `devices` counts devices per group at this level (8 GPUs per node),
    None on the outermost level when any number of groups may join (a fat tree of nodes). `ports` is the
    links (or NICs) one device has at this level, per direction, each of `bandwidth_bytes_per_s`; below 1 when
    several devices share a NIC (4 NICs for 8 GPUs: 0.5). `latency_s` is one hop: from a device to its peer
    across the fabric (through the switch, host bridge or fat tree), or to its neighbour on a ring or torus.
    `efficiency` is the share of the line rate a collective library delivers as payload (protocol overhead).
    A level with `in_network_reduction` adds in its switch; `reduction_efficiency` is the share of the payload rate
    that traffic through the switch's adders and multicast moves at, `reduction_latency_s` its start-up, paid once
    by a collective that reduces there."""

    name: str
    topology: Topology
    devices: int | None
    ports: float
    bandwidth_bytes_per_s: float
    latency_s: float
    efficiency: float = 1.0
    in_network_reduction: bool = False
    reduction_efficiency: float = 1.0
    reduction_latency_s: float = 0.0
    shape: tuple[int, ...] = ()   # a ring or torus: the full machine's shape at this level
    wrap: bool = True             # a torus: wrap-around links close each dimension into a ring
    wrap_multiple: int = 1        # ... but only a dimension whose size is a multiple of this (TPU v4: 4)

    @property
    def payload_bytes_per_s(self) -> float:
        """One port's rate per direction as a library moves data over it."""
        return self.bandwidth_bytes_per_s * self.efficiency

    def wraps(self, size: int) -> bool:
        """Whether a dimension of `size` members closes into a ring here."""
        return self.topology is Topology.ring or (self.wrap and size > 2 and size % self.wrap_multiple == 0)


@dataclass(frozen=True)
class Protocol:
    """A way the collective library moves data (NCCL's LL and Simple): a fixed cost per collective, the levels'
    hop latencies and payload rates scaled, and the algorithms that run in it. LL flags every 8 bytes: little
    latency, a fraction of the bandwidth; Simple fences whole chunks: the full bandwidth, longer hops."""

    name: str
    overhead_s: float
    latency_scale: float = 1.0
    efficiency: float = 1.0
    algorithms: tuple[str, ...] | None = None     # None: every algorithm accelsim.comm registers


@dataclass(frozen=True)
class DeviceCount:
    """How many devices a run may use, and how many it uses when none is given."""

    default: int
    minimum: int
    maximum: int | None   # None: no bound beyond the hierarchy


@dataclass(frozen=True)
class Slice:
    """The devices one run uses: `participants[i]` members of level i's group take part (innermost first;
    1 where a level is not crossed), `shape[i]` the torus shape used at level i (() elsewhere). One group of a run's
    ranks inside its slice (accelsim.parallel.groups) also has, per torus dimension, `step[i]`: the links from one
    member to the next, shared by the groups interleaved between them (() : 1), and `closed[i]`: whether its members
    go round a ring (() : as the level wraps a dimension of that length)."""

    devices: int
    participants: tuple[int, ...]
    shape: tuple[tuple[int, ...], ...]
    step: tuple[tuple[int, ...], ...] = ()
    closed: tuple[tuple[bool, ...], ...] = ()

    def groups(self, level: int) -> int:
        """Devices in one group of level `level`: 8 for a node of a 2-node DGX slice, 16 for the whole."""
        return math.prod(self.participants[:level + 1])

    @property
    def active(self) -> tuple[int, ...]:
        """Levels the slice crosses, innermost first."""
        return tuple(i for i, p in enumerate(self.participants) if p > 1)


@dataclass(frozen=True)
class System:
    """Devices of one preset joined by levels of links, innermost first; `overhead_s` is paid once per
    collective (kernel launch and setup in the library). `algorithms` are those the system's collective library
    chooses among (NCCL: ring, tree, nvls; None: all), names accelsim.comm checks against its registry; any
    algorithm the slice allows may still be asked for by name. `protocols` are the library's ways of moving data
    (the schema gives a file without any one protocol that costs `overhead_s` and scales nothing; with them,
    `overhead_s` is the first one's)."""

    name: str
    description: str
    device: Arch
    devices: DeviceCount
    levels: tuple[LinkLevel, ...]
    overhead_s: float
    source_file: Path
    algorithms: tuple[str, ...] | None = None     # None: every algorithm accelsim.comm registers
    protocols: tuple[Protocol, ...] = ()

    @property
    def torus_levels(self) -> tuple[int, ...]:
        return tuple(i for i, level in enumerate(self.levels) if level.topology.dims > 1)

    def sliced(self, cut: Slice) -> System:
        """The system as a run on `cut` sees it: each ring or torus level the slice's shape (a 4x4x4 slice of the
        pod is a 4x4x4 torus, closing where its own dimensions do), and `cut.devices` as its only device count."""
        levels = tuple(replace(level, shape=cut.shape[i], devices=cut.groups(i))
                       if level.topology.dims and cut.shape[i] else level for i, level in enumerate(self.levels))
        n = cut.devices
        return replace(self, levels=levels, devices=DeviceCount(n, min(self.devices.minimum, n), n))

    def fit(self, devices: int | None = None, shape: tuple[int, ...] | None = None) -> Slice:
        """The slice for `--devices N` and/or `--slice AxBxC`; UserError naming the system when it does not fit."""
        if shape is not None:
            if not self.torus_levels:
                raise UserError(f"{self.name}: --slice {_text(shape)} needs a torus level; this system has "
                                f"{', '.join(level.topology.value for level in self.levels)}")
            if devices is not None and math.prod(shape) * self._below(self.torus_levels[0]) != devices:
                raise UserError(f"{self.name}: --slice {_text(shape)} is {math.prod(shape)} devices, not --devices "
                                f"{devices}")
            devices = math.prod(shape) * self._below(self.torus_levels[0])
        n = self.devices.default if devices is None else devices
        bound = self.devices.maximum or n
        if not self.devices.minimum <= n <= bound:
            span = f"{self.devices.minimum} to {self.devices.maximum:,}" if self.devices.maximum else \
                f"at least {self.devices.minimum}"
            raise UserError(f"{self.name}: {n} devices; this system takes {span}")
        participants, shapes, below = [], [], 1
        for i, level in enumerate(self.levels):
            if n % below:
                raise UserError(f"{self.name}: {n} devices do not fill whole groups of {below} (level "
                                f"{self.levels[i - 1].name!r}); use at most {below} or a multiple of {below}")
            group = min(level.devices or n, n)
            members = group // below
            participants.append(members)
            asked = shape if self.torus_levels and i == self.torus_levels[0] else None
            shapes.append(self._shape(i, members, asked) if members > 1 or asked else ())
            below = max(below, group)
        if below < n:
            raise UserError(f"{self.name}: {n} devices; the levels hold at most {below}")
        return Slice(n, tuple(participants), tuple(shapes))

    def _below(self, index: int) -> int:
        """Devices per group of the level below `index` (1 for the innermost)."""
        return 1 if index == 0 else self.levels[index - 1].devices or 1

    def _shape(self, index: int, members: int, asked: tuple[int, ...] | None) -> tuple[int, ...]:
        level = self.levels[index]
        dims = level.topology.dims
        if dims == 0:
            return ()
        whole = f"level {level.name!r}, a {_text(level.shape)} {'ring' if dims == 1 else 'torus'}"
        if asked is not None:
            if len(asked) != dims:
                raise UserError(f"{self.name}: --slice {_text(asked)} has {len(asked)} dimensions; level "
                                f"{level.name!r} is a {level.topology.value} ({dims})")
            if not fits(asked, level.shape):
                over = next(a for a, m in zip(sorted(asked), sorted(level.shape)) if a > m)
                raise UserError(f"{self.name}: --slice {_text(asked)} does not fit {whole}: a slice's dimensions, in "
                                f"some order, are each at most the torus's ({over} is too long)")
            return asked
        if dims == 1:
            return (members,)
        if members == math.prod(level.shape):
            return level.shape
        shape = balanced_shape(members, dims, level.wrap_multiple, level.shape)
        if shape is None:
            below, above = nearest_counts(members, level.shape)
            near = [f"{c * self._below(index)} ({_text(balanced_shape(c, dims, level.wrap_multiple, level.shape))})"
                    for c in (below, above) if c is not None]
            raise UserError(f"{self.name}: {members * self._below(index)} devices do not form a slice of {whole} (no "
                            f"AxBxC of {members} fits it)" + (f"; the nearest counts that do: {', '.join(near)}"
                                                              if near else ""))
        return shape


def parse_shape(text: str) -> tuple[int, ...]:
    """`4x4x4` -> (4, 4, 4); UserError for anything else."""
    parts = str(text).lower().split("x")
    if not all(p.isdigit() and int(p) > 0 for p in parts):
        raise UserError(f"--slice {text!r}: write the torus shape as whole numbers joined by x, e.g. 4x4x4")
    return tuple(int(p) for p in parts)


def _text(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape)
