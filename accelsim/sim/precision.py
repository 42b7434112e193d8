"""The precision `eval --dtype` emulates, chosen once from the dtype (and an arch's accumulators), and what it does to a
model's outputs: max and mean absolute error against the fp32 reference, per output.

Invariant: a Precision names every rounding the emulation makes (accelsim.sim.emulate applies them); fp32 makes none.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.hardware import Arch

# --dtype values eval emulates, and the format a product's operands are rounded to
OPERANDS = {DType.fp32: DType.fp32, DType.bf16: DType.bf16, DType.fp16: DType.fp16, DType.fp8: DType.fp8,
            DType.fp8_e5m2: DType.fp8_e5m2, DType.int8: DType.int8}
DEFAULT_ACCUMULATOR_BITS = 32        # int8 x int8 -> int32; bf16, fp16, fp8 products -> fp32
FLOAT_ACCUMULATORS = (32, 64)        # a float accumulator narrower than fp32 would round after every addition,
#                                      in an order the hardware does not document: not emulated
FP8_MAX = {DType.fp8: 448.0, DType.fp8_e5m2: 57344.0}   # the largest finite E4M3FN and E5M2 values
INT8_MIN, INT8_MAX = -128, 127
FORMATS = {DType.fp8: "fp8 (E4M3)", DType.fp8_e5m2: "fp8 (E5M2)"}


@dataclass(frozen=True)
class Precision:
    """How the products (MatMul, Gemm, Conv, ConvTranspose, two-operand Einsum) of a model run, and what the ops
    around them keep.

    operands: the format a product's operands are rounded to (round to nearest, ties to even);
    scaled: operands are scaled onto the format's range first (int8: activations per tensor, weights per output
    channel; fp8: per tensor), from the absolute maxima of a reference run on the same inputs;
    accumulator_bits: the width sums are kept in (an int8 product's in two's complement, wrapping; a float's fp32 or
    fp64); outputs: the dtype a product's result (and, for floats, every op computing on such results) is stored in:
    int8 requantises it per tensor, then it is read back as fp32 by the ops around it.
    """

    dtype: DType
    operands: DType
    scaled: bool
    accumulator_bits: int
    outputs: DType

    @property
    def exact(self) -> bool:
        """Nothing is rounded: fp32 operands and outputs."""
        return self.dtype == DType.fp32

    @property
    def integer(self) -> bool:
        return not self.operands.is_float

    def describe(self) -> str:
        """One line a user reads before the figures."""
        if self.exact:
            return "nothing rounded (the reference itself)"
        if self.integer:
            return (f"int8 operands (activations per tensor, weights per output channel, symmetric, scales from "
                    f"these inputs), int{self.accumulator_bits} accumulation, outputs requantised to int8 per tensor")
        scaled = " scaled per tensor," if self.scaled else ""
        return (f"{FORMATS.get(self.operands, self.operands.value)} operands,{scaled} fp{self.accumulator_bits} "
                f"accumulation, outputs "
                f"rounded to {self.outputs.value} (round to nearest even); softmax, norms, exp, log, pow and sums "
                f"in fp32")


def precision(dtype: str | DType, arch: Arch | None = None) -> Precision:
    """The Precision of `--dtype` (and `--arch`: its matrix unit's accumulator width for the dtype, where the YAML
    gives one, else 32 bits). A dtype eval does not emulate, or one the arch does not compute in, is a UserError."""
    chosen = _parse(dtype)
    bits = DEFAULT_ACCUMULATOR_BITS
    if arch is not None:
        # an arch naming fp8 computes in both fp8 formats, as Hopper's and Ada's tensor cores do, at one rate
        named = DType.fp8 if chosen == DType.fp8_e5m2 else chosen
        if named not in arch.dtypes and chosen != DType.fp32:
            supported = ", ".join(d.value for d in arch.dtypes if d in OPERANDS)
            raise UserError(f"--dtype {chosen.value}: {arch.name} has no matrix unit computing in it; of the dtypes "
                            f"eval emulates it computes in {supported or 'none'}")
        unit = arch.matrix_for(named) if named in arch.dtypes else None
        if unit is not None and unit.array is not None:
            bits = unit.array.accumulator_bits
            if chosen.is_float and bits not in FLOAT_ACCUMULATORS:
                raise UserError(f"{arch.source_file}: compute unit {unit.name!r}: array: accumulator_bits: {bits} "
                                f"for {chosen.value}: eval emulates float accumulation in "
                                f"{' or '.join(map(str, FLOAT_ACCUMULATORS))} bits")
    outputs = DType.bf16 if chosen in FP8_MAX else chosen     # an fp8 GEMM writes bf16, as Transformer Engine's do
    return Precision(chosen, OPERANDS[chosen], chosen in FP8_MAX or chosen == DType.int8, bits, outputs)


def native(arch: Arch) -> DType:
    """The first dtype `arch`'s matrix units compute in that eval emulates: the one `run` uses by default."""
    for dtype in arch.dtypes:
        if dtype in OPERANDS:
            return dtype
    raise UserError(f"{arch.name} computes in {', '.join(d.value for d in arch.dtypes)}; eval emulates "
                    f"{', '.join(d.value for d in OPERANDS)}: give --dtype")


def _parse(dtype: str | DType) -> DType:
    allowed = ", ".join(d.value for d in OPERANDS)
    try:
        chosen = dtype if isinstance(dtype, DType) else DType(dtype)
    except ValueError:
        chosen = None
    if chosen not in OPERANDS:
        raise UserError(f"--dtype {getattr(dtype, 'value', dtype)!r}: eval emulates {allowed}")
    return chosen


@dataclass(frozen=True)
class OutputError:
    """How far one output at the emulated precision lies from the reference."""

    name: str
    shape: tuple[int, ...]
    max_abs: float        # max |emulated - reference|
    mean_abs: float       # mean |emulated - reference|
    mean_ref: float       # mean |reference|
    max_ref: float        # max |reference|

    @property
    def relative(self) -> float:
        """mean |error| / mean |reference| (0 where the reference is all zeros and so is the error)."""
        return _ratio(self.mean_abs, self.mean_ref)

    @property
    def max_relative(self) -> float:
        """max |error| / max |reference|."""
        return _ratio(self.max_abs, self.max_ref)


def _ratio(error: float, size: float) -> float:
    if size == 0:
        return 0.0 if error == 0 else float("inf")
    return error / size


def output_error(name: str, reference: np.ndarray, emulated: np.ndarray) -> OutputError:
    """The error of one output, computed in float64 (an integer or bool output compares as numbers)."""
    ref = np.asarray(reference, dtype=np.float64)
    diff = np.abs(np.asarray(emulated, dtype=np.float64) - ref)
    empty = diff.size == 0
    return OutputError(name, tuple(ref.shape), 0.0 if empty else float(np.max(diff)),
                       0.0 if empty else float(np.mean(diff)), 0.0 if empty else float(np.mean(np.abs(ref))),
                       0.0 if empty else float(np.max(np.abs(ref))))


def error_table(errors: list[OutputError]) -> str:
    """One row per output: its shape, max and mean absolute error, and both relative to the reference's size."""
    header = ("output", "shape", "max |err|", "mean |err|", "mean |ref|", "mean rel", "max rel")
    rows = [(e.name, str(list(e.shape)), f"{e.max_abs:.4g}", f"{e.mean_abs:.4g}", f"{e.mean_ref:.4g}",
             _percent(e.relative), _percent(e.max_relative)) for e in errors]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["error against the reference in the model's own dtypes (mean rel = mean |err| / mean |ref|, max rel = "
             "max |err| / max |ref|):"]
    for row in [header, *rows]:
        lines.append("  ".join(cell.ljust(width) if i < 2 else cell.rjust(width)
                               for i, (cell, width) in enumerate(zip(row, widths))).rstrip())
    return "\n".join(lines) + "\n"


def _percent(ratio: float) -> str:
    return "inf" if ratio == float("inf") else f"{100 * ratio:.3g}%"
