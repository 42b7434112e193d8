"""LRN, BatchNormalization, LayerNormalization, Softmax/LogSoftmax, Reduce*: Graph and IR against onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler.errors import ModelError
from compiler.frontend import from_model
from compiler.ops.interpret import run_graph, run_ir
from compiler.ir import OpKind
from compiler.ops.lower import lower
from tests.compiler.onnx_models import F32, I32, I64, floats, init, ints, model
from tests.compiler.oracle import check_against_ort


def _one(op, x, opset, inits=(), extra_inputs=(), **attrs):
    node = helper.make_node(op, ["x", *extra_inputs], ["y"], name="n0", **attrs)
    return check_against_ort(model([node], [("x", F32, x.shape)], [("y", F32)], opset, inits), {"x": x})


# -- LRN -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 3, 5])
@pytest.mark.parametrize("opset", [9, 13])
def test_lrn(size, opset):
    x = floats(2, 7, 5, 4)
    graph = _one("LRN", x, opset, size=size, alpha=1e-2, beta=0.6, bias=2.0)
    (reduce,) = lower(graph).ops
    assert reduce.kind == OpKind.reduce and reduce.axes == (1,) and reduce.ops == x.size * (size + 5)


def test_lrn_even_size_follows_the_onnx_window():
    """onnxruntime refuses even sizes; ONNX puts floor((size-1)/2) channels below and the rest above."""
    x, size = floats(1, 6, 2, 3), 4
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=0.5, beta=0.75, bias=1.0)
    graph = from_model(model([node], [("x", F32, x.shape)], [("y", F32)], 13))
    want = np.empty_like(x)
    for c in range(6):
        window = x[:, max(0, c - 1):min(6, c + 3)]
        want[:, c] = x[:, c] / (1.0 + 0.5 / size * (window ** 2).sum(axis=1)) ** 0.75
    np.testing.assert_allclose(run_graph(graph, {"x": x})["y"], want, rtol=1e-5)
    np.testing.assert_allclose(run_ir(lower(graph), {"x": x})["y"], want, rtol=1e-5)


# -- BatchNormalization ----------------------------------------------------------------------------

def _bn_params(channels, shape=None):
    shape = shape or (channels,)
    return [init("scale", floats(*shape)), init("bias", floats(*shape)), init("mean", floats(*shape)),
            init("var", np.abs(floats(*shape)) + 0.1)]


@pytest.mark.parametrize("opset", [9, 14, 15])
@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (4, 6), (1, 3, 7)])
def test_batchnorm(opset, shape):
    x = floats(*shape)
    graph = _one("BatchNormalization", x, opset, _bn_params(shape[1]), ("scale", "bias", "mean", "var"),
                 epsilon=1e-3)
    (bn,) = lower(graph).ops
    assert bn.kind == OpKind.map and bn.ops == 2 * x.size


def test_batchnorm_bad_parameter_shape_and_refused_modes():
    node = helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"], name="bn1")
    proto = model([node], [("x", F32, (1, 3, 4, 4))], [("y", F32)], 15, _bn_params(4))
    with pytest.raises(ModelError, match=r"'bn1' \(BatchNormalization\): scale has shape \[4\], expected \[3\]"):
        from_model(proto)
    outputs = [("y", F32), ("running_mean", F32), ("running_var", F32)]
    for opset, attrs, message in ((15, {}, "only Y is an output in inference"),
                                  (12, {}, "training mode needs opset 14 or later")):
        node = helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"],
                                [name for name, _ in outputs], name="bn2", **attrs)
        proto = model([node], [("x", F32, (1, 3, 4, 4))], outputs, opset, _bn_params(3))
        with pytest.raises(ModelError, match=rf"'bn2' \(BatchNormalization\): {message}"):
            from_model(proto)


@pytest.mark.parametrize("opset", [14, 15])
@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (6, 4)])
def test_batchnorm_training_mode_equals_onnxruntime(opset, shape):
    """The batch's statistics normalise; the running statistics take the population variance (ONNX's ReduceVar)."""
    x = floats(*shape) * 2 + 1
    outputs = [("y", F32), ("running_mean", F32), ("running_var", F32)]
    node = helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], [n for n, _ in outputs],
                            training_mode=1, momentum=0.8, epsilon=1e-3)
    graph = check_against_ort(model([node], [("x", F32, x.shape)], outputs, opset, _bn_params(shape[1])), {"x": x})
    ops = lower(graph).ops
    kinds = [op.kind for op in ops if not getattr(op, "view", False)]
    assert kinds == [OpKind.reduce, OpKind.reduce, OpKind.map, OpKind.map, OpKind.map]
    assert sum(op.ops for op in ops) == x.size * (1 + 3 + 2) + 2 * 2 * shape[1]


# -- LayerNormalization ----------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [17, 18, 21])
@pytest.mark.parametrize("shape, axis, bias", [((2, 5, 8), -1, True), ((2, 5, 8), 1, False),
                                               ((3, 7), 0, True), ((2, 3, 4, 6), -2, True)])
def test_layernorm(opset, shape, axis, bias):
    x = floats(*shape)
    normalized = shape[axis:]
    inits = [init("scale", floats(*normalized))] + ([init("b", floats(*normalized))] if bias else [])
    graph = _one("LayerNormalization", x, opset, inits, ("scale",) + (("b",) if bias else ()), axis=axis,
                 epsilon=1e-4)
    (ln,) = lower(graph).ops
    assert ln.axes == tuple(range(axis % len(shape), len(shape))) and ln.ops == x.size * (6 + bias)


def test_layernorm_extra_outputs_lower_only_when_read():
    x = floats(2, 3, 8)
    node = helper.make_node("LayerNormalization", ["x", "scale"], ["y", "mean", "inv_std"], axis=-1)
    for outputs, ops in (([("y", F32)], 1), ([("y", F32), ("mean", F32), ("inv_std", F32)], 3)):
        graph = check_against_ort(model([node], [("x", F32, x.shape)], outputs, 17, [init("scale", floats(8))]),
                                  {"x": x})
        assert len(lower(graph).ops) == ops


def test_layernorm_of_doubles_computes_in_doubles():
    """onnxruntime normalises fp64 data in fp64 (its Mean and InvStdDev stay fp32, stash_type 1); in fp32 this
    x (offset 100) would be off by about 1e-5."""
    x = floats(2, 3, 8).astype(np.float64) * 3 + 100
    node = helper.make_node("LayerNormalization", ["x", "scale", "b"], ["y", "mean", "inv_std"], axis=-1)
    proto = model([node], [("x", TensorProto.DOUBLE, x.shape)],
                  [("y", TensorProto.DOUBLE), ("mean", F32), ("inv_std", F32)], 17,
                  [init("scale", floats(8).astype(np.float64)), init("b", floats(8).astype(np.float64))])
    check_against_ort(proto, {"x": x}, rtol=1e-12, atol=1e-12)


# -- Softmax ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset, axis, reduced", [(9, None, (1, 2, 3)), (11, 2, (2, 3)), (11, -1, (3,)),
                                                  (13, None, (3,)), (13, 1, (1,)), (21, -3, (1,))])
def test_softmax_axis_rule_changes_at_opset_13(op, opset, axis, reduced):
    x = floats(2, 3, 4, 5) * 3
    attrs = {} if axis is None else {"axis": axis}
    (reduce,) = lower(_one(op, x, opset, **attrs)).ops
    assert reduce.axes == reduced and reduce.ops == 5 * x.size


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("scale", [1e3, -1e3, 3e4])
def test_softmax_of_large_logits_equals_onnxruntime(op, scale):
    # exp(1000) overflows float32: only a max-subtracted softmax survives logits this large
    x = (floats(2, 3, 8) + scale).astype(np.float32)
    _one(op, x, 13, axis=-1)


# -- Reduce ----------------------------------------------------------------------------------------

REDUCE_CASES = [([1], 1), ([0, 2], 0), ([-1], 1), (None, 1), (None, 0), ([-3, 1], 0)]


@pytest.mark.parametrize("op, opsets", [("ReduceMean", (11, 13, 18, 21)), ("ReduceSum", (11, 13, 21)),
                                        ("ReduceMax", (11, 18)), ("ReduceMin", (13, 18))])
@pytest.mark.parametrize("axes, keepdims", REDUCE_CASES)
def test_reduce(op, opsets, axes, keepdims):
    x = floats(3, 4, 5)
    for opset in opsets:
        from_input = opset >= {"ReduceSum": 13}.get(op, 18)
        inits, extra, attrs = [], (), {"keepdims": keepdims}
        if axes is not None and from_input:
            inits, extra = [init("axes", np.array(axes, dtype=np.int64))], ("axes",)
        elif axes is not None:
            attrs["axes"] = axes
        (reduce,) = lower(_one(op, x, opset, inits, extra, **attrs)).ops
        assert reduce.kind == OpKind.reduce and reduce.ops == x.size


@pytest.mark.parametrize("opset", [13, 18])
def test_reduce_sum_of_integers_is_exact(opset):
    x = ints(-1000, 1000, 4, 6, dtype=np.int32)
    inputs = ["x", "axes"] if opset >= 13 else ["x"]
    node = helper.make_node("ReduceSum", inputs, ["y"], keepdims=0)
    check_against_ort(model([node], [("x", I32, x.shape)], [("y", I32)], opset,
                            [init("axes", np.array([1], dtype=np.int64))]), {"x": x})


@pytest.mark.parametrize("op, opset", [("ReduceSum", 13), ("ReduceMean", 18), ("ReduceMax", 18)])
def test_reduce_noop_with_empty_axes_is_a_view(op, opset):
    x = floats(3, 4)
    graph = _one(op, x, opset, noop_with_empty_axes=1)
    (move,) = lower(graph).ops
    assert move.kind == OpKind.move and move.view and move.nbytes == 0


def test_reduce_errors_name_node_and_op():
    node = helper.make_node("ReduceMean", ["x"], ["y"], name="r1", axes=[3])
    with pytest.raises(ModelError, match=r"'r1' \(ReduceMean\): axis 3 is out of range for rank 2"):
        from_model(model([node], [("x", F32, (3, 4))], [("y", F32)], 13))
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], name="r2")
    proto = model([node], [("x", F32, (3, 4)), ("axes", I64, (1,))], [("y", F32)], 13)
    graph = from_model(proto)       # axes fed at run time: evaluation takes them, simulation cannot
    with pytest.raises(ModelError, match=r"'r2' \(ReduceSum\): its output shape depends on the axes.*constant"):
        lower(graph)
