"""Schema version 1 of archs/*.yaml: turns the dict accelsim.arch.load read into checked Arch objects.

Every key has one spelling; every error names the file, the key path (`memory[1].bandwidth`) and
the value at fault. Invariant: build_arch returns only an Arch whose units, roles and sizes agree
(e.g. a systolic unit never claims more MACs per cycle than it has PEs).
"""
import warnings
from dataclasses import replace

from accelsim.arch import units
from accelsim.arch.fields import YamlFile, as_count, as_enum, as_list, as_mapping, as_quantity, as_text, key_at, one_of
from compiler.hardware import (
    SCHEMA_VERSION, Arch, ComputeUnit, Dataflow, Interconnect, ArchKind, Link, MemoryLevel,
    MicroKernel, Power, SimtLimits, SystolicArray, UnitRole,
)
from compiler.dtypes import DType
from compiler.hardware.profiles import PROFILES, UNIT_KEYS, profile
from compiler.ir import Role
from compiler.references import quoted

# A generous ceiling on PEs in one systolic array: TPU v4's MXU has 16,384, a wafer-scale engine under a million
# cores. Past it an arch still loads, with a warning (ArchWarning).
BUILDABLE_PES = 1 << 24


class ArchWarning(UserWarning):
    """An arch that loads but describes hardware no one could build."""


_TOP = ("version", "name", "kind", "description", "clock", "compute", "memory", "power")
_UNIT = ("name", "role", "count")
_UNIT_OPTIONAL = ("clock", "macs_per_cycle", "mac_energy", "ops_per_cycle", "op_energy", "array", "dataflows", "limits",
                  "launch_overhead", "pipeline_stages", "micro_kernel", "output_stage", "sustained_clock")
_BY_ROLE = {UnitRole.matrix: ("macs_per_cycle", "mac_energy"), UnitRole.vector: ("ops_per_cycle", "op_energy")}
_ARRAY = ("rows", "cols", "accumulator_bits", "weight_buffers")
_ARRAY_OPTIONAL = ("io_registers", "accumulator_rows")
_LIMITS = ("warp", "threads", "blocks", "registers", "shared_memory")
_MICRO_KERNEL = ("rows", "cols", "register_rows", "register_bytes")
_LEVEL = ("name", "capacity", "bandwidth", "latency", "holds", "access", "read_energy", "write_energy")
_LINK = ("bandwidth", "latency")


def _per_dtype(f: YamlFile, value, path: str, parse_value) -> tuple:
    if not isinstance(value, dict) or not value:
        raise f.error(path, f"{quoted(value)} is not a mapping from dtype to value, e.g. {{int8: ...}}")
    return tuple((as_enum(f, k, key_at(path, k), DType, "dtype"), parse_value(v, key_at(path, k)))
                 for k, v in value.items())


# the most arch cycles one byte of a level, or one cycle of a unit, may take: a level that moves a byte per 2^32
# cycles (0.16 B/s at 700 MHz) is no memory, and the engine's cycles are int64: far slower hardware would wrap them
SLOWEST_CYCLES = 2 ** 32


def _not_too_slow(f: YamlFile, value, path: str, per_s: float, clock_hz: float, what: str) -> None:
    """Refuse a rate of `per_s` (bytes or unit cycles per second) slower than one per SLOWEST_CYCLES arch cycles."""
    cycles = clock_hz / per_s          # a float: 7e8 / 1e-320 is inf, not an error
    if not cycles <= SLOWEST_CYCLES:
        raise f.error(path, f"{quoted(value)} is {cycles:.3g} arch cycles per {what} at the {clock_hz:.3g} Hz arch "
                            f"clock; at most 2^32 (4.3e9) are allowed")


def _latency(f: YamlFile, value, path: str, clock_hz: float) -> tuple[float, int]:
    """(seconds, cycles at the arch clock) from `500 ns` or `28 cycles`."""
    if isinstance(value, str) and value.strip().endswith(("cycle", "cycles")):
        cycles = as_quantity(f, value, path, units.parse_cycles, positive=False)
        _not_too_long(f, value, path, cycles, clock_hz)
        return cycles / clock_hz, cycles
    try:
        seconds = units.parse_time(value)
    except units.UnitError as e:
        raise f.error(path, f"{e} (or a whole number of `cycles` at the arch clock)") from None
    _not_too_long(f, value, path, seconds * clock_hz, clock_hz)
    return seconds, round(seconds * clock_hz)


def _not_too_long(f: YamlFile, value, path: str, cycles: float, clock_hz: float) -> None:
    """Refuse a wait (a latency, a launch overhead) of more than SLOWEST_CYCLES arch cycles: `1e300 s` is no
    latency, and its cycles would not fit the engine's int64 (nor a float: 1e300 s x 700 MHz is inf)."""
    if not cycles <= SLOWEST_CYCLES:
        raise f.error(path, f"{quoted(value)} is {cycles:.3g} arch cycles at the {clock_hz:.3g} Hz arch clock; at "
                            f"most 2^32 (4.3e9, {SLOWEST_CYCLES / clock_hz:.3g} s) are allowed")


def _array(f: YamlFile, value, path: str) -> SystolicArray:
    d = as_mapping(f, value, path, _ARRAY, _ARRAY_OPTIONAL)
    extra = {k: as_count(f, d[k], key_at(path, k), minimum=0) for k in _ARRAY_OPTIONAL if k in d}
    array = SystolicArray(*(as_count(f, d[k], key_at(path, k)) for k in _ARRAY), **extra)
    if array.pes > BUILDABLE_PES:
        warnings.warn(ArchWarning(f"{f.shown}: {path}: a {array.rows:,} x {array.cols:,} array is {array.pes:,} PEs, "
                                  f"beyond any chip built ({BUILDABLE_PES:,}); the numbers are a thought experiment"),
                      stacklevel=2)
    return array


def _fills_array(f: YamlFile, name, per_cycle, array: SystolicArray, path: str) -> None:
    """Warn where a unit's MACs per cycle leave PEs of its array idle. A PE does one MAC of the unit's fastest dtype
    per cycle, so that dtype claims rows x cols; a wider one a power-of-two share of it (a PE taking 2, 4, ... cycles
    per MAC: TPU v1's int16 at a quarter of its int8 rate, npu4's fp16 at half). A 32x32 preset copied and grown
    to 64x64 but left claiming 1024 would otherwise run at a quarter of its array, silently."""
    fastest = max(n for _, n in per_cycle)
    for dtype, n in per_cycle:
        share = array.pes // n
        if (n == fastest and n != array.pes) or array.pes % n or share & (share - 1):
            want = f"{array.pes:,}" if n == fastest else f"{array.pes:,} divided by a power of two"
            warnings.warn(ArchWarning(
                f"{f.shown}: {key_at(path, dtype.value)}: unit {quoted(name)} claims {n:,} MACs per cycle, which does "
                f"not match its {array.rows}x{array.cols} = {array.pes:,} PEs; a PE does one MAC per cycle, so "
                f"{dtype.value} should claim {want} (change macs_per_cycle with the array's rows and cols)"),
                stacklevel=3)


def _limits(f: YamlFile, value, path: str) -> SimtLimits:
    d = as_mapping(f, value, path, _LIMITS)
    counts = [as_count(f, d[k], key_at(path, k)) for k in _LIMITS[:-1]]
    warp, threads, _, registers = counts
    if threads % warp:
        raise f.error(key_at(path, "threads"), f"{threads} resident threads are not a whole number of warps of "
                                            f"{warp} (warp); an SM holds whole warps")
    if registers < threads:
        raise f.error(key_at(path, "registers"), f"{registers} registers cannot give each of the {threads} resident "
                                              f"threads one; an SM has at least a register per thread (GPUs: 32 to 64)")
    return SimtLimits(*counts, as_quantity(f, d["shared_memory"], key_at(path, "shared_memory"), units.parse_size))


def _micro_kernel(f: YamlFile, value, path: str) -> MicroKernel:
    d = as_mapping(f, value, path, _MICRO_KERNEL)
    counts = [as_count(f, d[k], key_at(path, k)) for k in _MICRO_KERNEL[:-1]]
    return MicroKernel(*counts, as_quantity(f, d["register_bytes"], key_at(path, "register_bytes"), units.parse_size))


def _unit(f: YamlFile, value, path: str, kind: ArchKind, clock_hz: float) -> ComputeUnit:
    d = as_mapping(f, value, path, _UNIT, _UNIT_OPTIONAL)
    role = as_enum(f, d["role"], key_at(path, "role"), UnitRole, "compute role")
    other = _BY_ROLE[UnitRole.vector if role is UnitRole.matrix else UnitRole.matrix]
    for key in _BY_ROLE[role]:
        if key not in d:
            raise f.error(key_at(path, key), f"missing key {key!r} (required on a {role.value} unit)")
    for key in other + (("array", "dataflows") if role is UnitRole.vector else ()):
        if key in d:
            use = ", ".join(_BY_ROLE[role])
            raise f.error(key_at(path, key), f"{key!r} is not allowed on a {role.value} unit (use {use})")
    per_key, energy_key = _BY_ROLE[role]
    per_cycle = _per_dtype(f, d[per_key], key_at(path, per_key), lambda v, p: as_count(f, v, p))
    energy = _per_dtype(f, d[energy_key], key_at(path, energy_key),
                        lambda v, p: as_quantity(f, v, p, units.parse_energy))
    if [t for t, _ in energy] != [t for t, _ in per_cycle]:
        raise f.error(key_at(path, energy_key), f"dtypes {[t.value for t, _ in energy]} must match {per_key} "
                                             f"{[t.value for t, _ in per_cycle]}, in the same order")
    kind_of = profile(kind)
    gemm = role is UnitRole.matrix
    allowed = kind_of.matrix_keys if gemm else kind_of.vector_keys
    for key in UNIT_KEYS:
        if key in d and key not in allowed:
            raise f.error(key_at(path, key), f"{d[key]!r} makes no sense on a {kind.value} {role.value} unit")
        if key not in d and gemm and key in kind_of.required_matrix_keys:
            raise f.error(key_at(path, key), f"missing key {key!r} (required on a {kind.value} matrix unit)")
    array = _array(f, d["array"], key_at(path, "array")) if "array" in d else None
    if array is not None:
        for dtype, n in per_cycle:
            if n > array.pes:
                grid = f"{array.rows}x{array.cols} = {array.pes}"
                message = f"{n} MACs per cycle exceeds the {grid} PEs of the array"
                raise f.error(key_at(key_at(path, per_key), dtype.value), message)
        _fills_array(f, d["name"], per_cycle, array, key_at(path, per_key))
    dataflows = ()
    if "dataflows" in d:
        flows_path = key_at(path, "dataflows")
        flows = as_list(f, d["dataflows"], flows_path)
        dataflows = tuple(as_enum(f, v, key_at(flows_path, i), Dataflow, "dataflow") for i, v in enumerate(flows))
        if len(set(dataflows)) != len(dataflows):
            raise f.error(key_at(path, "dataflows"), f"{flows!r} lists a dataflow twice")
    unit_clock = as_quantity(f, d["clock"], key_at(path, "clock"), units.parse_frequency) if "clock" in d else clock_hz
    sustained = _sustained(f, d, path, unit_clock)
    for key, hz in (("clock", unit_clock), ("sustained_clock", sustained)):
        if key in d:
            _not_too_slow(f, d[key], key_at(path, key), hz, clock_hz, "cycle of the unit")
    return ComputeUnit(
        name=as_text(f, d["name"], key_at(path, "name")),
        role=role,
        count=as_count(f, d["count"], key_at(path, "count")),
        clock_hz=unit_clock,
        sustained_clock_hz=sustained,
        per_cycle=per_cycle,
        energy=energy,
        array=array,
        dataflows=dataflows,
        limits=_limits(f, d["limits"], key_at(path, "limits")) if "limits" in d else None,
        launch_overhead_s=_launch_overhead(f, d, path, clock_hz),
        pipeline_stages=(as_count(f, d["pipeline_stages"], key_at(path, "pipeline_stages"))
                         if "pipeline_stages" in d else 1),
        output_stage=_output_stage(f, d, path, kind, role),
        micro_kernel=_micro_kernel(f, d["micro_kernel"], key_at(path, "micro_kernel")) if "micro_kernel" in d else None,
    )


def _launch_overhead(f: YamlFile, d: dict, path: str, clock_hz: float) -> float:
    if "launch_overhead" not in d:
        return 0.0
    where = key_at(path, "launch_overhead")
    seconds = as_quantity(f, d["launch_overhead"], where, units.parse_time, positive=False)
    _not_too_long(f, d["launch_overhead"], where, seconds * clock_hz, clock_hz)
    return seconds


def _sustained(f: YamlFile, d: dict, path: str, clock_hz: float) -> float:
    """The clock a unit holds under load (0: its clock); above its clock it is refused."""
    if "sustained_clock" not in d:
        return 0.0
    where = key_at(path, "sustained_clock")
    hz = as_quantity(f, d["sustained_clock"], where, units.parse_frequency)
    if hz > clock_hz:
        raise f.error(where, f"{d['sustained_clock']!r} is above the unit's clock ({clock_hz / 1e6:g} MHz): a clock "
                             f"under load is at most the boost clock")
    return hz


def _output_stage(f: YamlFile, d: dict, path: str, kind: ArchKind, role: UnitRole) -> bool:
    if "output_stage" not in d:
        return False
    value, where = d["output_stage"], key_at(path, "output_stage")
    if not isinstance(value, bool):
        raise f.error(where, f"{quoted(value)} is not true or false")
    if value and (role is not UnitRole.vector or "output_stage" not in profile(kind).vector_keys):
        raise f.error(where, f"only a vector unit beside a systolic or ternary array runs its epilogues as they "
                             f"leave it, not a {kind.value} {role.value} unit")
    return value


def _level(f: YamlFile, value, path: str, clock_hz: float) -> MemoryLevel:
    d = as_mapping(f, value, path, _LEVEL, ("instances", "write_port", "refill"))
    holds_path = key_at(path, "holds")
    raw_holds = as_list(f, d["holds"], holds_path)
    holds = tuple(as_enum(f, v, key_at(holds_path, i), Role, "role") for i, v in enumerate(raw_holds))
    if len(set(holds)) != len(holds):
        raise f.error(holds_path, f"{d['holds']!r} lists a role twice")
    latency_s, latency_cycles = _latency(f, d["latency"], key_at(path, "latency"), clock_hz)
    level = MemoryLevel(
        name=as_text(f, d["name"], key_at(path, "name")),
        capacity_bytes=as_quantity(f, d["capacity"], key_at(path, "capacity"), units.parse_size),
        bandwidth_bytes_per_s=as_quantity(f, d["bandwidth"], key_at(path, "bandwidth"), units.parse_bandwidth),
        latency_s=latency_s,
        latency_cycles=latency_cycles,
        instances=as_count(f, d.get("instances", 1), key_at(path, "instances")),
        holds=holds,
        access_bytes=as_quantity(f, d["access"], key_at(path, "access"), units.parse_size),
        read_energy_j=as_quantity(f, d["read_energy"], key_at(path, "read_energy"), units.parse_energy),
        write_energy_j=as_quantity(f, d["write_energy"], key_at(path, "write_energy"), units.parse_energy),
    )
    _not_too_slow(f, d["bandwidth"], key_at(path, "bandwidth"), level.bandwidth_bytes_per_s, clock_hz, "byte")
    if level.access_bytes > level.capacity_bytes:
        raise f.error(key_at(path, "access"), f"{d['access']!r} is larger than the level's capacity {d['capacity']!r}")
    if "write_port" in d:
        port = as_quantity(f, d["write_port"], key_at(path, "write_port"), units.parse_bandwidth)
        _not_too_slow(f, d["write_port"], key_at(path, "write_port"), port, clock_hz, "byte")
        if port >= level.bandwidth_bytes_per_s:
            raise f.error(key_at(path, "write_port"), f"{d['write_port']!r} leaves no bandwidth for reads: the "
                          f"level's bandwidth {d['bandwidth']!r} is its reads and writes together")
        level = replace(level, write_port_bytes_per_s=port)
    if "refill" in d:
        level = replace(level, refill_per_tile=_choice_of(f, d["refill"], key_at(path, "refill"), REFILLS) == "tile")
    return level


REFILLS = ("slot", "tile")      # a level's slot refilled whole (the default), or tile by tile (a FIFO)


def _choice_of(f: YamlFile, value, path: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise f.error(path, f"{quoted(value)} is not one of {', '.join(allowed)}")
    return value


def _link(f: YamlFile, value, path: str) -> Link:
    d = as_mapping(f, value, path, _LINK, ("links",))
    return Link(
        bandwidth_bytes_per_s=as_quantity(f, d["bandwidth"], key_at(path, "bandwidth"), units.parse_bandwidth),
        latency_s=as_quantity(f, d["latency"], key_at(path, "latency"), units.parse_time, positive=False),
        links=as_count(f, d.get("links", 1), key_at(path, "links")),
    )


def _power(f: YamlFile, value) -> Power:
    d = as_mapping(f, value, "power", ("tdp",), ("idle",))
    tdp = as_quantity(f, d["tdp"], "power.tdp", units.parse_power)
    idle = as_quantity(f, d["idle"], "power.idle", units.parse_power, positive=False) if "idle" in d else None
    if idle is not None and idle > tdp:
        raise f.error("power.idle", f"{d['idle']!r} exceeds the TDP {d['tdp']!r}")
    return Power(tdp, idle)


def _check_memory(f: YamlFile, raw: list, levels: tuple[MemoryLevel, ...]) -> None:
    """Every role has a home, and along each role's path a level fits inside the one outside it."""
    for role in Role:
        path = [(i, level) for i, level in enumerate(levels) if role in level.holds]
        if not path:
            raise f.error("memory", f"no level holds {role.value} operands; add {role.value!r} to some level's holds")
        # Per instance against the outer level's total: 132 SMs' shared memories together may exceed
        # nothing in particular, but one of them must fit in the L2 it is filled from.
        for (o, outer), (i, inner) in zip(path, path[1:]):
            if inner.capacity_bytes > outer.capacity_total:
                total = repr(raw[o]["capacity"])
                if outer.instances > 1:
                    total = f"{outer.instances} x {total}"
                raise f.error(key_at(f"memory[{i}]", "capacity"),
                              f"{raw[i]['capacity']!r} per instance exceeds the {total} of {outer.name!r}, "
                              f"the next level out holding {role.value}; levels shrink inward")


def _unique(f: YamlFile, items, path: str) -> None:
    seen = set()
    for i, item in enumerate(items):
        if item.name in seen:
            raise f.error(key_at(key_at(path, i), "name"), f"{item.name!r} is used twice")
        seen.add(item.name)


def build_arch(data, shown: str, source) -> Arch:
    """Check `data` (the YAML document) against schema version 1 and build the Arch."""
    f = YamlFile(shown)
    if isinstance(data, dict) and "version" in data and data["version"] != SCHEMA_VERSION:
        version = data["version"]
        raise f.error("version", f"unsupported version {quoted(version)}; this accelsim reads version {SCHEMA_VERSION}")
    d = as_mapping(f, data, "", _TOP, ("interconnect",))
    kind = PROFILES[one_of(f, d["kind"], "kind", list(PROFILES), "kind")].kind
    clock_hz = as_quantity(f, d["clock"], "clock", units.parse_frequency)
    raw_compute = as_list(f, d["compute"], "compute")
    compute = tuple(_unit(f, v, f"compute[{i}]", kind, clock_hz) for i, v in enumerate(raw_compute))
    _unique(f, compute, "compute")
    roles = [u.role for u in compute]
    if UnitRole.matrix not in roles or roles.count(UnitRole.vector) != 1:
        listed = [r.value for r in roles]
        raise f.error("compute", f"roles {listed}: need at least one matrix unit and exactly one vector unit")
    needs = profile(kind).matrix_dtype
    if needs is not None and not any(u.supports(needs) for u in compute if u.role is UnitRole.matrix):
        raise f.error("compute", f"a {kind.value} arch needs a matrix unit with `{needs.value}` in macs_per_cycle")
    raw_memory = as_list(f, d["memory"], "memory")
    memory = tuple(_level(f, v, f"memory[{i}]", clock_hz) for i, v in enumerate(raw_memory))
    _unique(f, memory, "memory")
    _check_memory(f, raw_memory, memory)
    links = as_mapping(f, d.get("interconnect", {}), "interconnect", (), ("host", "chip_to_chip"))
    return Arch(
        name=as_text(f, d["name"], "name"),
        kind=kind,
        description=as_text(f, d["description"], "description"),
        clock_hz=clock_hz,
        compute=compute,
        memory=memory,
        interconnect=Interconnect(**{k: _link(f, v, f"interconnect.{k}") for k, v in links.items()}),
        power=_power(f, d["power"]),
        source_file=source,
    )
