"""onnx's node conformance cases through the public API (accelsim.validate.onnx_api) pass exactly where the
in-repo harness (compiler.conformance) passes them, on a sample: every 12th case, and the cases whose inputs are
what the API used to refuse (bfloat16, float8 and int4 arrays; shapes, sizes and k given as graph inputs).
benchmarks/onnx_api_conformance.py runs them all."""
from __future__ import annotations

import pytest

from accelsim.validate.onnx_api import run_all_api
from compiler.conformance import PASSING, in_scope_pass_fraction, node_cases, run_all

# cases the API refused while the harness passed them: a narrow type, or an input read as a shape
NARROW = ("test_castlike_BFLOAT16_to_FLOAT", "test_cast_FLOAT8E4M3FN_to_FLOAT", "test_dequantizelinear_int4",
          "test_quantizelinear_uint4")
SHAPED = ("test_reshape_extended_dims", "test_resize_upsample_sizes_nearest", "test_onehot_with_axis",
          "test_affine_grid_2d", "test_col2im", "test_expand_dim_changed", "test_constantofshape_int_zeros",
          "test_tile", "test_constant_pad")


@pytest.fixture(scope="module")
def sample():
    cases = node_cases()
    chosen = [c for i, c in enumerate(cases) if i % 12 == 0 or c.name in NARROW + SHAPED]
    assert {c.name for c in chosen} >= set(NARROW + SHAPED)
    return chosen


def test_the_api_passes_the_cases_the_harness_passes(sample):
    harness, api = run_all(sample), run_all_api(sample)
    by_case = {o.case: o for o in harness}
    differ = [f"{o.line()} (harness: {by_case[o.case].verdict.value})" for o in api
              if (o.verdict in PASSING) != (by_case[o.case].verdict in PASSING)]
    assert not differ, "\n".join(differ)
    assert in_scope_pass_fraction(api) == in_scope_pass_fraction(harness) > 0.9
    passed = {o.case for o in api if o.verdict in PASSING}
    assert passed >= set(NARROW + SHAPED)
