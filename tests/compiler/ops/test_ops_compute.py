"""Conv, Gemm, MatMul, MatMulInteger, pools: Graph reference and lowered IR against onnxruntime."""
import math

import numpy as np
import pytest
from onnx import helper

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.frontend import TERNARY_MARK, from_model
from compiler.ir import Einsum, OpKind, Move
from compiler.ops.lower import lower
from tests.compiler.onnx_models import F32, I8, I32, U8, floats, init, ints, model
from tests.compiler.oracle import check_against_ort


# -- Conv ------------------------------------------------------------------------------------------

def _conv(x_shape, w_shape, opset=13, bias=True, **attrs):
    x, w = floats(*x_shape), floats(*w_shape)
    inits = [init("w", w)] + ([init("b", floats(w_shape[0]))] if bias else [])
    node = helper.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["y"], name="conv0", **attrs)
    return model([node], [("x", F32, x_shape)], [("y", F32)], opset, inits), {"x": x}


CONVS = {
    "plain": ((1, 3, 8, 8), (4, 3, 3, 3), {}),
    "ragged_asym_pads": ((2, 3, 7, 5), (5, 3, 3, 2), dict(pads=[1, 0, 2, 1])),
    "stride_dilation": ((1, 2, 11, 9), (3, 2, 3, 3), dict(strides=[2, 3], dilations=[2, 1], pads=[2, 1, 1, 0])),
    "groups": ((1, 4, 6, 6), (6, 2, 3, 3), dict(group=2, pads=[1, 1, 1, 1])),
    "depthwise": ((2, 3, 7, 7), (3, 1, 3, 3), dict(group=3, strides=[2, 2], pads=[1, 1, 1, 1])),
    "depthwise_multiplier": ((1, 3, 5, 6), (6, 1, 2, 3), dict(group=3, dilations=[2, 1])),
    "patchify": ((1, 3, 8, 8), (4, 3, 4, 4), dict(strides=[4, 4])),
    "same_upper": ((1, 2, 7, 6), (3, 2, 3, 2), dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    "same_lower": ((1, 2, 7, 6), (3, 2, 4, 3), dict(auto_pad="SAME_LOWER", strides=[2, 1])),
    "valid": ((1, 2, 7, 6), (3, 2, 3, 3), dict(auto_pad="VALID", strides=[2, 2])),
    "conv1d": ((2, 3, 10), (4, 3, 3), dict(pads=[2, 1], strides=[2])),
    "conv1d_grouped": ((1, 4, 9), (4, 1, 3), dict(group=4, dilations=[3])),
    "conv3d": ((1, 2, 4, 5, 3), (3, 2, 2, 3, 2), dict(pads=[1, 0, 1, 0, 1, 0])),
}


@pytest.mark.parametrize("opset", [9, 11, 13, 21])
@pytest.mark.parametrize("case", sorted(CONVS))
def test_conv_matches_onnxruntime(case, opset):
    x_shape, w_shape, attrs = CONVS[case]
    check_against_ort(*_conv(x_shape, w_shape, opset, bias=case != "plain", **attrs))


@pytest.mark.parametrize("case", ["plain", "groups", "depthwise", "stride_dilation", "conv3d"])
def test_conv_is_one_einsum_with_the_conv_macs(case):
    x_shape, w_shape, attrs = CONVS[case]
    proto, _ = _conv(x_shape, w_shape, bias=True, **attrs)
    graph = from_model(proto)
    ir = lower(graph)
    einsums = [op for op in ir.ops if op.kind == OpKind.einsum]
    assert len(einsums) == 1
    n, k_total, *outs = graph.tensor("y").shape
    c_per_group, *kernel = w_shape[1:]
    assert einsums[0].macs == n * k_total * math.prod(outs) * c_per_group * math.prod(kernel)
    assert einsums[0].acc == DType.fp32
    # groups: a free view back to (N, G*K, P, Q); the bias is its own Map
    views = [op for op in ir.ops if isinstance(op, Move)]
    assert all(v.view and v.nbytes == 0 for v in views) and len(views) == (attrs.get("group", 1) > 1)
    assert ir.ops[-1].name == "conv0:bias" and ir.ops[-1].kind == OpKind.map


def test_conv_einsum_indexes_the_input_affinely():
    proto, _ = _conv((1, 4, 9, 9), (6, 2, 3, 3), bias=False, group=2, strides=[2, 2], dilations=[2, 1],
                     pads=[3, 1, 0, 0])
    einsum = lower(from_model(proto)).ops[0]
    assert einsum.describe() == "conv0:grouped[n,g,k,p,q] += x[n,2g+c,2p+2r-3,2q+s-1] * w[3g+k,c,r,s]"


@pytest.mark.parametrize("w_shape, attrs, words", [
    ((4, 2, 3, 3), {}, "weight's dim 1 must be 3"),
    ((4, 3, 3, 3), dict(group=2), "group 2 must divide"),
    ((4, 3, 3), {}, "rank 3"),
    ((4, 3, 9, 9), {}, "larger than the padded input"),
    ((4, 3, 3, 3), dict(strides=[1]), "strides must be 2 positive integers"),
    ((4, 3, 3, 3), dict(auto_pad="SAME"), "auto_pad 'SAME'"),
])
def test_conv_bad_shapes_name_node_and_op(w_shape, attrs, words):
    proto, _ = _conv((1, 3, 8, 8), w_shape, bias=False, **attrs)
    with pytest.raises(ModelError) as error:
        from_model(proto)
    assert "'conv0' (Conv)" in str(error.value) and words in str(error.value)


# -- Gemm ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [9, 11, 13])
@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("c_shape, alpha, beta", [((5,), 1.0, 1.0), ((3, 1), 0.5, 2.0), ((1, 5), 1.0, 0.25),
                                                  ((), 2.0, 1.0), ((3, 5), 1.0, 0.0)])
def test_gemm_matches_onnxruntime(opset, trans_a, trans_b, c_shape, alpha, beta):
    a = floats(*((4, 3) if trans_a else (3, 4)))
    b = floats(*((5, 4) if trans_b else (4, 5)))
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=alpha, beta=beta, transA=trans_a, transB=trans_b)
    proto = model([node], [("a", F32, a.shape)], [("y", F32)], opset, [init("b", b), init("c", floats(*c_shape))])
    ir = lower(check_against_ort(proto, {"a": a}))
    assert ir.ops[0].macs == 3 * 4 * 5
    assert len(ir.ops) == (2 if beta != 0 or alpha != 1 else 1)


def test_gemm_without_c_and_unit_alpha_is_one_einsum():
    a, b = floats(6, 7), floats(2, 7)
    node = helper.make_node("Gemm", ["a", "b"], ["y"], transB=1)
    graph = check_against_ort(model([node], [("a", F32, a.shape), ("b", F32, b.shape)], [("y", F32)], 13),
                              {"a": a, "b": b})
    assert [op.kind for op in lower(graph).ops] == [OpKind.einsum]


def test_gemm_inner_dimension_mismatch_is_clear():
    node = helper.make_node("Gemm", ["a", "b"], ["y"], name="fc")
    proto = model([node], [("a", F32, (2, 3)), ("b", F32, (4, 5))], [("y", F32)], 13)
    with pytest.raises(ModelError, match=r"'fc' \(Gemm\): inner dimensions differ"):
        from_model(proto)


# -- MatMul ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [9, 13])
@pytest.mark.parametrize("a_shape, b_shape", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 5)),
                                              ((3, 4), (4,)), ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 6)),
                                              ((1, 7, 4), (3, 4, 2)), ((5,), (2, 5, 3))])
def test_matmul_broadcasts_like_numpy(opset, a_shape, b_shape):
    a, b = floats(*a_shape), floats(*b_shape)
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    proto = model([node], [("a", F32, a_shape), ("b", F32, b_shape)], [("y", F32)], opset)
    ir = lower(check_against_ort(proto, {"a": a, "b": b}))
    assert ir.ops[0].macs == math.prod(np.matmul(a, b).shape) * a_shape[-1]


def test_attention_products_are_batched_einsums():
    q, k, v = floats(2, 4, 7, 8), floats(2, 4, 8, 7), floats(2, 4, 7, 8)
    nodes = [helper.make_node("MatMul", ["q", "k"], ["s"], name="qk"),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["o"], name="pv")]
    proto = model(nodes, [(n, F32, t.shape) for n, t in (("q", q), ("k", k), ("v", v))], [("o", F32)], 13)
    ir = lower(check_against_ort(proto, {"q": q, "k": k, "v": v}))
    qk, pv = ir.ops[0], ir.ops[2]
    assert isinstance(qk, Einsum) and qk.loops == (("b0", 2), ("b1", 4), ("m", 7), ("n", 7), ("k", 8))
    assert pv.macs == 2 * 4 * 7 * 8 * 7


@pytest.mark.parametrize("opset", [10, 13, 21])
@pytest.mark.parametrize("a_type, b_type, zero_points", [(I8, I8, False), (U8, U8, True), (U8, I8, True),
                                                        (I8, I8, True)])
def test_matmul_integer_matches_onnxruntime(opset, a_type, b_type, zero_points):
    numpy_type = {I8: np.int8, U8: np.uint8}
    lo = {I8: -128, U8: 0}
    # onnxruntime's x86 u8 x s8 kernel sums product pairs in saturating int16 (pmaddubsw): its
    # documented x86 saturation issue. 7-bit weights keep it exact, as ORT's quantizer does.
    span = 128 if (a_type, b_type) == (U8, I8) else 256
    a = ints(lo[a_type], lo[a_type] + 256, 2, 3, 6, dtype=numpy_type[a_type])
    b = ints(lo[b_type] // (256 // span), lo[b_type] // (256 // span) + span, 6, 4, dtype=numpy_type[b_type])
    inputs, inits = ["a", "b"], [init("b", b)]
    if zero_points:
        inits += [init("za", np.array(lo[a_type] + 100, dtype=numpy_type[a_type])),
                  init("zb", ints(lo[b_type], lo[b_type] + 256, 4, dtype=numpy_type[b_type]))]
        inputs += ["za", "zb"]
    node = helper.make_node("MatMulInteger", inputs, ["y"])
    ir = lower(check_against_ort(model([node], [("a", a_type, a.shape)], [("y", I32)], opset, inits), {"a": a}))
    einsum = ir.ops[-1]
    assert einsum.acc == DType.int32 and einsum.output.dtype == DType.int32
    assert len(ir.ops) == (3 if zero_points else 1)   # a zero point is subtracted by a Map per side


def test_matmul_integer_keeps_ternary_weights():
    a, w = ints(-128, 128, 3, 8), ints(-1, 2, 8, 5)
    node = helper.make_node("MatMulInteger", ["a", "w"], ["y"])
    proto = model([node], [("a", I8, a.shape)], [("y", I32)], 13, [init("w", w, TERNARY_MARK)])
    ir = lower(check_against_ort(proto, {"a": a}))
    (einsum,) = ir.ops
    assert [o.dtype for o in einsum.inputs] == [DType.int8, DType.ternary]
    assert einsum.inputs[1].nbytes == 8 * 5 * 2 // 8


# -- Pools -----------------------------------------------------------------------------------------

POOLS = {
    "plain": ((1, 2, 6, 6), dict(kernel_shape=[2, 2], strides=[2, 2])),
    "overlap_pads": ((2, 3, 7, 5), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 2])),
    "ceil": ((1, 2, 7, 8), dict(kernel_shape=[3, 2], strides=[2, 3], ceil_mode=1)),
    "ceil_pads": ((1, 1, 6, 6), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    "same_upper": ((1, 2, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 2], auto_pad="SAME_UPPER")),
    "pool1d": ((2, 3, 11), dict(kernel_shape=[4], strides=[3], pads=[1, 2])),
}


@pytest.mark.parametrize("opset", [10, 11, 19, 21])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool0", "AveragePool1"])
@pytest.mark.parametrize("case", sorted(POOLS))
def test_pool_matches_onnxruntime(op, case, opset):
    shape, attrs = POOLS[case]
    attrs = dict(attrs)
    if op.startswith("AveragePool"):
        attrs["count_include_pad"] = int(op[-1])
    x = floats(*shape)
    node = helper.make_node(op.rstrip("01"), ["x"], ["y"], **attrs)
    ir = lower(check_against_ort(model([node], [("x", F32, shape)], [("y", F32)], opset), {"x": x}))
    (reduce,) = ir.ops
    windows = reduce.output.elements * math.prod(attrs["kernel_shape"])
    assert reduce.kind == OpKind.reduce and windows <= reduce.ops < windows + 2 * reduce.inputs[0].elements


@pytest.mark.parametrize("opset", [12, 21])
def test_max_pool_dilations_and_int8(opset):
    x = ints(-128, 128, 1, 2, 9, 8)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 3], dilations=[3, 2], strides=[1, 2],
                            pads=[0, 1, 1, 0], ceil_mode=1)
    check_against_ort(model([node], [("x", I8, x.shape)], [("y", I8)], opset), {"x": x})


def test_average_pool_dilations_opset_19():
    x = floats(1, 2, 9, 8)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 3], pads=[1, 1, 0, 1])
    check_against_ort(model([node], [("x", F32, x.shape)], [("y", F32)], 19), {"x": x})


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (1, 4, 9), (1, 2, 3, 4, 5)])
def test_global_pools(op, shape):
    x = floats(*shape)
    graph = check_against_ort(model([helper.make_node(op, ["x"], ["y"])], [("x", F32, shape)], [("y", F32)], 13),
                              {"x": x})
    assert lower(graph).ops[0].ops == x.size


def test_pool_without_kernel_shape_is_clear():
    node = helper.make_node("MaxPool", ["x"], ["y"], name="pool1")
    with pytest.raises(ModelError, match=r"'pool1' \(MaxPool\): kernel_shape must be 2 positive"):
        from_model(model([node], [("x", F32, (1, 1, 4, 4))], [("y", F32)], 13))
