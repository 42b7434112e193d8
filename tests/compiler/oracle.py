"""onnxruntime as the numerical oracle: import a model, run the Graph and its IR, compare both to ORT.

Floats compare within rtol/atol; integers and booleans compare exactly.
"""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime

from compiler.frontend import from_model
from compiler.graph import Graph
from compiler.ops.interpret import run_graph, run_ir
from compiler.ops.lower import lower


def ort_run(model: onnx.ModelProto, feeds: dict) -> dict:
    """Every graph output by name, computed by onnxruntime on the CPU."""
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def check_against_ort(model: onnx.ModelProto, feeds: dict, rtol: float = 1e-4, atol: float = 1e-5) -> Graph:
    """Assert that the Graph reference and the lowered IR both equal onnxruntime; returns the Graph."""
    onnx.checker.check_model(model, full_check=True)
    graph = from_model(model)
    expected = ort_run(model, feeds)
    for label, got in (("graph", run_graph(graph, feeds)), ("ir", run_ir(lower(graph), feeds, graph.tensors))):
        for name, want in expected.items():
            value = np.asarray(got[name])
            assert value.shape == want.shape, f"{label} {name}: shape {value.shape}, onnxruntime {want.shape}"
            if want.dtype.kind in "fc":
                np.testing.assert_allclose(value, want, rtol=rtol, atol=atol, err_msg=f"{label} {name}")
            else:
                np.testing.assert_array_equal(value, want, err_msg=f"{label} {name}")
    return graph
