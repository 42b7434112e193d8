"""Strict unit parsing: each kind accepts its own units, in SI, and rejects everything else."""
import pytest

from accelsim.arch import units


@pytest.mark.parametrize("text, expected", [
    ("24 MiB", 24 * 2**20), ("48 KiB", 49152), ("1 KB", 1000), ("8 GiB", 8 * 2**30),
    ("141 GB", 141 * 10**9), ("1.5 KiB", 1536), ("64 B", 64), ("2 TiB", 2 * 2**40), ("3MB", 3 * 10**6),
])
def test_size(text, expected):
    assert units.parse_size(text) == expected
    assert isinstance(units.parse_size(text), int)


@pytest.mark.parametrize("text, expected", [
    ("34 GB/s", 34e9), ("4.8 TB/s", 4.8e12), ("400 MB/s", 4e8), ("14 GiB/s", 14 * 2**30), ("1 KiB/s", 1024),
])
def test_bandwidth(text, expected):
    assert units.parse_bandwidth(text) == pytest.approx(expected)


@pytest.mark.parametrize("parse, text, expected", [
    (units.parse_frequency, "700 MHz", 7e8), (units.parse_frequency, "1.95 GHz", 1.95e9),
    (units.parse_frequency, "32 kHz", 3.2e4), (units.parse_frequency, "10 Hz", 10.0),
    (units.parse_energy, "0.2 pJ", 0.2e-12), (units.parse_energy, "1.3 nJ", 1.3e-9),
    (units.parse_energy, "5 fJ", 5e-15), (units.parse_energy, "2 uJ", 2e-6), (units.parse_energy, "1 J", 1.0),
    (units.parse_power, "75 W", 75.0), (units.parse_power, "500 mW", 0.5), (units.parse_power, "1.1 kW", 1100.0),
    (units.parse_time, "500 ns", 5e-7), (units.parse_time, "1 us", 1e-6), (units.parse_time, "20 ps", 2e-11),
    (units.parse_time, "3 ms", 3e-3), (units.parse_time, "0.5 s", 0.5),
    (units.parse_cycles, "28 cycles", 28), (units.parse_cycles, "1 cycle", 1),
    (units.parse_size, "1e3 B", 1000),
])
def test_other_kinds(parse, text, expected):
    assert parse(text) == pytest.approx(expected)


@pytest.mark.parametrize("parse, text, fragment", [
    (units.parse_size, "24 MB/s", "is not a size"),              # a bandwidth is not a size
    (units.parse_bandwidth, "34 GB", "is not a bandwidth"),      # a size is not a bandwidth
    (units.parse_bandwidth, "10 Gb/s", "is not a bandwidth"),    # bits are never accepted
    (units.parse_size, "24", "is not a size"),                   # missing unit
    (units.parse_size, 24, "is not a size"),                     # a bare YAML number
    (units.parse_size, "-1 KiB", "negative"),
    (units.parse_size, "lots MiB", "is not a size"),
    (units.parse_size, "1.5 B", "whole number of bytes"),
    (units.parse_size, "1,024 B", "is not a size"),
    (units.parse_frequency, "700 mhz", "did you mean 'MHz'"),
    (units.parse_frequency, "700 MHz fast", "is not a frequency"),
    (units.parse_energy, "0.2 pW", "is not an energy"),
    (units.parse_power, "75 J", "is not a power"),
    (units.parse_time, "500 ns ", None),                         # trailing space is fine: no error
    (units.parse_time, "5 cycles", "is not a time"),
    (units.parse_time, "nan s", "is not a time"),
    (units.parse_cycles, "2.5 cycles", "whole number of cycles"),
    (units.parse_frequency, "1e300 GHz", "'1e300 GHz' is too large to be a frequency"),   # finite x finite = inf
    (units.parse_size, "1e300 TB", "too large to be a size"),
    (units.parse_bandwidth, "1e306 TiB/s", "too large to be a bandwidth"),
])
def test_rejects(parse, text, fragment):
    if fragment is None:
        parse(text)
        return
    with pytest.raises(ValueError, match=fragment) as info:
        parse(text)
    assert isinstance(info.value, units.UnitError)


def test_error_lists_allowed_units():
    with pytest.raises(units.UnitError) as info:
        units.parse_bandwidth("34 GB")
    for unit in ("B/s", "KB/s", "MB/s", "GB/s", "TB/s", "KiB/s", "MiB/s", "GiB/s", "TiB/s"):
        assert unit in str(info.value)


@pytest.mark.parametrize("value, ok", [(3, True), (0, True), (-1, False), (2.5, False), ("3", False), (True, False)])
def test_count(value, ok):
    if ok:
        assert units.parse_count(value) == value
    else:
        with pytest.raises(units.UnitError):
            units.parse_count(value)
