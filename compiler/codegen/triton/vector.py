"""The launch shape of a Map or Reduce kernel, read off the op's vector chunk plan (compiler.map.vector).

A chunk of the plan is what the whole vector unit works on at once (accelsim.price.vector prices it over
every SM), so one program takes one SM's share of a chunk: ceil(chunk / SMs) elements (Map) or rows (Reduce),
rounded up to a power of two. Warps are the unit's lanes for the op's dtype (H100 fp32: 128 lanes per SM =
4 warps; bf16: 8). Invariant: a program never holds more than VALUES_PER_THREAD values per thread, except a
Reduce row that is longer (one program holds a whole row: its statistics are one pass).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from compiler.codegen.triton.kernel import NoTritonKernel, pow2, warp_size
from compiler.map.vector import plan
from compiler.targeting import pick_unit
from compiler.ir import IROp
from compiler.mapping import Mapping
from compiler.hardware import Arch

VALUES_PER_THREAD = 16     # registers a thread gives to its values, as 64 accumulators are a GEMM thread's
MAX_WARPS = 32             # 1,024 threads: CUDA's block limit
MAX_ROW = 1 << 16          # the longest row one program reduces in registers


@dataclass(frozen=True)
class Launch:
    share: int             # elements (Map) or rows (Reduce) of one SM's share of a chunk
    block: int             # elements or rows per program: the share rounded to a power of two, within limits
    num_warps: int
    programs: int


def chunk_mapping(op: IROp, arch: Arch) -> Mapping:
    """The mapper's chunk plan of a vector op, which compiler.codegen.generate executes."""
    return plan(op, arch)


def _chunk(op: IROp, arch: Arch, mapping: Mapping | None) -> tuple[int, int, int]:
    """(output elements per chunk, SMs sharing a chunk, warps from the unit's lanes)."""
    mapping = mapping if mapping is not None else chunk_mapping(op, arch)
    shape = op.output.shape or (1,)       # ops alike share one plan (compiler.codegen.generate): shapes must match
    if mapping.signature != "vector" or len(mapping.levels) != 2 or tuple(e for _, e in mapping.loops) != shape:
        raise NoTritonKernel(f"{op.name!r} ({op.op}): mapping of {mapping.op!r} is not a vector chunk plan "
                             f"(compiler.map.vector.plan) of it")
    unit, dtype = pick_unit(op, arch)
    warp = warp_size(arch)
    warps = min(MAX_WARPS, pow2(-(-unit.peak_per_cycle(dtype) // warp)))
    return math.prod(e for _, e in mapping.levels[1].tile), unit.count, warps


def map_launch(op: IROp, arch: Arch, mapping: Mapping | None) -> Launch:
    chunk, sms, warps = _chunk(op, arch, mapping)
    elements = max(1, op.output.elements)
    share = -(-chunk // sms)
    cap = VALUES_PER_THREAD * warp_size(arch) * warps
    block = max(min(pow2(elements), warp_size(arch) * warps), min(pow2(share), cap))
    return Launch(share, block, warps, -(-elements // block))


def reduce_launch(op: IROp, arch: Arch, mapping: Mapping | None, rows: int, length: int) -> Launch:
    """Rows of `length` elements each (the reduced trailing axes): a program holds BLOCK rows of pow2(length)."""
    if length > MAX_ROW:
        raise NoTritonKernel(f"{op.name!r} ({op.op}): rows of {length} elements; one program reduces at most "
                             f"{MAX_ROW} in registers")
    chunk, sms, warps = _chunk(op, arch, mapping)
    per_row = max(1, op.output.elements // max(rows, 1))      # the row itself (softmax, norms) or one value
    share = -(-(chunk // per_row) // sms)
    warp, width = warp_size(arch), pow2(length)
    warps = min(MAX_WARPS, max(warps, pow2(-(-width // (VALUES_PER_THREAD * warp)))))
    block = max(1, min(pow2(share), pow2(rows), VALUES_PER_THREAD * warp * warps // width))
    return Launch(share, block, warps, -(-rows // block))
