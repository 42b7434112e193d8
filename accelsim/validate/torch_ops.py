"""The vendor library's side of a validation case: its input tensors and the PyTorch call that runs it (cuBLAS,
cuDNN, FlashAttention), with the precision flags the case's dtype asks for.

Invariant: `inputs` holds one tensor per input of the case's Graph (accelsim.validate.cases), by name, so the
generated Triton kernels and the vendor call read the very same values; vendor-only layouts (a column-major fp8
operand, K untransposed) are copies made here, outside any timed region.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable

from compiler.dtypes import DType
from compiler.errors import UserError
from accelsim.validate.cases import ELEMENTWISE, ROW_BROADCAST, Case

TOLERANCE = {DType.fp32: 1e-4, DType.tf32: 5e-3, DType.fp16: 1e-2, DType.bf16: 2e-2, DType.fp8: 8e-2}


def torch_dtype(dtype: DType):
    import torch

    table = {DType.fp32: torch.float32, DType.tf32: torch.float32, DType.fp16: torch.float16,
             DType.bf16: torch.bfloat16, DType.fp8: torch.float8_e4m3fn, DType.fp64: torch.float64}
    if dtype not in table:
        raise UserError(f"dtype {dtype.value}: no PyTorch tensor type for it here (allowed: "
                        f"{', '.join(d.value for d in table)})")
    return table[dtype]


@dataclass
class Vendor:
    """What the vendor library runs: `call()` once returns the output; `library` names what ran."""

    inputs: dict                     # graph input name -> tensor
    call: Callable[[], object]
    library: str
    extra: dict = field(default_factory=dict)   # vendor-only copies of inputs


@contextlib.contextmanager
def precision(dtype: DType):
    """fp32 cases run in IEEE fp32 and tf32 cases in TF32 (cuBLAS and cuDNN both); cuDNN picks its fastest
    algorithm per shape (benchmark mode), as a framework does in training."""
    import torch

    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark)
    tf32 = dtype == DType.tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    try:
        yield
    finally:
        (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
         torch.backends.cudnn.benchmark) = saved


def _random(shape, dtype: DType, device, generator, scale: float = 1.0):
    import torch

    values = torch.randn(shape, device=device, generator=generator, dtype=torch.float32) * scale
    return values.to(torch_dtype(dtype))


def vendor(case: Case, device: str, seed: int = 0) -> Vendor:
    """The case's input tensors on `device` and the library call for it."""
    import torch
    import torch.nn.functional as F

    def on(library: str) -> str:   # what PyTorch calls into for this op here
        return library if device != "cpu" else "PyTorch CPU"

    if case.kind in ("scaledgemm", "scaledbgemm") and device != "cpu":    # said before the device is touched
        raise UserError(f"validation case {case.key!r}: no block-scaled vendor kernel is wired up for {device}; "
                        f"block-scaled GEMMs are scored against published times (validation/published)")
    gen = torch.Generator(device=device).manual_seed(seed)
    d, dt = case.size, case.dtype
    graph = case.graph()
    shapes = {t: graph.tensors[t].shape for t in (*graph.inputs, *graph.weights)}
    x = {name: _random(shape, dt, device, gen, 1.0 if name != "q" else d.get("d", 1) ** -0.5)
         for name, shape in shapes.items()}
    if "var" in x:   # a variance is positive
        x["var"] = (x["var"].float().abs() + 0.5).to(x["var"].dtype)
    if case.kind in ("scaledgemm", "scaledbgemm"):
        return _scaled_gemm(case, x, shapes, device, gen)
    if case.kind == "gemm" and dt == DType.fp8:
        if device == "cpu":   # no fp8 GEMM library on a CPU: the harness check multiplies the same values
            return Vendor(x, lambda: x["a"].float() @ x["b"].float(), "torch.matmul on fp8 values widened (CPU)")
        b_column_major = x["b"].t().contiguous().t()
        one = torch.ones((), device=device)
        return Vendor(x, lambda: torch._scaled_mm(x["a"], b_column_major, one, one, out_dtype=torch.bfloat16),
                      "cuBLASLt fp8 (torch._scaled_mm)", {"b": b_column_major})
    if case.kind in ("gemm", "bgemm"):
        return Vendor(x, lambda: torch.matmul(x["a"], x["b"]), f"{on('cuBLAS')} (torch.matmul, {dt.value})")
    if case.kind == "conv":
        stride, pad, groups = d["stride"], d["pad"], d["groups"]
        return Vendor(x, lambda: F.conv2d(x["x"], x["w"], stride=stride, padding=pad, groups=groups),
                      f"{on('cuDNN')} (torch.nn.functional.conv2d, benchmark mode, {dt.value})")
    if case.kind == "attention":
        k = x["kt"].transpose(-1, -2).contiguous()
        return Vendor(x, lambda: F.scaled_dot_product_attention(x["q"], k, x["v"], scale=1.0),
                      "torch scaled_dot_product_attention (FlashAttention or memory-efficient)", {"k": k})
    if case.kind == "softmax":
        return Vendor(x, lambda: torch.softmax(x["x"], dim=-1), "torch.softmax")
    if case.kind == "layernorm":
        cols = d["cols"]
        return Vendor(x, lambda: F.layer_norm(x["x"], (cols,), x["gamma"], x["beta"], 1e-5),
                      "torch.nn.functional.layer_norm")
    if case.kind == "batchnorm":
        return Vendor(x, lambda: F.batch_norm(x["x"], x["mean"], x["var"], x["scale"], x["bias"], training=False,
                                              eps=1e-5), f"{on('cuDNN')} (torch.nn.functional.batch_norm, inference)")
    if case.kind in ROW_BROADCAST:
        fn = {"addrow": torch.add, "mulrow": torch.mul}[case.kind]
        return Vendor(x, lambda: fn(x["x"], x["row"]), f"torch.{fn.__name__} (a row broadcast)")
    fn = {"gelu": F.gelu, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
          "add": torch.add, "mul": torch.mul}[case.kind]
    names = ("x", "y")[:ELEMENTWISE[case.kind][1]]
    return Vendor(x, lambda: fn(*(x[n] for n in names)), f"torch.{fn.__name__}")


def _scaled_gemm(case: Case, x: dict, shapes: dict, device: str, gen) -> Vendor:
    """A block-scaled GEMM's operands (scales positive fp32) and, on a CPU, its meaning: each operand times its
    scales repeated over their blocks, multiplied, rounded to bf16. No block-scaled vendor kernel is wired up for
    a GPU yet: its times come from published measurements (validation/published)."""
    import torch

    for name in ("a_scale", "b_scale"):
        x[name] = torch.rand(shapes[name], device=device, generator=gen) + 0.5
    d = case.size

    def dequantized():
        a_scale = x["a_scale"].repeat_interleave(d["block"], -1)[..., :d["k"]]      # [(B,) M, K]
        b_scale = x["b_scale"].repeat_interleave(d["block"], -2)[..., :d["k"], :]   # [(B,) K, N]
        return ((x["a"].float() * a_scale) @ (x["b"].float() * b_scale)).to(torch.bfloat16)
    return Vendor(x, dequantized, "fp8 values dequantized per block, then torch.matmul (CPU)")


def relative_error(got, want) -> float:
    """||got - want|| / ||want|| over all elements, in fp32: one figure per case, whatever its layout."""
    got, want = got.float().reshape(-1), want.float().reshape(-1)
    norm = float(want.norm())
    return float((got - want).norm()) / norm if norm > 0 else float((got - want).norm())
