"""A model quantized by onnxruntime (static QDQ) simulated: on TPU v1 its convolutions run on the MXU's int8 path
and their requantisation is priced on the vector unit; against the float model on a preset with both float and
int8 matrix units (NPU: fp16 at half the int8 rate) it is faster, reads half the DRAM bytes and spends less
energy. TPU v1 computes no floats, so there the float model runs only as accelsim quantizes it (int8, with no
requantisation to pay): that comparison is made in benchmarks/qdq_resnet50.py, not asserted here."""
import onnx
import pytest

import accelsim
from compiler.errors import MappingError
from tests.compiler.ops.test_ops_quantized_models import conv_net, quantized


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qdq")
    float_model = conv_net(channels=128, size=28)
    onnx.save(float_model, folder / "float.onnx")
    onnx.save(quantized(float_model, folder), folder / "int8.onnx")
    return folder / "float.onnx", folder / "int8.onnx"


def kernel_seconds(result, op) -> float:
    """The time of the kernel `op` belongs to (its anchor and the epilogue ops fused into it)."""
    kernel = op.kernel or op.name
    return sum(o.seconds for o in result.ops if (o.kernel or o.name) == kernel)


def test_int8_model_runs_in_int8_on_tpu_v1(models):
    result = accelsim.run(str(models[1]), "tpu_v1")
    einsums = [op for op in result.ops if op.macs]
    assert len(einsums) == 4 and all(op.rate_dtype == "int8" and op.unit == "mxu" for op in einsums)
    requantize = [op for op in result.ops if op.name.endswith(":requantize")]
    assert len(requantize) == 4
    # each runs in TPU v1's activation pipeline beside the array: its kernel takes time, it may add none
    assert all(op.ops > 0 and kernel_seconds(result, op) > 0 and op.unit == "activation" for op in requantize)
    assert {op.dtype for op in requantize} == {"int32"}     # it reads the 32-bit accumulators


def test_tpu_v1_refuses_the_float_model_in_fp32(models):
    with pytest.raises(MappingError, match="no matrix unit computes fp32.*--dtype int8"):
        accelsim.run(str(models[0]), "tpu_v1", dtype="fp32")


def test_int8_is_faster_and_moves_fewer_bytes_than_fp16_on_an_npu(models):
    fp16_run = accelsim.run(str(models[0]), "npu4", dtype="fp16")
    int8_run = accelsim.run(str(models[1]), "npu4", dtype="int8")
    fp16, int8 = fp16_run.totals(), int8_run.totals()
    # the matrix work, at twice the fp16 rate: 4.7 us against 6.9 us. The whole model is not (10.2 us against
    # 9.5 us): the int8 model's requantisation Maps, 5.4 us on the vector unit, outweigh it
    assert sum(op.seconds for op in int8_run.ops if op.macs) < sum(op.seconds for op in fp16_run.ops if op.macs)
    dram = next(iter(fp16["bytes_by_level"]))
    assert int8["bytes_by_level"][dram] < 0.6 * fp16["bytes_by_level"][dram]   # int8 weights: half of fp16
    assert int8["energy_j"] < fp16["energy_j"]


def test_dynamic_and_qoperator_models_simulate(tmp_path):
    """DynamicQuantizeLinear, ConvInteger, MatMulInteger (quantize_dynamic) and QLinearConv (QOperator format):
    every op that is not a view takes time on TPU v1."""
    from onnx import helper
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic

    from tests.compiler.ops.test_ops_quantized_models import _model, _weight

    onnx.save(conv_net(), tmp_path / "float.onnx")
    quantize_dynamic(str(tmp_path / "float.onnx"), str(tmp_path / "dynamic.onnx"), weight_type=QuantType.QInt8,
                     op_types_to_quantize=["MatMul", "Conv"])
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    operators = quantized(_model(nodes, [1, 3, 10, 10], [_weight("w", 8, 3, 3, 3), _weight("b", 8)]), tmp_path,
                          fmt=QuantFormat.QOperator, activations=QuantType.QUInt8)
    onnx.save(operators, tmp_path / "qoperator.onnx")
    seen = set()
    for name in ("dynamic.onnx", "qoperator.onnx"):
        result = accelsim.run(str(tmp_path / name), "tpu_v1")
        seen |= {op.op for op in result.ops}
        assert all(kernel_seconds(result, op) > 0 for op in result.ops if op.bytes or op.macs or op.ops)
    assert {"DynamicQuantizeLinear", "ConvInteger", "QLinearConv", "QuantizeLinear", "DequantizeLinear"} <= seen
