"""One representative device's links, and the transfers an algorithm puts on them, as the link engine's arrays.

Every device of a homogeneous level behaves alike, so a collective is simulated for one device: its outgoing
channels (one per switched level; one per direction of each torus dimension), each carrying the flows that
share the physical link (two GPUs behind one NIC: 2). Incoming links carry the same load by symmetry, except
where a switch reduces and multicasts (NVLS): a device then receives what it did not send, so such a level also
has the device's ingress channel, whose latency is the switch's reduction start-up.
Invariant: a Network's channels are exactly the links the slice crosses; Transfers hands the engine rows whose
dependencies point to earlier rows.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelsim.arch.system import Protocol, Slice, System

PATH = 3   # channels one transfer may cross at once (a chain through node, network and back)


@dataclass(frozen=True)
class Channel:
    """The port(s) a device sends through at one level: payload rate per direction, latency per hop, and how many
    devices' flows share it (a NIC behind 2 GPUs: 2; 12 NVLinks of one GPU: 1)."""

    name: str
    level: int
    bandwidth: float
    latency: float
    flows: float


@dataclass(frozen=True)
class Dim:
    """One torus (or ring) dimension the slice spans: its members, whether they close into a ring, its + and -
    channels, and `step`, the links from one member to the next (a data-parallel group whose members are 4 apart
    along x: 4, each link then carrying the flows of the 4 groups interleaved there)."""

    size: int
    wraps: bool
    plus: int
    minus: int
    step: int = 1


def protocols(system: System) -> tuple[Protocol, ...]:
    """The system's protocols; a System built without any has one that costs its overhead and scales nothing."""
    return system.protocols or (Protocol("default", system.overhead_s),)


class Network:
    """The channels of the representative device of `slice` on `system`, as `protocol` (default: the system's
    first) drives them: each level's payload rate times the protocol's efficiency, its hop latency times the
    protocol's latency scale."""

    def __init__(self, system: System, slice_: Slice, protocol: Protocol | None = None):
        self.system, self.slice = system, slice_
        self.protocol = protocol or protocols(system)[0]
        rate, hop = self.protocol.efficiency, self.protocol.latency_scale
        self.channels: list[Channel] = []
        self.egress: dict[int, int] = {}          # switched level -> its channel
        self.ingress: dict[int, int] = {}         # switched level that reduces in the network -> its inward channel
        self.dims: dict[int, list[Dim]] = {}      # ring/torus level -> its dimensions of size > 1
        for i in slice_.active:
            level = system.levels[i]
            if level.topology.dims == 0:
                ports = level.ports
                self.egress[i] = self._add(level.name, i, level.payload_bytes_per_s * max(ports, 1.0) * rate,
                                           level.latency_s * hop, max(1.0, 1.0 / ports))
                if level.in_network_reduction:
                    self.ingress[i] = self._add(f"{level.name} in", i, level.payload_bytes_per_s * max(ports, 1.0)
                                                * rate, level.reduction_latency_s, max(1.0, 1.0 / ports))
                continue
            per_direction = level.ports / (2 * level.topology.dims) * level.payload_bytes_per_s * rate
            self.dims[i] = []
            shape = slice_.shape[i]
            steps = slice_.step[i] if slice_.step else (1,) * len(shape)
            closed = slice_.closed[i] if slice_.closed else tuple(level.wraps(size) for size in shape)
            for axis, size, step, wraps in zip("xyz", shape, steps, closed):
                if size > 1:
                    name = f"{level.name} {axis}" if level.topology.dims > 1 else level.name
                    plus = self._add(f"{name}+", i, per_direction, level.latency_s * hop, 1.0)
                    minus = self._add(f"{name}-", i, per_direction, level.latency_s * hop, 1.0)
                    self.dims[i].append(Dim(size, wraps, plus, minus, step))

    def _add(self, name: str, level: int, bandwidth: float, latency: float, flows: float) -> int:
        self.channels.append(Channel(name, level, bandwidth, latency, flows))
        return len(self.channels) - 1

    @property
    def active(self) -> tuple[int, ...]:
        return self.slice.active

    def participants(self, level: int) -> int:
        return self.slice.participants[level]

    def inside(self, level: int) -> int:
        """Devices in one member of `level` (a node's 8 GPUs are one member of the InfiniBand level)."""
        return self.slice.groups(level) // self.slice.participants[level]

    def first(self, level: int) -> int:
        """The channel a level's neighbour or peer is reached by: its egress, or its first dimension's + link."""
        return self.egress[level] if level in self.egress else self.dims[level][0].plus

    def flows(self, channel: int) -> float:
        return self.channels[channel].flows

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return (np.array([c.bandwidth for c in self.channels], np.float64),
                np.array([c.latency for c in self.channels], np.float64))


class Transfers:
    """Rows for the link engine, added in blocks; ids are row numbers, a block's dependencies earlier rows."""

    def __init__(self):
        self.count = 0
        self._blocks: list[tuple] = []

    def add(self, path, nbytes, after=None, share=1.0, hops=1, stages=1, piece=None) -> np.ndarray:
        """Rows crossing `path` (channel ids, one tuple for all rows or an int array [rows, k]), `nbytes` each
        (a number or an array), waiting for the ids in `after` ([rows, d], -1 for none); `piece` numbers the
        piece of the buffer each row carries (older pieces are served first; default: row i is piece i).
        Returns their ids."""
        path = np.atleast_2d(np.asarray(path, np.int64))
        nbytes = np.atleast_1d(np.asarray(nbytes, np.float64))
        rows = max(path.shape[0], nbytes.shape[0], 0 if after is None else np.atleast_2d(after).shape[0])
        path = np.broadcast_to(path, (rows, path.shape[1]))
        share = np.broadcast_to(np.asarray(share, np.float64), path.shape)
        hops = np.broadcast_to(np.asarray(hops, np.int64), path.shape)
        after = np.full((rows, 1), -1, np.int64) if after is None else \
            np.broadcast_to(np.atleast_2d(np.asarray(after, np.int64)), (rows, np.atleast_2d(after).shape[1]))
        ids = np.arange(self.count, self.count + rows, dtype=np.int64)
        assert (after < ids[:, None]).all(), "a dependency must be an earlier transfer"
        piece = np.arange(rows) if piece is None else np.asarray(piece, np.int64)
        self._blocks.append((path, share, hops, np.broadcast_to(np.asarray(stages, np.int64), (rows,)),
                             np.broadcast_to(nbytes, (rows,)), after, np.broadcast_to(piece, (rows,))))
        self.count += rows
        return ids

    def arrays(self) -> dict[str, np.ndarray]:
        """path, share, hops: [T, PATH]; stages, nbytes, piece: [T]; dep: [T, D], padded with -1 (share 0)."""
        width = max((b[5].shape[1] for b in self._blocks), default=1)
        out: dict[str, list[np.ndarray]] = {"path": [], "share": [], "hops": [], "stages": [], "nbytes": [], "dep": [],
                                            "piece": []}
        for path, share, hops, stages, nbytes, after, piece in self._blocks:
            pad = PATH - path.shape[1]
            out["path"].append(np.pad(path, ((0, 0), (0, pad)), constant_values=-1))
            out["share"].append(np.pad(share, ((0, 0), (0, pad))))
            out["hops"].append(np.pad(hops, ((0, 0), (0, pad))))
            out["stages"].append(stages)
            out["nbytes"].append(nbytes)
            out["dep"].append(np.pad(after, ((0, 0), (0, width - after.shape[1])), constant_values=-1))
            out["piece"].append(piece)
        empty = {"path": (0, PATH), "share": (0, PATH), "hops": (0, PATH), "stages": (0,), "nbytes": (0,),
                 "dep": (0, width), "piece": (0,)}
        dtypes = {"path": np.int64, "hops": np.int64, "stages": np.int64, "dep": np.int64, "piece": np.int64}
        return {k: np.ascontiguousarray(np.concatenate(v) if v else np.zeros(empty[k]), dtypes.get(k, np.float64))
                for k, v in out.items()}
