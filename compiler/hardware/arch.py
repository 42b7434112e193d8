"""The typed, frozen objects a hardware description becomes: Arch, ComputeUnit, MemoryLevel and enums.

Everything downstream of accelsim.arch.load sees these, never strings or dicts. Invariant: an Arch has
passed every check in accelsim.arch.schema.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from pathlib import Path

from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.ir import Role

SCHEMA_VERSION = 1


class ArchError(UserError):
    """A hardware description that cannot be read: names the file, the key path and the value."""


class ArchKind(enum.Enum):
    """The compute model an arch is simulated with."""

    simd = "simd"
    simt = "simt"
    systolic = "systolic"
    ternary = "ternary"


class Dataflow(enum.Enum):
    """What stays put in a systolic array's PEs (upper case: `is` is a Python keyword)."""

    WS = "ws"  # weights stay in the PEs, activations flow east, partial sums flow south
    OS = "os"  # each PE accumulates one output; weights and activations both flow
    IS = "is"  # activations stay; weights flow, partial sums flow


class UnitRole(enum.Enum):
    """Which IR ops a compute unit runs: `matrix` runs Einsums, `vector` runs Map/Reduce/Move."""

    matrix = "matrix"
    vector = "vector"


@dataclass(frozen=True)
class SystolicArray:
    """The PE grid of a systolic or ternary matrix unit."""

    rows: int
    cols: int
    accumulator_bits: int  # width of the partial sums held in / leaving the array
    weight_buffers: int  # weight tiles the PEs hold: 2 = double-buffered (load next while computing)
    io_registers: int = 0  # pipeline registers beyond skew and drain (rtl/systolic_core.v: input, de-skew, accumulator)
    accumulator_rows: int = 0  # output rows the accumulators hold: the most rows one WS tile streams (0: no limit)

    @property
    def pes(self) -> int:
        return self.rows * self.cols


@dataclass(frozen=True)
class SimtLimits:
    """Per-SM occupancy limits of a SIMT unit (one instance = one SM)."""

    warp: int  # threads per warp
    threads: int  # resident threads per SM
    blocks: int  # resident blocks per SM
    registers: int  # 32-bit registers per SM
    shared_memory_bytes: int  # largest shared-memory carveout per SM


@dataclass(frozen=True)
class MicroKernel:
    """A CPU GEMM micro-kernel: C accumulators in a rows x cols grid of registers, each register
    `register_rows` x `register_bytes` (an AVX-512 zmm is 1 x 64 B, an AMX tile 16 x 64 B)."""

    rows: int
    cols: int
    register_rows: int
    register_bytes: int


@dataclass(frozen=True)
class ComputeUnit:
    """One kind of compute unit, instantiated `count` times per chip.

    `per_cycle` is MACs per cycle per instance for a matrix unit and element ops per cycle
    (an FMA counts once) for a vector unit; a dtype absent from it is unsupported.
    `energy` is joules per MAC (matrix) or per op (vector), per dtype. `launch_overhead_s` is paid
    once per kernel (a GPU launch); `pipeline_stages` is how many K-tiles a SIMT GEMM kernel stages in
    shared memory (1: no overlap of loads with MMAs). `sustained_clock_hz` is the clock the unit holds through a
    long dense kernel under the board's power limit (0: `clock_hz`); work is priced at it, the peak is quoted at
    `clock_hz`.
    """

    name: str
    role: UnitRole
    count: int
    clock_hz: float
    per_cycle: tuple[tuple[DType, int], ...]
    energy: tuple[tuple[DType, float], ...]
    array: SystolicArray | None = None
    dataflows: tuple[Dataflow, ...] = ()
    limits: SimtLimits | None = None
    launch_overhead_s: float = 0.0
    pipeline_stages: int = 1
    micro_kernel: MicroKernel | None = None
    # a vector unit that runs the fused epilogues of a systolic array's kernels beside it, on the results as they
    # leave the array (TPU v1's activation pipeline after the accumulators), rather than after the kernel's tiles
    output_stage: bool = False
    sustained_clock_hz: float = 0.0

    @property
    def working_clock_hz(self) -> float:
        """The clock work is priced at: the sustained clock where the YAML gives one, else the clock."""
        return self.sustained_clock_hz or self.clock_hz

    @property
    def dtypes(self) -> tuple[DType, ...]:
        return tuple(dtype for dtype, _ in self.per_cycle)

    def supports(self, dtype: DType) -> bool:
        return dtype in self.dtypes

    def peak_per_cycle(self, dtype: DType) -> int:
        """MACs (or ops) per cycle of one instance; ArchError if the dtype is unsupported."""
        for d, n in self.per_cycle:
            if d is dtype:
                return n
        supported = ", ".join(d.value for d in self.dtypes)
        raise ArchError(f"compute unit {self.name!r} does not support {dtype.value} (supports {supported})")

    def peak_per_second(self, dtype: DType) -> float:
        """MACs (or ops) per second of all instances: count x per-cycle x clock."""
        return self.count * self.peak_per_cycle(dtype) * self.clock_hz

    def energy_per_action(self, dtype: DType) -> float:
        """Joules per MAC (matrix) or per op (vector) in `dtype`."""
        self.peak_per_cycle(dtype)  # raises for an unsupported dtype
        return dict(self.energy)[dtype]


@dataclass(frozen=True)
class MemoryLevel:
    """One memory level, `instances` copies of it (e.g. one shared memory per SM)."""

    name: str
    capacity_bytes: int  # per instance
    bandwidth_bytes_per_s: float  # per instance
    latency_s: float
    latency_cycles: int  # at the arch clock
    instances: int
    holds: tuple[Role, ...]  # which operands tiles of this level may hold
    access_bytes: int  # bytes moved by one access, the unit the energies are priced in
    read_energy_j: float  # per access
    write_energy_j: float  # per access
    # per instance; 0: reads and writes share one channel at `bandwidth_bytes_per_s`; else writes (stores) have a
    # port of their own at this bandwidth and reads the rest (TPU v1's Unified Buffer: a row read and a row
    # written per cycle), so a store waiting for its compute never holds back the next tile's loads
    write_port_bytes_per_s: float = 0.0
    # True: a load that fills a slot with several tiles the level below takes lands them one by one, each into
    # the place the slot's previous tile of the same rank left (a FIFO: TPU v1's weight FIFO); False: a slot
    # is refilled whole, once all of its tiles have been taken
    refill_per_tile: bool = False

    @property
    def capacity_total(self) -> int:
        return self.capacity_bytes * self.instances

    @property
    def bandwidth_total(self) -> float:
        return self.bandwidth_bytes_per_s * self.instances

    def energy_per_byte(self, write: bool = False) -> float:
        return (self.write_energy_j if write else self.read_energy_j) / self.access_bytes


@dataclass(frozen=True)
class Link:
    """An off-chip link: `bandwidth` is the published aggregate over its `links` lanes."""

    bandwidth_bytes_per_s: float
    latency_s: float
    links: int = 1


@dataclass(frozen=True)
class Interconnect:
    """Links to the host and to peer chips; None where the target has none."""

    host: Link | None = None
    chip_to_chip: Link | None = None


@dataclass(frozen=True)
class Power:
    """Board or chip power envelope."""

    tdp_w: float
    idle_w: float | None = None


@dataclass(frozen=True)
class Arch:
    """A whole target: compute units, memory levels from DRAM inward, links and power."""

    name: str
    kind: ArchKind
    description: str
    clock_hz: float
    compute: tuple[ComputeUnit, ...]
    memory: tuple[MemoryLevel, ...]
    interconnect: Interconnect
    power: Power
    source_file: Path

    @property
    def matrix_units(self) -> tuple[ComputeUnit, ...]:
        return tuple(u for u in self.compute if u.role is UnitRole.matrix)

    @property
    def matrix(self) -> ComputeUnit:
        """The first matrix unit, the one running the native dtype."""
        return self.matrix_units[0]

    @property
    def vector(self) -> ComputeUnit:
        return next(u for u in self.compute if u.role is UnitRole.vector)

    @property
    def dtypes(self) -> tuple[DType, ...]:
        """Dtypes some matrix unit supports, in file order; the first is the native default."""
        seen: dict[DType, None] = {}
        for unit in self.matrix_units:
            seen.update(dict.fromkeys(unit.dtypes))
        return tuple(seen)

    @property
    def native_dtype(self) -> DType:
        return self.dtypes[0]

    def matrix_for(self, dtype: DType) -> ComputeUnit:
        """The matrix unit with the highest peak in `dtype` (e.g. H100 fp32 runs on CUDA cores)."""
        units = [u for u in self.matrix_units if u.supports(dtype)]
        if not units:
            supported = ", ".join(d.value for d in self.dtypes)
            raise ArchError(f"{self.name}: no matrix unit supports {dtype.value} (supports {supported})")
        return max(units, key=lambda u: u.peak_per_second(dtype))

    def levels_holding(self, role: Role) -> tuple[MemoryLevel, ...]:
        """Levels that may hold operands of `role`, from DRAM inward: the path its tiles take."""
        return tuple(level for level in self.memory if role in level.holds)

    def level(self, name: str) -> MemoryLevel:
        for level in self.memory:
            if level.name == name:
                return level
        raise ArchError(f"{self.name}: no memory level {name!r} (levels: {', '.join(l.name for l in self.memory)})")

    def cycles(self, seconds: float) -> int:
        """Whole arch-clock cycles covering `seconds`."""
        return math.ceil(seconds * self.clock_hz - 1e-9)
