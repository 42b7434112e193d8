"""Element-wise ops (binary, variadic, unary, Clip, Cast) against onnxruntime, through the Graph and the IR."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler.builder import Builder
from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.frontend import from_model
from compiler.ops.interpret import run_graph
from compiler.ir import OpKind
from compiler.ops.lower import lower
from tests.compiler.onnx_models import model as onnx_model
from tests.compiler.oracle import check_against_ort

F32, F16, I32, I64, BOOL = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT32, TensorProto.INT64, \
    TensorProto.BOOL
FP16_TOL = dict(rtol=1e-3, atol=1e-3)   # one fp16 rounding: half an ulp is 2^-11 (about 4.9e-4) relative
RNG = np.random.default_rng(0)


def _check(model, feeds, rtol=1e-5, atol=1e-6):
    """Graph and IR references equal onnxruntime (ints and bools exactly), with the declared output dtypes."""
    graph = check_against_ort(model, feeds, rtol=rtol, atol=atol)
    for o in model.graph.output:
        assert graph.tensor(o.name).dtype == DType.from_onnx(o.type.tensor_type.elem_type), o.name
    return graph


def _randn(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _one(op, feeds, opset, out=None, inits=(), extra=(), tol=None, **attrs):
    """One node over graph inputs `feeds` (then initializer names `extra`), output y (dtype `out` or x's)."""
    inputs = [(name, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for name, v in feeds.items()]
    node = helper.make_node(op, [*feeds, *extra], ["y"], **attrs)
    proto = onnx_model([node], inputs, [("y", out or inputs[0][1])], opset, inits)
    return _check(proto, feeds, **(tol or {}))


# -- binary and variadic ------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [9, 13, 17, 21])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean"])
def test_arithmetic_broadcasts(op, opset):
    graph = _one(op, {"a": _randn((2, 3, 4)), "b": _randn((3, 1)) + 3.0}, opset)
    assert graph.tensor("y").shape == (2, 3, 4)


@pytest.mark.parametrize("op", ["Sum", "Max", "Min", "Mean"])
def test_variadic_three_inputs(op):
    graph = _one(op, {"a": _randn(4), "b": _randn((2, 1)), "c": _randn((1, 4))}, 13)
    (op_ir,) = lower(graph).ops
    assert op_ir.ops == 8 * (2 + (op == "Mean"))   # two combining ops per element (+1 scale for Mean)


@pytest.mark.parametrize("opset", [9, 13, 21])
def test_integer_div_truncates_toward_zero(opset):
    a = np.array([7, -7, 7, -7, 6, -6, 0, -1], dtype=np.int32)
    graph = _one("Div", {"a": a, "b": np.array([2, 2, -2, -2, 3, 4, 5, 3], dtype=np.int32)}, opset)
    assert run_graph(graph, {"a": a, "b": np.full(8, 2, np.int32)})["y"].tolist() == [3, -3, 3, -3, 3, -3, 0, 0]


@pytest.mark.parametrize("fmod,dtype", [(0, np.int32), (1, np.int32), (1, np.float32)])
def test_mod_sign_rules(fmod, dtype):
    a, b = np.array([7, -7, 7, -7, 5, -4], dtype=dtype), np.array([3, 3, -3, -3, 5, 3], dtype=dtype)
    _one("Mod", {"a": a, "b": b}, 13, fmod=fmod)


@pytest.mark.parametrize("opset,exponent", [(9, np.float32), (13, np.float32), (15, np.int64)])
def test_pow(opset, exponent):
    _one("Pow", {"a": np.abs(_randn((2, 3))) + 0.5, "b": np.array([2, 3, 0], dtype=exponent)}, opset)


@pytest.mark.parametrize("opset", [13, 17, 21])
@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_comparisons_give_bool(op, opset):
    a = np.array([[1, 2, 3], [3, 2, 1]], dtype=np.float32)
    graph = _one(op, {"a": a, "b": np.array([1, 2, 2], dtype=np.float32)}, opset, out=BOOL)
    assert graph.tensor("y").dtype == DType.bool


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic(op):
    _one(op, {"a": np.array([[True, False], [True, True]]), "b": np.array([True, False])}, 13)


@pytest.mark.parametrize("opset", [9, 16, 21])
def test_where_broadcasts_three_ways(opset):
    nodes = [helper.make_node("Greater", ["x", "zero"], ["c"]), helper.make_node("Where", ["c", "x", "y"], ["o"])]
    zero = helper.make_tensor("zero", F32, [], [0.0])
    proto = onnx_model(nodes, [("x", F32, [2, 3]), ("y", F32, [3])], [("o", F32)], opset, [zero])
    _check(proto, {"x": _randn((2, 3)), "y": _randn(3)})


@pytest.mark.parametrize("op", ["Add", "Mul", "Sub"])
def test_fp16_binary(op):
    _one(op, {"a": _randn((4, 5), np.float16), "b": _randn(5, np.float16)}, 17, tol=FP16_TOL)


# -- unary ---------------------------------------------------------------------------------------------

UNARY = ["Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs", "Softplus", "Floor", "Ceil", "Sign",
         "Elu", "Selu"]


@pytest.mark.parametrize("opset", [9, 13, 17, 21])
@pytest.mark.parametrize("op", UNARY)
def test_unary(op, opset):
    x = _randn((3, 7)) * 3
    x[0, :3] = [0.0, 12.0, -12.0]
    _one(op, {"x": x}, opset)


@pytest.mark.parametrize("op", ["Sqrt", "Log", "Reciprocal"])
def test_unary_positive_domain(op):
    _one(op, {"x": np.abs(_randn(10)) + 0.1}, 13)


@pytest.mark.parametrize("opset", [11, 13, 21])
def test_round_half_to_even(opset):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, -2.6], dtype=np.float32)
    assert run_graph(_one("Round", {"x": x}, opset), {"x": x})["y"].tolist() == [0, 2, 2, 0, -2, -2, 2, -3]


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("opset", [20, 21])
def test_gelu(approximate, opset):
    graph = _one("Gelu", {"x": _randn((4, 8)) * 3}, opset, approximate=approximate)
    assert lower(graph).ops[0].ops == 32 * (14 if approximate == "none" else 12)


@pytest.mark.parametrize("op,attrs,opset", [
    ("LeakyRelu", {"alpha": 0.2}, 9), ("LeakyRelu", {}, 16), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 9),
    ("HardSigmoid", {}, 21), ("Elu", {"alpha": 0.5}, 13), ("HardSwish", {}, 14)])
def test_unary_with_attributes(op, attrs, opset):
    _one(op, {"x": _randn((2, 9)) * 4}, opset, **attrs)


def test_fp16_relu_and_sigmoid():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["x"], ["s"])]
    proto = onnx_model(nodes, [("x", F16, [3, 5])], [("r", F16), ("s", F16)], 17)
    _check(proto, {"x": _randn((3, 5), np.float16)}, **FP16_TOL)


def test_sigmoid_costs_four_ops_per_element():
    (op,) = lower(_one("Sigmoid", {"x": _randn((2, 5))}, 13)).ops
    assert op.kind == OpKind.map and op.ops == 40 and op.output.shape == (2, 5)


# -- Clip -----------------------------------------------------------------------------------------------

def test_clip_attributes_before_opset_11():
    _one("Clip", {"x": _randn(12)}, 9, min=-0.5, max=0.7)


@pytest.mark.parametrize("opset", [11, 13, 21])
@pytest.mark.parametrize("bounds", [("lo", "hi"), ("lo",), ("", "hi"), ()])
def test_clip_optional_inputs(opset, bounds):
    inits = [helper.make_tensor("lo", F32, [], [-0.25]), helper.make_tensor("hi", F32, [], [0.5])]
    _one("Clip", {"x": _randn((3, 4))}, opset, inits=inits, extra=bounds)


def test_clip_int32_bounds_from_graph_inputs():
    feeds = {"x": np.arange(-3, 3, dtype=np.int32), "lo": np.array(-1, np.int32), "hi": np.array(1, np.int32)}
    _one("Clip", feeds, 13)


# -- Cast ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [9, 13, 19, 21])
@pytest.mark.parametrize("source,target", [(F32, I32), (F32, I64), (I64, F32), (F32, BOOL), (BOOL, F32),
                                           (F32, F16), (I32, I64)])
def test_cast(source, target, opset):
    values = np.array([-2.7, -1.5, -0.4, 0.0, 0.6, 1.5, 3.9])
    x = values > 0 if source == BOOL else values.astype(helper.tensor_dtype_to_np_dtype(source))
    _one("Cast", {"x": x}, opset, out=target, to=target)


def test_cast_through_bf16_rounds():
    nodes = [helper.make_node("Cast", ["x"], ["b"], to=TensorProto.BFLOAT16),
             helper.make_node("Cast", ["b"], ["y"], to=F32)]
    x = _randn(16) * 100
    graph = _check(onnx_model(nodes, [("x", F32, [16])], [("y", F32)], 13), {"x": x}, rtol=0, atol=0)
    assert graph.tensor("b").dtype == DType.bf16
    assert not np.array_equal(run_graph(graph, {"x": x})["y"], x)   # bf16 keeps 8 bits of mantissa


def test_cast_to_same_type_is_a_view():
    (op,) = lower(_one("Cast", {"x": _randn(3)}, 13, to=F32)).ops
    assert op.kind == OpKind.move and op.view and op.nbytes == 0


# -- errors ----------------------------------------------------------------------------------------------

def test_non_broadcastable_onnx_model_names_file_node_and_op():
    proto = onnx_model([helper.make_node("Add", ["a", "b"], ["y"], name="residual")],
                       [("a", F32, [2, 3]), ("b", F32, [4])], [("y", F32)], 13)
    with pytest.raises(ModelError, match=r"^<onnx model>: node 'residual' \(Add\): input shapes \[2, 3\] and "
                                         r"\[4\] do not broadcast"):
        from_model(proto)


def test_non_broadcastable_shapes_name_node_and_op():
    b = Builder("bad")
    x, y = b.input("x", (2, 3)), b.input("y", (4,))
    with pytest.raises(ModelError, match=r"node 'add' \(Add\).*\[2, 3\] and \[4\] do not broadcast"):
        b.node("Add", [x, y])


def test_mixed_dtypes_are_rejected():
    b = Builder("bad")
    x, y = b.input("x", (2,)), b.input("y", (2,), DType.int32)
    with pytest.raises(ModelError, match=r"\(Mul\).*one dtype.*fp32.*int32"):
        b.node("Mul", [x, y])


def test_float_only_activation_rejects_ints():
    b = Builder("bad")
    x = b.input("x", (2,), DType.int64)
    with pytest.raises(ModelError, match=r"\(Sigmoid\).*floating-point.*int64"):
        b.node("Sigmoid", [x])


def test_cast_to_unsupported_type():
    b = Builder("bad")
    with pytest.raises(ModelError, match=r"\(Cast\).*STRING is not supported"):
        b.node("Cast", [b.input("x", (2,))], to=TensorProto.STRING)


def test_gelu_bad_approximation():
    b = Builder("bad")
    with pytest.raises(ModelError, match=r"\(Gelu\).*approximate='fast'.*'none' or 'tanh'"):
        b.node("Gelu", [b.input("x", (2,))], approximate="fast")
