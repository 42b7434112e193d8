"""ONNX as exporters write it: constants folded into the inputs a node reads for their values, graph inputs bound
by value at import (compiler.bind), narrow-typed values taken as the declared type. onnxruntime is the oracle."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from compiler.bind import bound, held_input, static_inputs
from compiler.dtypes import DType
from compiler.errors import ModelError, UnknownValueError
from compiler.frontend import from_model
from compiler.ops.interpret import run_graph


def model(nodes, inputs, outputs, opset=18):
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info(*i) for i in inputs],
                         [h.make_tensor_value_info(*o) for o in outputs])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def constant(name, value):
    return h.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value)))


def onnxruntime(m, feeds):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_a_constant_cast_like_the_data_folds_into_pad_constant_value():
    """onnx's function bodies and onnxscript write Pad(x, pads, CastLike(-inf, x)): the CastLike reads x for its type
    only, so it folds; it was refused ('constant_value ... must be a constant known at import time')."""
    m = model([constant("c", np.float64(-2.5)), h.make_node("CastLike", ["c", "x"], ["value"]),
               constant("pads", np.array([0, 1, 0, 2])), h.make_node("Pad", ["x", "pads", "value"], ["y"])],
              [("x", T.FLOAT, [2, 3])], [("y", T.FLOAT, [2, 6])])
    graph = from_model(m)
    assert graph.constants["value"].dtype == np.float32 and graph.constants["value"] == -2.5
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(run_graph(graph, {"x": x})["y"], onnxruntime(m, {"x": x})[0])


def test_a_body_two_ifs_deep_reads_a_constant_of_the_graph():
    """The If between them reads nothing itself, so it must pass the constant on to the body it holds."""
    inner = h.make_graph([h.make_node("Add", ["x", "c"], ["r"])], "inner", [],
                         [h.make_tensor_value_info("r", T.FLOAT, [2])])
    inner_else = h.make_graph([h.make_node("Sub", ["x", "c"], ["r2"])], "inner_else", [],
                              [h.make_tensor_value_info("r2", T.FLOAT, [2])])
    middle = h.make_graph([h.make_node("If", ["b"], ["m"], then_branch=inner, else_branch=inner_else)], "middle", [],
                          [h.make_tensor_value_info("m", T.FLOAT, [2])])
    other = h.make_graph([h.make_node("Identity", ["x"], ["o"])], "other", [],
                         [h.make_tensor_value_info("o", T.FLOAT, [2])])
    m = model([constant("c", np.array([1.5, 2.0], np.float32)),
               h.make_node("If", ["a"], ["y"], then_branch=middle, else_branch=other)],
              [("a", T.BOOL, []), ("b", T.BOOL, []), ("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])])
    feeds = {"a": np.array(True), "b": np.array(False), "x": np.array([4.0, 8.0], np.float32)}
    np.testing.assert_array_equal(run_graph(from_model(m), feeds)["y"], onnxruntime(m, feeds)[0])


RESHAPE = model([h.make_node("Reshape", ["x", "shape"], ["y"])], [("x", T.FLOAT, [2, 3]), ("shape", T.INT64, [2])],
                [("y", T.FLOAT, None)])


def test_a_shape_input_is_bound_from_the_feeds_that_need_it_and_the_rest_stay_inputs():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    feeds = {"x": x, "shape": np.array([3, -1])}
    assert static_inputs(RESHAPE.graph) == {"shape"}
    graph = from_model(RESHAPE, feeds=feeds)
    assert graph.inputs == ["x"] and graph.tensor("y").shape == (3, 2)
    np.testing.assert_array_equal(run_graph(graph, {"x": x})["y"], onnxruntime(RESHAPE, feeds)[0])
    assert from_model(RESHAPE, input_values={"shape": (1, 6)}).tensor("y").shape == (1, 6)


def test_an_unbound_shape_input_is_an_error_naming_it_and_how_to_bind_it():
    with pytest.raises(UnknownValueError, match=r"target shape.*graph input 'shape'.*--bind shape=V0,V1"):
        from_model(RESHAPE)
    indirect = model([h.make_node("Cast", ["s"], ["shape"], to=T.INT64), h.make_node("Reshape", ["x", "shape"], ["y"])],
                     [("x", T.FLOAT, [2, 3]), ("s", T.FLOAT, [2])], [("y", T.FLOAT, None)])
    with pytest.raises(UnknownValueError, match=r"computed from graph input 's',.*--bind s=V0,V1"):
        from_model(indirect)


def test_values_are_bound_at_the_declared_type_and_shape_or_refused_naming_the_input():
    topk = model([h.make_node("TopK", ["x", "k"], ["v", "i"])], [("x", T.FLOAT, [5]), ("k", T.INT64, [1]),
                 ("scale", T.FLOAT, []), ("pads", T.INT64, ["n"])], [("v", T.FLOAT, None), ("i", T.INT64, None)])
    given = bound(topk.graph, {"k": (3,), "scale": (2,), "pads": (0, 1)}, "m.onnx")
    assert given["k"][0].tolist() == [3] and given["k"][1].shape == (1,)
    assert given["scale"][0].dtype == np.float32 and given["scale"][0].shape == ()   # an integer binds a float
    assert given["pads"][1].shape == (2,)
    with pytest.raises(ModelError, match=r"'k' holds \[2.5\].*int64: give whole numbers"):
        bound(topk.graph, {"k": (2.5,)}, "m.onnx")
    with pytest.raises(ModelError, match=r"'k' has shape \[2\].*declares \[1\]"):
        bound(topk.graph, {"k": (2, 3)}, "m.onnx")
    with pytest.raises(ModelError, match=r"'nope', which is not a graph input \(inputs: x, k"):
        bound(topk.graph, {"nope": (1,)}, "m.onnx")


def test_narrow_values_are_taken_as_ml_dtypes_raw_bytes_or_floats_rounded_to_the_type():
    values = np.array([1.0, 1.00390625, -3.5], ml_dtypes.bfloat16)        # 1 + 2^-8: a bf16 value
    widened = values.astype(np.float32)
    np.testing.assert_array_equal(held_input(values, DType.bf16, "x"), widened)
    np.testing.assert_array_equal(held_input(values.view("V2"), DType.bf16, "x"), widened)   # as an .npz keeps it
    np.testing.assert_array_equal(held_input(widened, DType.bf16, "x"), widened)
    assert held_input(np.float32([1.001]), DType.bf16, "x")[0] == 1.0                       # rounded to bf16
    np.testing.assert_array_equal(held_input(values, DType.fp32, "x"), widened)             # exact: a wider float
    fp8 = np.array([0.5, -2.0], ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(held_input(fp8, DType.fp8, "x"), [0.5, -2.0])
    int4 = np.array([-8, 7], ml_dtypes.int4)
    assert held_input(int4, DType.int4, "x").tolist() == [-8, 7]
    with pytest.raises(ModelError, match=r"x is float8_e4m3fn, the model expects bf16; give ml_dtypes.bfloat16"):
        held_input(fp8, DType.bf16, "x")
    with pytest.raises(ModelError, match=r"x is \|V2 \(raw bytes\), the model expects fp8"):
        held_input(values.view("V2"), DType.fp8, "x")


def test_a_shape_computed_from_a_weight_larger_than_shape_arithmetic_folds():
    """Weights of more than 64 elements stay weights, except where import needs what they compute: a Reshape's
    shape gathered from a table was refused ('the target shape ... must be a constant known at import'), and
    without weights (as `run` imports) the table is read for it."""
    table = numpy_helper.from_array(np.arange(5000, dtype=np.int64), "table")   # `run` keeps no value of 5,000
    which = numpy_helper.from_array(np.array([3, 2], np.int64), "which")
    nodes = [h.make_node("Gather", ["table", "which"], ["shape"]), h.make_node("Reshape", ["x", "shape"], ["y"]),
             h.make_node("Mul", ["table", "table"], ["t2"])]
    graph = h.make_graph(nodes,
                         "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                         [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("t2", T.INT64, None)],
                         initializer=[table, which])
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    imported = from_model(m)
    assert "t2" not in imported.constants          # what no shape needs stays computed at run time
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(run_graph(imported, {"x": x})["y"], onnxruntime(m, {"x": x})[0])
    assert from_model(m, weights=False).tensor("y").shape == (3, 2)
