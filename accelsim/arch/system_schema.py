"""Schema version 1 of archs/systems/*.yaml (`kind: system`): the dict accelsim.arch.system_load read, checked
and turned into a System.

Same rules as arch files (accelsim.arch.schema; both read fields with accelsim.arch.fields): one spelling per
key, units explicit, every error names the file, the key path (`levels[1].bandwidth`) and the value. Invariant:
build_system returns only a System whose levels nest (each level's group a multiple of the one inside it), whose
tori multiply out, whose links carry data (bandwidth > 0) and whose default and largest device counts fit the
hierarchy.
"""
from __future__ import annotations

import math

from accelsim.arch import units
from compiler.hardware import SCHEMA_VERSION, ArchError
from accelsim.arch.fields import YamlFile, as_count, as_enum, as_list, as_mapping, as_quantity, as_text, key_at
from accelsim.arch.system import DeviceCount, LinkLevel, Protocol, System, Topology, parse_shape
from compiler.errors import UserError
from compiler.references import quoted

_TOP = ("version", "kind", "name", "description", "device", "devices", "levels")
_DEVICES = ("default",)
_DEVICES_OPTIONAL = ("min", "max")
_LEVEL = ("name", "topology", "bandwidth", "latency")
_LEVEL_OPTIONAL = ("devices", "links", "nics", "shape", "efficiency", "in_network_reduction", "reduction_efficiency",
                   "reduction_latency", "wrap", "wrap_multiple")
_PROTOCOL = ("name", "overhead")
_PROTOCOL_OPTIONAL = ("latency_scale", "efficiency", "algorithms")
_REDUCING = (Topology.switch, Topology.fat_tree)   # where a switch can add (NVSwitch NVLS, InfiniBand SHARP)


def build_system(data, shown: str, source, load_device) -> System:
    """Check `data` (the YAML document) and build the System; `load_device(name)` loads the device it names (a
    preset, or a file found from the system file's folder: accelsim.arch.reference)."""
    f = YamlFile(shown)
    if isinstance(data, dict) and "version" in data and data["version"] != SCHEMA_VERSION:
        raise f.error("version", f"unsupported version {quoted(data['version'])}; this accelsim reads version "
                                 f"{SCHEMA_VERSION}")
    d = as_mapping(f, data, "", _TOP, ("overhead", "algorithms", "protocols"))
    if d["kind"] != "system":
        raise f.error("kind", f"{quoted(d['kind'])} in a system file; write `kind: system` (a device is an arch "
                              f"file in archs/)")
    try:
        device = load_device(as_text(f, d["device"], "device"))
    except ArchError as e:
        raise f.error("device", str(e)) from None
    raw_levels = as_list(f, d["levels"], "levels")
    levels, below = [], 1
    for i, raw in enumerate(raw_levels):
        level = _level(f, raw, f"levels[{i}]", below, outermost=i == len(raw_levels) - 1)
        levels.append(level)
        below = level.devices or below
    names = [level.name for level in levels]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise f.error(f"levels[{i}].name", f"{name!r} is used twice")
    if "protocols" in d and "overhead" in d:
        raise f.error("overhead", "give the overhead of each protocol under `protocols`, not both")
    overhead = as_quantity(f, d["overhead"], "overhead", units.parse_time, positive=False) if "overhead" in d else 0.0
    protocols = _protocols(f, d["protocols"]) if "protocols" in d else (Protocol("default", overhead),)
    system = System(
        name=as_text(f, d["name"], "name"),
        description=as_text(f, d["description"], "description"),
        device=device,
        devices=_devices(f, d["devices"], levels),
        levels=tuple(levels),
        overhead_s=protocols[0].overhead_s,
        source_file=source,
        algorithms=_algorithms(f, d["algorithms"], "algorithms") if "algorithms" in d else None,
        protocols=protocols,
    )
    for key in ("default", "max"):
        n = getattr(system.devices, {"max": "maximum"}.get(key, key))
        if n is not None:
            try:
                system.fit(n)
            except UserError as e:
                raise f.error(f"devices.{key}", f"{n}: {str(e).split(': ', 1)[1]}") from None
    return system


def _devices(f: YamlFile, value, levels: list[LinkLevel]) -> DeviceCount:
    d = as_mapping(f, value, "devices", _DEVICES, _DEVICES_OPTIONAL)
    default = as_count(f, d["default"], "devices.default")
    minimum = as_count(f, d.get("min", 2), "devices.min")
    top = levels[-1].devices
    maximum = as_count(f, d["max"], "devices.max") if "max" in d else top
    if top is not None and maximum is not None and maximum > top:
        raise f.error("devices.max", f"{maximum} exceeds the {top} devices of the outermost level "
                                     f"{levels[-1].name!r}")
    if maximum is not None and not minimum <= default <= maximum:
        raise f.error("devices.default", f"{default} is outside min {minimum} .. max {maximum}")
    if default < minimum:
        raise f.error("devices.default", f"{default} is below min {minimum}")
    return DeviceCount(default, minimum, maximum)


def _level(f: YamlFile, value, path: str, below: int, outermost: bool) -> LinkLevel:
    d = as_mapping(f, value, path, _LEVEL, _LEVEL_OPTIONAL)
    topology = as_enum(f, d["topology"], key_at(path, "topology"), Topology, "topology")
    dims = topology.dims
    torus = dims > 1
    for key, allowed in (("shape", torus), ("wrap", torus), ("wrap_multiple", torus),
                         ("in_network_reduction", topology in _REDUCING), ("nics", below > 1)):
        if key in d and not allowed:
            raise f.error(key_at(path, key), f"{d[key]!r} makes no sense on a {topology.value} level"
                          + (" inside no other level (give links per device)" if key == "nics" else ""))
    for key in ("reduction_efficiency", "reduction_latency"):
        if key in d and d.get("in_network_reduction") is not True:
            raise f.error(key_at(path, key), f"{d[key]!r} needs `in_network_reduction: true` on the level")
    if ("links" in d) == ("nics" in d):
        raise f.error(path, "give exactly one of `links` (per device) or `nics` (per group of the level below)")
    shape = _shape(f, d["shape"], key_at(path, "shape"), dims) if "shape" in d else ()
    if torus and not shape:
        raise f.error(key_at(path, "shape"), f"missing key 'shape' (required on a {topology.value} level, e.g. "
                                          f"{'x'.join(['4'] * dims)})")
    devices = _group(f, d, path, below, shape, outermost)
    if topology is Topology.ring:
        shape = (devices // below,) if devices else ()
    if "links" in d:
        ports = float(as_count(f, d["links"], key_at(path, "links")))
        if dims and ports % (2 * dims):
            raise f.error(key_at(path, "links"), f"{d['links']!r} links cannot be spread over the {2 * dims} "
                                              f"neighbours of a {topology.value}; give a multiple of {2 * dims}")
    else:
        ports = as_count(f, d["nics"], key_at(path, "nics")) / below
    return LinkLevel(
        name=as_text(f, d["name"], key_at(path, "name")),
        topology=topology,
        devices=devices,
        ports=ports,
        bandwidth_bytes_per_s=as_quantity(f, d["bandwidth"], key_at(path, "bandwidth"), units.parse_bandwidth),
        latency_s=as_quantity(f, d["latency"], key_at(path, "latency"), units.parse_time, positive=False),
        efficiency=_fraction(f, d.get("efficiency", 1.0), key_at(path, "efficiency")),
        in_network_reduction=_flag(f, d.get("in_network_reduction", False), key_at(path, "in_network_reduction")),
        reduction_efficiency=_fraction(f, d.get("reduction_efficiency", 1.0), key_at(path, "reduction_efficiency")),
        reduction_latency_s=as_quantity(f, d["reduction_latency"], key_at(path, "reduction_latency"), units.parse_time,
                                      positive=False) if "reduction_latency" in d else 0.0,
        shape=shape,
        wrap=_flag(f, d.get("wrap", True), key_at(path, "wrap")),
        wrap_multiple=as_count(f, d.get("wrap_multiple", 1), key_at(path, "wrap_multiple")),
    )


def _group(f: YamlFile, d: dict, path: str, below: int, shape: tuple[int, ...], outermost: bool) -> int | None:
    """Devices per group at this level: as written, or from a torus shape; None on an open outermost level."""
    if "devices" not in d:
        if shape:
            return below * math.prod(shape)
        if not outermost:
            raise f.error(key_at(path, "devices"), "missing key 'devices' (devices per group; only the outermost "
                                                "level may leave it open)")
        return None
    devices = as_count(f, d["devices"], key_at(path, "devices"), minimum=2)
    if devices <= below or devices % below:
        raise f.error(key_at(path, "devices"), f"{devices} must be a multiple of the {below} devices per group of "
                                            f"the level inside it, and larger")
    if shape and below * math.prod(shape) != devices:
        shown = "x".join(str(s) for s in shape)
        raise f.error(key_at(path, "shape"), f"{shown} is {math.prod(shape)} groups of {below}, "
                                          f"{below * math.prod(shape)} devices, not the level's {devices}")
    return devices


def _shape(f: YamlFile, value, path: str, dims: int) -> tuple[int, ...]:
    try:
        shape = parse_shape(value)
    except UserError:
        raise f.error(path, f"{quoted(value)} is not a shape; write whole numbers joined by x, e.g. 16x16x16") from None
    if len(shape) != dims:
        raise f.error(path, f"{quoted(value)} has {len(shape)} dimensions, the topology {dims}")
    return shape


def _algorithms(f: YamlFile, value, path: str) -> tuple[str, ...]:
    """Collective algorithm names, each once; accelsim.comm checks them against the algorithms it registers."""
    names = tuple(as_text(f, name, f"{path}[{i}]") for i, name in enumerate(as_list(f, value, path)))
    if len(set(names)) != len(names):
        raise f.error(path, f"{quoted(value)}: name each algorithm once")
    return names


def _protocols(f: YamlFile, value) -> tuple[Protocol, ...]:
    """The library's protocols, e.g. [{name: ll, overhead: 6.6 us, efficiency: 0.38}, {name: simple, ...}]."""
    out = []
    for i, raw in enumerate(as_list(f, value, "protocols")):
        path = f"protocols[{i}]"
        d = as_mapping(f, raw, path, _PROTOCOL, _PROTOCOL_OPTIONAL)
        scale = d.get("latency_scale", 1.0)
        # `not 0 < scale < inf`, not `not scale > 0`: .inf passed that, and every time it scaled became nan
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < math.inf:
            raise f.error(key_at(path, "latency_scale"), f"{scale!r} is not a positive finite number (hop latency "
                                                      f"multiplier)")
        out.append(Protocol(
            name=as_text(f, d["name"], key_at(path, "name")),
            overhead_s=as_quantity(f, d["overhead"], key_at(path, "overhead"), units.parse_time, positive=False),
            latency_scale=float(scale),
            efficiency=_fraction(f, d.get("efficiency", 1.0), key_at(path, "efficiency")),
            algorithms=_algorithms(f, d["algorithms"], key_at(path, "algorithms")) if "algorithms" in d else None,
        ))
        if out[-1].name in [p.name for p in out[:-1]]:
            raise f.error(key_at(path, "name"), f"{out[-1].name!r} is used twice")
    return tuple(out)


def _fraction(f: YamlFile, value, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise f.error(path, f"{quoted(value)} is not a fraction in (0, 1] (the share of the line rate delivered)")
    return float(value)


def _flag(f: YamlFile, value, path: str) -> bool:
    if not isinstance(value, bool):
        raise f.error(path, f"{quoted(value)} is not true or false")
    return value
