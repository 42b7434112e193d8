"""Element-wise math against onnxruntime and onnx's own cases: trigonometric and hyperbolic functions, the newer
activations (Celu, Mish, Softsign, Swish, Shrink, ThresholdedRelu, PRelu), IsNaN / IsInf, BitShift / BitwiseNot,
Mod, Where and the variadic ops with many broadcasting inputs, Det; their IR costs and a simulation on a100."""
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

F32, F64, F16 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16
I8, I32, I64, U8, BOOL = TensorProto.INT8, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8, TensorProto.BOOL
RNG = np.random.default_rng(7)


def _graph(op, feeds, opset=21, out=None, inits=(), extra=(), rtol=1e-5, atol=1e-6, **attrs):
    """One node over graph inputs `feeds` (then initializers `extra`), checked against onnxruntime; its Graph."""
    inputs = [(name, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for name, v in feeds.items()]
    node = helper.make_node(op, [*feeds, *extra], ["y"], name="n0", **attrs)
    proto = model([node], inputs, [("y", out or inputs[0][1])], opset, inits)
    return check_against_ort(proto, feeds, rtol=rtol, atol=atol)


def _bad(op, inputs, opset=21, out=F32, **attrs):
    """The ModelError that importing one node over `inputs` [(name, elem_type, shape)] raises."""
    node = helper.make_node(op, [name for name, _, _ in inputs], ["y"], name="n0", **attrs)
    with pytest.raises(ModelError) as error:
        from_model(model([node], inputs, [("y", out)], opset))
    return str(error.value)


# -- trigonometric and hyperbolic --------------------------------------------------------------------------

DOMAINS = {"Acos": (-0.99, 0.99), "Asin": (-0.99, 0.99), "Atanh": (-0.99, 0.99), "Acosh": (1.0, 6.0),
           "Cosh": (-4.0, 4.0), "Sinh": (-4.0, 4.0), "Tan": (-1.4, 1.4)}
TRIG_COST = {"Sin": 10, "Cos": 10, "Tan": 16, "Atan": 12, "Asin": 16, "Acos": 17, "Sinh": 4, "Cosh": 4, "Asinh": 7,
             "Acosh": 5, "Atanh": 5}


FP16_TOL = dict(rtol=1e-3, atol=1e-3)   # one fp16 rounding of an fp32 result


# onnxruntime's CPU kernels take float and float16, and double for Sin and Cos only
@pytest.mark.parametrize("op, dtype", [(op, dtype) for op in sorted(TRIG_COST) for dtype in (np.float32, np.float16)]
                         + [("Sin", np.float64), ("Cos", np.float64)])
def test_trig_matches_onnxruntime(op, dtype):
    lo, hi = DOMAINS.get(op, (-6.0, 6.0))
    x = RNG.uniform(lo, hi, (3, 5)).astype(dtype)
    graph = _graph(op, {"x": x}, opset=9 if dtype == np.float32 else 22, **(FP16_TOL if dtype == np.float16 else {}))
    (ir_op,) = lower(graph).ops
    assert ir_op.kind == OpKind.map and ir_op.ops == x.size * TRIG_COST[op]


@pytest.mark.parametrize("op", ["Sin", "Cos", "Tan", "Acos", "Asin", "Atan", "Sinh", "Cosh", "Asinh", "Acosh",
                                "Atanh"])
def test_trig_onnx_cases(op):
    for case in node_cases(op.lower()).values():
        check_case(case)


def test_trig_refuses_integers_naming_the_node():
    message = _bad("Cos", [("x", I32, [3])], out=I32)
    assert "'n0' (Cos)" in message and "floating-point" in message and "int32" in message


# -- activations -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op, attrs, cost", [
    ("Celu", {}, 7), ("Celu", {"alpha": 0.5}, 7), ("Celu", {"alpha": 2.5}, 7),
    ("ThresholdedRelu", {}, 2), ("ThresholdedRelu", {"alpha": 0.3}, 2), ("ThresholdedRelu", {"alpha": -0.5}, 2),
    ("Softsign", {}, 3), ("Mish", {}, 9),
    ("Shrink", {}, 6), ("Shrink", {"lambd": 1.5, "bias": 0.25}, 6), ("Shrink", {"lambd": 0.0, "bias": -1.0}, 6),
])
def test_activation_matches_onnxruntime(op, attrs, cost):
    x = (RNG.standard_normal((2, 3, 4)) * 3).astype(np.float32)
    opset = 18 if op == "Mish" else 13
    graph = _graph(op, {"x": x}, opset=opset, **attrs)
    (ir_op,) = lower(graph).ops
    assert ir_op.ops == x.size * cost


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float64])
def test_shrink_on_integers_and_doubles_matches_onnxruntime(dtype):
    x = np.arange(-6, 6, dtype=dtype).reshape(3, 4)
    _graph("Shrink", {"x": x}, opset=13, lambd=1.5, bias=2.0)


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_swish_against_its_definition(alpha):
    """onnxruntime has no Swish kernel yet (opset 24): x * sigmoid(alpha x), computed here by hand in float64."""
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    node = helper.make_node("Swish", ["x"], ["y"], alpha=alpha)
    graph = from_model(model([node], [("x", F32, [4, 5])], [("y", F32)], 24))
    want = x.astype(np.float64) / (1 + np.exp(-alpha * x.astype(np.float64)))
    np.testing.assert_allclose(run_graph(graph, {"x": x})["y"], want, rtol=1e-6)
    np.testing.assert_allclose(run_ir(lower(graph), {"x": x})["y"], want, rtol=1e-6)


def test_swiglu_against_its_definition_and_refusing_broadcast():
    """Swish(A) * B (opset 28, past onnxruntime): written out in float64; A and B must have one shape."""
    a, b = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((3, 4)).astype(np.float32)
    node = helper.make_node("SwiGLU", ["a", "b"], ["y"], name="n0", alpha=1.5)
    graph = from_model(model([node], [("a", F32, [3, 4]), ("b", F32, [3, 4])], [("y", F32)], 28))
    want = a.astype(np.float64) / (1 + np.exp(-1.5 * a.astype(np.float64))) * b
    np.testing.assert_allclose(run_ir(lower(graph), {"a": a, "b": b})["y"], want, rtol=1e-6)
    assert lower(graph).ops[0].ops == 12 * 7
    message = _bad("SwiGLU", [("a", F32, [3, 4]), ("b", F32, [1, 4])], opset=28)
    assert "'n0' (SwiGLU)" in message and "does not broadcast" in message


@pytest.mark.parametrize("x_shape, slope_shape", [((2, 3, 4), (1,)), ((2, 3, 4), (3, 1)), ((2, 3, 4), (4,)),
                                                  ((2, 3, 4), (2, 3, 4)), ((2, 3, 4, 5), (3, 1, 1))])
@pytest.mark.parametrize("opset", [9, 16])
def test_prelu_slope_broadcasts_to_x(x_shape, slope_shape, opset):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    slope = RNG.uniform(0.05, 0.5, slope_shape).astype(np.float32)
    graph = _graph("PRelu", {"x": x}, opset=opset, inits=[init("slope", slope)], extra=["slope"])
    (ir_op,) = lower(graph).ops
    assert ir_op.ops == 2 * x.size and graph.tensor("y").shape == x_shape


def test_prelu_refuses_a_slope_larger_than_x():
    message = _bad("PRelu", [("x", F32, [3, 1]), ("slope", F32, [3, 4])])
    assert "'n0' (PRelu)" in message and "[3, 4]" in message and "never x to the slope" in message


@pytest.mark.parametrize("module", ["celu", "mish", "softsign", "shrink", "thresholdedrelu", "prelu", "swish",
                                    "swiglu"])
def test_activation_onnx_cases(module):
    for case in node_cases(module).values():
        check_case(case)


# -- IsNaN, IsInf ------------------------------------------------------------------------------------------

SPECIALS = np.array([[np.inf, -np.inf, np.nan, 0.0], [-0.0, 3e4, -3.5, np.nan]])   # 3e4: finite in fp16 too


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("positive, negative", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_isinf_detects_the_asked_signs(positive, negative, dtype):
    x = SPECIALS.astype(dtype)
    graph = _graph("IsInf", {"x": x}, opset=20, out=BOOL, detect_positive=positive, detect_negative=negative)
    (ir_op,) = lower(graph).ops
    assert ir_op.ops == x.size * (2 if positive and negative else 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_isnan_matches_onnxruntime(dtype):
    _graph("IsNaN", {"x": SPECIALS.astype(dtype)}, opset=20, out=BOOL)


def test_isinf_refuses_another_attribute_value():
    message = _bad("IsInf", [("x", F32, [3])], out=BOOL, detect_negative=2)
    assert "'n0' (IsInf)" in message and "detect_negative=2" in message and "(0 or 1)" in message


@pytest.mark.parametrize("module", ["isnan", "isinf"])
def test_float_class_onnx_cases(module):
    for case in node_cases(module).values():
        check_case(case)


# -- bitwise ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_bitshift_matches_onnxruntime(direction, dtype):
    bits = np.dtype(dtype).itemsize * 8
    x = RNG.integers(0, 200, (2, 3, 4)).astype(dtype)
    amount = np.array([0, 1, 3, bits - 1], dtype=dtype)    # broadcasts along the last axis
    graph = _graph("BitShift", {"x": x, "amount": amount}, opset=11, direction=direction)
    assert lower(graph).ops[0].ops == x.size


def test_signed_bitshift_from_opset_28_sign_extends():
    """onnxruntime stops before opset 28; the expectation is the ONNX rule written out: an arithmetic right shift,
    and a shift by a negative amount or the width or more giving -1 for a negative x shifted right, else 0."""
    x = np.array([-8, -8, 7, -1, 100, -128], dtype=np.int8)
    amount = np.array([1, 9, 2, -1, 7, 0], dtype=np.int8)
    for direction, want in (("RIGHT", [-4, -1, 1, -1, 0, -128]), ("LEFT", [-16, 0, 28, 0, 0, -128])):
        node = helper.make_node("BitShift", ["x", "s"], ["y"], direction=direction)
        graph = from_model(model([node], [("x", I8, [6]), ("s", I8, [6])], [("y", I8)], 28))
        assert run_graph(graph, {"x": x, "s": amount})["y"].tolist() == want


def test_bitshift_refuses_signed_before_opset_28_and_a_bad_direction():
    message = _bad("BitShift", [("x", I32, [3]), ("s", I32, [3])], opset=21, out=I32, direction="LEFT")
    assert "'n0' (BitShift)" in message and "unsigned" in message and "opset 28" in message
    message = _bad("BitShift", [("x", U8, [3]), ("s", U8, [3])], opset=21, out=U8, direction="UP")
    assert "direction='UP'" in message and "'LEFT' or 'RIGHT'" in message


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint16, np.uint32,
                                   np.uint64])
def test_bitwise_not_matches_onnxruntime(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, info.max, 0, 1, 5], dtype=dtype)
    _graph("BitwiseNot", {"x": x}, opset=18)


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
def test_bitwise_binary_broadcasts(op):
    a = RNG.integers(-100, 100, (2, 3, 4)).astype(np.int32)
    _graph(op, {"a": a, "b": RNG.integers(-100, 100, (3, 1)).astype(np.int32)}, opset=18)


def test_bitwise_not_refuses_floats():
    message = _bad("BitwiseNot", [("x", F32, [3])], opset=18)
    assert "'n0' (BitwiseNot)" in message and "integer" in message and "fp32" in message


@pytest.mark.parametrize("source, target", [(F32, I32), (I32, F32), (F16, TensorProto.INT16), (U8, I8),
                                            (TensorProto.BFLOAT16, TensorProto.UINT16), (F64, TensorProto.UINT64)])
def test_bitcast_keeps_every_bit(source, target):
    """onnxruntime stops before opset 26: numpy's view of the same bytes is the expectation."""
    x = np.array([[1.0, -2.5, 0.0], [3.0e-3, 7.0, -0.0]])
    source_np, target_np = (helper.tensor_dtype_to_np_dtype(t) for t in (source, target))
    x = x.astype(source_np) if np.dtype(source_np).kind == "f" else (x * 10).astype(source_np)
    node = helper.make_node("BitCast", ["x"], ["y"], name="n0", to=target)
    graph = from_model(model([node], [("x", source, [2, 3])], [("y", target)], 26))
    want = x.view(target_np)
    ir_op, = lower(graph).ops
    assert ir_op.kind == OpKind.move and ir_op.view
    for got in (run_graph(graph, {"x": x})["y"], run_ir(lower(graph), {"x": x}, graph.tensors)["y"]):
        np.testing.assert_array_equal(np.asarray(got).astype(target_np).view(np.uint8), want.view(np.uint8))


def test_bitcast_refuses_another_width():
    message = _bad("BitCast", [("x", F32, [3])], opset=26, out=I64, to=I64)
    assert "'n0' (BitCast)" in message and "fp32 is 32 bits, int64 is 64" in message


@pytest.mark.parametrize("module", ["bitshift", "bitwisenot", "bitwiseand", "bitwiseor", "bitwisexor", "bitcast"])
def test_bitwise_onnx_cases(module):
    for case in node_cases(module).values():
        check_case(case)


# -- Mod, Where, variadic, rounding, Det -------------------------------------------------------------------

@pytest.mark.parametrize("dtype, fmod", [(np.int8, 0), (np.int32, 0), (np.int64, 1), (np.uint8, 0),
                                         (np.float32, 1), (np.float64, 1), (np.float16, 1)])
def test_mod_broadcasts_and_matches_onnxruntime(dtype, fmod):
    a = (RNG.integers(-50, 50, (2, 3, 4)) if np.dtype(dtype).kind != "u" else RNG.integers(0, 99, (2, 3, 4)))
    b = np.array([3, 7, 5, 2]) * (1 if np.dtype(dtype).kind == "u" else np.array([1, -1, 1, -1]))
    _graph("Mod", {"a": a.astype(dtype), "b": b.astype(dtype)}, opset=13, fmod=fmod)


def test_float_mod_refuses_fmod_0_before_opset_28():
    message = _bad("Mod", [("a", F32, [3]), ("b", F32, [3])], opset=21)
    assert "'n0' (Mod)" in message and "fmod=1 before opset 28" in message


@pytest.mark.parametrize("shapes", [((2, 1, 4), (3, 1), (1,)), ((4,), (2, 3, 4), (2, 1, 1)), ((), (3,), (2, 1))])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
def test_where_broadcasts_all_three_inputs(shapes, dtype):
    cond = RNG.integers(0, 2, shapes[0]).astype(bool)
    a, b = (RNG.integers(-9, 9, s).astype(dtype) for s in shapes[1:])
    graph = _graph("Where", {"c": cond, "a": a, "b": b}, opset=16, out=helper.np_dtype_to_tensor_dtype(a.dtype))
    assert graph.tensor("y").shape == np.broadcast_shapes(*shapes)


# the types onnxruntime has kernels for: Mean float only, Sum no integers
@pytest.mark.parametrize("op, dtype", [("Max", np.float32), ("Max", np.float64), ("Max", np.int32),
                                       ("Min", np.float32), ("Min", np.int32), ("Sum", np.float32),
                                       ("Sum", np.float64), ("Mean", np.float32)])
def test_variadic_with_five_broadcasting_inputs(op, dtype):
    shapes = [(2, 3, 4), (4,), (3, 1), (1, 1, 1), (2, 1, 4)]
    feeds = {f"x{i}": (RNG.standard_normal(s) * 10).astype(dtype) for i, s in enumerate(shapes)}
    graph = _graph(op, feeds, opset=13)
    (ir_op,) = lower(graph).ops
    assert ir_op.ops == 24 * (4 + (op == "Mean"))


@pytest.mark.parametrize("op", ["Sign", "Floor", "Ceil", "Round"])
def test_rounding_keeps_halves_and_signs(op):
    x = np.array([-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.5, 3.7, -3.7], dtype=np.float32)
    _graph(op, {"x": x}, opset=13)


@pytest.mark.parametrize("module", ["mod", "where", "max", "min", "sum", "mean", "sign", "floor", "ceil", "round"])
def test_elementwise_onnx_cases(module):
    for case in node_cases(module).values():
        check_case(case)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1)])
def test_det_matches_onnxruntime(shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    graph = _graph("Det", {"x": x}, opset=11, rtol=1e-4, atol=1e-5)
    (ir_op,) = lower(graph).ops
    rows = shape[-1]
    assert ir_op.kind == OpKind.reduce and ir_op.ops == x.size * max(1, -(-2 * rows // 3))
    for case in node_cases("det").values():
        check_case(case)


def test_det_refuses_a_non_square_matrix():
    message = _bad("Det", [("x", F32, [3, 4])])
    assert "'n0' (Det)" in message and "square" in message and "[3, 4]" in message


# -- simulation ------------------------------------------------------------------------------------------

def test_math_ops_simulate_on_a100_with_time():
    """A chain of the element-wise math ops: each becomes one priced Map on a100 that takes time."""
    chain = [("Sin", {}), ("Atan", {}), ("Mish", {}), ("Celu", {"alpha": 0.5}), ("Softsign", {}),
             ("Shrink", {"lambd": 0.1}), ("ThresholdedRelu", {"alpha": 0.1}), ("Asinh", {})]
    nodes, name = [], "x"
    for i, (op, attrs) in enumerate(chain):
        nodes.append(helper.make_node(op, [name], [f"t{i}"], name=f"{op.lower()}_{i}", **attrs))
        name = f"t{i}"
    nodes += [helper.make_node("PRelu", [name, "slope"], ["p"], name="prelu"),
              helper.make_node("IsNaN", ["p"], ["nan"], name="isnan"),
              helper.make_node("Where", ["nan", "x", "p"], ["y"], name="where")]
    proto = model(nodes, [("x", F32, [8, 64, 32])], [("y", F32)], 18,
                  [init("slope", np.full((64, 1), 0.2, np.float32))])
    result = run(from_model(proto), "a100")
    by_node = {op.node: op for op in result.ops}
    assert set(by_node) == {n.name for n in nodes}
    for op in result.ops:
        assert op.kind == "map" and op.ops > 0 and op.seconds > 0, op.name
    assert by_node["atan_1"].ops == 8 * 64 * 32 * 12


# -- window functions ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic, output", [(1, F32), (0, F32), (1, F64), (0, I32)])
def test_window_matches_onnxruntime(op, periodic, output):
    """The size as a constant (folded at import) and as a runtime input (evaluation only)."""
    size = np.array(10, dtype=np.int64)
    node = helper.make_node(op, ["n"], ["y"], name="n0", periodic=periodic, output_datatype=output)
    check_against_ort(model([node], [], [("y", output)], 17, [init("n", size)]), {})
    proto = model([node], [("n", I64, [])], [("y", output)], 17)
    graph = from_model(proto)
    want = ort_run(proto, {"n": size})["y"]
    np.testing.assert_allclose(run_graph(graph, {"n": size})["y"], want, rtol=1e-6, atol=1e-7)
    with pytest.raises(ModelError, match=rf"'n0' \({op}\): its output shape depends on the size"):
        lower(graph)


def test_a_window_too_long_to_fold_is_one_map_computing_each_sample():
    size = 100_000                                    # past the import-time folding limit
    node = helper.make_node("BlackmanWindow", ["n"], ["y"], name="n0")
    graph = from_model(model([node], [], [("y", F32)], 17, [init("n", np.array(size, dtype=np.int64))]))
    (ir_op,) = lower(graph).ops
    assert ir_op.kind == OpKind.map and ir_op.inputs == () and ir_op.ops == 24 * size
    samples = run_ir(lower(graph), {})["y"]
    n = np.arange(size)
    np.testing.assert_allclose(samples[:5], (0.42 - 0.5 * np.cos(2 * np.pi * n / size)
                                             + 0.08 * np.cos(4 * np.pi * n / size))[:5], atol=1e-6)


@pytest.mark.parametrize("module", ["hannwindow", "hammingwindow", "blackmanwindow"])
def test_window_onnx_cases(module):
    for case in node_cases(module).values():
        if "expanded" not in case.name:     # the expanded bodies compute the length with Range from the input
            check_case(case)
