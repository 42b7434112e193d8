"""Map (element-wise, broadcast) and Reduce (softmax, norms, means) ops as Triton kernels blocked by their vector
chunk plan, under Triton's CPU interpreter against each op's numpy reference."""
import math

import numpy as np
import pytest
from tests.compiler.codegen.triton.test_triton import check, first, one_op, torch  # noqa: F401  (sets TRITON_INTERPRET)

from accelsim.arch import load_arch
from compiler.codegen.triton import NoTritonKernel
from tests.compiler.triton_kernel_of import kernel_of
from compiler.codegen.triton.elementwise import UNARY
from compiler.codegen.triton.vector import VALUES_PER_THREAD, chunk_mapping
from compiler.dtypes import DType

ARCHS = ("h100", "h200", "a100", "gtx580")


def unary(op, shape=(3, 37), dtype=DType.fp32, **attrs):
    return first(one_op(lambda b: b.node(op, [b.input("x", shape)], **attrs), dtype), "map")


def binary(op, a, b_shape, dtype=DType.fp32):
    return first(one_op(lambda b: b.node(op, [b.input("a", a), b.input("b", b_shape)]), dtype), "map")


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_formulas_match_numpy(op, tmp_path):
    check(unary(op), load_arch("h100"), np.random.default_rng(len(op)), tol=2e-6, module_dir=tmp_path)


@pytest.mark.parametrize("op, attrs", [("Gelu", {}), ("Gelu", {"approximate": "tanh"}), ("LeakyRelu", {"alpha": 0.2}),
                                       ("Elu", {"alpha": 0.5}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
                                       ("Selu", {"alpha": 1.5, "gamma": 1.1})], ids=str)
def test_attributes_reach_the_formula(op, attrs, tmp_path):
    kernel = check(unary(op, **attrs), load_arch("a100"), np.random.default_rng(1), tol=2e-6, module_dir=tmp_path)
    for value in attrs.values():
        assert (repr(value) if isinstance(value, float) else "0.044715") in kernel.source   # tanh: Gelu's cubic


# (op, a, b): numpy broadcasting of the second input to the output: a bias, a per-row scale, a scalar in front
BROADCASTS = [("Add", (2, 8, 24), (24,)), ("Mul", (2, 8, 24), (8, 1)), ("Sub", (), (3, 5)),
              ("Div", (4, 6), (4, 6)), ("Add", (2, 1, 5), (3, 1)), ("Mul", (1, 4, 1, 6), (1,))]


@pytest.mark.parametrize("arch_name", ARCHS)
@pytest.mark.parametrize("case", BROADCASTS, ids=lambda c: f"{c[0]}{c[1]}{c[2]}")
def test_binary_ops_broadcast_like_numpy(arch_name, case, tmp_path):
    op, a, b = case
    kernel = check(binary(op, a, b), load_arch(arch_name), np.random.default_rng(2), tol=1e-6, module_dir=tmp_path)
    if b == (24,):
        assert "i1 = offs % 24" in kernel.source and "tl.load(in1_ptr + i1" in kernel.source   # never expanded


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("op", ["Add", "Gelu"])
def test_narrow_dtypes_compute_in_fp32(op, dtype, tmp_path):
    ir = one_op(lambda b: b.node(op, [b.input("x", (5, 40))] + ([b.weight("bias", (40,))] if op == "Add" else [])),
                DType(dtype))
    check(first(ir, "map"), load_arch("h100"), np.random.default_rng(3), out_dtype=getattr(torch, {
        "fp16": "float16", "bf16": "bfloat16"}[dtype]), tol=2 ** -7, module_dir=tmp_path)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_pow_keeps_numpy_signs_and_zeroth_powers(tmp_path):
    op = binary("Pow", (4, 5), (4, 5))
    base = torch.tensor([[-2.0, -2.0, -2.0, 0.0, 0.0], [3.0, 1.5, -1.0, 2.0, 4.0]] * 2)
    exponent = torch.tensor([[2.0, 3.0, 0.0, 0.0, 2.0], [0.5, -1.0, -1.0, 10.0, 0.5]] * 2)
    kernel = check(op, load_arch("h100"), None, tol=1e-6, module_dir=tmp_path,
                   inputs=([base, exponent], [base.numpy(), exponent.numpy()]))
    assert "tl.exp2" in kernel.source


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
def test_variadic_ops_fold_every_input(op, tmp_path):
    ir = one_op(lambda b: b.node(op, [b.input("a", (3, 8)), b.input("b", (8,)), b.input("c", (3, 1))]))
    check(first(ir, "map"), load_arch("h200"), np.random.default_rng(4), tol=1e-6, module_dir=tmp_path)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_comparisons_write_bools(op, tmp_path):
    a = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    b = torch.tensor([2.0, 2.0, 2.0])
    check(binary(op, (2, 3), (3,)), load_arch("h100"), None, out_dtype=torch.bool, tol=0, module_dir=tmp_path,
          inputs=([a, b], [a.numpy(), b.numpy()]))


def test_where_and_cast(tmp_path):
    ir = one_op(lambda b: b.node("Where", [b.input("c", (4, 6), DType.bool), b.input("x", (4, 6)), b.input("y", (6,))]))
    check(first(ir, "map"), load_arch("h100"), np.random.default_rng(5), tol=0, module_dir=tmp_path)
    ir = one_op(lambda b: b.node("Cast", [b.input("m", (2, 16), DType.int64)], to=DType.fp32.onnx))
    check(first(ir, "map"), load_arch("h100"), np.random.default_rng(6), tol=0, module_dir=tmp_path)


def test_epilogues_of_gemm_conv_and_batchnorm(tmp_path):
    """The Maps other lowerings add: Gemm's alpha * AB + beta * C, Conv's per-channel bias (axis 1, not numpy's
    last axis), inference BatchNorm with its epsilon."""
    ir = one_op(lambda b: b.node("Gemm", [b.input("a", (6, 8)), b.weight("w", (8, 5)), b.input("c", (5,))],
                                 alpha=0.5, beta=2.0))
    kernel = check(first(ir, "map"), load_arch("h100"), np.random.default_rng(7), tol=1e-6, module_dir=tmp_path)
    assert "y = 0.5 * x0 + 2.0 * x1" in kernel.source
    ir = one_op(lambda b: b.node("Conv", [b.input("x", (2, 3, 5, 5)), b.weight("w", (4, 3, 3, 3)),
                                          b.weight("bias", (4,))], kernel_shape=[3, 3]))
    check(first(ir, "map"), load_arch("a100"), np.random.default_rng(8), tol=1e-6, module_dir=tmp_path)

    def bn(b):
        x = b.input("x", (2, 4, 3, 3))
        params = [b.weight(n, (4,)) for n in ("scale", "bias", "mean")] + [b.weight("var", (4,), init="uniform")]
        return b.node("BatchNormalization", [x] + params, epsilon=1e-3)
    op = first(one_op(bn), "map")
    rng = np.random.default_rng(9)
    values = [rng.standard_normal(o.shape).astype(np.float32) for o in op.inputs]
    values[4] = np.abs(values[4]) + 0.1                 # a variance
    kernel = check(op, load_arch("gtx580"), None, tol=1e-6, module_dir=tmp_path,
                   inputs=([torch.from_numpy(v) for v in values], values))
    assert "0.001" in kernel.source


def test_integer_maps_have_no_kernel():
    op = first(one_op(lambda b: b.node("Add", [b.input("a", (4,), DType.int32), b.input("b", (4,), DType.int32)]),
                      quantize=False), "map")
    with pytest.raises(NoTritonKernel, match="'add' \\(Add\\): integer or bool operands"):
        kernel_of(op, load_arch("h100"))


def softmax(shape, axis=-1, opset=17, op="Softmax", dtype=DType.fp32):
    return first(one_op(lambda b: b.node(op, [b.input("x", shape)], axis=axis), dtype, opset=opset), "reduce")


@pytest.mark.parametrize("arch_name", ARCHS)
@pytest.mark.parametrize("shape", [(8, 50), (3, 4, 16), (1, 2, 1, 24), (5, 1)], ids=str)
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_rows(arch_name, shape, op, tmp_path):
    check(softmax(shape, op=op), load_arch(arch_name), np.random.default_rng(10), tol=1e-6, module_dir=tmp_path)


def test_softmax_before_opset_13_normalizes_every_trailing_axis(tmp_path):
    op = softmax((2, 3, 5), axis=1, opset=11)
    kernel = check(op, load_arch("h100"), np.random.default_rng(11), tol=1e-6, module_dir=tmp_path)
    assert kernel.tile[1] == 15 and kernel.block[1] == 16
    with pytest.raises(NoTritonKernel, match=r"reduces axes \(1,\) of a rank-3 input; the kernel reduces trailing"):
        kernel_of(softmax((2, 3, 5), axis=1), load_arch("h100"))


def layer_norm(shape, axis=-1, bias=True, dtype=DType.fp32, scale_shape=None, epsilon=1e-5):
    def build(b):
        x = b.input("x", shape)
        norm = shape[axis:] if axis != -1 else shape[-1:]
        params = [b.input("scale", scale_shape or norm)] + ([b.input("bias", norm)] if bias else [])
        return b.node("LayerNormalization", [x] + params, axis=axis, epsilon=epsilon)
    return first(one_op(build, dtype), "reduce")


@pytest.mark.parametrize("arch_name", ARCHS)
@pytest.mark.parametrize("case", ["rows", "ragged", "no bias", "two axes", "eps 1e-12"])
def test_layer_norm(arch_name, case, tmp_path):
    op = {"rows": lambda: layer_norm((8, 64)), "ragged": lambda: layer_norm((3, 5, 40)),
          "no bias": lambda: layer_norm((4, 24), bias=False),
          "two axes": lambda: layer_norm((3, 4, 6), axis=-2, scale_shape=(6,)),
          "eps 1e-12": lambda: layer_norm((2, 16), epsilon=1e-12)}[case]()
    kernel = check(op, load_arch(arch_name), np.random.default_rng(12), tol=2e-6, module_dir=tmp_path)
    assert repr(float({"eps 1e-12": 1e-12}.get(case, 1e-5))) in kernel.source


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_narrow_rows_reduce_in_fp32(dtype, tmp_path):
    out = getattr(torch, {"fp16": "float16", "bf16": "bfloat16"}[dtype])
    for op in (layer_norm((6, 40), dtype=DType(dtype)), softmax((6, 40), dtype=DType(dtype))):
        check(op, load_arch("h200"), np.random.default_rng(13), out_dtype=out, tol=2 ** -7, module_dir=tmp_path)


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reductions_to_one_value_per_row(op, keepdims, tmp_path):
    ir = one_op(lambda b: b.node(op, [b.input("x", (3, 5, 20))], axes=[-1], keepdims=keepdims), opset=11)
    check(first(ir, "reduce"), load_arch("a100"), np.random.default_rng(14), tol=1e-6, module_dir=tmp_path)


def test_global_average_pool(tmp_path):
    ir = one_op(lambda b: b.node("GlobalAveragePool", [b.input("x", (2, 6, 3, 3))]))
    check(first(ir, "reduce"), load_arch("h100"), np.random.default_rng(15), tol=1e-6, module_dir=tmp_path)


def test_layer_norm_statistics_outputs_have_no_kernel():
    def build(b):
        x = b.input("x", (4, 8))
        y, mean = b.node("LayerNormalization", [x, b.input("s", (8,))], outputs=2)
        return [y, mean]
    ir = one_op(build)
    stats = [op for op in ir.ops if op.kind.value == "reduce"][1]
    with pytest.raises(NoTritonKernel, match="the mean or inverse std of a LayerNormalization"):
        kernel_of(stats, load_arch("h100"))


@pytest.mark.parametrize("arch_name, dtype, warps", [("h100", "fp32", 4), ("h100", "bf16", 8), ("a100", "fp32", 2),
                                                     ("a100", "fp16", 4), ("gtx580", "fp32", 1)])
def test_warps_are_the_units_lanes(arch_name, dtype, warps):
    """H100: 128 fp32 (256 bf16) lanes per SM = 4 (8) warps; A100 64 fp32; a GTX 580's SM has 32 cores."""
    op = unary("Relu", (64, 1024), DType(dtype))
    assert kernel_of(op, load_arch(arch_name)).num_warps == warps


def test_a_program_is_one_sms_share_of_a_chunk():
    """The vector plan cuts an op into chunks the whole unit works on; a program takes ceil(chunk / SMs) of it,
    rounded up to a power of two, at most VALUES_PER_THREAD values per thread."""
    arch = load_arch("h100")
    op = unary("Gelu", (64, 1024))
    chunk = math.prod(e for _, e in chunk_mapping(op, arch).levels[1].tile)
    kernel = kernel_of(op, arch)
    assert kernel.tile == (math.ceil(chunk / arch.vector.count),)
    assert kernel.block[0] == min(1 << (kernel.tile[0] - 1).bit_length(), VALUES_PER_THREAD * 32 * kernel.num_warps)
    assert kernel.grid == (math.ceil(64 * 1024 / kernel.block[0]),)
    rows = softmax((512, 96))
    chunk_rows = math.prod(e for _, e in chunk_mapping(rows, arch).levels[1].tile) // 96
    kernel = kernel_of(rows, arch)
    assert kernel.tile == (math.ceil(chunk_rows / arch.vector.count), 96) and kernel.block[1] == 128
    assert kernel.grid == (math.ceil(512 / kernel.block[0]),)


def test_a_row_longer_than_a_program_holds_has_no_kernel():
    with pytest.raises(NoTritonKernel, match="rows of 100000 elements; one program reduces at most 65536"):
        kernel_of(softmax((2, 100000)), load_arch("h100"))
