"""Schema version 1 of archs/*.yaml: turns the dict accelsim.arch.load read into checked Arch objects.

Every key has one spelling; every error names the file, the key path (`memory[1].bandwidth`) and
the value at fault. Invariant: build_arch returns only an Arch whose units, roles and sizes agree
(e.g. a systolic unit never claims more MACs per cycle than it has PEs).
"""
import difflib
import warnings
from dataclasses import replace

from accelsim.arch import units
from compiler.hardware import (
    SCHEMA_VERSION, Arch, ArchError, ComputeUnit, Dataflow, Interconnect, ArchKind, Link, MemoryLevel,
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


class _File:
    """The file being read, for messages: every error starts `<file>: <key path>: `."""

    def __init__(self, shown: str):
        self.shown = shown

    def error(self, path: str, message: str) -> ArchError:
        return ArchError(f"{self.shown}: {path or '(top level)'}: {message}")


def _at(path: str, key) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))


def _mapping(f: _File, value, path: str, required, optional=()) -> dict:
    allowed = (*required, *optional)
    if not isinstance(value, dict):
        raise f.error(path, f"{_what(value, path, 'a mapping')}; expected keys {', '.join(allowed)}")
    if not path and value and not any(key in allowed for key in value):   # another kind of file: its keys unshown
        raise f.error(path, f"the document has none of the keys {', '.join(allowed)}")
    for key in value:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise f.error(_at(path, key), f"unknown key {quoted(key)}; {hint}allowed: {', '.join(allowed)}")
    for key in required:
        if key not in value:
            raise f.error(_at(path, key), f"missing key {key!r} (required: {', '.join(required)})")
    return value


def _what(value, path: str, expected: str) -> str:
    """`<value> is not <expected>`: the whole document by its type only (a file that is one long string, a key or
    a token, is never quoted back), any other value quoted and cut short."""
    if path:
        return f"{quoted(value)} is not {expected}"
    return f"the document is not {expected} (it is {'empty' if value is None else f'a {type(value).__name__}'})"


def _list(f: _File, value, path: str) -> list:
    if not isinstance(value, list) or not value:
        raise f.error(path, _what(value, path, "a non-empty list"))
    return value


def _text(f: _File, value, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise f.error(path, f"{quoted(value)} is not a non-empty string")
    return value


def _count(f: _File, value, path: str, minimum: int = 1) -> int:
    try:
        n = units.parse_count(value)
    except units.UnitError as e:
        raise f.error(path, str(e)) from None
    if n < minimum:
        raise f.error(path, f"{quoted(value)} must be at least {minimum}")
    return n


def _quantity(f: _File, value, path: str, parse, positive: bool = True):
    try:
        x = parse(value)
    except units.UnitError as e:
        raise f.error(path, str(e)) from None
    if positive and x <= 0:
        raise f.error(path, f"{quoted(value)} must be greater than zero")
    return x


def _choice(f: _File, value, path: str, enum_cls, what: str):
    return enum_cls(_one_of(f, value, path, [m.value for m in enum_cls], what))


def _one_of(f: _File, value, path: str, names: list[str], what: str) -> str:
    if isinstance(value, str) and value in names:
        return value
    close = difflib.get_close_matches(str(value), names, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise f.error(path, f"unknown {what} {quoted(value)}; {hint}use one of {', '.join(names)}")


def _per_dtype(f: _File, value, path: str, parse_value) -> tuple:
    if not isinstance(value, dict) or not value:
        raise f.error(path, f"{quoted(value)} is not a mapping from dtype to value, e.g. {{int8: ...}}")
    return tuple((_choice(f, k, _at(path, k), DType, "dtype"), parse_value(v, _at(path, k))) for k, v in value.items())


# the most arch cycles one byte of a level, or one cycle of a unit, may take: a level that moves a byte per 2^32
# cycles (0.16 B/s at 700 MHz) is no memory, and the engine's cycles are int64: far slower hardware would wrap them
SLOWEST_CYCLES = 2 ** 32


def _not_too_slow(f: _File, value, path: str, per_s: float, clock_hz: float, what: str) -> None:
    """Refuse a rate of `per_s` (bytes or unit cycles per second) slower than one per SLOWEST_CYCLES arch cycles."""
    cycles = clock_hz / per_s          # a float: 7e8 / 1e-320 is inf, not an error
    if not cycles <= SLOWEST_CYCLES:
        raise f.error(path, f"{quoted(value)} is {cycles:.3g} arch cycles per {what} at the {clock_hz:.3g} Hz arch "
                            f"clock; at most 2^32 (4.3e9) are allowed")


def _latency(f: _File, value, path: str, clock_hz: float) -> tuple[float, int]:
    """(seconds, cycles at the arch clock) from `500 ns` or `28 cycles`."""
    if isinstance(value, str) and value.strip().endswith(("cycle", "cycles")):
        cycles = _quantity(f, value, path, units.parse_cycles, positive=False)
        _not_too_long(f, value, path, cycles, clock_hz)
        return cycles / clock_hz, cycles
    try:
        seconds = units.parse_time(value)
    except units.UnitError as e:
        raise f.error(path, f"{e} (or a whole number of `cycles` at the arch clock)") from None
    _not_too_long(f, value, path, seconds * clock_hz, clock_hz)
    return seconds, round(seconds * clock_hz)


def _not_too_long(f: _File, value, path: str, cycles: float, clock_hz: float) -> None:
    """Refuse a wait (a latency, a launch overhead) of more than SLOWEST_CYCLES arch cycles: `1e300 s` is no
    latency, and its cycles would not fit the engine's int64 (nor a float: 1e300 s x 700 MHz is inf)."""
    if not cycles <= SLOWEST_CYCLES:
        raise f.error(path, f"{quoted(value)} is {cycles:.3g} arch cycles at the {clock_hz:.3g} Hz arch clock; at "
                            f"most 2^32 (4.3e9, {SLOWEST_CYCLES / clock_hz:.3g} s) are allowed")


def _array(f: _File, value, path: str) -> SystolicArray:
    d = _mapping(f, value, path, _ARRAY, _ARRAY_OPTIONAL)
    extra = {k: _count(f, d[k], _at(path, k), minimum=0) for k in _ARRAY_OPTIONAL if k in d}
    array = SystolicArray(*(_count(f, d[k], _at(path, k)) for k in _ARRAY), **extra)
    if array.pes > BUILDABLE_PES:
        warnings.warn(ArchWarning(f"{f.shown}: {path}: a {array.rows:,} x {array.cols:,} array is {array.pes:,} PEs, "
                                  f"beyond any chip built ({BUILDABLE_PES:,}); the numbers are a thought experiment"),
                      stacklevel=2)
    return array


def _fills_array(f: _File, name, per_cycle, array: SystolicArray, path: str) -> None:
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
                f"{f.shown}: {_at(path, dtype.value)}: unit {quoted(name)} claims {n:,} MACs per cycle, which does "
                f"not match its {array.rows}x{array.cols} = {array.pes:,} PEs; a PE does one MAC per cycle, so "
                f"{dtype.value} should claim {want} (change macs_per_cycle with the array's rows and cols)"),
                stacklevel=3)


def _limits(f: _File, value, path: str) -> SimtLimits:
    d = _mapping(f, value, path, _LIMITS)
    counts = [_count(f, d[k], _at(path, k)) for k in _LIMITS[:-1]]
    warp, threads, _, registers = counts
    if threads % warp:
        raise f.error(_at(path, "threads"), f"{threads} resident threads are not a whole number of warps of "
                                            f"{warp} (warp); an SM holds whole warps")
    if registers < threads:
        raise f.error(_at(path, "registers"), f"{registers} registers cannot give each of the {threads} resident "
                                              f"threads one; an SM has at least a register per thread (GPUs: 32 to 64)")
    return SimtLimits(*counts, _quantity(f, d["shared_memory"], _at(path, "shared_memory"), units.parse_size))


def _micro_kernel(f: _File, value, path: str) -> MicroKernel:
    d = _mapping(f, value, path, _MICRO_KERNEL)
    counts = [_count(f, d[k], _at(path, k)) for k in _MICRO_KERNEL[:-1]]
    return MicroKernel(*counts, _quantity(f, d["register_bytes"], _at(path, "register_bytes"), units.parse_size))


def _unit(f: _File, value, path: str, kind: ArchKind, clock_hz: float) -> ComputeUnit:
    d = _mapping(f, value, path, _UNIT, _UNIT_OPTIONAL)
    role = _choice(f, d["role"], _at(path, "role"), UnitRole, "compute role")
    other = _BY_ROLE[UnitRole.vector if role is UnitRole.matrix else UnitRole.matrix]
    for key in _BY_ROLE[role]:
        if key not in d:
            raise f.error(_at(path, key), f"missing key {key!r} (required on a {role.value} unit)")
    for key in other + (("array", "dataflows") if role is UnitRole.vector else ()):
        if key in d:
            use = ", ".join(_BY_ROLE[role])
            raise f.error(_at(path, key), f"{key!r} is not allowed on a {role.value} unit (use {use})")
    per_key, energy_key = _BY_ROLE[role]
    per_cycle = _per_dtype(f, d[per_key], _at(path, per_key), lambda v, p: _count(f, v, p))
    energy = _per_dtype(f, d[energy_key], _at(path, energy_key), lambda v, p: _quantity(f, v, p, units.parse_energy))
    if [t for t, _ in energy] != [t for t, _ in per_cycle]:
        raise f.error(_at(path, energy_key), f"dtypes {[t.value for t, _ in energy]} must match {per_key} "
                                             f"{[t.value for t, _ in per_cycle]}, in the same order")
    kind_of = profile(kind)
    gemm = role is UnitRole.matrix
    allowed = kind_of.matrix_keys if gemm else kind_of.vector_keys
    for key in UNIT_KEYS:
        if key in d and key not in allowed:
            raise f.error(_at(path, key), f"{d[key]!r} makes no sense on a {kind.value} {role.value} unit")
        if key not in d and gemm and key in kind_of.required_matrix_keys:
            raise f.error(_at(path, key), f"missing key {key!r} (required on a {kind.value} matrix unit)")
    array = _array(f, d["array"], _at(path, "array")) if "array" in d else None
    if array is not None:
        for dtype, n in per_cycle:
            if n > array.pes:
                grid = f"{array.rows}x{array.cols} = {array.pes}"
                message = f"{n} MACs per cycle exceeds the {grid} PEs of the array"
                raise f.error(_at(_at(path, per_key), dtype.value), message)
        _fills_array(f, d["name"], per_cycle, array, _at(path, per_key))
    dataflows = ()
    if "dataflows" in d:
        flows_path = _at(path, "dataflows")
        flows = _list(f, d["dataflows"], flows_path)
        dataflows = tuple(_choice(f, v, _at(flows_path, i), Dataflow, "dataflow") for i, v in enumerate(flows))
        if len(set(dataflows)) != len(dataflows):
            raise f.error(_at(path, "dataflows"), f"{flows!r} lists a dataflow twice")
    unit_clock = _quantity(f, d["clock"], _at(path, "clock"), units.parse_frequency) if "clock" in d else clock_hz
    sustained = _sustained(f, d, path, unit_clock)
    for key, hz in (("clock", unit_clock), ("sustained_clock", sustained)):
        if key in d:
            _not_too_slow(f, d[key], _at(path, key), hz, clock_hz, "cycle of the unit")
    return ComputeUnit(
        name=_text(f, d["name"], _at(path, "name")),
        role=role,
        count=_count(f, d["count"], _at(path, "count")),
        clock_hz=unit_clock,
        sustained_clock_hz=sustained,
        per_cycle=per_cycle,
        energy=energy,
        array=array,
        dataflows=dataflows,
        limits=_limits(f, d["limits"], _at(path, "limits")) if "limits" in d else None,
        launch_overhead_s=_launch_overhead(f, d, path, clock_hz),
        pipeline_stages=_count(f, d["pipeline_stages"], _at(path, "pipeline_stages")) if "pipeline_stages" in d else 1,
        output_stage=_output_stage(f, d, path, kind, role),
        micro_kernel=_micro_kernel(f, d["micro_kernel"], _at(path, "micro_kernel")) if "micro_kernel" in d else None,
    )


def _launch_overhead(f: _File, d: dict, path: str, clock_hz: float) -> float:
    if "launch_overhead" not in d:
        return 0.0
    where = _at(path, "launch_overhead")
    seconds = _quantity(f, d["launch_overhead"], where, units.parse_time, positive=False)
    _not_too_long(f, d["launch_overhead"], where, seconds * clock_hz, clock_hz)
    return seconds


def _sustained(f: _File, d: dict, path: str, clock_hz: float) -> float:
    """The clock a unit holds under load (0: its clock); above its clock it is refused."""
    if "sustained_clock" not in d:
        return 0.0
    where = _at(path, "sustained_clock")
    hz = _quantity(f, d["sustained_clock"], where, units.parse_frequency)
    if hz > clock_hz:
        raise f.error(where, f"{d['sustained_clock']!r} is above the unit's clock ({clock_hz / 1e6:g} MHz): a clock "
                             f"under load is at most the boost clock")
    return hz


def _output_stage(f: _File, d: dict, path: str, kind: ArchKind, role: UnitRole) -> bool:
    if "output_stage" not in d:
        return False
    value, where = d["output_stage"], _at(path, "output_stage")
    if not isinstance(value, bool):
        raise f.error(where, f"{quoted(value)} is not true or false")
    if value and (role is not UnitRole.vector or "output_stage" not in profile(kind).vector_keys):
        raise f.error(where, f"only a vector unit beside a systolic or ternary array runs its epilogues as they "
                             f"leave it, not a {kind.value} {role.value} unit")
    return value


def _level(f: _File, value, path: str, clock_hz: float) -> MemoryLevel:
    d = _mapping(f, value, path, _LEVEL, ("instances", "write_port", "refill"))
    holds_path = _at(path, "holds")
    raw_holds = _list(f, d["holds"], holds_path)
    holds = tuple(_choice(f, v, _at(holds_path, i), Role, "role") for i, v in enumerate(raw_holds))
    if len(set(holds)) != len(holds):
        raise f.error(holds_path, f"{d['holds']!r} lists a role twice")
    latency_s, latency_cycles = _latency(f, d["latency"], _at(path, "latency"), clock_hz)
    level = MemoryLevel(
        name=_text(f, d["name"], _at(path, "name")),
        capacity_bytes=_quantity(f, d["capacity"], _at(path, "capacity"), units.parse_size),
        bandwidth_bytes_per_s=_quantity(f, d["bandwidth"], _at(path, "bandwidth"), units.parse_bandwidth),
        latency_s=latency_s,
        latency_cycles=latency_cycles,
        instances=_count(f, d.get("instances", 1), _at(path, "instances")),
        holds=holds,
        access_bytes=_quantity(f, d["access"], _at(path, "access"), units.parse_size),
        read_energy_j=_quantity(f, d["read_energy"], _at(path, "read_energy"), units.parse_energy),
        write_energy_j=_quantity(f, d["write_energy"], _at(path, "write_energy"), units.parse_energy),
    )
    _not_too_slow(f, d["bandwidth"], _at(path, "bandwidth"), level.bandwidth_bytes_per_s, clock_hz, "byte")
    if level.access_bytes > level.capacity_bytes:
        raise f.error(_at(path, "access"), f"{d['access']!r} is larger than the level's capacity {d['capacity']!r}")
    if "write_port" in d:
        port = _quantity(f, d["write_port"], _at(path, "write_port"), units.parse_bandwidth)
        _not_too_slow(f, d["write_port"], _at(path, "write_port"), port, clock_hz, "byte")
        if port >= level.bandwidth_bytes_per_s:
            raise f.error(_at(path, "write_port"), f"{d['write_port']!r} leaves no bandwidth for reads: the "
                          f"level's bandwidth {d['bandwidth']!r} is its reads and writes together")
        level = replace(level, write_port_bytes_per_s=port)
    if "refill" in d:
        level = replace(level, refill_per_tile=_choice_of(f, d["refill"], _at(path, "refill"), REFILLS) == "tile")
    return level


REFILLS = ("slot", "tile")      # a level's slot refilled whole (the default), or tile by tile (a FIFO)


def _choice_of(f: _File, value, path: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise f.error(path, f"{quoted(value)} is not one of {', '.join(allowed)}")
    return value


def _link(f: _File, value, path: str) -> Link:
    d = _mapping(f, value, path, _LINK, ("links",))
    return Link(
        bandwidth_bytes_per_s=_quantity(f, d["bandwidth"], _at(path, "bandwidth"), units.parse_bandwidth),
        latency_s=_quantity(f, d["latency"], _at(path, "latency"), units.parse_time, positive=False),
        links=_count(f, d.get("links", 1), _at(path, "links")),
    )


def _power(f: _File, value) -> Power:
    d = _mapping(f, value, "power", ("tdp",), ("idle",))
    tdp = _quantity(f, d["tdp"], "power.tdp", units.parse_power)
    idle = _quantity(f, d["idle"], "power.idle", units.parse_power, positive=False) if "idle" in d else None
    if idle is not None and idle > tdp:
        raise f.error("power.idle", f"{d['idle']!r} exceeds the TDP {d['tdp']!r}")
    return Power(tdp, idle)


def _check_memory(f: _File, raw: list, levels: tuple[MemoryLevel, ...]) -> None:
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
                raise f.error(_at(f"memory[{i}]", "capacity"),
                              f"{raw[i]['capacity']!r} per instance exceeds the {total} of {outer.name!r}, "
                              f"the next level out holding {role.value}; levels shrink inward")


def _unique(f: _File, items, path: str) -> None:
    seen = set()
    for i, item in enumerate(items):
        if item.name in seen:
            raise f.error(_at(_at(path, i), "name"), f"{item.name!r} is used twice")
        seen.add(item.name)


def build_arch(data, shown: str, source) -> Arch:
    """Check `data` (the YAML document) against schema version 1 and build the Arch."""
    f = _File(shown)
    if isinstance(data, dict) and "version" in data and data["version"] != SCHEMA_VERSION:
        version = data["version"]
        raise f.error("version", f"unsupported version {quoted(version)}; this accelsim reads version {SCHEMA_VERSION}")
    d = _mapping(f, data, "", _TOP, ("interconnect",))
    kind = PROFILES[_one_of(f, d["kind"], "kind", list(PROFILES), "kind")].kind
    clock_hz = _quantity(f, d["clock"], "clock", units.parse_frequency)
    raw_compute = _list(f, d["compute"], "compute")
    compute = tuple(_unit(f, v, f"compute[{i}]", kind, clock_hz) for i, v in enumerate(raw_compute))
    _unique(f, compute, "compute")
    roles = [u.role for u in compute]
    if UnitRole.matrix not in roles or roles.count(UnitRole.vector) != 1:
        listed = [r.value for r in roles]
        raise f.error("compute", f"roles {listed}: need at least one matrix unit and exactly one vector unit")
    needs = profile(kind).matrix_dtype
    if needs is not None and not any(u.supports(needs) for u in compute if u.role is UnitRole.matrix):
        raise f.error("compute", f"a {kind.value} arch needs a matrix unit with `{needs.value}` in macs_per_cycle")
    raw_memory = _list(f, d["memory"], "memory")
    memory = tuple(_level(f, v, f"memory[{i}]", clock_hz) for i, v in enumerate(raw_memory))
    _unique(f, memory, "memory")
    _check_memory(f, raw_memory, memory)
    links = _mapping(f, d.get("interconnect", {}), "interconnect", (), ("host", "chip_to_chip"))
    return Arch(
        name=_text(f, d["name"], "name"),
        kind=kind,
        description=_text(f, d["description"], "description"),
        clock_hz=clock_hz,
        compute=compute,
        memory=memory,
        interconnect=Interconnect(**{k: _link(f, v, f"interconnect.{k}") for k, v in links.items()}),
        power=_power(f, d["power"]),
        source_file=source,
    )
