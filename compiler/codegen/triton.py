"""A Triton GEMM kernel from a SIMT Mapping: one program per thread block of the mapping, masked edges.

Invariant: the kernel walks exactly the mapping's blocks (grid = ceil(M / TILE_M) x ceil(N / TILE_N), K in
steps of TILE_K), so the thread blocks it launches are the ones accelsim.compute.simt prices. Triton needs
power-of-two block shapes, so a tile of 50 rows runs in a BLOCK_M of 64 with rows 50..63 masked off.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path

from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.ir import Einsum
from compiler.mapping import Mapping, gemm_view

# As accelsim.compute.simt prices a block: 64 fp32 accumulators per thread (an 8 x 8 thread tile), whole
# warps, at most 1,024 threads. Without an arch: 32-thread warps and Triton's default of 3 stages.
OUTPUTS_PER_THREAD = 64
MAX_THREADS_PER_BLOCK = 1024
DEFAULT_WARP = 32
DEFAULT_STAGES = 3
MIN_BLOCK = 16   # tl.dot's smallest operand side on GPUs

SOURCE = '''\
import triton
import triton.language as tl

TILE_M, TILE_N, TILE_K = {tile_m}, {tile_n}, {tile_k}
BLOCK_M, BLOCK_N, BLOCK_K = {block_m}, {block_n}, {block_k}
NUM_WARPS, NUM_STAGES = {num_warps}, {num_stages}


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  TILE_M: tl.constexpr, TILE_N: tl.constexpr, TILE_K: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # One program is one thread block of the mapping: TILE_M x TILE_N outputs, padded to BLOCK_M x BLOCK_N.
    pid = tl.program_id(0)
    blocks_n = tl.cdiv(N, TILE_N)
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    offs_m = (pid // blocks_n) * TILE_M + rm
    offs_n = (pid % blocks_n) * TILE_N + rn
    mask_m = (rm < TILE_M) & (offs_m < M)
    mask_n = (rn < TILE_N) & (offs_n < N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, TILE_K):
        offs_k = k0 + rk
        mask_k = (rk < TILE_K) & (offs_k < K)
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, c,
             mask=mask_m[:, None] & mask_n[None, :])


def launch(a, b, c):
    """c[m, n] = sum_k a[m, k] * b[k, n]; operands in the op's order and layouts ({layout})."""
    x, w = {operands}
    M, N, K = {m}, {n}, {k}
    grid = (triton.cdiv(M, TILE_M) * triton.cdiv(N, TILE_N),)
    matmul_kernel[grid](x, w, c, M, N, K, x.stride({am}), x.stride({ak}), w.stride({bk}), w.stride({bn}),
                        c.stride({cm}), c.stride({cn}), TILE_M=TILE_M, TILE_N=TILE_N, TILE_K=TILE_K,
                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                        num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return c
'''


@dataclass(frozen=True)
class TritonKernel:
    source: str                        # a complete Python module: matmul_kernel and launch(a, b, c)
    tile: tuple[int, int, int]         # the mapping's thread-block tile (m, n, k)
    block: tuple[int, int, int]        # BLOCK_M, BLOCK_N, BLOCK_K: the tile rounded up to powers of two
    num_warps: int
    num_stages: int


def triton_gemm(op: Einsum, mapping: Mapping, arch=None) -> TritonKernel:
    """The Triton kernel of a plain GEMM `op` as `mapping` (a SIMT mapping of it) blocks it. With `arch`,
    warps and stages follow the arch's unit as accelsim.compute.simt prices them; without, 32-thread
    warps and 3 stages. UserError for batched or convolution Einsums and non-SIMT mappings."""
    dims, axes = _plain_gemm(op)
    if mapping.dataflow is not None or mapping.op != op.name or not mapping.levels:
        raise UserError(f"triton_gemm: mapping of {mapping.op!r} on {mapping.unit!r} is not a SIMT mapping of "
                        f"{op.name!r}")
    unit = next((u for u in arch.compute if u.name == mapping.unit), None) if arch is not None else None
    if arch is not None and (unit is None or unit.limits is None):
        raise UserError(f"triton_gemm: unit {mapping.unit!r} of arch {arch.name!r} is not a SIMT unit")
    tile = _block_tile(mapping, dims)
    block = tuple(max(MIN_BLOCK, 1 << (t - 1).bit_length()) for t in tile)
    warp = unit.limits.warp if unit else DEFAULT_WARP
    warps = -(-tile[0] * tile[1] // (OUTPUTS_PER_THREAD * warp))
    threads = min(warps * warp, MAX_THREADS_PER_BLOCK, unit.limits.threads if unit else MAX_THREADS_PER_BLOCK)
    # Triton wants a power-of-two warp count: 3 priced warps launch as 4.
    num_warps = 1 << (max(1, threads // warp) - 1).bit_length()
    stages = _stages(mapping, arch, unit, tile, op) if unit else DEFAULT_STAGES
    extents = dict(op.loops)
    x = next(i for i, names in enumerate(axes) if dims["m"] in names)    # the m x k operand
    xa, wa = axes[x], axes[1 - x]
    source = SOURCE.format(
        tile_m=tile[0], tile_n=tile[1], tile_k=tile[2], block_m=block[0], block_n=block[1], block_k=block[2],
        num_warps=num_warps, num_stages=stages, layout=", ".join("[" + ", ".join(a) + "]" for a in axes),
        operands="a, b" if x == 0 else "b, a", m=extents[dims["m"]], n=extents[dims["n"]],
        k=extents[dims["k"]], am=xa.index(dims["m"]), ak=xa.index(dims["k"]), bk=wa.index(dims["k"]),
        bn=wa.index(dims["n"]), cm=op.out_dims.index(dims["m"]), cn=op.out_dims.index(dims["n"]))
    return TritonKernel(source=source, tile=tile, block=block, num_warps=num_warps, num_stages=stages)


def _plain_gemm(op) -> tuple[dict[str, str], tuple[tuple[str, ...], ...]]:
    """The loop dim playing m, n and k, and each input's axes as dim names; UserError unless `op` is
    out[m, n] += x[m, k] * w[k, n] (any axis order). Batched GEMMs (attention heads) and convolutions
    (sliding windows, several m or k dims) are out of scope: one 2-D program grid, plain strides."""
    if not isinstance(op, Einsum):
        raise UserError(f"triton_gemm: {op.name!r} is a {op.kind.value} op, not an Einsum")
    view = gemm_view(op)
    if len(op.inputs) != 2 or view.b or any(len(getattr(view, g)) != 1 for g in "mnk"):
        raise UserError(f"triton_gemm: {op.name!r} ({op.op}) is not a plain 2-operand GEMM (b={view.b}, "
                        f"m={view.m}, n={view.n}, k={view.k}); batched GEMMs and convolutions are not supported")
    axes = []
    for operand, operand_axes in zip(op.inputs, op.in_axes):
        if any(len(a.terms) != 1 or a.terms[0][1] != 1 or a.offset for a in operand_axes):
            raise UserError(f"triton_gemm: operand {operand.tensor!r} of {op.name!r} is not indexed by plain "
                            f"loop dims")
        axes.append(tuple(a.terms[0][0] for a in operand_axes))
    return {g: getattr(view, g)[0] for g in "mnk"}, tuple(axes)


def _block_tile(mapping: Mapping, dims: dict[str, str]) -> tuple[int, int, int]:
    """The thread block's (m, n, k): the innermost level's tile split over the "units" factors (one block
    per SM per step, as accelsim.compute.instance_tile reads it), clipped to the op."""
    spread: dict[str, int] = {}
    for s in mapping.spatial:
        if s.axis == "units":
            spread[s.dim] = spread.get(s.dim, 1) * s.factor
    inner, extents = dict(mapping.levels[-1].tile), dict(mapping.loops)
    return tuple(min(extents[dims[g]], -(-inner[dims[g]] // spread.get(dims[g], 1))) for g in "mnk")


def _stages(mapping: Mapping, arch, unit, tile, op) -> int:
    """The unit's pipeline_stages if the mapping double-buffers shared memory (the outermost per-SM
    level), cut to how many (BM + BN) x BK operand stages fit in it: accelsim.compute.simt's rule."""
    shared = next((lv for lv in arch.memory if lv.instances == unit.count), None)
    held = next((lv for lv in mapping.levels if shared is not None and lv.level == shared.name), None)
    stages = unit.pipeline_stages if held is None or held.double_buffered else 1
    in_bytes = max(DType(mapping.dtype).bits if mapping.dtype else op.inputs[0].dtype.bits, 8) // 8
    return max(1, min(stages, unit.limits.shared_memory_bytes // ((tile[0] + tile[1]) * tile[2] * in_bytes)))


def load(kernel: TritonKernel, directory: str | os.PathLike | None = None) -> types.ModuleType:
    """Import the kernel's source as a fresh module. It goes through a file (in `directory`, else a new
    temporary one) because Triton reads a kernel's source back with `inspect`, which exec'd strings lack;
    Triton reads TRITON_INTERPRET when a kernel is defined, so set it before calling this."""
    folder = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="accelsim_triton_"))
    name = f"accelsim_gemm_{hashlib.sha1(kernel.source.encode()).hexdigest()[:12]}"
    path = folder / f"{name}.py"
    path.write_text(kernel.source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
