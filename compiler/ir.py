"""The IR: four op kinds that the mapper, the engine and the RTL model all understand.

- Einsum: a loop nest of multiply-accumulates (GEMM, conv, attention, ternary matmul). Operand axes are
  affine in the loop indices, so a convolution is one Einsum over its seven loops (n k p q c r s, plus g
  for groups) with the input indexed h = stride*p + dilation*r - pad. An axis may index blocks of its
  loop range (k // 128): a block-scaled GEMM's scales are operands too, one value per block.
- Map: element-wise over a broadcast output shape (activations, bias, residual adds, casts).
- Reduce: reduces some axes of its first input (softmax, norms, pooling, means).
- Move: copies or rearranges bytes without arithmetic (transpose, concat, slice, gather); a `view`
  (reshape, squeeze, identity) moves nothing at all.
Invariant: every op knows its work (`macs` or `ops`), its operand bytes, and a numpy reference.
"""
from __future__ import annotations

import enum
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from compiler.dtypes import DType
from compiler.errors import ModelError


class OpKind(enum.Enum):
    einsum = "einsum"
    map = "map"
    reduce = "reduce"
    move = "move"


class Role(enum.Enum):
    """What an operand is to the op; memory levels in an arch say which roles they hold."""

    weight = "weight"
    input = "input"
    output = "output"


@dataclass(frozen=True)
class Operand:
    tensor: str
    shape: tuple[int, ...]
    dtype: DType
    role: Role
    fused: bool = False          # passed inside one kernel (compiler.passes.fuse): it never leaves the chip
    external: bool = False       # a model input or output (compiler.passes.boundary): it lies off chip

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.dtype.nbytes(self.elements)


@dataclass(frozen=True)
class Axis:
    """One operand axis indexed by (sum(coeff * loop index) + offset) // block; no terms means a fixed index.
    A block over 1 reads one value per block of the range: a block-scaled GEMM's activation scale sx[m, k // 128]."""

    terms: tuple[tuple[str, int], ...]
    offset: int = 0
    block: int = 1

    @staticmethod
    def of(dim: str) -> Axis:
        return Axis(((dim, 1),))


def unblocked(array: np.ndarray, axes: tuple[Axis, ...]) -> tuple[np.ndarray, tuple[Axis, ...]]:
    """An operand with blocked axes as the plain operand it stands for: each value repeated over its block
    (sx[m, k // 128] as an [M, K] array indexed [m, k]); any other operand as it is."""
    for i, axis in enumerate(axes):
        if axis.block > 1:
            array = np.repeat(array, axis.block, axis=i)
    return array, tuple(Axis(a.terms, a.offset) if a.block > 1 else a for a in axes)


def is_scale(axes: tuple[Axis, ...]) -> bool:
    """An operand read per block (a block-scaled GEMM's scales): it scales the products, it is not a factor
    the matrix unit multiplies, so the GEMM view and the compute dtype leave it out."""
    return any(a.block > 1 for a in axes)


@dataclass(frozen=True, kw_only=True)
class IROp:
    name: str                    # unique in the IR
    node: str                    # the graph node it was lowered from
    op: str                      # the frontend op type, for reports
    inputs: tuple[Operand, ...]
    output: Operand
    kernel: str = ""             # the op whose kernel this one is fused into ("": it is a kernel of its own)
    launch: bool = True          # pays a kernel launch (a fused member or an op in a captured graph does not)
    kind: OpKind = field(init=False)

    @property
    def macs(self) -> int:
        return 0

    @property
    def ops(self) -> int:
        """Vector-unit operations (element-wise arithmetic, comparisons, exp...)."""
        return 0

    def bytes_by_role(self) -> dict[Role, int]:
        """Compulsory bytes: every operand read once, the output written once; none for a fused operand."""
        total = {role: 0 for role in Role}
        for operand in self.inputs:
            total[operand.role] += 0 if operand.fused else operand.nbytes
        total[Role.output] += 0 if self.output.fused else self.output.nbytes
        return total

    @property
    def nbytes(self) -> int:
        return sum(self.bytes_by_role().values())

    def reference(self, arrays: list[np.ndarray]) -> np.ndarray:
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class Einsum(IROp):
    loops: tuple[tuple[str, int], ...]      # loop dims in nest order with their extents
    in_axes: tuple[tuple[Axis, ...], ...]   # per input operand, one Axis per array axis
    out_dims: tuple[str, ...]               # the output is indexed by plain loop dims
    acc: DType                              # accumulator type (int32 for int8/ternary, fp32 for floats)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", OpKind.einsum)
        extents = dict(self.loops)
        for operand, axes in zip(self.inputs, self.in_axes):
            if len(axes) != len(operand.shape):
                raise ModelError(f"einsum {self.name}: operand {operand.tensor} has {len(operand.shape)} "
                                 f"axes but {len(axes)} index expressions")
            for axis in axes:
                for dim, _ in axis.terms:
                    if dim not in extents:
                        raise ModelError(f"einsum {self.name}: unknown loop {dim!r}")
        if tuple(extents[d] for d in self.out_dims) != self.output.shape:
            raise ModelError(f"einsum {self.name}: output shape {self.output.shape} does not match loops "
                             f"{self.out_dims}")

    @property
    def macs(self) -> int:
        return math.prod(e for _, e in self.loops)

    @property
    def reduction_dims(self) -> tuple[str, ...]:
        return tuple(d for d, _ in self.loops if d not in self.out_dims)

    @property
    def factors(self) -> tuple[int, ...]:
        """Indices of the inputs the matrix unit multiplies: all but a block-scaled Einsum's scales."""
        return tuple(i for i, axes in enumerate(self.in_axes) if not is_scale(axes))

    @property
    def scale_block(self) -> int:
        """The reduction range each scale covers in a block-scaled Einsum (128: the partial sums of each 128 k
        are scaled and added, DeepGEMM's promotion); 0 for an Einsum without block scales."""
        blocks = [a.block for axes in self.in_axes if is_scale(axes) for a in axes
                  if a.block > 1 and any(d in self.reduction_dims for d, _ in a.terms)]
        return min(blocks, default=0)

    @property
    def ops(self) -> int:
        """A block-scaled Einsum's promotions: each output's partial sum of each block, scaled and added."""
        block = self.scale_block
        if not block:
            return 0
        extents = dict(self.loops)
        reduced = math.prod(extents[d] for d in self.reduction_dims)
        return self.output.elements * -(-reduced // block)

    def describe(self) -> str:
        """Einsum notation with affine indices, e.g. `o[n,k,p,q] += i[n,c,2p+r-3,2q+s-3] * w[k,c,r,s]`."""
        def index(axis: Axis) -> str:
            parts = [f"{c}{d}" if c != 1 else d for d, c in axis.terms]
            text = "+".join(parts) or "0"
            text += f"{axis.offset:+d}" if axis.offset and axis.terms else ""
            if axis.block > 1:      # sx[m,k/128]; a sum is bracketed first: ((k+64)/128)
                text = f"({text})/{axis.block}" if len(parts) > 1 or axis.offset else f"{text}/{axis.block}"
            return text
        args = " * ".join(f"{o.tensor}[{','.join(index(a) for a in axes)}]"
                          for o, axes in zip(self.inputs, self.in_axes))
        return f"{self.output.tensor}[{','.join(self.out_dims)}] += {args}"

    def reference(self, arrays: list[np.ndarray]) -> np.ndarray:
        return _affine_einsum(self, arrays)


@dataclass(frozen=True, kw_only=True)
class Map(IROp):
    fn: Callable[..., np.ndarray] = field(compare=False, repr=False)
    ops_per_element: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", OpKind.map)

    @property
    def ops(self) -> int:
        return self.output.elements * self.ops_per_element

    def reference(self, arrays: list[np.ndarray]) -> np.ndarray:
        return self.fn(*arrays)


@dataclass(frozen=True, kw_only=True)
class Reduce(IROp):
    axes: tuple[int, ...]                   # reduced axes of inputs[0]
    fn: Callable[..., np.ndarray] = field(compare=False, repr=False)
    ops_per_element: int = 1                # per element of inputs[0]

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", OpKind.reduce)

    @property
    def ops(self) -> int:
        return self.inputs[0].elements * self.ops_per_element

    def reference(self, arrays: list[np.ndarray]) -> np.ndarray:
        return self.fn(*arrays)


@dataclass(frozen=True, kw_only=True)
class Move(IROp):
    fn: Callable[..., np.ndarray] = field(compare=False, repr=False)
    view: bool = False                      # a reshape: no byte moves on any hardware
    # writes inputs[1] into inputs[0]'s buffer, which the output is (a KV-cache append, TensorScatter): only the
    # update's bytes move, read once and written once; the rest of the buffer stays where it lies, untouched
    in_place: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", OpKind.move)

    def bytes_by_role(self) -> dict[Role, int]:
        if self.view:
            return {role: 0 for role in Role}
        # A copy reads what it writes (a gather or slice reads only the part it keeps).
        total = {role: 0 for role in Role}
        total[Role.input] = self.written
        total[Role.output] = self.written
        return total

    @property
    def written(self) -> int:
        """Bytes the copy writes: its output, or an in-place write's update alone."""
        return self.inputs[1].nbytes if self.in_place else self.output.nbytes

    def reference(self, arrays: list[np.ndarray]) -> np.ndarray:
        return self.fn(*arrays)


@dataclass
class IR:
    """A lowered model: ops in execution order over named tensors."""

    name: str
    ops: list[IROp]
    inputs: list[str]
    outputs: list[str]
    weights: dict[str, np.ndarray | None]
    constants: dict[str, np.ndarray]
    source: str = "<ir>"


# -- the Einsum reference ------------------------------------------------------------------------------

def _affine_einsum(op: Einsum, arrays: list[np.ndarray]) -> np.ndarray:
    """Evaluate an affine Einsum: window loops (conv r, s) are iterated in Python, the rest by np.einsum.

    Out-of-range indices read zero (padding). Integers accumulate in int64 and wrap to `acc`.
    """
    extents = dict(op.loops)
    letters = {d: chr(ord("a") + i) for i, (d, _) in enumerate(op.loops)}
    work = np.int64 if not op.acc.is_float else np.float64 if op.acc == DType.fp64 else np.float32
    pairs = [unblocked(np.asarray(a), axes) for a, axes in zip(arrays, op.in_axes)]
    arrays, in_axes = [a for a, _ in pairs], [axes for _, axes in pairs]
    plans = [_plan_operand(op, axes, extents) for axes in in_axes]
    window_dims = sorted({d for plan in plans for d in plan.iterated})
    for d in window_dims:
        if d in op.out_dims:
            raise ModelError(f"einsum {op.name}: window loop {d!r} must be a reduction loop")
    prepared = [plan.prepare(np.asarray(a).astype(work, copy=False)) for plan, a in zip(plans, arrays)]
    # A window loop (r, s) is fixed each round in every operand, so it leaves the einsum subscripts.
    subscripts = ",".join("".join(letters[d] for d in plan.dims if d not in window_dims) for plan in plans)
    subscripts += "->" + "".join(letters[d] for d in op.out_dims)
    out = np.zeros(tuple(extents[d] for d in op.out_dims), dtype=work)
    for values in itertools.product(*(range(extents[d]) for d in window_dims)):
        fixed = dict(zip(window_dims, values))
        views = [plan.view(array, fixed) for plan, array in zip(plans, prepared)]
        out += np.einsum(subscripts, *views, optimize=True)
    return out.astype(op.acc.numpy)


@dataclass
class _OperandPlan:
    """How to turn one operand into an array indexed by plain loop dims."""

    dims: list[str]                         # loop dim of each axis of the final view
    # per original axis: ("dim",) ("split", dims, sizes) ("fix", i) ("window", ...)
    steps: list[tuple[Any, ...]]
    iterated: set[str]

    def prepare(self, array: np.ndarray) -> np.ndarray:
        pads = []
        for axis_len, step in zip(array.shape, self.steps):
            if step[0] == "window":
                lo, hi = step[4], step[5]
                pads.append((max(0, -lo), max(0, hi - (axis_len - 1))))
            elif step[0] in ("dim", "split"):
                # a loop may run past the end (a conv's end padding read as p*stride + r): zeros there too
                reach = step[2] if step[0] == "dim" else math.prod(step[2])
                pads.append((0, max(0, reach - axis_len)))
            else:
                pads.append((0, 0))
        if any(p != (0, 0) for p in pads):
            array = np.pad(array, pads)
        self._shift = [max(0, -s[4]) if s[0] == "window" else 0 for s in self.steps]
        return array

    def view(self, array: np.ndarray, fixed: dict[str, int]) -> np.ndarray:
        index: list[Any] = []
        split_shape: list[int] = []
        for ax, step in enumerate(self.steps):
            if step[0] == "dim":
                index.append(slice(0, step[2]))
                split_shape.append(step[2])
            elif step[0] == "fix":
                index.append(step[1])
            elif step[0] == "split":
                index.append(slice(0, math.prod(step[2])))
                split_shape.extend(step[2])
            else:  # window: keep dim `step[1]` with stride step[2]; the other terms are fixed this round
                _, _, stride, terms, _, _, count, offset = step
                start = offset + sum(c * fixed[d] for d, c in terms) + self._shift[ax]
                index.append(slice(start, start + stride * (count - 1) + 1, stride))
                split_shape.append(count)
        view = array[tuple(index)].reshape(split_shape)
        # Plain axes of a window loop (the weight's r, s) take this round's value, as the windows do.
        fixed_view: np.ndarray = view[tuple(fixed.get(d, slice(None)) for d in self.dims)]
        return fixed_view


def _plan_operand(op: Einsum, axes: tuple[Axis, ...], extents: dict[str, int]) -> _OperandPlan:
    dims: list[str] = []
    steps: list[tuple[Any, ...]] = []
    iterated: set[str] = set()
    for axis in axes:
        terms = axis.terms
        if not terms:
            steps.append(("fix", axis.offset))
        elif len(terms) == 1 and terms[0][1] == 1 and axis.offset == 0:
            steps.append(("dim", terms[0][0], extents[terms[0][0]]))
            dims.append(terms[0][0])
        elif axis.offset == 0 and _is_mixed_radix(terms, extents):
            ordered = sorted(terms, key=lambda t: -t[1])
            steps.append(("split", [d for d, _ in ordered], [extents[d] for d, _ in ordered]))
            dims.extend(d for d, _ in ordered)
        else:
            keep = max(terms, key=lambda t: (t[0] in op.out_dims, extents[t[0]]))
            rest = tuple(t for t in terms if t is not keep)
            lo = axis.offset + sum(min(0, c * (extents[d] - 1)) for d, c in terms)
            hi = axis.offset + sum(max(0, c * (extents[d] - 1)) for d, c in terms)
            if keep[1] <= 0:
                raise ModelError(f"einsum {op.name}: axis {axis} needs a positive stride on {keep[0]!r}")
            steps.append(("window", keep[0], keep[1], rest, lo, hi, extents[keep[0]], axis.offset))
            dims.append(keep[0])
            iterated |= {d for d, _ in rest}
    return _OperandPlan(dims, steps, iterated)


def _is_mixed_radix(terms: tuple[tuple[str, int], ...], extents: dict[str, int]) -> bool:
    ordered = sorted(terms, key=lambda t: -t[1])
    if ordered[-1][1] != 1:
        return False
    return all(ordered[i][1] == ordered[i + 1][1] * extents[ordered[i + 1][0]] for i in range(len(ordered) - 1))
