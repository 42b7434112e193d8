"""ONNX files with degenerate values are refused at import or compile time naming the node (a ModelError, exit 2),
not left to fail deep in the compiler: empty tensors reaching the mapper, Resize by nan or inf, a Range of 10^15
values folded in memory, a Constant whose dims promise data it does not hold."""
import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import ModelError
from compiler.frontend import from_model
from compiler.ops.interpret import run_graph
from compiler.compile import compile_graph

F32 = TensorProto.FLOAT


def _model(nodes, inputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F32, s) for n, s in inputs],
                              [helper.make_tensor_value_info("y", F32, None)], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


@pytest.mark.parametrize("nodes, inputs, inits, message", [
    ([helper.make_node("Relu", ["x"], ["y"])], [("x", [0, 4])], [], "input 'x' of shape [0, 4] is empty"),
    ([helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])], [("x", [1, 4])],
     [_ints("s", [2]), _ints("e", [2]), _ints("a", [1])], "output 'y' of shape [1, 0] is empty"),
    ([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", [2, 0])],
     [numpy_helper.from_array(np.ones((0, 3), np.float32), "w")], "input 'x' of shape [2, 0] is empty"),
])
def test_an_empty_tensor_is_refused_for_simulation_and_evaluated(nodes, inputs, inits, message):
    """Tiles of an empty tensor divided by zero in the mapper (an internal ZeroDivisionError); the reference
    interpreter still runs the graph, as onnxruntime does."""
    graph = from_model(_model(nodes, inputs, inits))
    with pytest.raises(ModelError, match=r"node '\w+' \(\w+\): " + re.escape(message) + "; accelsim simulates no "
                                         "empty tensors"):
        compile_graph(graph)
    feeds = {name: np.zeros(shape, np.float32) for name, shape in inputs}
    assert run_graph(graph, feeds)["y"].size == (6 if "MatMul" in nodes[0].op_type else 0)


def test_an_empty_roi_initializer_still_compiles():
    nodes = [helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="nearest")]
    inits = [numpy_helper.from_array(np.zeros(0, np.float32), "roi"),
             numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    ir = compile_graph(from_model(_model(nodes, [("x", [1, 1, 4, 4])], inits)))
    assert ir.ops


@pytest.mark.parametrize("scales", [[1, 1, np.nan, 2], [1, 1, 2, np.inf], [1, 1, -np.inf, 1]])
def test_resize_by_a_scale_that_is_not_finite_is_refused(scales):
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["y"])]
    inits = [numpy_helper.from_array(np.array(scales, np.float32), "scales")]
    with pytest.raises(ModelError, match=r"Resize\): scales \[.*\] must be positive finite numbers"):
        from_model(_model(nodes, [("x", [1, 1, 4, 4])], inits))


def test_resize_of_an_empty_axis_to_sizes_is_refused():
    nodes = [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"])]
    with pytest.raises(ModelError, match=r"resizes an empty axis \(input shape \[1, 1, 0, 4\]\)"):
        from_model(_model(nodes, [("x", [1, 1, 0, 4])], [_ints("sizes", [1, 1, 8, 8])]))


def _range(start, limit, delta):
    values = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
              (("start", start), ("limit", limit), ("delta", delta))]
    nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["r"]), helper.make_node("Add", ["x", "r"], ["y"])]
    return _model(nodes, [("x", [1])], values)


def test_a_huge_range_is_shaped_without_being_made():
    """Range(0, 1e15, 1) took its length from the array itself: 7.11 PiB of float64 (an internal MemoryError)."""
    graph = from_model(_range(0, 1e15, 1))
    assert graph.tensor("r").shape == (999999986991104,) and "r" not in graph.constants


@pytest.mark.parametrize("limit", [np.inf, np.nan])
def test_a_range_of_no_finite_length_is_refused(limit):
    with pytest.raises(ModelError, match=r"Range\): start 0.0, limit (inf|nan), delta 1.0: not a finite length"):
        from_model(_range(0, limit, 1))


def test_a_small_range_still_folds():
    graph = from_model(_range(1, 4, 1.5))
    np.testing.assert_array_equal(graph.constants["r"], np.array([1, 2.5], np.float32))


def test_a_constant_without_the_data_its_dims_promise_is_refused():
    value = TensorProto(name="v", data_type=F32, dims=[2 ** 36, 4])   # no data: to_array could not reshape
    nodes = [helper.make_node("Constant", [], ["c"], value=value), helper.make_node("Add", ["x", "c"], ["y"])]
    with pytest.raises(ModelError, match=r"\(Constant\): attribute 'value': shape \[68719476736, 4\] of fp32 needs "
                                         r"274,877,906,944 entries of data, but it holds 0"):
        from_model(_model(nodes, [("x", [1])]))


def test_a_constant_with_external_data_is_refused_not_read_from_the_working_folder(tmp_path, monkeypatch):
    """onnx's to_array read a Constant's external data relative to the working folder, wherever the model was:
    an internal ValidationError when absent, any readable file's bytes when present."""
    (tmp_path / "secret.bin").write_bytes(b"\x00" * 16)
    monkeypatch.chdir(tmp_path)
    value = TensorProto(name="v", data_type=F32, dims=[4], data_location=TensorProto.EXTERNAL)
    value.external_data.add(key="location", value="secret.bin")
    nodes = [helper.make_node("Constant", [], ["c"], value=value), helper.make_node("Add", ["x", "c"], ["y"])]
    with pytest.raises(ModelError, match=r"\(Constant\): attribute 'value': its data is in an external file"):
        from_model(_model(nodes, [("x", [4])]))
