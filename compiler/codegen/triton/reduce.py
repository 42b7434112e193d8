"""Reduce ops over trailing axes -> one Triton kernel holding BLOCK_R whole rows per program.

Softmax, LogSoftmax, LayerNormalization (the normalized output), ReduceMean/Sum/Max/Min and the global pools:
the reduced trailing axes are one row of L elements, padded to a power of two, the rest are rows. Invariant:
statistics are computed in fp32 (fp64 for fp64 inputs) in one pass over registers, with the frontend op's
formula (compiler/ops/softmax.py: max subtracted first; layernorm.py: 1 / sqrt(var + epsilon)), and padded
lanes never reach a sum, a max or memory.
"""
from __future__ import annotations

import math

from compiler.codegen.triton.kernel import PRELUDE, TL_TYPES, NoTritonKernel, TritonKernel, captured, torch_names
from compiler.codegen.triton.vector import Launch, reduce_launch
from compiler.dtypes import DType
from compiler.hardware import Arch
from compiler.ir import Reduce
from compiler.mapping import Mapping

ROW_OPS = ("Softmax", "LogSoftmax", "LayerNormalization")     # out has x's shape
TO_ONE = {"ReduceMean": "mean", "ReduceSum": "sum", "ReduceMax": "max", "ReduceMin": "min",
          "GlobalAveragePool": "mean", "GlobalMaxPool": "max"}   # one value per row
SUPPORTED = ROW_OPS + tuple(TO_ONE)


def reduce_kernel(op: Reduce, arch: Arch, mapping: Mapping | None = None) -> TritonKernel:
    """The Triton kernel of Reduce `op` over trailing axes, blocked by its vector chunk plan."""
    x = op.inputs[0]
    if op.op not in SUPPORTED:
        raise NoTritonKernel(f"{op.name!r}: Reduce ops of type {op.op} have no triton kernel (pools with windows, "
                             f"LRN reduce neighbourhoods, not rows); supported: {', '.join(SUPPORTED)}")
    rank = len(x.shape)
    first = min(op.axes) if op.axes else rank
    if tuple(op.axes) != tuple(range(first, rank)):
        raise NoTritonKernel(f"{op.name!r} ({op.op}): reduces axes {tuple(op.axes)} of a rank-{rank} input; the "
                             f"kernel reduces trailing axes only")
    if op.op in ROW_OPS and op.output.shape != x.shape:
        raise NoTritonKernel(f"{op.name!r} ({op.op}): an output of shape {list(op.output.shape)} (the mean or "
                             f"inverse std of a LayerNormalization); the kernel writes the normalized values")
    if not x.dtype.is_float:
        raise NoTritonKernel(f"{op.name!r} ({op.op}): a {x.dtype.value} input; the kernel reduces floats")
    length, rows = math.prod(x.shape[first:]), math.prod(x.shape[:first])
    launch = reduce_launch(op, arch, mapping, rows, length)
    width = 1 << (length - 1).bit_length()
    compute = TL_TYPES[DType.fp64 if x.dtype == DType.fp64 else DType.fp32]
    lines, params = _formula(op, length, compute, width != length)
    edge_r, edge_l = rows % launch.block != 0, width != length
    body = ["    pid = tl.program_id(0)", "    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)",
            "    cols = tl.arange(0, BLOCK_L)"]
    mask = [f"(rows < {rows})[:, None]"] * edge_r + [f"(cols < {length})[None, :]"] * edge_l
    body += [f"    mask = {' & '.join(mask)}"] * bool(mask)
    body.append(f"    x = tl.load(x_ptr + rows[:, None] * {length} + cols[None, :]"
                + (", mask=mask, other=0.0" if mask else "") + f").to({compute})")
    for name in params:
        body.append(f"    {name} = tl.load({name}_ptr + cols" + (f", mask=cols < {length}, other=0.0" if edge_l else "")
                    + f").to({compute})")
    body += ["    " + line for line in lines]
    if op.op in ROW_OPS:
        body.append(f"    tl.store(y_ptr + rows[:, None] * {length} + cols[None, :], y.to(y_ptr.dtype.element_ty)"
                    + (", mask=mask)" if mask else ")"))
    else:
        body.append("    tl.store(y_ptr + rows, y.to(y_ptr.dtype.element_ty)"
                    + (f", mask=rows < {rows})" if edge_r else ")"))
    return TritonKernel(op=op.name, kind="reduce", source=_module(op, body, params, launch, width, x.shape[first:]),
                        tile=(launch.share, length), block=(launch.block, width), num_warps=launch.num_warps,
                        num_stages=1, grid=(launch.programs,), inputs=torch_names(op.inputs),
                        output=torch_names([op.output])[0], notes=(f"{op.op} over rows of {length}",))


def _formula(op: Reduce, length: int, compute: str, padded: bool) -> tuple[list[str], list[str]]:
    """(lines computing y from the rows x[BLOCK_R, BLOCK_L], the per-column parameters loaded as well)."""
    lowest = ["x = tl.where(cols[None, :] < %d, x, float('-inf'))" % length] if padded else []
    if op.op == "Softmax":
        return lowest + ["e = tl.exp(x - tl.max(x, axis=1)[:, None])", "y = e / tl.sum(e, axis=1)[:, None]"], []
    if op.op == "LogSoftmax":
        return lowest + ["s = x - tl.max(x, axis=1)[:, None]", "y = s - tl.log(tl.sum(tl.exp(s), axis=1))[:, None]"], []
    if op.op == "LayerNormalization":
        epsilon = float(captured(op, "epsilon", 1e-5))
        params = ["scale", "bias"][: len(op.inputs) - 1]
        centered = ["c = x - (tl.sum(x, axis=1) / %d)[:, None]" % length]
        centered += ["c = tl.where(cols[None, :] < %d, c, 0.0)" % length] if padded else []
        scaled = " * scale[None, :]" if "scale" in params else ""
        shifted = " + bias[None, :]" if "bias" in params else ""
        return centered + ["var = tl.sum(c * c, axis=1) / %d" % length,
                           f"y = c * (1.0 / tl.sqrt(var + {epsilon!r}))[:, None]{scaled}{shifted}"], params
    how = TO_ONE[op.op]
    if how in ("sum", "mean"):
        return ["y = tl.sum(x, axis=1)" + (f" / {length}" if how == "mean" else "")], []
    fill = "float('-inf')" if how == "max" else "float('inf')"
    guard = [f"x = tl.where(cols[None, :] < {length}, x, {fill})"] if padded else []
    return guard + [f"y = tl.{how}(x, axis=1)"], []


def _module(op: Reduce, body: list[str], params: list[str], launch: Launch, width: int,
            row_shape: tuple[int, ...]) -> str:
    n = len(op.inputs)
    args = ", ".join(f"in{i}" for i in range(n))
    checks = [f"    _expect(in{i}, {tuple(o.shape)!r}, {f'input {i} ({o.tensor})'!r})" for i, o in enumerate(op.inputs)]
    # scale and bias broadcast to the normalized shape, flat like a row (a copy only if they are broadcast)
    flat = [f"in{i + 1}.expand({tuple(row_shape)!r}).contiguous().reshape(-1)" for i in range(len(params))]
    head = ["", "", "@triton.jit", "def reduce_kernel(x_ptr, " + "".join(f"{p}_ptr, " for p in params)
            + "y_ptr, BLOCK_R: tl.constexpr, BLOCK_L: tl.constexpr):",
            f"    # One program holds BLOCK_R whole rows: one SM's share of a chunk of the vector plan is "
            f"{launch.share} rows."]
    tail = ["", "", f"def launch({args}, out):", f'    """out = {op.op}({args}) over axes {tuple(op.axes)}."""',
            *checks, f"    _expect(out, {tuple(op.output.shape)!r}, 'out')",
            "    dst = out if out.is_contiguous() else torch.empty_like(out, memory_format=torch.contiguous_format)",
            f"    reduce_kernel[({launch.programs},)](in0.contiguous(), {''.join(f + ', ' for f in flat)}dst, "
            f"BLOCK_R={launch.block}, BLOCK_L={width}, num_warps={launch.num_warps}, num_stages=1)",
            "    if dst is not out:", "        out.copy_(dst)", "    return out", ""]
    return PRELUDE.format(doc=f"{op.name}: {op.op} of {list(op.inputs[0].shape)} over axes {tuple(op.axes)}",
                          op=op.name) + "\n".join(head + body + tail)
