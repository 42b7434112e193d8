"""The area model: stored Yosys cell counts match the RTL as it is now, and the fit reproduces them."""
import importlib.util
import shutil
from pathlib import Path

import pytest

from accelsim.arch import area

ROOT = Path(__file__).resolve().parents[3]


def rtl_area():
    """benchmarks/rtl_area.py as a module (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location("rtl_area", ROOT / "benchmarks" / "rtl_area.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stored(variant, rows, cols):
    (entry,) = [e for e in area.synthesized()["arrays"]
                if (e["variant"], e["rows"], e["cols"]) == (variant, rows, cols)]
    return entry


@pytest.mark.parametrize("variant", area.VARIANTS)
def test_stored_counts_match_the_rtl(variant):
    # Rerun: .venv/bin/python benchmarks/rtl_area.py  after any change to rtl/*.v or rtl/synth/
    if shutil.which("yosys") is None:
        pytest.skip("yosys is not on PATH: cannot re-synthesize the RTL")
    fresh = rtl_area().synth(variant, 2, 2)
    old = stored(variant, 2, 2)
    assert fresh["yosys_script"] == old["yosys_script"]
    assert (fresh["cells"], fresh["flip_flops"], fresh["cells_by_type"]) == \
        (old["cells"], old["flip_flops"], old["cells_by_type"])


def test_every_entry_was_made_by_todays_flow():
    flow = rtl_area()
    for e in area.synthesized()["arrays"]:
        assert e["yosys_script"] == flow.script(e["variant"], e["rows"], e["cols"], e["acc_depth"])
        assert e["acc_depth"] == 1 and e["module"] == "systolic_core"
        assert sum(e["cells_by_type"].values()) == e["cells"]
    sizes = {(e["rows"], e["cols"]) for e in area.synthesized()["arrays"]}
    assert {(2, 2), (4, 4), (8, 8), (16, 16)} <= sizes and any(r != c for r, c in sizes)


@pytest.mark.parametrize("variant", area.VARIANTS)
def test_fit_reproduces_the_synthesized_points(variant):
    # The form is symmetric in rows and cols, the RTL is not (a column carries 32-bit de-skew and accumulator,
    # a row an 8-bit skew): ternary 4x8 and 8x4 differ by 6 %, so the fit is within 4 %, not closer.
    fit = area.fit(variant)
    assert fit.max_rel_error < 0.04
    for rows, cols, cells in area.points(variant):
        model = area.area_cells(rows, cols, ternary=variant == "ternary")
        assert model == pytest.approx(cells, rel=0.04)
    assert fit.per_pe > 0


@pytest.mark.parametrize("ternary", [False, True])
def test_area_grows_with_the_array(ternary):
    sizes = [(2, 2), (4, 4), (4, 8), (8, 8), (16, 16), (32, 32)]
    cells = [area.area_cells(r, c, ternary) for r, c in sizes]
    assert cells == sorted(cells) and len(set(cells)) == len(cells)
    # Doubling both sides of a large array nearly quadruples it: the PE term dominates.
    assert area.area_cells(64, 64, ternary) / area.area_cells(32, 32, ternary) == pytest.approx(4, rel=0.02)


def test_ternary_is_smaller_than_int8():
    for rows, cols, cells in area.points("int8"):
        assert stored("ternary", rows, cols)["cells"] < cells
        assert area.area_cells(rows, cols, ternary=True) < area.area_cells(rows, cols)
    # No multiplier: a ternary PE is well under half an int8 PE.
    assert area.fit("ternary").per_pe < 0.5 * area.fit("int8").per_pe


def test_unknown_variant_and_empty_array_are_errors():
    with pytest.raises(ValueError, match=r"'fp8'.*int8, ternary"):
        area.fit("fp8")
    with pytest.raises(ValueError, match="at least one row"):
        area.area_cells(0, 4)
