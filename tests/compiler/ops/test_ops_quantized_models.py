"""Real models quantized by onnxruntime.quantization (static QDQ per tensor and per channel, dynamic, QOperator):
the Graph reference against onnxruntime run op by op, and the compiled IR (QDQ folded into integer Einsums)
against onnxruntime's own fused kernels; the folded Einsums tiled for TPU v1 keep their numbers.

Tolerance: outputs are dequantized values of the last QuantizeLinear, so they agree exactly or differ by whole
steps of its scale; a float sum in another order can move a value across a rounding boundary, so at most one
step is allowed, on at most 1% of the elements. Dynamic quantization's float outputs agree to float32 rounding.
"""
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.frontend import from_model
from compiler.ir import Einsum, Map, Move
from compiler.ops.interpret import run_graph, run_ir
from compiler.ops.qlinear import Requantize
from compiler.ops.quantize import Dequantize
from compiler.compile import Options, compile_graph

RNG = np.random.default_rng(11)
F32 = TensorProto.FLOAT


def _weight(name, *shape, scale=0.3):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def conv_net(channels=8, size=12) -> onnx.ModelProto:
    """Conv-Relu, strided Conv-Relu, a 1x1 Conv added back (a residual), global average pool, Gemm."""
    c = channels
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"]),
             helper.make_node("Add", ["r2", "c3"], ["s"]),
             helper.make_node("GlobalAveragePool", ["s"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    inits = [_weight("w1", c, 3, 3, 3), _weight("b1", c), _weight("w2", c, c, 3, 3, scale=0.15), _weight("b2", c),
             _weight("w3", c, c, 1, 1), _weight("b3", c), _weight("wf", 10, c), _weight("bf", 10)]
    return _model(nodes, [1, 3, size, size], inits)


def mlp() -> onnx.ModelProto:
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y"])]
    return _model(nodes, [4, 32], [_weight("w1", 32, 48), _weight("b1", 48), _weight("w2", 48, 16, scale=0.2)])


def _model(nodes, x_shape, inits) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", F32, x_shape)],
                              [helper.make_tensor_value_info("y", F32, None)], initializer=inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    return onnx.shape_inference.infer_shapes(proto)


class _Calibration(CalibrationDataReader):
    def __init__(self, shape):
        self.batches = iter([{"x": RNG.standard_normal(shape).astype(np.float32)} for _ in range(4)])

    def get_next(self):
        return next(self.batches, None)


# Weights in 7 bits (`reduce_range`): onnxruntime's integer kernels on x86 without VNNI (AVX2 only) multiply
# uint8 by int8 in pairs summed into int16 (vpmaddubsw), which saturates for 8-bit weights: its outputs then
# differ from its own op-by-op run by up to 15 output steps, on one machine and not on another. With 7-bit
# weights no pair can saturate (2 x 255 x 64 < 32,767), so onnxruntime is an exact oracle on every x86.
REDUCE_RANGE = True


def quantized(proto: onnx.ModelProto, folder, per_channel=True, activations=QuantType.QInt8,
              fmt=QuantFormat.QDQ) -> onnx.ModelProto:
    """The model quantized by onnxruntime's static quantizer, calibrated on random inputs."""
    source, target = folder / "float.onnx", folder / "int8.onnx"
    onnx.save(proto, source)
    shape = [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
    quantize_static(str(source), str(target), _Calibration(shape), quant_format=fmt, per_channel=per_channel,
                    activation_type=activations, weight_type=QuantType.QInt8, reduce_range=REDUCE_RANGE)
    return onnx.load(str(target))


def ort(proto: onnx.ModelProto, feeds: dict, fused: bool) -> np.ndarray:
    """onnxruntime's output: `fused` lets it fold QDQ into its integer kernels, else it runs op by op."""
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL if fused \
        else onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _output_step(proto: onnx.ModelProto) -> float:
    """The scale of the QuantizeLinear whose DequantizeLinear gives the output y."""
    last = next(n for n in proto.graph.node if "y" in n.output)
    scales = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    return float(scales[last.input[1]])


def assert_within_a_step(got, want, step, label):
    off = np.abs(np.asarray(got, np.float64) - want)
    assert off.max() <= step * 1.001, f"{label}: off by {off.max() / step:.2f} steps"
    assert np.mean(off > step * 1e-3) <= 0.01, f"{label}: {np.mean(off > 0):.1%} of the elements differ"


@pytest.mark.parametrize("activations", [QuantType.QInt8, QuantType.QUInt8])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("build", [conv_net, mlp])
def test_static_qdq_matches_onnxruntime(build, per_channel, activations, tmp_path):
    proto = quantized(build(), tmp_path, per_channel, activations)
    graph = from_model(proto)
    feeds = {"x": RNG.standard_normal(graph.tensor("x").shape).astype(np.float32)}
    step = _output_step(proto)
    assert_within_a_step(run_graph(graph, feeds)["y"], ort(proto, feeds, fused=False), step, "graph")
    ir = compile_graph(graph, Options())
    assert_within_a_step(run_ir(ir, feeds, graph.tensors)["y"], ort(proto, feeds, fused=True), step, "folded IR")
    # every Conv, Gemm and MatMul folded: its MACs over 8-bit values into int32
    einsums = [op for op in ir.ops if isinstance(op, Einsum)]
    assert len(einsums) == (4 if build is conv_net else 2)
    assert all(op.acc == DType.int32 and {o.dtype.bits for o in op.inputs} == {8} for op in einsums)


def test_folded_conv_is_one_int8_einsum_whose_epilogue_requantises(tmp_path):
    proto = quantized(conv_net(), tmp_path, per_channel=True, activations=QuantType.QUInt8)
    graph = from_model(proto)
    ir = compile_graph(graph, Options())
    by_node = {}
    for op in ir.ops:
        by_node.setdefault(op.node, []).append(op)
    first = by_node[next(n.name for n in graph.nodes if n.op == "Conv")]
    # uint8 data with a zero point: the border is padded with it (a priced copy), then one Einsum over the
    # stored uint8 data and int8 weights, then one Map that corrects, scales, rounds and saturates
    pad, einsum, requantize = first
    assert isinstance(pad, Move) and pad.nbytes > 0
    assert isinstance(einsum, Einsum) and einsum.acc == DType.int32 and einsum.output.dtype == DType.int32
    assert [o.dtype for o in einsum.inputs] == [DType.uint8, DType.int8]
    assert isinstance(requantize, Map) and isinstance(requantize.fn, Requantize)
    assert requantize.output.dtype == DType.uint8 and requantize.ops == 4 * requantize.output.elements
    assert requantize.fn.relu is False and "bias" in requantize.fn.roles
    # no DequantizeLinear is left on a folded operand (the residual Add still dequantizes its inputs)
    dequantized = {op.output.tensor for op in ir.ops if isinstance(op, Map) and isinstance(op.fn, Dequantize)}
    assert not any(o.tensor in dequantized for e in ir.ops if isinstance(e, Einsum) for o in e.inputs)


def test_dynamic_quantization_matches_onnxruntime(tmp_path):
    """quantize_dynamic: DynamicQuantizeLinear -> MatMulInteger / ConvInteger -> scale in float."""
    for name, proto in (("mlp", mlp()), ("conv", conv_net())):
        source, target = tmp_path / f"{name}.onnx", tmp_path / f"{name}_dynamic.onnx"
        onnx.save(proto, source)
        quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8,
                         op_types_to_quantize=["MatMul", "Conv"], reduce_range=REDUCE_RANGE)
        dynamic = onnx.load(str(target))
        ops = {n.op_type for n in dynamic.graph.node}
        assert "DynamicQuantizeLinear" in ops and ({"MatMulInteger", "ConvInteger"} & ops)
        graph = from_model(dynamic)
        feeds = {"x": RNG.standard_normal(graph.tensor("x").shape).astype(np.float32)}
        want = ort(dynamic, feeds, fused=False)
        np.testing.assert_allclose(run_graph(graph, feeds)["y"], want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(run_ir(compile_graph(graph), feeds, graph.tensors)["y"], want, rtol=1e-5,
                                   atol=1e-5)


def test_qoperator_format_imports_qlinear_conv(tmp_path):
    """QOperator format: QLinearConv nodes (onnxruntime's contrib ops, such as QLinearAdd, are refused)."""
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], strides=[2, 2])]
    inits = [_weight("w1", 8, 3, 3, 3), _weight("b1", 8), _weight("w2", 4, 8, 3, 3, scale=0.15), _weight("b2", 4)]
    proto = quantized(_model(nodes, [1, 3, 10, 10], inits), tmp_path, fmt=QuantFormat.QOperator,
                      activations=QuantType.QUInt8)
    assert [n.op_type for n in proto.graph.node].count("QLinearConv") == 2
    graph = from_model(proto)
    feeds = {"x": RNG.standard_normal((1, 3, 10, 10)).astype(np.float32)}
    step = _output_step(proto)
    assert_within_a_step(run_graph(graph, feeds)["y"], ort(proto, feeds, fused=False), step, "graph")
    assert_within_a_step(run_ir(compile_graph(graph), feeds, graph.tensors)["y"], ort(proto, feeds, fused=False),
                         step, "IR")
    contrib = quantized(conv_net(), tmp_path, fmt=QuantFormat.QOperator)
    with pytest.raises(ModelError, match="in domain 'com.microsoft' is not supported"):
        from_model(contrib)


def test_tiled_int8_program_keeps_the_numbers(tmp_path):
    """Compiled for TPU v1, each op computed tile by tile equals its untiled reference (integers exactly)."""
    from accelsim.sim.build import mappings_for
    from compiler.codegen import generate
    from tests.compiler.codegen.test_codegen import check_every_op, compiled

    proto = quantized(conv_net(channels=16, size=10), tmp_path, per_channel=True, activations=QuantType.QUInt8)
    graph = from_model(proto)
    arch, ir = compiled(graph, "tpu_v1")
    feeds = {"x": RNG.standard_normal((1, 3, 10, 10)).astype(np.float32)}
    check_every_op(ir, generate(ir, arch, mappings_for(ir, arch)), feeds)
    folded = [op for op in ir.ops if isinstance(op, Einsum)]
    assert all(op.acc == DType.int32 and op.output.dtype == DType.int32 for op in folded)


def _qdq_conv(weight_type: str) -> onnx.ModelProto:
    """x -> Q -> DQ -> Conv (weights: int4 per channel, or fp8 e4m3fn) -> Q -> DQ -> y, built by hand (opset 21)."""
    import ml_dtypes

    k, c = 6, 4
    w = RNG.standard_normal((k, c, 3, 3)).astype(np.float32)
    if weight_type == "int4":
        zero = np.uint8(120)
        w_scale = (np.abs(w).max(axis=(1, 2, 3)) / 7).astype(np.float32)
        stored = np.clip(np.rint(w / w_scale[:, None, None, None]), -8, 7).astype(ml_dtypes.int4)
        bias = RNG.integers(-500, 500, k).astype(np.int32)
        bias_nodes = [helper.make_node("DequantizeLinear", ["bq", "bs"], ["b"], axis=0)]
        inits = [numpy_helper.from_array(bias, "bq"), numpy_helper.from_array(np.float32(0.05) * w_scale, "bs")]
        w_attrs = {"axis": 0}
    else:
        zero = np.array(0, dtype=ml_dtypes.float8_e4m3fn)
        w_scale = np.float32(0.01)
        stored = (w / w_scale).astype(ml_dtypes.float8_e4m3fn)
        bias_nodes, inits, w_attrs = [], [numpy_helper.from_array(RNG.standard_normal(k).astype(np.float32), "b")], {}
    inits += [numpy_helper.from_array(np.float32(0.05), "xs"), numpy_helper.from_array(zero, "xz"),
              numpy_helper.from_array(stored, "wq"), numpy_helper.from_array(w_scale, "ws"),
              numpy_helper.from_array(np.float32(0.4), "ys"), numpy_helper.from_array(zero, "yz")]
    nodes = bias_nodes + [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["wq", "ws"], ["w"], **w_attrs),
        helper.make_node("Conv", ["xd", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", F32, [1, c, 7, 7])],
                              [helper.make_tensor_value_info("y", F32, None)], initializer=inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    proto.ir_version = 10
    return onnx.shape_inference.infer_shapes(proto)


@pytest.mark.parametrize("weight_type", ["int4", "fp8"])
def test_int4_and_fp8_weights_fold(weight_type):
    """int4 weights (uint8 data) fold into an int4 x uint8 Einsum; fp8 data and weights into an fp8 Einsum
    summing in fp32. Both agree with onnxruntime run op by op (and a Relu is folded into the epilogue)."""
    proto = _qdq_conv(weight_type)
    graph = from_model(proto)
    feeds = {"x": RNG.standard_normal((1, 4, 7, 7)).astype(np.float32) * 3}
    want = ort(proto, feeds, fused=False)
    step = 0.4 if weight_type == "int4" else 0.4 * 2 ** -3 * np.abs(want).max()   # fp8: 3 mantissa bits
    assert_within_a_step(run_graph(graph, feeds)["y"], want, step, "graph")
    ir = compile_graph(graph, Options())
    assert_within_a_step(run_ir(ir, feeds, graph.tensors)["y"], want, step, "folded IR")
    (einsum,) = [op for op in ir.ops if isinstance(op, Einsum)]
    requantize = next(op for op in ir.ops if isinstance(op, Map) and isinstance(op.fn, Requantize))
    assert requantize.fn.relu and not any(op.op == "Relu" for op in ir.ops)
    if weight_type == "int4":
        assert [o.dtype for o in einsum.inputs] == [DType.uint8, DType.int4] and einsum.acc == DType.int32
        assert einsum.inputs[1].nbytes == 6 * 4 * 9 // 2          # two weights per byte
    else:
        assert [o.dtype for o in einsum.inputs] == [DType.fp8, DType.fp8] and einsum.acc == DType.fp32
