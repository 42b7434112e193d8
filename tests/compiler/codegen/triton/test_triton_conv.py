"""Batched GEMMs (attention heads) and convolutions (groups, strides, pads, dilations) as Triton implicit GEMMs,
from their SIMT mappings, under Triton's CPU interpreter against the Einsum's numpy reference."""
import dataclasses
import math

import numpy as np
import pytest
from tests.compiler.codegen.triton.test_triton import assert_blocks_as_priced, check, first, one_op, torch  # noqa: F401  (sets TRITON_INTERPRET)

from accelsim.arch import load_arch
from accelsim.price.cost import reporter
from compiler.codegen.triton import load, triton_gemm
from tests.compiler.triton_kernel_of import kernel_of
from compiler.dtypes import DType
from compiler.map import map_op

ARCHS = ("h100", "h200", "a100", "gtx580")
# (a, b) operand shapes of a MatMul: attention's Q K^T and P V per head, decode (one query), ragged heads,
# and numpy broadcasting of batch axes (a size-1 batch axis facing a larger one is a fixed index).
BATCHED = {"qk": ((1, 2, 16, 16), (1, 2, 16, 24)), "pv": ((1, 2, 16, 24), (1, 2, 24, 16)),
           "decode": ((2, 2, 1, 16), (2, 2, 16, 40)), "ragged": ((3, 17, 20), (3, 20, 9)),
           "broadcast": ((2, 1, 5, 8), (1, 3, 8, 6))}


def matmul(a, b, dtype=DType.fp32):
    return first(one_op(lambda g: g.node("MatMul", [g.input("a", a), g.input("b", b)]), dtype), "einsum")


def conv(n, c, h, w, k, r, s, stride=1, pad=1, groups=1, dilation=1, dtype=DType.fp32, pads=None):
    def build(b):
        x = b.input("x", (n, c, h, w))
        weight = b.weight("w", (k, c // groups, r, s))
        return b.node("Conv", [x, weight], strides=[stride] * 2, pads=pads or [pad] * 4, group=groups,
                      dilations=[dilation] * 2, kernel_shape=[r, s])
    return first(one_op(build, dtype), "einsum")


@pytest.mark.parametrize("arch_name", ARCHS)
@pytest.mark.parametrize("case", sorted(BATCHED))
def test_batched_gemm_matches_numpy(arch_name, case, tmp_path):
    op = matmul(*BATCHED[case])
    kernel = check(op, load_arch(arch_name), np.random.default_rng(len(case)), module_dir=tmp_path)
    # broadcast: a's batch axis indexes the output and a only (an m dim), b's the output and b (an n dim)
    assert kernel.kind == ("gemm" if case == "broadcast" else "batched_gemm")
    arch = load_arch(arch_name)
    mapping = map_op(op, arch, reporter(arch, [op]))
    assert_blocks_as_priced(op, arch, mapping, triton_gemm(op, mapping, arch))


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp8"])
def test_attention_heads_in_narrow_dtypes(dtype, tmp_path):
    op = matmul((1, 2, 16, 32), (1, 2, 32, 24), DType(dtype))
    check(op, load_arch("h200"), np.random.default_rng(5), module_dir=tmp_path)


def test_a_block_of_several_heads_walks_them_in_turn(tmp_path):
    """A mapping whose thread block holds 4 of 6 heads (no SM spread): the program loops over its heads, the
    last block's 2 missing heads masked off; accelsim prices the block as 4 x 16 rows."""
    op = matmul((6, 16, 16), (6, 16, 24))
    arch = load_arch("h100")
    mapping = map_op(op, arch, reporter(arch, [op]))
    inner = dataclasses.replace(mapping.levels[-1], tile=tuple((d, 4 if d == "b0" else e)
                                                               for d, e in mapping.levels[-1].tile))
    mapping = dataclasses.replace(mapping, levels=mapping.levels[:-1] + (inner,), spatial=())
    kernel = check(op, arch, np.random.default_rng(6), mapping=mapping, module_dir=tmp_path)
    assert kernel.tile[0] == 4 * 16 and kernel.grid == (2,)
    assert "for bi in range(4):" in kernel.source and "live_m = bat + 0 * rm < 6" in kernel.source


# (n, c, h, w, k, r, s, stride, pad, groups, dilation)
CONVS = {"3x3 pad": (1, 3, 9, 9, 8, 3, 3, 1, 1, 1, 1), "grouped stride pad": (2, 8, 9, 9, 12, 3, 3, 2, 1, 2, 1),
         "depthwise": (1, 8, 7, 7, 8, 3, 3, 1, 1, 8, 1), "1x1 stride 2": (1, 4, 8, 8, 6, 1, 1, 2, 0, 1, 1),
         "dilated": (1, 4, 10, 10, 4, 3, 3, 1, 2, 1, 2), "patches": (1, 3, 16, 16, 8, 4, 4, 4, 0, 1, 1),
         "7x7 stride 2": (1, 3, 20, 20, 16, 7, 7, 2, 3, 1, 1)}


@pytest.mark.parametrize("arch_name", ARCHS)
@pytest.mark.parametrize("case", sorted(CONVS))
def test_conv_matches_numpy(arch_name, case, tmp_path):
    n, c, h, w, k, r, s, stride, pad, groups, dilation = CONVS[case]
    op = conv(n, c, h, w, k, r, s, stride, pad, groups, dilation)
    arch = load_arch(arch_name)
    kernel = check(op, arch, np.random.default_rng(sum(CONVS[case])), module_dir=tmp_path)
    assert kernel.kind == "conv"
    mapping = map_op(op, arch, reporter(arch, [op]))
    assert_blocks_as_priced(op, arch, mapping, kernel)
    p, q = op.output.shape[-2:]
    # implicit GEMM: M = n*p*q, N = k per group, K = c*r*s per group; one program per block of each group
    assert kernel.grid == (groups * math.ceil(n * p * q / kernel.tile[0]) * math.ceil(k // groups / kernel.tile[1]),)


def test_asymmetric_pads_mask_both_edges(tmp_path):
    op = conv(1, 2, 6, 7, 3, 3, 3, pads=[0, 2, 1, 0])      # top 0, left 2, bottom 1, right 0
    kernel = check(op, load_arch("h100"), np.random.default_rng(8), module_dir=tmp_path)
    assert ">= 0" in kernel.source and "< 6)" in kernel.source


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_grouped_conv_in_narrow_dtypes(dtype, tmp_path):
    op = conv(1, 8, 9, 9, 16, 3, 3, 2, 1, 4, dtype=DType(dtype))
    kernel = check(op, load_arch("h100"), np.random.default_rng(9), module_dir=tmp_path)
    assert kernel.notes[0].startswith(f"dot {dtype}")


def test_unpadded_conv_has_no_bounds_masks():
    """A 1x1 stride-2 conv never reads outside its input: the kernel has no padding masks, only the edges."""
    op = conv(1, 4, 8, 8, 6, 1, 1, 2, 0)
    source = kernel_of(op, load_arch("h100")).source
    assert "x_a2" not in source and "x_a3" not in source


def test_conv_bias_and_ungroup_run_in_order(tmp_path):
    """A grouped conv with a bias lowers to Einsum -> view -> bias Map: the kernels chained as the validation
    runner chains them (views reshape) give the graph's output."""
    def build(b):
        x = b.input("x", (1, 4, 6, 6))
        return b.node("Conv", [x, b.weight("w", (6, 2, 3, 3)), b.weight("bias", (6,))], pads=[1] * 4, group=2,
                      kernel_shape=[3, 3])
    ir = one_op(build, weights=True)
    arch, rng = load_arch("a100"), np.random.default_rng(10)
    env = {name: np.asarray(v, np.float32) for name, v in ir.weights.items()}
    env["x"] = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    tensors = {name: torch.from_numpy(v) for name, v in env.items()}
    for op in ir.ops:
        args = [tensors[o.tensor] for o in op.inputs]
        if op.kind.value == "move":
            tensors[op.output.tensor] = args[0].reshape(op.output.shape)
        else:
            out = torch.empty(op.output.shape)
            tensors[op.output.tensor] = load(kernel_of(op, arch), tmp_path).launch(*args, out)
        env[op.output.tensor] = op.reference([env[o.tensor] for o in op.inputs])
    final = ir.outputs[0]
    np.testing.assert_allclose(tensors[final].numpy(), env[final], rtol=1e-5, atol=1e-5)
