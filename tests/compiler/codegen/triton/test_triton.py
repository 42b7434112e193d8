"""Triton GEMM kernels generated from real SIMT mappings, run under Triton's CPU interpreter against each op's
numpy reference; the helpers here (graph -> IR op -> kernel -> compare) serve the other test_triton_* files.

Triton's own helpers (tl.zeros, tl.cdiv) are jitted when triton is imported, so TRITON_INTERPRET is set
here, before any import of triton; the kernels then run on CPU torch tensors.
"""
import math
import os

os.environ["TRITON_INTERPRET"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from accelsim.arch import load_arch  # noqa: E402
from accelsim.price import simt  # noqa: E402
from compiler.targeting import gemm_sizes  # noqa: E402
from accelsim.price.cost import reporter  # noqa: E402
from compiler.builder import Builder  # noqa: E402
from compiler.codegen.triton import NoTritonKernel, load, triton_gemm  # noqa: E402
from tests.compiler.triton_kernel_of import kernel_of  # noqa: E402
from compiler.dtypes import DType  # noqa: E402
from compiler.errors import UserError  # noqa: E402
from compiler.ir import Axis, Einsum, Operand, Role  # noqa: E402
from compiler.map import map_op  # noqa: E402
from compiler.compile import Options, compile_graph  # noqa: E402

try:
    import torch
except ImportError as error:   # `make test` installs PyTorch only from a local CPU wheel (see the Makefile)
    pytest.skip(f"PyTorch not installed ({error}): the interpreter runs kernels on torch tensors",
                allow_module_level=True)
try:
    import triton  # noqa: F401
except ImportError as error:
    if os.environ.get("CI"):
        raise          # CI installs the test extra: a missing triton there is a broken environment
    pytest.skip(f"triton not installed ({error}); pip install -e '.[test]'", allow_module_level=True)

ARCHS = ("h100", "h200", "a100", "gtx580")
SHAPES = ((64, 64, 64), (100, 70, 50), (1, 256, 128), (257, 129, 65))   # (m, n, k); ragged and decode-like
# What the kernels are checked to, as a fraction of the output's largest magnitude. Inputs are quantized to
# the dtype first (the reference multiplies the very values the kernel loads), so a GEMM with an fp32 out is
# near exact in any dtype; the looser figures are for GPUs (tf32 rounds its operands) and narrow outputs.
TOLERANCE = {DType.fp32: 1e-5, DType.tf32: 5e-3, DType.fp16: 2e-3, DType.bf16: 1e-2, DType.fp8: 1e-2,
             DType.fp64: 1e-12}
POSITIVE = ("Sqrt", "Log", "Reciprocal")       # ops whose inputs are drawn from [0.5, 2.5)


def one_op(build, dtype=DType.fp32, weights=False, opset=17, quantize=True):
    """The IR of a small graph compiled for `dtype` (quantize=False: as built); build(b) returns its outputs."""
    b = Builder("t", dtype=dtype, weights=weights, opset=opset)
    out = build(b)
    return compile_graph(b.build(out if isinstance(out, list) else [out]), Options(dtype=dtype if quantize else None))


def first(ir, kind):
    return next(op for op in ir.ops if op.kind.value == kind)


def arrays(op, rng, kernel):
    """Random inputs for `op` as the torch tensors launch takes and as the numpy arrays its reference takes
    (the same values: bf16 and fp8 are rounded before the reference sees them)."""
    tensors, values = [], []
    for operand, name in zip(op.inputs, kernel.inputs):
        if operand.dtype == DType.bool:
            t = torch.from_numpy(rng.random(operand.shape) > 0.5)
        elif not operand.dtype.is_float:
            t = torch.from_numpy(rng.integers(-3, 4, operand.shape)).to(getattr(torch, name))
        else:
            a = rng.random(operand.shape) * 2 + 0.5 if op.op in POSITIVE else rng.standard_normal(operand.shape)
            t = torch.tensor(np.asarray(a, np.float32)).to(getattr(torch, name))
        tensors.append(t)
        values.append(t.float().numpy().astype(operand.dtype.numpy) if t.is_floating_point() else t.numpy())
    return tensors, values


def check(op, arch, rng, mapping=None, tol=None, out_dtype=torch.float32, inputs=None, module_dir=None):
    """Generate, load and launch `op`'s kernel on `arch` and compare its every output with op.reference."""
    kernel = kernel_of(op, arch, mapping)
    tensors, values = inputs if inputs is not None else arrays(op, rng, kernel)
    want = np.asarray(op.reference(values)).astype(np.float64)
    fill = float("nan") if out_dtype.is_floating_point else 0
    out = torch.full(op.output.shape, fill, dtype=torch.float32).to(out_dtype)   # every output must be written
    got = load(kernel, module_dir).launch(*tensors, out)
    assert got is out
    dtype = max((o.dtype for o in op.inputs if o.dtype.is_float), key=lambda d: TOLERANCE[d], default=DType.fp32)
    tol = TOLERANCE[dtype] if tol is None else tol
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(got.double().numpy(), want, rtol=tol, atol=tol * scale)
    return kernel


def gemm(m, n, k, dtype=DType.fp32, name="g"):
    return Einsum(name=name, node=name, op="MatMul",
                  inputs=(Operand(f"{name}.x", (m, k), dtype, Role.input),
                          Operand(f"{name}.w", (k, n), dtype, Role.weight)),
                  output=Operand(f"{name}.y", (m, n), dtype, Role.output),
                  loops=(("m", m), ("n", n), ("k", k)),
                  in_axes=((Axis.of("m"), Axis.of("k")), (Axis.of("k"), Axis.of("n"))),
                  out_dims=("m", "n"), acc=DType.fp32 if dtype.is_float else DType.int32)


def mapped(arch_name, op):
    arch = load_arch(arch_name)
    return arch, map_op(op, arch, reporter(arch, [op]))


def priced(op, arch, mapping):
    """What accelsim.price.simt prices the whole op as: one kernel over its GEMM view (batch folded into M)."""
    unit = next(u for u in arch.compute if u.name == mapping.unit)
    return unit, simt.kernel(*gemm_sizes(mapping), unit, arch, mapping, DType(mapping.dtype))


def assert_blocks_as_priced(op, arch, mapping, kernel):
    unit, model = priced(op, arch, mapping)
    assert kernel.tile == model.block
    assert all(b >= t and b & (b - 1) == 0 for b, t in zip(kernel.block, kernel.tile))
    assert kernel.num_warps >= model.threads // unit.limits.warp and kernel.num_warps & (kernel.num_warps - 1) == 0
    # the priced stages, cut only where the power-of-two blocks would overflow shared memory on a real GPU
    stored = max(max(o.dtype.bits, 8) // 8 for o in op.inputs)
    fit = unit.limits.shared_memory_bytes // ((kernel.block[0] + kernel.block[1]) * kernel.block[2] * stored)
    assert kernel.num_stages == max(1, min(model.stages, fit))
    assert f"BLOCK_M={kernel.block[0]}, BLOCK_N={kernel.block[1]}, BLOCK_K={kernel.block[2]}," in kernel.source
    assert f"num_warps={kernel.num_warps}, num_stages={kernel.num_stages})" in kernel.source


@pytest.mark.parametrize("arch_name", ARCHS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_kernel_blocks_as_the_simt_model_prices(arch_name, shape):
    op = gemm(*shape)
    arch, mapping = mapped(arch_name, op)
    kernel = triton_gemm(op, mapping, arch)
    assert_blocks_as_priced(op, arch, mapping, kernel)
    m, n, _ = shape
    assert kernel.grid == (math.ceil(m / kernel.tile[0]) * math.ceil(n / kernel.tile[1]),)
    assert kernel.kind == "gemm" and kernel.inputs == ("float32", "float32") and "ieee" in kernel.describe()


def test_big_gemm_runs_the_mapped_block_unrounded():
    """4096^3 fp32 on an H100: the mapping's thread block is powers of two already, so it reaches the kernel as it
    is, with the priced warps and all of the unit's 4 stages (4 x (BM + BN) x BK x 4 B fits 228 KiB)."""
    op = gemm(4096, 4096, 4096)
    arch, mapping = mapped("h100", op)
    kernel = triton_gemm(op, mapping, arch)
    _, model = priced(op, arch, mapping)
    assert kernel.tile == kernel.block == model.block
    assert kernel.num_stages == model.stages == 4
    assert kernel.num_warps == model.threads // 32


def test_stages_are_cut_to_what_the_padded_blocks_fit():
    """100 x 70 x 50 fp32 on a GTX 580: the priced 50 x 35 x 50 block (2 stages of 17 KiB in 48 KiB) pads to
    64 x 64 x 64, 32 KiB a stage, so one stage fits; two would not launch on the GPU."""
    op = gemm(100, 70, 50)
    arch, mapping = mapped("gtx580", op)
    kernel = triton_gemm(op, mapping, arch)
    _, model = priced(op, arch, mapping)
    assert (kernel.tile, kernel.block) == ((50, 35, 50), (64, 64, 64))
    assert (model.stages, kernel.num_stages) == (2, 1)


@pytest.mark.parametrize("arch_name", ARCHS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_kernel_matches_numpy(arch_name, shape, tmp_path):
    m, n, k = shape
    arch = load_arch(arch_name)
    check(gemm(m, n, k), arch, np.random.default_rng(m * n + k), module_dir=tmp_path)


# (arch, dtype) -> the MMA operand type and precision the kernel must use: the arch's own where it has the dtype,
# widened exactly where accelsim prices it at another rate (an A100 has no fp8 MMA, a GTX 580 only fp32).
HOPPER = {"fp32": "dot fp32 (ieee)", "tf32": "dot fp32 (tf32)", "fp16": "dot fp16", "bf16": "dot bf16",
          "fp8": "dot fp8"}
DOTS = {**{("h100", d): v for d, v in HOPPER.items()}, **{("h200", d): v for d, v in HOPPER.items()},
        **{("a100", d): v for d, v in HOPPER.items()}, ("a100", "fp8"): "dot fp16",
        ("gtx580", "fp32"): "dot fp32 (ieee)", ("gtx580", "tf32"): "dot fp32 (ieee)"}


@pytest.mark.parametrize("arch_name, dtype", sorted(DOTS), ids=lambda v: str(v))
def test_compute_dtype_reaches_the_dot(arch_name, dtype, tmp_path):
    """A MatMul compiled for `dtype` (compiler.passes.quantize sets it; the mapper picks the unit and rate):
    operands arrive in its torch type (fp8: float8_e4m3fn), multiply as the arch does, accumulate in fp32."""
    dt = DType(dtype)
    ir = one_op(lambda b: b.node("MatMul", [b.input("a", (33, 40)), b.weight("w", (40, 20))]), dt)
    kernel = check(first(ir, "einsum"), load_arch(arch_name), np.random.default_rng(7), module_dir=tmp_path)
    assert kernel.notes[0] == DOTS[arch_name, dtype] + ", accumulate fp32"
    if dt == DType.fp8:
        assert kernel.inputs == ("float8_e4m3fn", "float8_e4m3fn")
    assert ("WIDEN_BF16" in kernel.source) == (DOTS[arch_name, dtype] == "dot bf16")


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_narrow_outputs_are_rounded_once(dtype, tmp_path):
    """out in the op's own 16-bit type: fp32 accumulators are cast on store, one rounding per element."""
    dt = DType(dtype)
    ir = one_op(lambda b: b.node("MatMul", [b.input("a", (20, 48)), b.weight("w", (48, 24))]), dt)
    check(first(ir, "einsum"), load_arch("h100"), np.random.default_rng(3), out_dtype=getattr(torch, {
        "fp16": "float16", "bf16": "bfloat16"}[dtype]), tol=2 ** -7, module_dir=tmp_path)


def test_transposed_weight_uses_its_strides(tmp_path):
    """w stored as [n, k] (a Linear layer's weight, Gemm transB=1): the kernel reads it through its axes."""
    ir = one_op(lambda b: b.node("Gemm", [b.input("x", (33, 24)), b.weight("w", (40, 24))], transB=1))
    op = first(ir, "einsum")
    assert op.inputs[1].shape == (40, 24)
    check(op, load_arch("a100"), np.random.default_rng(1), module_dir=tmp_path)


def test_non_contiguous_inputs_are_read_through_their_strides(tmp_path):
    op = gemm(24, 40, 32)
    arch = load_arch("h100")
    kernel = kernel_of(op, arch)
    rng = np.random.default_rng(2)
    a = torch.from_numpy(rng.standard_normal((32, 24), np.float32)).t()       # a view, strides (1, 24)
    w = torch.from_numpy(rng.standard_normal((40, 32), np.float32)).t()
    out = load(kernel, tmp_path).launch(a, w, torch.empty((24, 40)))
    np.testing.assert_allclose(out.numpy(), a.numpy() @ w.numpy(), rtol=1e-5, atol=1e-5)


def test_launch_checks_shapes(tmp_path):
    op = gemm(8, 16, 16)
    arch = load_arch("h100")
    module = load(kernel_of(op, arch), tmp_path)
    with pytest.raises(ValueError, match=r"g: input 1 \(g.w\) has shape \(16, 8\); the op's is \(16, 16\)"):
        module.launch(torch.zeros(8, 16), torch.zeros(16, 8), torch.zeros(8, 16))


def test_systolic_mapping_is_refused():
    op = gemm(16, 16, 16, DType.int8)
    arch, mapping = mapped("systolic_8x8", op)
    with pytest.raises(UserError, match="not a SIMT mapping"):
        triton_gemm(op, mapping, arch)
    with pytest.raises(NoTritonKernel, match="'g' \\(MatMul\\): arch 'systolic_8x8' is a systolic target"):
        kernel_of(op, arch, mapping)


def test_an_op_without_a_kernel_names_it_and_what_is_supported():
    ir = one_op(lambda b: b.node("Transpose", [b.input("x", (4, 6))], perm=[1, 0]))
    with pytest.raises(NoTritonKernel, match=r"'transpose' is a move op of type Transpose, which has no triton "
                                             r"kernel \(supported: einsum: .*; map: .*Gelu.*; reduce: .*Softmax"):
        kernel_of(ir.ops[0], load_arch("h100"))
    pool = one_op(lambda b: b.node("MaxPool", [b.input("x", (1, 2, 6, 6))], kernel_shape=[2, 2], strides=[2, 2]))
    with pytest.raises(NoTritonKernel, match="'maxpool': Reduce ops of type MaxPool have no triton kernel"):
        kernel_of(pool.ops[0], load_arch("h100"))
    assert issubclass(NoTritonKernel, UserError)      # the validation runner records it, it is not fatal
