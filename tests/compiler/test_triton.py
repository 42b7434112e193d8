"""The Triton GEMM kernel generated from a real SIMT mapping, run under Triton's CPU interpreter vs numpy.

Triton's own helpers (tl.zeros, tl.cdiv) are jitted when triton is imported, so TRITON_INTERPRET is set
here, before any import of triton; the kernels then run on CPU torch tensors.
"""
import os

os.environ["TRITON_INTERPRET"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from accelsim.arch import load_arch  # noqa: E402
from accelsim.compute import simt  # noqa: E402
from accelsim.cost import reporter  # noqa: E402
from compiler.codegen.triton import load, triton_gemm  # noqa: E402
from compiler.dtypes import DType  # noqa: E402
from compiler.errors import UserError  # noqa: E402
from compiler.ir import Axis, Einsum, Operand, Role  # noqa: E402
from compiler.map import map_op  # noqa: E402

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

ARCHS = ("h100", "a100", "gtx580")
SHAPES = ((64, 64, 64), (100, 70, 50), (1, 256, 128), (257, 129, 65))   # (m, n, k); ragged and decode-like


def gemm(m, n, k, dtype=DType.fp32, name="g"):
    return Einsum(name=name, node=name, op="MatMul",
                  inputs=(Operand(f"{name}.x", (m, k), dtype, Role.input), Operand(f"{name}.w", (k, n), dtype, Role.weight)),
                  output=Operand(f"{name}.y", (m, n), dtype, Role.output),
                  loops=(("m", m), ("n", n), ("k", k)), in_axes=((Axis.of("m"), Axis.of("k")), (Axis.of("k"), Axis.of("n"))),
                  out_dims=("m", "n"), acc=DType.fp32 if dtype.is_float else DType.int32)


def mapped(arch_name, m, n, k, dtype=DType.fp32):
    arch = load_arch(arch_name)
    op = gemm(m, n, k, dtype)
    return arch, op, map_op(op, arch, reporter(arch, [op]))


@pytest.mark.parametrize("arch_name", ARCHS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_kernel_blocks_as_the_simt_model_prices(arch_name, shape):
    arch, op, mapping = mapped(arch_name, *shape)
    kernel = triton_gemm(op, mapping, arch)
    unit = next(u for u in arch.compute if u.name == mapping.unit)
    priced = simt.kernel(*shape, unit, arch, mapping, DType(mapping.dtype))
    assert kernel.tile == priced.block
    assert all(b >= t and b & (b - 1) == 0 for b, t in zip(kernel.block, kernel.tile))
    assert kernel.num_warps >= priced.threads // unit.limits.warp and kernel.num_warps & (kernel.num_warps - 1) == 0
    assert kernel.num_stages == priced.stages
    assert f"BLOCK_M, BLOCK_N, BLOCK_K = {kernel.block[0]}, {kernel.block[1]}, {kernel.block[2]}" in kernel.source


def test_big_gemm_uses_a_simt_block():
    """4096^3 on an H100 maps to a 128 x 64 x 32 thread block: the tile reaches the kernel unrounded."""
    arch, op, mapping = mapped("h100", 4096, 4096, 4096)
    kernel = triton_gemm(op, mapping, arch)
    assert kernel.tile == kernel.block == (128, 64, 32)
    assert (kernel.num_warps, kernel.num_stages) == (4, 4)


@pytest.mark.parametrize("arch_name", ARCHS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_kernel_matches_numpy(arch_name, shape, tmp_path):
    m, n, k = shape
    arch, op, mapping = mapped(arch_name, m, n, k)
    module = load(triton_gemm(op, mapping, arch), tmp_path)
    rng = np.random.default_rng(m * n + k)
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    c = torch.full((m, n), np.nan)             # every output must be written
    module.launch(torch.from_numpy(a), torch.from_numpy(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_fp16_inputs_accumulate_in_fp32(tmp_path):
    m, n, k = 100, 70, 50
    arch, op, mapping = mapped("h100", m, n, k, DType.fp16)
    module = load(triton_gemm(op, mapping, arch), tmp_path)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16)
    c = torch.empty((m, n), dtype=torch.float32)
    module.launch(torch.from_numpy(a), torch.from_numpy(b), c)
    np.testing.assert_allclose(c.numpy(), a.astype(np.float32) @ b.astype(np.float32), rtol=1e-4, atol=1e-3)


def test_transposed_weight_uses_its_strides(tmp_path):
    """w stored as [n, k] (a Linear layer's weight): launch reads it through its strides."""
    m, n, k = 33, 40, 24
    op = Einsum(name="t", node="t", op="MatMul",
                inputs=(Operand("t.x", (m, k), DType.fp32, Role.input), Operand("t.w", (n, k), DType.fp32, Role.weight)),
                output=Operand("t.y", (m, n), DType.fp32, Role.output),
                loops=(("m", m), ("n", n), ("k", k)), in_axes=((Axis.of("m"), Axis.of("k")), (Axis.of("n"), Axis.of("k"))),
                out_dims=("m", "n"), acc=DType.fp32)
    arch = load_arch("a100")
    module = load(triton_gemm(op, map_op(op, arch, reporter(arch, [op])), arch), tmp_path)
    rng = np.random.default_rng(1)
    a, w = rng.standard_normal((m, k), np.float32), rng.standard_normal((n, k), np.float32)
    c = torch.empty((m, n))
    module.launch(torch.from_numpy(a), torch.from_numpy(w), c)
    np.testing.assert_allclose(c.numpy(), a @ w.T, rtol=1e-4, atol=1e-4)


def test_batched_gemm_is_refused():
    op = Einsum(name="bg", node="bg", op="MatMul",
                inputs=(Operand("bg.x", (2, 8, 4), DType.fp32, Role.input), Operand("bg.w", (2, 4, 8), DType.fp32, Role.input)),
                output=Operand("bg.y", (2, 8, 8), DType.fp32, Role.output),
                loops=(("b", 2), ("m", 8), ("n", 8), ("k", 4)),
                in_axes=((Axis.of("b"), Axis.of("m"), Axis.of("k")), (Axis.of("b"), Axis.of("k"), Axis.of("n"))),
                out_dims=("b", "m", "n"), acc=DType.fp32)
    _, _, mapping = mapped("h100", 8, 8, 4)
    with pytest.raises(UserError, match="not a plain 2-operand GEMM"):
        triton_gemm(op, mapping)


def test_systolic_mapping_is_refused():
    arch = load_arch("systolic_8x8")
    op = gemm(16, 16, 16, DType.int8)
    with pytest.raises(UserError, match="not a SIMT mapping"):
        triton_gemm(op, map_op(op, arch, reporter(arch, [op])), arch)
