"""Triton kernels for real GPUs, generated from accelsim's own mapping of each IR op: `triton_kernel` is the one
entry point, `load` imports a kernel's source as a module whose `launch(*inputs, out)` runs it.

Invariant: every kernel takes its block shape, warps and stages from the op's mapping (an Einsum's SIMT mapping,
a vector op's chunk plan) and records them in its TritonKernel; an op no generator covers is a NoTritonKernel
(a UserError) naming the op, its type and what is supported.
"""
from __future__ import annotations

from typing import Callable

from compiler.codegen.triton.einsum import triton_gemm
from compiler.codegen.triton.elementwise import SUPPORTED as MAP_OPS
from compiler.codegen.triton.elementwise import map_kernel
from compiler.codegen.triton.kernel import TORCH_DTYPES, NoTritonKernel, TritonKernel, load
from compiler.codegen.triton.reduce import SUPPORTED as REDUCE_OPS
from compiler.codegen.triton.reduce import reduce_kernel
from compiler.errors import UserError
from compiler.hardware.profiles import profile
from compiler.ir import Einsum, IROp, Map, Reduce
from compiler.mapping import Mapping
from compiler.hardware import Arch

__all__ = ["triton_kernel", "triton_gemm", "load", "TritonKernel", "NoTritonKernel", "SUPPORTED", "TORCH_DTYPES"]

SUPPORTED = {"einsum": ("any 2-operand Einsum: MatMul, Gemm, batched MatMul, Conv (groups, strides, pads, "
                        "dilations)",), "map": MAP_OPS, "reduce": REDUCE_OPS}


def triton_kernel(op: IROp, arch: Arch, mapping: Mapping | None = None,
                  report: Callable[[Mapping], float] | None = None) -> TritonKernel:
    """The Triton kernel of `op` on SIMT `arch` from its mapping (accelsim.sim.build maps every op); without
    one, an Einsum is mapped by compiler.map.map_op with `report` (the cost model, which the caller hands in:
    the compiler never imports it) and a vector op gets the mapper's chunk plan."""
    if getattr(arch, "kind", None) is not None and not profile(arch.kind).cuda:
        raise NoTritonKernel(f"{op.name!r} ({op.op}): arch {arch.name!r} is a {arch.kind.value} target; "
                             f"Triton kernels are generated for SIMT (GPU) archs")
    if isinstance(op, Einsum):
        if mapping is None:
            from compiler.map import map_op

            if report is None:
                raise UserError(f"{op.name!r}: an Einsum's kernel needs its mapping, or a cost model (`report`, "
                                f"accelsim.price.cost.reporter) to map it with")
            mapping = map_op(op, arch, report)
        return triton_gemm(op, mapping, arch)
    if isinstance(op, Map):
        return map_kernel(op, arch, mapping)
    if isinstance(op, Reduce):
        return reduce_kernel(op, arch, mapping)
    listed = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in SUPPORTED.items())
    raise NoTritonKernel(f"{op.name!r} is a {op.kind.value} op of type {op.op}, which has no triton kernel "
                         f"(supported: {listed})")
