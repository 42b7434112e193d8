"""ONNX's own node test cases (model, inputs, reference outputs) for a few ops, without generating all of them.

Importing one module of onnx.backend.test.case.node runs its exporters, which append that op's cases to onnx's list;
a whole collect_testcases() takes tens of seconds, one module a fraction of one. Inputs that an op reads for their
values (a Reduce's axes) become initializers, as a model exported with fixed shapes has them.
"""
from __future__ import annotations

import importlib
import sys
import warnings

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.frontend import from_model
from compiler.ops import REGISTRY
from compiler.ops.interpret import run_graph, run_ir
from compiler.ops.lower import lower

_LOADED: dict[str, list] = {}


def node_cases(module: str) -> dict[str, object]:
    """Case name -> case, for onnx.backend.test.case.node.<module>."""
    if module not in _LOADED:
        import onnx.backend.test.case.node as registry
        before = len(registry._NodeTestCases)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            name = f"onnx.backend.test.case.node.{module}"
            # imported already (a whole collect_testcases() ran in this process): its exporters run again on a reload,
            # with onnx's record of case names set aside (it refuses a name twice) and no op filter
            seen, target = dict(registry._existing_names), registry._TargetOpType
            registry._existing_names.clear()
            registry._TargetOpType = None
            try:
                importlib.reload(sys.modules[name]) if name in sys.modules else importlib.import_module(name)
            finally:
                registry._existing_names.update(seen)
                registry._TargetOpType = target
        _LOADED[module] = registry._NodeTestCases[before:]
    return {case.name: case for case in _LOADED[module]}


def _with_values_bound(case) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The case's model with value inputs (axes...) made initializers, and the feeds left for the others."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    inputs, _ = case.data_sets[0]
    values = {info.name: np.asarray(v) for info, v in zip(model.graph.input, inputs)}
    bound = {node.input[i] for node in model.graph.node if node.op_type in REGISTRY
             for i in REGISTRY[node.op_type].value_inputs if i < len(node.input) and node.input[i] in values}
    model.graph.initializer.extend(numpy_helper.from_array(values[name], name) for name in sorted(bound))
    kept = [info for info in model.graph.input if info.name not in bound]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    return model, {name: v for name, v in values.items() if name not in bound}


def check_case(case) -> None:
    """The Graph reference and the lowered IR both give the outputs onnx ships (integers and bools exactly)."""
    model, feeds = _with_values_bound(case)
    graph = from_model(model, source=case.name)
    expected = dict(zip([o.name for o in model.graph.output], case.data_sets[0][1]))
    with np.errstate(all="ignore"):
        results = {"graph": run_graph(graph, feeds), "ir": run_ir(lower(graph), feeds, graph.tensors)}
    for label, got in results.items():
        for name, want in expected.items():
            want, value = np.asarray(want), np.asarray(got[name])
            assert value.shape == want.shape, f"{case.name} {label} {name}: shape {value.shape}, onnx {want.shape}"
            if want.dtype.kind in "fcV":
                np.testing.assert_allclose(value.astype(np.float64), want.astype(np.float64), rtol=case.rtol,
                                           atol=max(case.atol, 1e-6), err_msg=f"{case.name} {label} {name}")
            else:
                np.testing.assert_array_equal(value, want, err_msg=f"{case.name} {label} {name}")
