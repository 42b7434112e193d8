"""A fused attention (compiler.passes.attention) -> one FlashAttention Triton kernel: per block of query rows, the
key axis walked in blocks with an online softmax, scores and probabilities kept in registers, never stored.

Invariant: the kernel computes the group's ops' formula (scores Q.K^T in fp32, each scale or additive mask Map in
the order the IR has them, a max-subtracted softmax over keys, the probabilities times V) with the softmax's sum
rescaled block by block instead of taken once; a key block past the end reads -inf scores and adds nothing.
"""
from __future__ import annotations

import math

from compiler.codegen.triton.kernel import PRELUDE, NoTritonKernel, TritonKernel, pow2, torch_names
from compiler.ir import Einsum, IROp, Operand
from compiler.hardware import Arch

SIDES = {"Mul": "s * {side}", "Div": "s / {side}", "Add": "s + {side}", "Sub": "s - {side}"}
SIDES_FIRST = {"Sub": "{side} - s", "Div": "{side} / s"}     # the side operand on the left


def attention_kernel(ops: list[IROp], arch: Arch | None = None, block: tuple[int, int] = (64, 64)) -> TritonKernel:
    """The kernel of one attention group: [scores, *maps, softmax, weighted] as compiler.passes.attention finds
    them, `block` query rows by key columns per step (each at least 16, as tl.dot needs)."""
    scores, *maps, softmax, weighted = ops
    for op in (scores, weighted):
        if not _batched_matmul(op):
            raise NoTritonKernel(f"{op.name!r}: the attention kernel takes a batched matmul over plain loop dims "
                                 f"with no broadcast batch; this one is "
                                 f"{op.describe() if isinstance(op, Einsum) else op.kind.value}")
    *batch, m, n = scores.output.shape
    d, dv = scores.inputs[0].shape[-1], weighted.output.shape[-1]
    heads = math.prod(batch)
    steps: list[str] = []
    sides: list[Operand] = []
    for op in maps:
        chained = [i for i, o in enumerate(op.inputs) if o.shape == scores.output.shape and o.fused]
        if len(op.inputs) != 2 or len(chained) != 1 or op.op not in SIDES:
            raise NoTritonKernel(f"{op.name!r} ({op.op}): between the scores and the softmax the kernel applies "
                                 f"only {', '.join(SIDES)} with one other operand")
        side = 1 - chained[0]
        formula = SIDES_FIRST.get(op.op, SIDES[op.op]) if side == 0 else SIDES[op.op]
        steps.append("s = " + formula.format(side=f"tl.load(side{len(sides)}_ptr + off_s, mask=inside, "
                                                   f"other=0.0).to(tl.float32)"))
        sides.append(op.inputs[side])
    bm, bn = (max(16, min(b, pow2(e))) for b, e in zip(block, (m, n)))
    bd, bdv = max(16, pow2(d)), max(16, pow2(dv))
    grid = (-(-m // bm), heads)
    source = _module(scores, weighted, steps, sides, (heads, m, n, d, dv), (bm, bn, bd, bdv), grid)
    return TritonKernel(op=scores.name, kind="attention", source=source, tile=(bm, bn, d), block=(bm, bn, bd),
                        num_warps=4, num_stages=1, grid=grid,
                        inputs=torch_names([scores.inputs[0], scores.inputs[1], weighted.inputs[1], *sides]),
                        output=torch_names([weighted.output])[0],
                        notes=(f"online softmax over {n} keys in blocks of {bn}", f"{len(maps)} score maps"))


def _batched_matmul(op: IROp) -> bool:
    """out[..., i, j] += a[..., i, k] * b[..., k, j] with every operand indexed by plain dims, batch unbroadcast."""
    if not isinstance(op, Einsum) or len(op.inputs) != 2 or len(op.reduction_dims) != 1:
        return False
    (k,), out = op.reduction_dims, op.out_dims
    want = (out[:-1] + (k,), out[:-2] + (k, out[-1]))
    for axes, dims in zip(op.in_axes, want):
        if len(axes) != len(dims) or any(a.offset or a.terms != ((dim, 1),) for a, dim in zip(axes, dims)):
            return False
    return True


def _module(scores: IROp, weighted: IROp, steps: list[str], sides: list[Operand], sizes: tuple[int, int, int, int, int],
            blocks: tuple[int, int, int, int], grid: tuple[int, int]) -> str:
    heads, m, n, d, dv = sizes
    bm, bn, bd, bdv = blocks
    side_args = "".join(f"side{i}_ptr, " for i in range(len(sides)))
    body = f'''

@triton.jit
def attention_kernel(q_ptr, kt_ptr, v_ptr, {side_args}o_ptr, BM: tl.constexpr, BN: tl.constexpr,
                     BD: tl.constexpr, BDV: tl.constexpr):
    # one program: BM query rows of one (batch, head); the keys in blocks of BN, scores never leave registers
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    h = tl.program_id(1)
    dd, ee = tl.arange(0, BD), tl.arange(0, BDV)
    q = tl.load(q_ptr + h * {m * d} + rows[:, None] * {d} + dd[None, :],
                mask=(rows[:, None] < {m}) & (dd[None, :] < {d}), other=0.0)
    top = tl.full((BM,), float("-inf"), tl.float32)
    total = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, BDV), tl.float32)
    for start in range(0, {n}, BN):
        cols = start + tl.arange(0, BN)
        kt = tl.load(kt_ptr + h * {d * n} + dd[:, None] * {n} + cols[None, :],
                     mask=(dd[:, None] < {d}) & (cols[None, :] < {n}), other=0.0)
        s = tl.dot(q, kt, out_dtype=tl.float32)
        inside = (rows[:, None] < {m}) & (cols[None, :] < {n})
        off_s = h * {m * n} + rows[:, None] * {n} + cols[None, :]
{"".join(f"        {line}{chr(10)}" for line in steps)}        s = tl.where(cols[None, :] < {n}, s, float("-inf"))
        new_top = tl.maximum(top, tl.max(s, axis=1))
        p = tl.exp(s - new_top[:, None])
        rescale = tl.exp(top - new_top)
        total = total * rescale + tl.sum(p, axis=1)
        v = tl.load(v_ptr + h * {n * dv} + cols[:, None] * {dv} + ee[None, :],
                    mask=(cols[:, None] < {n}) & (ee[None, :] < {dv}), other=0.0)
        acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v, out_dtype=tl.float32)
        top = new_top
    out = acc / total[:, None]
    tl.store(o_ptr + h * {m * dv} + rows[:, None] * {dv} + ee[None, :], out.to(o_ptr.dtype.element_ty),
             mask=(rows[:, None] < {m}) & (ee[None, :] < {dv}))
'''
    names = ["q", "kt", "v"] + [f"side{i}" for i in range(len(sides))]
    shapes = [scores.inputs[0].shape, scores.inputs[1].shape, weighted.inputs[1].shape] + [s.shape for s in sides]
    checks = "".join(f"    _expect({a}, {tuple(s)!r}, {a!r})\n" for a, s in zip(names[:3], shapes[:3]))
    flat = "".join(f"    side{i} = side{i}.expand({tuple(scores.output.shape)!r})"
                   f".reshape({heads}, {m}, {n}).contiguous()\n"
                   for i in range(len(sides)))
    launch = f'''

def launch({", ".join(names)}, out):
    """out = softmax(maps(q @ kt)) @ v, one FlashAttention pass; sides broadcast to the scores' shape."""
{checks}    _expect(out, {tuple(weighted.output.shape)!r}, "out")
{flat}    dst = torch.empty(({heads}, {m}, {dv}), dtype=out.dtype, device=out.device)
    attention_kernel[{grid!r}](q.contiguous(), kt.contiguous(), v.contiguous(), {side_args.replace("_ptr", "")}dst,
                               BM={bm}, BN={bn}, BD={bd}, BDV={bdv}, num_warps=4, num_stages=1)
    out.copy_(dst.reshape(out.shape))
    return out
'''
    doc = f"{scores.name}: attention of {heads} heads, {m} queries x {n} keys, head size {d}"
    return PRELUDE.format(doc=doc, op=scores.name) + body + launch
