"""QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearConv, QLinearMatMul, ConvInteger and
MatMulInteger: the Graph reference and the lowered IR against onnxruntime (integers exactly, floats to one float32
rounding), and against the ONNX conformance cases of these ops."""
import re

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.frontend import SUPPORTED_OPSETS, from_model
from compiler.ir import Einsum, OpKind, Map, Move
from compiler.ops.interpret import run_graph, run_ir
from compiler.ops.lower import lower
from tests.compiler.onnx_models import F32, I8, I32, U8, init, model
from tests.compiler.ops.onnx_node_cases import node_cases
from tests.compiler.oracle import check_against_ort

RNG = np.random.default_rng(3)
EXACT = dict(rtol=0, atol=0)


def _data(*shape):
    return (RNG.standard_normal(shape) * 2).astype(np.float32)


def _round_trip(x_shape, scale, zero_point, opset, **attrs):
    """x -> QuantizeLinear -> q and q -> DequantizeLinear -> y: both outputs checked."""
    inits = [init("s", scale)] + ([zero_point if isinstance(zero_point, onnx.TensorProto)
                                   else init("z", zero_point)] if zero_point is not None else [])
    names = ["x", "s"] + (["z"] if zero_point is not None else [])
    nodes = [helper.make_node("QuantizeLinear", names, ["q"], **attrs),
             helper.make_node("DequantizeLinear", ["q"] + names[1:], ["y"],
                              **{k: v for k, v in attrs.items() if k != "saturate"})]
    return nodes, [("x", F32, list(x_shape))], inits


@pytest.mark.parametrize("opset", [10, 13, 19, 21])
@pytest.mark.parametrize("zero_point", [np.int8(-3), np.uint8(131), None])
def test_per_tensor_round_trip_matches_onnxruntime(zero_point, opset):
    nodes, inputs, inits = _round_trip((2, 3, 5), np.float32(0.02), zero_point, opset)
    q_type = I8 if isinstance(zero_point, np.int8) else U8
    graph = check_against_ort(model(nodes, inputs, [("q", q_type), ("y", F32)], opset, inits),
                              {"x": _data(2, 3, 5)}, **EXACT)
    assert graph.tensor("q").dtype == (DType.int8 if q_type == I8 else DType.uint8)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_per_axis_round_trip_matches_onnxruntime(axis):
    size = (4, 3, 5)[axis]
    scale = RNG.uniform(0.01, 0.1, size).astype(np.float32)
    zero_point = RNG.integers(-10, 10, size).astype(np.int8)
    nodes, inputs, inits = _round_trip((4, 3, 5), scale, zero_point, 13, axis=axis)
    check_against_ort(model(nodes, inputs, [("q", I8), ("y", F32)], 13, inits), {"x": _data(4, 3, 5)}, **EXACT)


def test_int16_and_halves_round_to_even():
    x = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e9, -1e9]], dtype=np.float32)
    nodes, inputs, inits = _round_trip(x.shape, np.float32(1.0), np.int16(0), 21)
    check_against_ort(model(nodes, inputs, [("q", TensorProto.INT16), ("y", F32)], 21, inits), {"x": x}, **EXACT)
    graph = from_model(model(nodes, inputs, [("q", TensorProto.INT16)], 21, inits))
    assert run_graph(graph, {"x": x})["q"].tolist() == [[0, 2, 2, 0, -2, -2, 32767, -32768]]


@pytest.mark.parametrize("case", ["int4_per_axis", "int4_blocked", "fp8", "fp8_no_saturate", "int8_blocked"])
def test_narrow_types_match_onnxruntime(case):
    """int4 (per axis, blocked), fp8 e4m3fn (saturating or not) and blocked int8: the dequantized values."""
    shape = (2, 6, 4)
    if case == "int4_per_axis":
        zp = numpy_helper.from_array(np.array([1, 0, -2, 3, 0, -1], dtype=ml_dtypes.int4), "z")
        parts = _round_trip(shape, RNG.uniform(0.2, 0.5, 6).astype(np.float32), zp, 21, axis=1)
    elif case == "int4_blocked":
        zp = numpy_helper.from_array(np.zeros((2, 3, 4), dtype=ml_dtypes.int4), "z")
        parts = _round_trip(shape, RNG.uniform(0.2, 0.5, (2, 3, 4)).astype(np.float32), zp, 21, axis=1, block_size=2)
    elif case == "int8_blocked":
        parts = _round_trip(shape, RNG.uniform(0.01, 0.05, (2, 6, 2)).astype(np.float32), np.zeros((2, 6, 2), np.int8),
                            21, axis=2, block_size=2)
    else:
        # scale 0.03: |x / scale| stays under 448 but for the two values set below, as onnxruntime maps
        # [480, 512) to 448 without saturation where the spec (and ml_dtypes) give NaN
        zp = numpy_helper.from_array(np.array(0, dtype=ml_dtypes.float8_e4m3fn), "z")
        parts = _round_trip(shape, np.float32(0.03), zp, 19, **({"saturate": 0} if case.endswith("saturate") else {}))
    x = _data(*shape)
    if case == "fp8_no_saturate":
        x[0, 0, :2] = [1e4, -1e4]   # beyond 448 * scale: NaN without saturation
    check_against_ort(model(*parts[:2], [("y", F32)], 21 if "int" in case else 19, parts[2]), {"x": x}, **EXACT)


def test_dynamic_quantize_linear_matches_onnxruntime():
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zp"])
    proto = model([node], [("x", F32, [3, 7])], [("y", U8), ("scale", F32), ("zp", U8)], 11)
    for x in (_data(3, 7), np.abs(_data(3, 7)), -np.abs(_data(3, 7))):
        check_against_ort(proto, {"x": x}, **EXACT)
    ops = lower(from_model(proto)).ops
    assert [op.kind for op in ops] == [OpKind.reduce, OpKind.map, OpKind.map, OpKind.map]
    assert ops[0].ops == 2 * 21 and ops[-1].ops == 4 * 21     # min and max, then divide, round, add, clamp


def test_quantize_and_dequantize_are_priced_maps():
    nodes, inputs, inits = _round_trip((2, 8), np.float32(0.1), np.int8(0), 13)
    q, dq = lower(from_model(model(nodes, inputs, [("y", F32)], 13, inits))).ops
    assert isinstance(q, Map) and q.ops == 4 * 16 and q.output.dtype == DType.int8
    assert isinstance(dq, Map) and dq.ops == 2 * 16 and dq.inputs[0].nbytes == 16


@pytest.mark.parametrize("attrs, scale, words", [
    ({}, np.ones((2, 2), np.float32), "scale has shape [2, 2]"),
    ({"axis": 1}, np.ones(5, np.float32), "along axis 1"),
    ({"axis": 4}, np.ones(3, np.float32), "axis 4 is out of range"),
    ({"block_size": -1}, np.ones(3, np.float32), "block_size -1"),
    ({"block_size": 2, "axis": 1}, np.ones((2, 3), np.float32), "must have shape [2, 2]"),
])
def test_bad_scales_are_clear_errors(attrs, scale, words):
    nodes = [helper.make_node("QuantizeLinear", ["x", "s"], ["q"], name="q0", **attrs)]
    proto = model(nodes, [("x", F32, [2, 3])], [("q", U8)], 21, [init("s", scale)])
    with pytest.raises(ModelError, match=re.escape(words)) as error:
        from_model(proto)
    assert "'q0' (QuantizeLinear)" in str(error.value)


def test_dequantize_zero_point_type_must_match():
    node = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq0")
    proto = model([node], [("q", I8, [4])], [("y", F32)], 13, [init("s", np.float32(1)), init("z", np.uint8(1))])
    with pytest.raises(ModelError, match="zero point is uint8 but the input is int8"):
        from_model(proto)


# -- QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger -----------------------------------------------

def _qlinear_conv(x_type, w_zero, x_zero, per_channel, groups=1, bias=True, **attrs):
    k, c = 6, 4
    w_shape = (k, c // groups, 3, 3)
    low, high = (0, 256) if x_type == U8 else (-128, 128)
    x = RNG.integers(low, high, (1, c, 7, 6)).astype(np.uint8 if x_type == U8 else np.int8)
    x_np = x.dtype.type
    # 7-bit weights: onnxruntime on x86 without VNNI sums uint8 x int8 pairs in int16 (vpmaddubsw), which
    # saturates for full-range weights; with |w| <= 64 no pair can, so it is exact on every machine
    w = RNG.integers(-64, 64, w_shape).astype(np.int8)
    w_scale = RNG.uniform(0.01, 0.03, k).astype(np.float32) if per_channel else np.float32(0.02)
    w_zp = np.full(k, w_zero, np.int8) if per_channel else np.int8(w_zero)
    inits = [init("xs", np.float32(0.05)), init("xz", x_np(x_zero)), init("w", w), init("ws", w_scale),
             init("wz", w_zp), init("ys", np.float32(0.7)), init("yz", x_np(x_zero // 2))]
    names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias:
        inits.append(init("b", RNG.integers(-2000, 2000, k).astype(np.int32)))
        names.append("b")
    node = helper.make_node("QLinearConv", names, ["y"], name="qconv", group=groups, **attrs)
    return model([node], [("x", x_type, list(x.shape))], [("y", x_type)], 10, inits), {"x": x}


QCONVS = {
    "uint8_zero_point_padded": (U8, 0, 131, False, 1, dict(pads=[1, 1, 1, 1])),
    "int8_per_channel_strided": (I8, 0, -7, True, 1, dict(pads=[1, 0, 2, 1], strides=[2, 2])),
    "int8_weight_zero_point": (I8, 3, 5, True, 1, dict(pads=[1, 1, 1, 1])),
    "grouped_no_bias": (U8, 0, 100, False, 2, dict(pads=[0, 1, 0, 1], dilations=[2, 1])),
}


@pytest.mark.parametrize("case", sorted(QCONVS))
def test_qlinear_conv_matches_onnxruntime(case):
    x_type, w_zero, x_zero, per_channel, groups, attrs = QCONVS[case]
    proto, feeds = _qlinear_conv(x_type, w_zero, x_zero, per_channel, groups, bias=case != "grouped_no_bias",
                                 **attrs)
    graph = check_against_ort(proto, feeds, **EXACT)
    ops = lower(graph).ops
    einsum = next(op for op in ops if isinstance(op, Einsum))
    # the MACs read the stored 8-bit data; a known weight zero point is subtracted first (int16)
    assert einsum.inputs[0].dtype == graph.tensor("x").dtype and einsum.acc == DType.int32
    assert einsum.inputs[1].dtype == (DType.int16 if w_zero else DType.int8)
    pads = [op for op in ops if isinstance(op, Move) and op.name.endswith(":pad")]
    assert len(pads) == 1 and pads[0].nbytes > 0   # the border is the zero point, a priced copy
    assert ops[-1].name == "qconv:requantize" and ops[-1].ops >= 3 * graph.tensor("y").elements


@pytest.mark.parametrize("a_type", [U8, I8])
def test_qlinear_matmul_matches_onnxruntime(a_type):
    """Per-tensor A (onnxruntime takes no per-row A zero point), per-column B scales."""
    a_np = np.uint8 if a_type == U8 else np.int8
    a = RNG.integers(0 if a_type == U8 else -128, 128, (2, 5, 16)).astype(a_np)
    inits = [init("as", np.float32(0.03)), init("az", a_np(9)),
             init("b", RNG.integers(-128, 128, (16, 6)).astype(np.int8)),
             init("bs", RNG.uniform(0.01, 0.05, 6).astype(np.float32)), init("bz", np.zeros(6, np.int8)),
             init("ys", np.float32(0.4)), init("yz", a_np(3))]
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"], name="qmm")
    graph = check_against_ort(model([node], [("a", a_type, [2, 5, 16])], [("y", a_type)], 10, inits), {"a": a},
                              **EXACT)
    einsum, requantize = lower(graph).ops
    # known weights: the A zero point is corrected after the sum, so the MACs stay 8-bit
    assert einsum.inputs[0].dtype.bits == 8 and einsum.acc == DType.int32
    assert requantize.fn.weight_sums.shape == (6,) and requantize.ops == 4 * 2 * 5 * 6


@pytest.mark.parametrize("with_w_zero", [False, True])
def test_conv_integer_matches_onnxruntime(with_w_zero):
    x = RNG.integers(0, 256, (2, 3, 6, 6)).astype(np.uint8)
    inits = [init("w", RNG.integers(0, 256, (4, 3, 3, 3)).astype(np.uint8)), init("xz", np.uint8(128))]
    names = ["x", "w", "xz"] + (["wz"] if with_w_zero else [])
    inits += [init("wz", np.uint8(120))] if with_w_zero else []
    node = helper.make_node("ConvInteger", names, ["y"], name="ci", pads=[1, 2, 1, 0], strides=[1, 2])
    graph = check_against_ort(model([node], [("x", U8, [2, 3, 6, 6])], [("y", I32)], 10, inits), {"x": x},
                              **EXACT)
    assert graph.tensor("y").dtype == DType.int32


def test_qlinear_conv_bad_types_are_clear_errors():
    proto, _ = _qlinear_conv(U8, 0, 1, False)
    proto.graph.initializer[-1].CopyFrom(init("b", np.zeros(6, np.float32)))
    with pytest.raises(ModelError, match="'qconv' \\(QLinearConv\\): bias is fp32; QLinearConv's bias is int32"):
        from_model(proto)


# -- the ONNX conformance cases of these ops --------------------------------------------------------------

OPS = ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul",
       "ConvInteger", "MatMulInteger")
# Cases on element types that compiler.dtypes may not define: refused with a clear ModelError where it does not.
TYPED_CASES = {"e5m2": "fp8_e5m2", "uint16": "uint16", "uint4": "uint4", "uint2": "uint2", "int2": "int2",
               "float4e2m1": "fp4"}


def _cases():
    """The cases of onnx's modules of these ops (each module its op's file), not all of onnx's: a second, not five."""
    cases = {}
    for op in OPS:
        cases.update(node_cases(op.lower()))
    return {name: c for name, c in cases.items() if c.model.graph.node[0].op_type in OPS
            or (len(c.model.graph.node) > 1 and name.startswith("test_dynamicquantizelinear"))}


CASES = _cases()


def _array(value) -> np.ndarray:
    """A case's value as the reference interpreter holds it (fp8 and bf16 as float32, int4 as int8)."""
    if isinstance(value, onnx.TensorProto):
        value = numpy_helper.to_array(value)
    value = np.asarray(value)
    if value.dtype in (ml_dtypes.int4, ml_dtypes.int2):
        return value.astype(np.int8)
    if value.dtype in (ml_dtypes.uint4, ml_dtypes.uint2):
        return value.astype(np.uint8)
    return value.astype(np.float32) if value.dtype.kind == "V" or value.dtype == ml_dtypes.bfloat16 else value


def test_every_op_has_conformance_cases():
    assert {c.model.graph.node[0].op_type for c in CASES.values()} >= set(OPS) and len(CASES) >= 45


@pytest.mark.parametrize("name", sorted(CASES))
def test_conformance_case(name):
    case = CASES[name]
    proto = onnx.ModelProto()
    proto.CopyFrom(case.model)
    for imp in proto.opset_import:   # stamped with onnx's newest opset; 21 means the same for these cases
        if imp.domain in ("", "ai.onnx") and imp.version not in SUPPORTED_OPSETS:
            imp.version = 21
    dtype = next((d for tag, d in TYPED_CASES.items() if name.endswith(tag)), None)
    if dtype is not None and dtype not in DType.__members__:
        with pytest.raises(ModelError, match="is not supported|allowed"):
            from_model(proto)
        return
    graph = from_model(proto)
    inputs, outputs = case.data_sets[0]
    feeds = {info.name: _array(v) for info, v in zip(case.model.graph.input, inputs)}
    for label, got in (("graph", run_graph(graph, feeds)), ("ir", run_ir(lower(graph), feeds, graph.tensors))):
        for info, want in zip(case.model.graph.output, outputs):
            want, value = _array(want), np.asarray(got[info.name])
            assert value.shape == want.shape, label
            if want.dtype.kind == "f":
                np.testing.assert_allclose(value.astype(np.float32), want.astype(np.float32), rtol=1e-3,
                                           atol=1e-6, err_msg=label)
            else:
                np.testing.assert_array_equal(value, want, err_msg=label)
