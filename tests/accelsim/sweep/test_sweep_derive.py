"""Derived keys on hostile expressions: every expression is read and evaluated in bounded time and memory, and
ends in a value or a DeriveError (a one-line message), never another exception."""
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelsim.sweep.derive import MAX_CHARACTERS, MAX_DEPTH, DeriveError, parse_derived

ROOT = Path(__file__).resolve().parents[3]
BASE = yaml.safe_load((ROOT / "archs" / "systolic_32x32.yaml").read_text())


def derived(expression, key="memory.dram.latency"):
    """The value `expression` writes at `key` on a copy of the base document."""
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    rule = parse_derived(doc, key, expression)
    rule.apply(doc)
    return rule.target.get(doc)


@pytest.mark.parametrize("expression", ["9 ** 9 ** 9 ** 9", "10 ** 10 ** 10", "(-3) ** 10 ** 8",
                                        "2 ** 1000 * 2 ** 1000", "10.0 ** 400", "1e308 * 10", "1e308 + 1e308 - 1e308",
                                        "round(5, -10 ** 9)", "(-8) ** 0.5"])
def test_huge_or_unreal_values_are_refused_at_once(expression):
    with pytest.raises(DeriveError, match="too large|digits|not a real number"):
        derived(expression)


def test_big_but_real_values_still_compute():
    assert derived("2 ** 40", "compute.pe_array.macs_per_cycle.int8") == 2 ** 40     # exact, not a float
    assert derived("3 ** 600 / 3 ** 599") == "3 s"                                   # a float-range whole number
    assert derived("2 ** -2000 + 1e-9") == "1e-09 s"


def test_long_or_deep_expressions_are_refused_before_parsing():
    with pytest.raises(DeriveError, match=f"100001 characters is too long \\(at most {MAX_CHARACTERS}\\)"):
        derived("-" * 100000 + "1")
    with pytest.raises(DeriveError, match=f"nested too deeply \\(at most {MAX_DEPTH} levels\\)"):
        derived("-" * (MAX_DEPTH + 5) + "1")
    assert derived("-" * MAX_DEPTH + "1", "compute.pe_array.macs_per_cycle.int8") == 1


def test_a_reference_to_a_key_the_arch_lacks_is_named():
    with pytest.raises(DeriveError, match="nan is not set in the arch"):
        derived("2 * nan")


_leaves = st.one_of(st.integers(-2 ** 70, 2 ** 70).map(str), st.floats(allow_nan=False).map(repr),
                    st.sampled_from(["clock", "memory.dram.capacity", "compute.pe_array.array.rows", "nan", "x.y"]))
_expressions = st.recursive(
    _leaves, lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "//", "%", "**"]), inner)
        .map(lambda t: f"({' '.join(t)})"),
        st.tuples(st.sampled_from(["-", "+"]), inner).map("".join),
        st.tuples(st.sampled_from(["min", "max", "round", "sqrt", "log2"]), st.lists(inner, max_size=3))
        .map(lambda t: f"{t[0]}({', '.join(t[1])})")),
    max_leaves=12)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(_expressions, st.sampled_from(["memory.dram.latency", "compute.pe_array.macs_per_cycle.int8", "clock"]))
def test_any_expression_computes_or_is_refused(expression, key):
    try:
        derived(expression, key)
    except DeriveError:
        pass


@pytest.mark.parametrize("expression, message", [
    ("9 ** 9 ** 9 ** 9", "'9 \\*\\* 9 \\*\\* 9 \\*\\* 9': 9 \\*\\* 387420489 is too large"),
    ("clock * (1 / 0)", "'clock \\* \\(1 / 0\\)': 1 / 0: division by zero"),
    ("max(clock, 10 ** 10 ** 10)", "10 \\*\\* 10 \\*\\* 10: 10 \\*\\* 10000000000 is too large"),
])
def test_parts_of_numbers_alone_are_computed_as_the_spec_loads(expression, message):
    with pytest.raises(DeriveError, match=message):
        parse_derived(BASE, "memory.dram.latency", expression)


def test_a_huge_power_in_a_spec_is_one_line_before_the_sweep_starts(tmp_path, capsys):
    from accelsim.cli import main

    spec = {"base": "systolic_8x8", "models": [{"name": "resnet18", "options": {"image": 32}}],
            "objectives": ["latency"], "axes": {"compute.pe_array.array.rows": [4, 8]},
            "derive": {"memory.dram.latency": "9 ** 9 ** 9 ** 9"}}
    path = tmp_path / "powbomb.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["sweep", str(path), "--jobs", "1"]) == 2
    assert "powbomb.yaml: derive.memory.dram.latency: '9 ** 9 ** 9 ** 9': 9 ** 387420489 is too large" in \
        capsys.readouterr().err
    assert not (tmp_path / "powbomb.sqlite").exists()
