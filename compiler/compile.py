"""The compiler's stages in order: import or build -> Graph -> lower -> IR -> passes -> IR'.

PASSES lists the IR passes in the order they run; the order is written here, never discovered.
"""
from __future__ import annotations

from dataclasses import dataclass

from compiler.dtypes import DType
from compiler.graph import Graph
from compiler.hardware import Arch
from compiler.ir import IR
from compiler.ops.lower import lower, refuse_empty
from compiler.passes.boundary import boundary
from compiler.passes.fuse import fuse
from compiler.passes.qdq import fold_qdq
from compiler.passes.quantize import quantize


@dataclass(frozen=True)
class Options:
    dtype: DType | None = None      # the dtype the target computes in; None keeps the model's
    arch: Arch | None = None        # the target: kernels form per target; None forms none
    fuse: str = "runtime"           # how kernels form (compiler.passes.fuse.FUSIONS: runtime, chains, none)
    launch: str = "eager"           # "eager": a launch per kernel; "graph": one for the captured graph
    caches: str = "warm"            # where the model's inputs and outputs lie (compiler.passes.boundary.CACHES)


# fold_qdq after quantize: the model's quantized tensors keep their dtypes; fuse over the ops as they run; boundary
# last, over the operands as kernels pass them
PASSES = [quantize, fold_qdq, fuse, boundary]


def compile_graph(graph: Graph, options: Options = Options()) -> IR:
    refuse_empty(graph)
    ir = lower(graph)
    for step in PASSES:
        ir = step(ir, options)
    return ir
