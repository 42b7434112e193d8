"""onnx's node conformance cases through the public API, as a user runs a model: each case's model written to an
.onnx file and run by `accelsim.evaluate` with the case's inputs as onnx ships them (ml_dtypes arrays for bfloat16,
float8 and int4; shape inputs bound from them as `eval --inputs` binds them). compiler.conformance judges the
outputs exactly as it judges its own harness's, so the two pass rates agree when the API takes what the harness does.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from compiler.conformance import Outcome, case_inputs, run_all


def through_api(folder: str | Path):
    """An executor for compiler.conformance.run_case: the case's outputs by accelsim.evaluate, and its Graph (for
    the outputs' dtypes) by accelsim.load_model, each from the model file written to `folder`."""
    import onnx

    from accelsim.sim.api import evaluate
    from accelsim.sim.model import load_model

    def execute(case):
        path = Path(folder) / f"{case.name}.onnx"
        onnx.save(case.model, str(path))
        feeds = case_inputs(case)
        _, outputs = evaluate(path, inputs=feeds)
        return load_model(path, weights=False, feeds=feeds), outputs

    return execute


def run_all_api(cases: list | None = None) -> list[Outcome]:
    """Every case (of `cases`, default all of onnx's) through the public API."""
    with tempfile.TemporaryDirectory(prefix="accelsim-onnx-api-") as folder:
        return run_all(cases, through_api(folder))
