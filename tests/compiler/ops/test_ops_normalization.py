"""GroupNormalization (opsets 18 and 21), InstanceNormalization, MeanVarianceNormalization, LpNormalization and
RMSNormalization against onnxruntime and onnx's own cases; their IR Reduces; a simulation on a100."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from accelsim.sim.api import run
from compiler.errors import ModelError
from compiler.frontend import from_model
from compiler.ir import OpKind
from compiler.ops.interpret import run_graph, run_ir
from compiler.ops.lower import lower
from tests.compiler.onnx_models import init, model
from tests.compiler.oracle import check_against_ort, ort_run
from tests.compiler.ops.onnx_node_cases import check_case, node_cases

F32, F16, F64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE
RNG = np.random.default_rng(5)


def _graph(op, x, opset, params=(), rtol=1e-4, atol=1e-5, **attrs):
    """One node over x and initializer parameters [(name, value)], checked against onnxruntime; its Graph. onnx's
    checker refuses opset 18's GroupNormalization (deprecated there), which onnxruntime still runs: that one is
    compared without the checker."""
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    node = helper.make_node(op, ["x", *(name for name, _ in params)], ["y"], name="n0", **attrs)
    proto = model([node], [("x", elem, list(x.shape))], [("y", elem)], opset,
                  [init(name, value) for name, value in params])
    y = proto.graph.output[0].type.tensor_type
    if not y.HasField("shape"):     # onnx infers no shape for some function ops (GroupNormalization)
        for d in x.shape:
            y.shape.dim.add().dim_value = d
    if op != "GroupNormalization" or opset >= 21:
        return check_against_ort(proto, {"x": x}, rtol=rtol, atol=atol)
    graph = from_model(proto)
    want = ort_run(proto, {"x": x})["y"]
    for got in (run_graph(graph, {"x": x}), run_ir(lower(graph), {"x": x}, graph.tensors)):
        np.testing.assert_allclose(got["y"], want, rtol=rtol, atol=atol)
    return graph


def _bad(op, shape, opset, params=(), **attrs):
    node = helper.make_node(op, ["x", *(name for name, _ in params)], ["y"], name="n0", **attrs)
    proto = model([node], [("x", F32, list(shape))], [("y", F32)], opset,
                  [init(name, value) for name, value in params])
    with pytest.raises(ModelError) as error:
        from_model(proto)
    return str(error.value)


def _floats(*shape, dtype=np.float32):
    return (RNG.standard_normal(shape) * 2 + 0.5).astype(dtype)


# -- GroupNormalization, InstanceNormalization -----------------------------------------------------------------

@pytest.mark.parametrize("shape, groups", [((2, 6, 4, 4), 3), ((2, 6, 4, 4), 1), ((2, 6, 4, 4), 6), ((3, 4, 5), 2),
                                           ((1, 8, 2, 3, 2), 4), ((2, 4), 2)])
@pytest.mark.parametrize("opset", [18, 21])
def test_group_norm_matches_onnxruntime(shape, groups, opset):
    """opset 18: scale and bias one per group; opset 21: one per channel."""
    x = _floats(*shape)
    size = groups if opset < 21 else shape[1]
    params = [("scale", _floats(size)), ("bias", _floats(size))]
    graph = _graph("GroupNormalization", x, opset, params, num_groups=groups, epsilon=1e-3)
    ops = lower(graph).ops
    assert [op.kind for op in ops] == [OpKind.move, OpKind.reduce, OpKind.move]
    assert ops[0].view and ops[2].view and ops[1].ops == 7 * x.size and ops[1].axes == (2,)


def test_group_norm_in_fp16_computes_in_fp32():
    x = _floats(2, 4, 3, 3, dtype=np.float16)
    params = [("scale", _floats(4, dtype=np.float16)), ("bias", _floats(4, dtype=np.float16))]
    _graph("GroupNormalization", x, 21, params, rtol=2e-3, atol=2e-3, num_groups=2)


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 2, 2)])
@pytest.mark.parametrize("opset, epsilon", [(9, 1e-5), (22, 1e-2)])
def test_instance_norm_matches_onnxruntime(shape, opset, epsilon):
    x = _floats(*shape)
    params = [("scale", _floats(shape[1])), ("bias", _floats(shape[1]))]
    graph = _graph("InstanceNormalization", x, opset, params, epsilon=epsilon)
    (ir_op,) = lower(graph).ops
    assert ir_op.kind == OpKind.reduce and ir_op.axes == tuple(range(2, len(shape))) and ir_op.ops == 7 * x.size


def test_group_norm_refuses_groups_that_do_not_divide_the_channels():
    message = _bad("GroupNormalization", (2, 6, 3), 21, [("scale", np.ones(6, np.float32)),
                                                         ("bias", np.zeros(6, np.float32))], num_groups=4)
    assert "'n0' (GroupNormalization)" in message and "num_groups=4" in message and "6 channels" in message


def test_group_norm_refuses_per_group_parameters_in_opset_21():
    message = _bad("GroupNormalization", (2, 6, 3), 21, [("scale", np.ones(3, np.float32)),
                                                         ("bias", np.zeros(3, np.float32))], num_groups=3)
    assert "scale 'scale' is fp32 [3], expected fp32 [6] (one per channel)" in message


def test_instance_norm_refuses_rank_2():
    message = _bad("InstanceNormalization", (2, 3), 13, [("scale", np.ones(3, np.float32)),
                                                         ("bias", np.zeros(3, np.float32))])
    assert "'n0' (InstanceNormalization)" in message and "rank 3 or more" in message


# -- MeanVarianceNormalization, LpNormalization, RMSNormalization ----------------------------------------------

# onnx's shape inference of the opset 13 function body fails without an axes attribute: the default in opset 9
@pytest.mark.parametrize("axes, opset", [(None, 9), ([0, 2, 3], 13), ([1], 9), ([1], 13), ([2, 3], 13),
                                         ([-1, 0], 9), ([-1, 0], 13)])
def test_mvn_matches_onnxruntime(axes, opset):
    x = _floats(2, 3, 4, 5)
    graph = _graph("MeanVarianceNormalization", x, opset, **({} if axes is None else {"axes": axes}))
    (ir_op,) = lower(graph).ops
    assert ir_op.kind == OpKind.reduce and ir_op.ops == 5 * x.size


def test_mvn_refuses_a_repeated_axis():
    message = _bad("MeanVarianceNormalization", (2, 3, 4), 13, axes=[1, -2])
    assert "'n0' (MeanVarianceNormalization)" in message and "distinct axes" in message


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lp_norm_matches_onnxruntime(p, axis, dtype):
    x = _floats(3, 4, 5, dtype=dtype)
    x[1, :, 2] = 0.0          # a zero row along axis 1
    graph = _graph("LpNormalization", x, 13, p=p, axis=axis)
    (ir_op,) = lower(graph).ops
    assert ir_op.kind == OpKind.reduce and ir_op.ops == 3 * x.size


def test_lp_norm_refuses_p_3():
    message = _bad("LpNormalization", (2, 3), 13, p=3)
    assert "'n0' (LpNormalization)" in message and "p=3" in message and "(1 or 2)" in message


@pytest.mark.parametrize("axis, scale_shape", [(-1, (5,)), (1, (4, 5)), (1, (1, 5)), (0, (3, 4, 5))])
def test_rms_norm_matches_onnxruntime(axis, scale_shape):
    x = _floats(3, 4, 5)
    graph = _graph("RMSNormalization", x, 23, [("scale", _floats(*scale_shape))], axis=axis, epsilon=1e-4)
    (ir_op,) = lower(graph).ops
    assert ir_op.kind == OpKind.reduce and ir_op.ops == 4 * x.size and ir_op.axes == tuple(range(axis % 3, 3))


def test_rms_norm_refuses_a_scale_that_does_not_fit():
    message = _bad("RMSNormalization", (3, 4, 5), 23, [("scale", np.ones(4, np.float32))])
    assert "'n0' (RMSNormalization)" in message and "scale has shape [4]" in message


@pytest.mark.parametrize("module", ["groupnormalization", "instance_normalization", "meanvariancenormalization",
                                    "lpnormalization", "rmsnormalization"])
def test_normalization_onnx_cases(module):
    for case in node_cases(module).values():
        check_case(case)


# -- simulation ------------------------------------------------------------------------------------------

def test_normalizations_simulate_on_a100_with_time():
    c = 32
    nodes = [helper.make_node("GroupNormalization", ["x", "gs", "gb"], ["g"], name="group", num_groups=8),
             helper.make_node("InstanceNormalization", ["g", "gs", "gb"], ["i"], name="instance"),
             helper.make_node("MeanVarianceNormalization", ["i"], ["m"], name="mvn"),
             helper.make_node("LpNormalization", ["m"], ["l"], name="lp", axis=1),
             helper.make_node("RMSNormalization", ["l", "rs"], ["y"], name="rms")]
    proto = model(nodes, [("x", F32, [4, c, 16, 16])], [("y", F32)], 23,
                  [init("gs", np.ones(c, np.float32)), init("gb", np.zeros(c, np.float32)),
                   init("rs", np.ones(16, np.float32))])
    result = run(from_model(proto), "a100")
    computing = {op.node: op for op in result.ops if op.kind == "reduce"}
    assert set(computing) == {"group", "instance", "mvn", "lp", "rms"}
    assert all(op.seconds > 0 and op.ops > 0 for op in computing.values())
