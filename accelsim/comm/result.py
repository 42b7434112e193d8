"""What a timed collective holds, and nccl-tests' two bandwidths (doc/PERFORMANCE.md of NVIDIA/nccl-tests).

`size` is nccl-tests' size column: for allreduce, broadcast and send/recv a rank's buffer; for reduce-scatter
the whole input array (recvcount x n elements); for all-gather the whole output (sendcount x n); for all-to-all
a rank's whole send buffer. algbw = size / time; busbw = algbw x the factor below, comparable to a device's
link bandwidth whatever n is (nccl-tests applies 2(n-1)/n to allreduce whatever the algorithm, NVLS included).
"""
from __future__ import annotations

from dataclasses import dataclass, field

BUS_FACTOR = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


@dataclass(frozen=True)
class CollectiveResult:
    """One collective on one slice: its time and bandwidths, the algorithm (and protocol) that ran, and per channel
    of the representative device the bytes it sent and the seconds it was busy."""

    op: str
    system: str
    devices: int
    size: int
    algorithm: str
    seconds: float
    transfers: int
    channels: dict[str, dict[str, float]] = field(default_factory=dict)   # name -> {"bytes", "busy_s"}
    estimates: dict[str, float] = field(default_factory=dict)             # algorithm -> alpha-beta seconds
    protocol: str = ""                                                     # the library's protocol it ran in

    @property
    def algbw(self) -> float:
        """Bytes per second: size / time."""
        return self.size / self.seconds if self.seconds > 0 else 0.0

    @property
    def busbw(self) -> float:
        return self.algbw * BUS_FACTOR[self.op](self.devices)

    def row(self) -> dict:
        return {"bytes": self.size, "seconds": self.seconds, "algbw": self.algbw, "busbw": self.busbw,
                "algorithm": self.algorithm, "protocol": self.protocol}

    def to_dict(self) -> dict:
        return {"op": self.op, "system": self.system, "devices": self.devices, **self.row(),
                "transfers": self.transfers, "channels": self.channels, "estimates": self.estimates}


def table(results: list[CollectiveResult]) -> str:
    """nccl-tests' columns: size, time, algbw, busbw, plus the algorithm that ran and, where the system lists its
    library's protocols, the protocol."""
    protocols = any(r.protocol != "default" for r in results)
    lines = [f"{'bytes':>14} {'time (us)':>12} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}  "
             + (f"{'algorithm':<16} protocol" if protocols else "algorithm")]
    for r in results:
        lines.append(f"{r.size:>14,} {r.seconds * 1e6:>12.2f} {r.algbw / 1e9:>13.2f} {r.busbw / 1e9:>13.2f}  "
                     + (f"{r.algorithm:<16} {r.protocol}" if protocols else r.algorithm))
    return "\n".join(lines) + "\n"
