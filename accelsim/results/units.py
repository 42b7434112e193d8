"""Every figure accelsim prints goes through these, so one quantity reads one way everywhere (docs/result-schema.md,
"Units"): bytes in binary prefixes (24 MiB, 1.5 GiB: capacities, footprints and bytes moved alike), bandwidths
in decimal ones (3,352 GB/s, as datasheets give them), energy and time in SI prefixes by magnitude (1.39 mJ, 755 ns).
"""
from __future__ import annotations

_SMALL = ((1, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"), (1e-12, "p"), (1e-15, "f"))


def si(value: float, unit: str = "") -> str:
    """Counts: 1.23e9 -> '1.23 G'; keeps three significant digits."""
    if value == 0:
        return f"0 {unit}".strip()
    for factor, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}".strip()


def prefix_scale(value: float) -> tuple[float, str]:
    """(divisor, SI prefix), G down to p, that puts `value` at 1 or more: 0.00195 -> (1e-3, 'm')."""
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k"), *_SMALL[:5]):
        if abs(value) >= factor:
            return factor, prefix
    return 1e-12, "p"


def engineering(value: float, unit: str) -> str:
    """4 significant digits and an SI prefix: 0.001052 s -> '1.052 ms', 3.178e6 cells -> '3.178 M cells'."""
    if value == 0:
        return f"0 {unit}"
    factor, prefix = prefix_scale(value)
    joined = f"{prefix} {unit}" if unit == "cells" else f"{prefix}{unit}"
    return f"{value / factor:.4g} {joined}".replace("  ", " ").strip()


def binary(nbytes: float) -> str:
    """Bytes the way datasheets give capacities: 24 MiB, 768 KiB, 141 GiB."""
    for factor, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if nbytes >= factor:
            return f"{nbytes / factor:.3g} {unit}"
    return f"{nbytes:.0f} B"


def binary_scale(nbytes: float) -> tuple[float, str]:
    """(divisor, unit) for an axis of bytes: the binary prefix that puts the largest value at 1 or more."""
    for factor, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if nbytes >= factor:
            return float(factor), unit
    return 1.0, "B"


def bandwidth(bytes_per_second: float) -> str:
    """Bytes per second in decimal prefixes: 3.352e12 -> '3,352 GB/s', 1.2e8 -> '120 MB/s'."""
    if bytes_per_second < 1e9:
        return si(bytes_per_second, "B/s")
    gb = bytes_per_second / 1e9
    return f"{gb:,.0f} GB/s" if gb >= 100 else f"{gb:.3g} GB/s"


def energy_scale(joules: float) -> tuple[float, str]:
    """(divisor, unit): the SI prefix, J down to fJ, that puts `joules` at 1 or more."""
    for factor, prefix in _SMALL:
        if abs(joules) >= factor:
            return factor, f"{prefix}J"
    return _SMALL[-1][0], "fJ"


def energy(joules: float) -> str:
    """1.39e-3 -> '1.39 mJ', 2.5e-10 -> '250 pJ', 3.2 -> '3.2 J'."""
    if not joules:
        return "0 J"
    factor, unit = energy_scale(joules)
    return f"{joules / factor:.3g} {unit}"


def time_scale(seconds: float) -> tuple[float, str]:
    """(divisor, unit) that puts `seconds` between 1 and 1000 (s down to ns)."""
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if seconds >= factor:
            return factor, unit
    return 1e-9, "ns"


def seconds(value: float) -> str:
    """0.00015 -> '150 us'."""
    if value == 0:
        return "0"
    factor, unit = time_scale(value)
    return f"{value / factor:.3g} {unit}"


def plain(value) -> str:
    """A number for people: whole numbers with thousands separators (16,000,000), others to 4 significant digits,
    with an SI prefix outside 0.01 to 10,000 (0.000123456789 -> '123.5 u', 1.6e10 -> '16 G'); text as it is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int) or (value.is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"
    if value != value or 0.01 <= abs(value) < 1e4:
        return f"{value:.4g}"
    return engineering(value, "")
