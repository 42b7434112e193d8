"""Strict parsing of quantities written with units (`24 MiB`, `34 GB/s`, `700 MHz`, `0.2 pJ`).

One function per kind of quantity, each returning SI (bytes as int, B/s, Hz, J, W, s).
Invariant: a string parses only if its unit is spelled exactly as listed for its kind; a missing
or foreign unit, a non-number, a negative or a non-finite value raises UnitError naming the
allowed units. Bits are never accepted (`Gb/s` is an error, not a silent factor of 8).
"""
import math
import re

from compiler.references import quoted

# A plain decimal, optionally with an exponent: `24`, `0.2`, `1.5e3`. No signs (negatives are
# caught separately for a clearer message), no thousands separators.
_QUANTITY = re.compile(r"^\s*(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>\S+)\s*$")
_NEGATIVE = re.compile(r"^\s*-\s*(?:\d|\.\d)")

_SIZE = {
    "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
}
_BANDWIDTH = {f"{unit}/s": factor for unit, factor in _SIZE.items()}
_FREQUENCY = {"Hz": 1.0, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9}
_ENERGY = {"fJ": 1e-15, "pJ": 1e-12, "nJ": 1e-9, "uJ": 1e-6, "mJ": 1e-3, "J": 1.0}
_POWER = {"mW": 1e-3, "W": 1.0, "kW": 1e3}
_TIME = {"ps": 1e-12, "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_CYCLES = {"cycle": 1, "cycles": 1}


class UnitError(ValueError):
    """A quantity that is not a non-negative number followed by one of its kind's units."""


def _parse(text, kind: str, units: dict) -> float:
    allowed = ", ".join(units)
    a = "an" if kind[0] in "aeiou" else "a"
    if not isinstance(text, str) or isinstance(text, bool):
        raise UnitError(f"{quoted(text)} is not {a} {kind}: write a number and a unit, one of {allowed}")
    if _NEGATIVE.match(text):
        raise UnitError(f"{quoted(text)} is negative; {a} {kind} must be >= 0 (units: {allowed})")
    match = _QUANTITY.match(text)
    if match is None:
        raise UnitError(f"{quoted(text)} is not {a} {kind}; write a number and a unit, one of {allowed}")
    number, unit = float(match["number"]), match["unit"]
    if unit not in units:
        hint = [u for u in units if u.lower() == unit.lower()]
        did_you_mean = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise UnitError(f"{quoted(text)} is not {a} {kind}{did_you_mean}; use {allowed}")
    if not math.isfinite(number):
        raise UnitError(f"{quoted(text)} is not {a} finite {kind}")
    value = number * units[unit]
    if not math.isfinite(value):        # `1e300 GHz`: each factor finite, the product not
        raise UnitError(f"{quoted(text)} is too large to be {a} {kind}")
    return value


def parse_size(text) -> int:
    """Bytes, as an int: `24 MiB` -> 25165824. KB/MB/GB/TB are powers of 1000, KiB/... of 1024."""
    value = _parse(text, "size", _SIZE)
    nbytes = round(value)
    if abs(value - nbytes) > 1e-6 * max(1.0, value):
        raise UnitError(f"{quoted(text)} is not a whole number of bytes")
    return nbytes


def parse_bandwidth(text) -> float:
    """Bytes per second: `34 GB/s` -> 3.4e10."""
    return _parse(text, "bandwidth", _BANDWIDTH)


def parse_frequency(text) -> float:
    """Hertz: `700 MHz` -> 7e8."""
    return _parse(text, "frequency", _FREQUENCY)


def parse_energy(text) -> float:
    """Joules: `0.2 pJ` -> 2e-13."""
    return _parse(text, "energy", _ENERGY)


def parse_power(text) -> float:
    """Watts: `75 W` -> 75.0."""
    return _parse(text, "power", _POWER)


def parse_time(text) -> float:
    """Seconds: `500 ns` -> 5e-7."""
    return _parse(text, "time", _TIME)


def parse_cycles(text) -> int:
    """A whole number of clock cycles written with its unit: `28 cycles` -> 28 (`1 cycle` too)."""
    value = _parse(text, "cycle count", _CYCLES)
    if value != int(value):
        raise UnitError(f"{quoted(text)} is not a whole number of cycles")
    return int(value)


def parse_count(value) -> int:
    """A plain non-negative integer (no unit), for the counts the schema names as such."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UnitError(f"{quoted(value)} is not a count; write a plain whole number without a unit")
    if value < 0:
        raise UnitError(f"{quoted(value)} is negative; a count must be >= 0")
    return value


SIZE_UNITS = tuple(_SIZE)
BANDWIDTH_UNITS = tuple(_BANDWIDTH)
FREQUENCY_UNITS = tuple(_FREQUENCY)
ENERGY_UNITS = tuple(_ENERGY)
POWER_UNITS = tuple(_POWER)
TIME_UNITS = tuple(_TIME)
