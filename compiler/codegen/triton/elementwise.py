"""Map ops -> one Triton element-wise kernel over the flat output, inputs broadcast numpy-style.

Invariant: each formula is the frontend op's own (compiler/ops/activation.py, elementwise.py, batchnorm.py,
the Conv and Gemm epilogues), computed in fp32 (fp64 if an input is) and cast to out's type on store; an input
is read at the offset its broadcast shape gives each output element, so a bias is never expanded in memory.
"""
from __future__ import annotations

import math
from typing import Sequence

from compiler.codegen.triton.kernel import PRELUDE, TL_TYPES, NoTritonKernel, TritonKernel, captured, torch_names
from compiler.codegen.triton.vector import Launch, map_launch
from compiler.dtypes import DType
from compiler.hardware import Arch
from compiler.ir import Map
from compiler.mapping import Mapping

# Frontend op -> lines computing y from x0, x1, ... (already in the compute type); {name} is a constant the
# op's fn captured (captured()).
_TANH = ["t = tl.exp(-2.0 * tl.abs({z}))", "tanh = tl.where({z} >= 0, 1.0, -1.0) * (1.0 - t) / (1.0 + t)"]
UNARY = {
    "Relu": ["y = tl.maximum(x0, 0.0)"],
    "Sigmoid": ["y = 1.0 / (1.0 + tl.exp(-x0))"],
    "Tanh": [line.format(z="x0") for line in _TANH] + ["y = tanh"],
    "Erf": ["y = tl.erf(x0)"],
    "Sqrt": ["y = tl.sqrt(x0)"], "Exp": ["y = tl.exp(x0)"], "Log": ["y = tl.log(x0)"], "Neg": ["y = -x0"],
    "Abs": ["y = tl.abs(x0)"], "Reciprocal": ["y = 1.0 / x0"], "Floor": ["y = tl.floor(x0)"],
    "Ceil": ["y = tl.ceil(x0)"], "Sign": ["y = tl.where(x0 > 0, 1.0, tl.where(x0 < 0, -1.0, 0.0))"],
    "Softplus": ["y = tl.maximum(x0, 0.0) + tl.log(1.0 + tl.exp(-tl.abs(x0)))"],   # log(1 + e^x), stable
    "LeakyRelu": ["y = tl.where(x0 > 0, x0, x0 * {alpha})"],
    "HardSigmoid": ["y = tl.minimum(tl.maximum({alpha} * x0 + {beta}, 0.0), 1.0)"],
    "HardSwish": ["y = x0 * tl.minimum(tl.maximum(x0 / 6.0 + 0.5, 0.0), 1.0)"],
    "Elu": ["y = tl.where(x0 > 0, x0, {alpha} * (tl.exp(tl.minimum(x0, 0.0)) - 1.0))"],
    "Selu": ["y = {gamma} * tl.where(x0 > 0, x0, {alpha} * (tl.exp(tl.minimum(x0, 0.0)) - 1.0))"],
}
GELU = {"none": ["y = 0.5 * x0 * (1.0 + tl.erf(x0 * 0.7071067811865476))"],          # 0.5 x (1 + erf(x / sqrt 2))
        "tanh": ["u = 0.7978845608028654 * (x0 + 0.044715 * x0 * x0 * x0)"]           # sqrt(2 / pi) (x + 0.044715 x^3)
        + [line.format(z="u") for line in _TANH] + ["y = 0.5 * x0 * (1.0 + tanh)"]}
BINARY = {"Add": ["y = x0 + x1"], "Sub": ["y = x0 - x1"], "Mul": ["y = x0 * x1"], "Div": ["y = x0 / x1"],
          # a^b = 2^(b log2 |a|); a negative base keeps the sign of an odd integer exponent (numpy's power)
          "Pow": ["p = tl.exp2(x1 * tl.log2(tl.abs(x0)))", "odd = (x1 - 2.0 * tl.floor(0.5 * x1)) == 1.0",
                  "y = tl.where(x0 < 0, tl.where(x1 == tl.floor(x1), tl.where(odd, -p, p), float('nan')), p)",
                  "y = tl.where(x1 == 0, 1.0, y)"]}
COMPARE = {"Equal": "==", "Less": "<", "Greater": ">", "LessOrEqual": "<=", "GreaterOrEqual": ">="}
VARIADIC = ("Sum", "Mean", "Max", "Min")
EPILOGUES = ("Conv", "Gemm", "BatchNormalization")    # Maps the Conv and Gemm lowerings add; inference BatchNorm
SUPPORTED = tuple(UNARY) + ("Gelu",) + tuple(BINARY) + tuple(COMPARE) + VARIADIC + ("Where", "Cast") + EPILOGUES


def map_kernel(op: Map, arch: Arch, mapping: Mapping | None = None) -> TritonKernel:
    """The Triton kernel of Map `op`, blocked by its vector chunk plan (`mapping`, computed when None)."""
    if op.op not in SUPPORTED:
        raise NoTritonKernel(f"{op.name!r}: Map ops of type {op.op} have no triton kernel; supported: "
                             f"{', '.join(SUPPORTED)}")
    lines, views, compute = _formula(op)
    launch = map_launch(op, arch, mapping)
    elements = max(1, op.output.elements)
    body = ["    pid = tl.program_id(0)", "    offs = pid * BLOCK + tl.arange(0, BLOCK)"]
    masked = elements % launch.block != 0
    body += ["    mask = offs < %d" % elements] * masked
    dims, flags = _merged(op.output.shape, views)
    needed = {j for f in flags for j, full in enumerate(f) if full and not all(f)}
    for j in sorted(needed):
        inner = math.prod(dims[j + 1:])
        body.append(f"    i{j} = " + (f"offs // {inner}" if inner > 1 else "offs") + (f" % {dims[j]}" if j else ""))
    for i, f in enumerate(flags):
        kept = [j for j, full in enumerate(f) if full]
        strides = {j: math.prod(dims[k] for k in kept if k > j) for j in kept}
        at = "" if not kept else " + offs" if all(f) else " + " + " + ".join(
            f"i{j}" + (f" * {strides[j]}" if strides[j] > 1 else "") for j in kept)
        # masked lanes load ones, so they never take log(0) or 0 / 0 (they are not stored either way)
        dtype = op.inputs[i].dtype
        other = "" if dtype == DType.bool else ", other=1.0" if dtype.is_float else ", other=1"
        load = f"tl.load(in{i}_ptr{at}" + (f", mask=mask{other}" if masked and kept else "") + ")"
        convert = compute is not None and not (op.op == "Where" and i == 0)      # Where's condition stays bool
        body.append(f"    x{i} = {load}" + (f".to({TL_TYPES[compute]})" if convert and compute is not None else ""))
    body += ["    " + line for line in lines]
    body.append("    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty)" + (", mask=mask)" if masked else ")"))
    return TritonKernel(op=op.name, kind="map", source=_module(op, body, launch), tile=(launch.share,),
                        block=(launch.block,), num_warps=launch.num_warps, num_stages=1, grid=(launch.programs,),
                        inputs=torch_names(op.inputs), output=torch_names([op.output])[0],
                        notes=(f"{op.op} in {compute.value if compute else 'its input type'}",))


def _formula(op: Map) -> tuple[list[str], list[tuple[int, ...]], DType | None]:
    """(lines computing y, each input's shape as broadcast against the output, the compute type)."""
    shapes = [o.shape for o in op.inputs]
    floats = [o.dtype for o in op.inputs if o.dtype.is_float]
    compute = DType.fp64 if DType.fp64 in floats else DType.fp32
    data = op.inputs[1:] if op.op == "Where" else op.inputs
    if op.op != "Cast" and op.op not in COMPARE and not all(o.dtype.is_float for o in data):
        raise NoTritonKernel(f"{op.name!r} ({op.op}): integer or bool operands "
                             f"({', '.join(o.dtype.value for o in op.inputs)}); the kernels compute in floats")
    rank = len(op.output.shape)
    if op.op == "Cast":
        return ["y = x0"], shapes, None
    if op.op in COMPARE:
        return [f"y = x0 {COMPARE[op.op]} x1"], shapes, compute if floats else None
    if op.op == "Where":
        return ["y = tl.where(x0, x1, x2)"], shapes, compute
    if op.op in VARIADIC:
        names = [f"x{i}" for i in range(len(op.inputs))]
        if op.op in ("Max", "Min"):
            fold = names[0]
            for n in names[1:]:
                fold = f"tl.{'maximum' if op.op == 'Max' else 'minimum'}({fold}, {n})"
            return [f"y = {fold}"], shapes, compute
        total = " + ".join(names)
        return [f"y = ({total}) / {len(names)}.0" if op.op == "Mean" else f"y = {total}"], shapes, compute
    if op.op == "Gelu":
        return GELU[captured(op, "approximate", "none")], shapes, compute
    if op.op in UNARY:
        defaults = {"LeakyRelu": {"alpha": 0.01}, "HardSigmoid": {"alpha": 0.2, "beta": 0.5}, "Elu": {"alpha": 1.0},
                    "Selu": {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875}}
        values = {k: repr(float(captured(op, k, v))) for k, v in defaults.get(op.op, {}).items()}
        return [line.format(**values) for line in UNARY[op.op]], shapes, compute
    if op.op in BINARY:
        return BINARY[op.op], shapes, compute
    if op.op == "Conv":          # y + b over the channel axis (compiler/ops/conv.py's bias Map)
        return ["y = x0 + x1"], [shapes[0], shapes[1] + (1,) * (rank - 2)], compute
    if op.op == "Gemm":          # alpha * y + beta * c (compiler/ops/gemm.py's epilogue)
        alpha, beta = float(captured(op, "alpha")), float(captured(op, "beta"))
        terms = [f"{alpha!r} * x0" if alpha != 1 else "x0"]
        terms += [f"{beta!r} * x1" if beta != 1 else "x1"] * (len(op.inputs) > 1 and beta != 0)
        return [f"y = {' + '.join(terms)}"], shapes, compute
    epsilon = float(captured(op, "epsilon", 1e-5))           # BatchNormalization, inference
    per_channel = captured(op, "spatial", 1) != 0
    views = [shapes[0]] + [s + (1,) * (rank - 2) if per_channel else s for s in shapes[1:]]
    return [f"y = (x0 - x3) * (x1 / tl.sqrt(x4 + {epsilon!r})) + x2"], views, compute


def _merged(shape: tuple[int, ...], views: Sequence[tuple[int, ...]]) -> tuple[list[int], list[list[bool]]]:
    """The output's dims with extent-1 dims dropped and neighbours every input treats alike (whole or
    broadcast) merged; per input, which merged dims it spans. (1, 16, 768) + (768,): dims [16, 768]."""
    rank = len(shape)
    aligned = [(1,) * (rank - len(v)) + tuple(v) for v in views]
    dims: list[int] = []
    flags: list[list[bool]] = [[] for _ in views]
    previous = None
    for d, extent in enumerate(shape):
        if extent == 1:
            continue
        full = tuple(a[d] == extent for a in aligned)
        if full == previous:
            dims[-1] *= extent
        else:
            dims.append(extent)
            for f, bit in zip(flags, full):
                f.append(bit)
        previous = full
    return dims, flags


def _module(op: Map, body: list[str], launch: Launch) -> str:
    n = len(op.inputs)
    args = ", ".join(f"in{i}" for i in range(n))
    checks = [f"    _expect(in{i}, {tuple(o.shape)!r}, {f'input {i} ({o.tensor})'!r})" for i, o in enumerate(op.inputs)]
    head = ["", "", "@triton.jit", f"def map_kernel({', '.join(f'in{i}_ptr' for i in range(n))}, out_ptr, "
            "BLOCK: tl.constexpr):",
            f"    # One program is one SM's share of a chunk of the vector plan: {launch.share} elements, "
            f"in a block of {launch.block}."]
    tail = ["", "", f"def launch({args}, out):",
            f'    """out = {op.op}({args}), broadcast to {list(op.output.shape)}."""',
            *checks, f"    _expect(out, {tuple(op.output.shape)!r}, 'out')",
            "    dst = out if out.is_contiguous() else torch.empty_like(out, memory_format=torch.contiguous_format)",
            f"    map_kernel[({launch.programs},)]({', '.join(f'in{i}.contiguous()' for i in range(n))}, dst, "
            f"BLOCK={launch.block}, num_warps={launch.num_warps}, num_stages=1)",
            "    if dst is not out:", "        out.copy_(dst)", "    return out", ""]
    return PRELUDE.format(doc=f"{op.name}: {op.op} over {list(op.output.shape)}", op=op.name) + "\n".join(
        head + body + tail)
