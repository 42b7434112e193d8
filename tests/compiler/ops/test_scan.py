"""Scan: a body graph per step (the MatMul-free LM's MLGRU recurrence), against onnxruntime; one Map lowered."""
import numpy as np
import pytest
from onnx import helper

from compiler.errors import ModelError
from compiler.frontend import from_model
from compiler.ops.interpret import run_graph
from compiler.ir import OpKind
from compiler.ops.lower import lower
from tests.compiler.onnx_models import F32, floats, init, model
from tests.compiler.oracle import check_against_ort

T, B, H, D = 5, 2, 4, 3


def _value(name, shape=None):
    return helper.make_tensor_value_info(name, F32, shape)


def _linear_scan(opset, x_shape, in_axis=0, out_axis=0, in_dir=0, out_dir=0):
    """h_t = 0.5 h_{t-1} + x_t W (a Gemm), y_t = h_t V (a MatMul): states and scan outputs both exercised."""
    body = helper.make_graph(
        [helper.make_node("Gemm", ["x_t", "w", "h"], ["h_new"], beta=0.5),
         helper.make_node("MatMul", ["h_new", "v"], ["y_t"])],
        "body", [_value("h", [1, H]), _value("x_t", [1, D])], [_value("h_new", [1, H]), _value("y_t", [1, 2])])
    attrs = dict(num_scan_inputs=1, body=body, scan_input_axes=[in_axis], scan_output_axes=[out_axis],
                 scan_input_directions=[in_dir], scan_output_directions=[out_dir])
    node = helper.make_node("Scan", ["h0", "x"], ["h_last", "ys"], name="scan0", **attrs)
    return model([node], [("h0", F32, (1, H)), ("x", F32, x_shape)], [("h_last", F32), ("ys", F32)], opset,
                 [init("w", floats(D, H)), init("v", floats(H, 2))])


@pytest.mark.parametrize("opset", [9, 11, 16, 21])
@pytest.mark.parametrize("x_shape, in_axis, out_axis", [((T, 1, D), 0, 0), ((1, T, D), 1, 1), ((1, D, T), -1, -1)])
@pytest.mark.parametrize("in_dir, out_dir", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_scan_axes_and_directions(opset, x_shape, in_axis, out_axis, in_dir, out_dir):
    proto = _linear_scan(opset, x_shape, in_axis, out_axis, in_dir, out_dir)
    check_against_ort(proto, {"h0": floats(1, H), "x": floats(*x_shape)})


def _mlgru(opset, outputs=("h_last", "hs")):
    """The MLGRU token mixer: f_t = sigmoid(F_t), h_t = f_t * h_{t-1} + (1 - f_t) * c_t."""
    body = helper.make_graph(
        [helper.make_node("Sigmoid", ["f_pre"], ["f"]),
         helper.make_node("Mul", ["f", "h"], ["keep"]),
         helper.make_node("Sub", ["one", "f"], ["g"]),      # `one` is an outer-scope initializer
         helper.make_node("Mul", ["g", "c"], ["write"]),
         helper.make_node("Add", ["keep", "write"], ["h_new"]),
         helper.make_node("Mul", ["h_new", "one"], ["h_out"])],
        "mlgru", [_value("h", [B, H]), _value("f_pre", [B, H]), _value("c", [B, H])],
        [_value("h_new", [B, H]), _value("h_out", [B, H])])
    node = helper.make_node("Scan", ["h0", "f_seq", "c_seq"], ["h_last", "hs"], name="mlgru", num_scan_inputs=2,
                            body=body)
    return model([node], [("h0", F32, (B, H)), ("f_seq", F32, (T, B, H)), ("c_seq", F32, (T, B, H))],
                 [(name, F32) for name in outputs], opset, [init("one", np.ones((1,), np.float32))])


@pytest.mark.parametrize("opset", [11, 16, 21])
def test_mlgru_recurrence_matches_onnxruntime_and_numpy(opset):
    feeds = {"h0": floats(B, H), "f_seq": floats(T, B, H), "c_seq": floats(T, B, H)}
    graph = check_against_ort(_mlgru(opset), feeds)
    h = feeds["h0"]
    for t in range(T):
        f = 1 / (1 + np.exp(-feeds["f_seq"][t]))
        h = f * h + (1 - f) * feeds["c_seq"][t]
    np.testing.assert_allclose(run_graph(graph, feeds)["h_last"], h, rtol=1e-5, atol=1e-6)


def test_mlgru_lowers_to_one_map_counting_every_step():
    graph = from_model(_mlgru(13, outputs=("hs",)))
    (scan,) = lower(graph).ops
    body = graph.node("mlgru").resolved["body"]
    per_step = sum(op.ops for op in lower(body).ops)
    assert scan.kind == OpKind.map and scan.ops == T * per_step
    assert per_step >= 5 * B * H   # sigmoid, two muls, a sub and an add per hidden element at least
    assert {o.tensor for o in scan.inputs} == {"h0", "f_seq", "c_seq", "one"}   # the outer weight is read


def test_scan_with_both_outputs_read_counts_the_work_once():
    graph = from_model(_mlgru(13))
    ops = lower(graph).ops
    assert [op.kind for op in ops] == [OpKind.map, OpKind.map] and ops[1].ops == 0


def test_scan_errors_name_node_and_op():
    proto = _linear_scan(11, (T, 1, D))
    for attribute in proto.graph.node[0].attribute:
        if attribute.name == "num_scan_inputs":
            attribute.i = 3
    with pytest.raises(ModelError, match=r"'scan0' \(Scan\): num_scan_inputs is 3"):
        from_model(proto)
    body = helper.make_graph([helper.make_node("Add", ["h", "runtime"], ["h_new"])], "b",
                             [_value("h", [1, H]), _value("x_t", [1, D])], [_value("h_new", [1, H])])
    nodes = [helper.make_node("Sigmoid", ["h0"], ["runtime"]),
             helper.make_node("Scan", ["h0", "x"], ["h_last"], num_scan_inputs=1, body=body)]
    proto = model(nodes, [("h0", F32, (1, H)), ("x", F32, (T, 1, D))], [("h_last", F32)], 13)
    with pytest.raises(ModelError, match="computes at run time"):
        from_model(proto)
