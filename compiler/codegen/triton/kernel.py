"""What every generated Triton kernel shares: the record of what it took from its mapping, how its source is
imported, the torch dtypes of its operands, and the arch figures it sizes warps by.

Invariant: a TritonKernel's source is a complete module whose `launch(*inputs, out)` takes torch tensors with
exactly the shapes (and the torch dtypes `inputs` names) of the op's inputs, writes every element of `out`
(op.output's shape, any float dtype: results are cast on store) and returns it.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.hardware import Arch
from compiler.ir import IROp, Operand

DEFAULT_WARP = 32

# The torch dtype a tensor of each accelsim dtype is handed over in (tf32 is fp32 storage: only the MMA
# rounds; ternary weights are int8 holding -1, 0, +1).
TORCH_DTYPES = {
    DType.fp64: "float64", DType.fp32: "float32", DType.tf32: "float32", DType.fp16: "float16",
    DType.bf16: "bfloat16", DType.fp8: "float8_e4m3fn", DType.int64: "int64", DType.int32: "int32",
    DType.int16: "int16", DType.int8: "int8", DType.uint8: "uint8", DType.ternary: "int8", DType.bool: "bool",
}
# The same as Triton types, for casts inside a kernel.
TL_TYPES = {
    DType.fp64: "tl.float64", DType.fp32: "tl.float32", DType.tf32: "tl.float32", DType.fp16: "tl.float16",
    DType.bf16: "tl.bfloat16", DType.fp8: "tl.float8e4nv", DType.int64: "tl.int64", DType.int32: "tl.int32",
    DType.int16: "tl.int16", DType.int8: "tl.int8", DType.uint8: "tl.uint8", DType.ternary: "tl.int8",
    DType.bool: "tl.int1",
}


class NoTritonKernel(UserError):
    """An op (or an op's form: a windowed reduce, an integer map) that no generator here writes a kernel for."""


@dataclass(frozen=True)
class TritonKernel:
    op: str                            # the IR op's name
    kind: str                          # gemm | batched_gemm | conv | map | reduce
    source: str                        # a complete Python module: the @triton.jit kernel and launch(*inputs, out)
    tile: tuple[int, ...]              # what the mapping gave one program: Einsums (BM, BN, BK) as
    #                                    accelsim.price.compute.simt prices the block (batch folded into BM); map
    #                                    (elements,); reduce (rows, row length)
    block: tuple[int, ...]             # the constexpr block shape it runs: the tile rounded up to powers of two
    num_warps: int
    num_stages: int
    grid: tuple[int, ...]              # programs launched per grid axis
    inputs: tuple[str, ...]            # torch dtype names launch expects, in op.inputs order
    output: str                        # torch dtype of op.output (out may be another float type)
    notes: tuple[str, ...] = ()        # how it computes: the MMA operand type and precision, the formula

    def describe(self) -> str:
        """One line for a table or a CSV cell: `gemm tile 100x70x50 block 128x128x64 4 warps 3 stages grid 1`."""
        def x(values: Iterable[int]) -> str:
            return "x".join(map(str, values))
        text = (f"{self.kind} tile {x(self.tile)} block {x(self.block)} {self.num_warps} warps "
                f"{self.num_stages} stages grid {x(self.grid)}")
        return text + "".join(f"; {n}" for n in self.notes)


def pow2(n: int) -> int:
    """The smallest power of two >= n (>= 1)."""
    return 1 << (max(1, int(n)) - 1).bit_length()


def warp_size(arch: Arch | None) -> int:
    """Threads per warp of the arch's SIMT units (vector units carry no limits of their own)."""
    limits = [u.limits for u in getattr(arch, "compute", ()) if u.limits is not None]
    return limits[0].warp if limits else DEFAULT_WARP


def torch_names(operands: Iterable[Operand]) -> tuple[str, ...]:
    return tuple(_torch_name(o) for o in operands)


def _torch_name(operand: Operand) -> str:
    if operand.dtype not in TORCH_DTYPES:
        raise NoTritonKernel(f"operand {operand.tensor!r} is {operand.dtype.value}: no torch dtype holds it")
    return TORCH_DTYPES[operand.dtype]


def captured(op: IROp, name: str, default: Any = None) -> Any:
    """A constant the op's numpy fn closes over: the IR keeps no attributes (a Map or Reduce carries its fn),
    so epsilon, alpha or Gemm's beta are read from the frontend node, or the value, that fn captured.
    A lowering that stops capturing it is a NoTritonKernel here, never a silently wrong constant."""
    fn = getattr(op, "fn", None)
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ())) if fn is not None else {}
    if name in cells:
        return cells[name].cell_contents
    if "node" in cells:
        return cells["node"].cell_contents.attr(name, default)
    raise NoTritonKernel(f"{op.name!r} ({op.op}): its reference does not carry {name!r}, which the kernel needs")


def load(kernel: TritonKernel, directory: str | os.PathLike[str] | None = None) -> types.ModuleType:
    """Import the kernel's source as a fresh module. It goes through a file (in `directory`, else a new
    temporary one) because Triton reads a kernel's source back with `inspect`, which exec'd strings lack;
    Triton reads TRITON_INTERPRET when a kernel is defined, so set it before calling this."""
    folder = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="accelsim_triton_"))
    name = f"accelsim_{kernel.kind}_{hashlib.sha1(kernel.source.encode()).hexdigest()[:12]}"
    path = folder / f"{name}.py"
    path.write_text(kernel.source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, f"{path}: a .py file has a loader"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Every generated module starts with this: the imports and a shape check that names the op.
PRELUDE = '''\
"""{doc}"""
import os

import torch
import triton
import triton.language as tl

OP = {op!r}


def _expect(tensor, shape, what):
    if tuple(tensor.shape) != shape:
        raise ValueError(f"{{OP}}: {{what}} has shape {{tuple(tensor.shape)}}; the op's is {{shape}}")
'''
