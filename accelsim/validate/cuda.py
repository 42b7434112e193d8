"""`accelsim validate cuda`: each case timed through the vendor library (PyTorch: cuBLAS, cuDNN, FlashAttention)
and through the Triton kernels accelsim's compiler generates from its own mapping, the two checked against each
other, and written beside what accelsim predicts.

Invariant: a row is appended to measurements.csv (and flushed) the moment its case is measured, so a run that is
stopped (Ctrl-C, the time budget, a crash) keeps every case it finished; the folder is re-scorable by
`accelsim validate score` at any point.
"""
from __future__ import annotations

import csv
import math
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from compiler.errors import UserError
from accelsim.validate.cases import Case, parse, predict
from accelsim.validate.torch_ops import TOLERANCE, precision, relative_error, torch_dtype, vendor
from compiler.hardware import Arch

COLD = "cold"     # where a case's operands are when timed: the clock flushes L2 first (cuda_device)
COLUMNS = ("suite", "case", "count", "measured_s", "predicted_s", "triton_s", "triton_error", "triton_kernel",
           "library", "note")


@dataclass(frozen=True)
class Row:
    suite: str
    case: Case
    count: int                  # times a zoo model runs this case (1 elsewhere)
    measured_s: float           # the vendor library, median
    predicted_s: float
    triton_s: float | None      # accelsim's generated kernels, median; None where none could run
    triton_error: float | None  # ||triton - vendor|| / ||vendor||
    triton_kernel: str          # what each kernel took from the mapping
    library: str
    note: str = ""

    @property
    def mismatch(self) -> bool:
        return self.triton_error is not None and not self.triton_error <= TOLERANCE.get(self.case.dtype, 2e-2)


class TritonCase:
    """The case's IR, one generated kernel per kernel the fusion pass formed for an attention (FlashAttention) and
    per op otherwise, launched in order on the vendor's very input tensors."""

    def __init__(self, case: Case, arch: Arch, inputs: dict, folder: Path):
        import torch

        from accelsim.sim.build import build
        from compiler.codegen.triton import load, triton_kernel
        from compiler.codegen.triton.attention import attention_kernel
        from compiler.dtypes import DType
        from compiler.passes.attention import attention_groups

        compiled = build(case.graph(), arch, dtype=case.dtype)
        ir = compiled.ir
        self.inputs, self.output = inputs, ir.outputs[0]
        self.steps, described = [], []
        device = next(iter(inputs.values())).device
        fused = {g.scores: g for g in attention_groups(ir) if ir.ops[g.weighted].kernel == ir.ops[g.scores].name}
        inside = {i for g in fused.values() for i in g.members}
        for i, op in enumerate(ir.ops):
            if i in inside:
                continue
            if i in fused:
                ops = [ir.ops[j] for j in (i, *fused[i].maps, fused[i].softmax, fused[i].weighted)]
                kernel = attention_kernel(ops, arch)
                reads = [ops[0].inputs[0], ops[0].inputs[1], ops[-1].inputs[1],
                         *(o for member in ops[1:-2] for o in member.inputs if not o.fused)]
                op = ops[-1]
            else:
                kernel, reads = None, list(op.inputs)
            # an fp8 GEMM writes bf16, as cuBLASLt's does here: the check then compares the products, not two
            # roundings to a 3-bit mantissa
            stored = DType.bf16 if op.output.dtype == DType.fp8 and op.kind.value == "einsum" else op.output.dtype
            out = torch.empty(op.output.shape, dtype=torch_dtype(stored), device=device)
            names = [o.tensor for o in reads]
            if kernel is None and op.kind.value == "move" and getattr(op, "view", False):
                self.steps.append((names, op.output.tensor, None, out))
                continue
            kernel = kernel or triton_kernel(op, arch, compiled.mappings[op.name])
            self.steps.append((names, op.output.tensor, load(kernel, folder), out))
            described.append(f"{kernel.op}: {kernel.describe()}")
        self.description = "; ".join(described)

    def __call__(self):
        tensors = dict(self.inputs)
        for names, output, module, out in self.steps:
            args = [tensors[name] for name in names]
            tensors[output] = args[0].reshape(out.shape) if module is None else module.launch(*args, out)
        return tensors[self.output]


def measure(suite: str, case: Case, count: int, arch: Arch, clock, folder: Path) -> Row:
    """Vendor and Triton times for one case (a UserError from the vendor side propagates: the row has no truth)."""
    predicted = predict(case, arch, caches=COLD)    # the clock flushes L2 before each run
    with precision(case.dtype):
        lib = vendor(case, clock.device)
        measured = clock.median_s(lib.call)
        want = lib.call()
        triton_s = error = None
        kernel, note = "", ""
        try:
            generated = TritonCase(case, arch, lib.inputs, folder)
            kernel = generated.description
            error = relative_error(generated(), want)
            triton_s = clock.median_s(generated)
        except UserError as e:                     # an op with no generated kernel: recorded, not fatal
            note = f"no triton kernel: {e}"
        except Exception as e:                     # a Triton compile or launch failure is data about the codegen
            note = f"triton failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
        clock.sync()
    row = Row(suite, case, count, measured, predicted, triton_s, error, kernel, lib.library, note)
    if row.mismatch:
        row = replace(row, note=f"MISMATCH: relative error {error:.2e} over tolerance")
    del lib
    clock.release()
    return row


class CsvOut:
    """measurements.csv, written row by row and flushed: nothing measured is lost when the run stops."""

    def __init__(self, path: Path):
        self.file = path.open("w", newline="")
        self.writer = csv.writer(self.file)
        self.writer.writerow(COLUMNS)
        self.file.flush()

    def write(self, r: Row) -> None:
        def seconds(v):
            return "" if v is None else f"{v:.6e}"
        self.writer.writerow([r.suite, r.case.key, r.count, seconds(r.measured_s), seconds(r.predicted_s),
                              seconds(r.triton_s), "" if r.triton_error is None else f"{r.triton_error:.2e}",
                              r.triton_kernel, r.library, r.note])
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def _seconds(s: float | None) -> str:
    if s is None:
        return f"{'-':>10}"
    return f"{s * 1e3:7.3f} ms" if s >= 1e-3 else f"{s * 1e6:7.1f} us"


def run_cases(work: list[tuple[str, str, int]], arch: Arch, clock, out: CsvOut, budget_s: float,
              stream=sys.stdout) -> tuple[list[Row], list[str]]:
    """Measure (suite, key, count) in order until the budget is spent (checked between cases: the first always
    runs); returns (rows, keys not reached)."""
    start = time.perf_counter()
    rows, suite, measured = [], None, {}
    with tempfile.TemporaryDirectory(prefix="accelsim_triton_") as folder:
        for i, (name, key, count) in enumerate(work):
            if i and time.perf_counter() - start > budget_s:
                left = [k for _, k, _ in work[i:]]
                print(f"budget of {budget_s:.0f} s spent: {len(left)} cases not run", file=stream)
                return rows, left
            if name != suite:
                suite = name
                print(f"{suite}: {'case':36} {'vendor':>10} {'triton':>10} {'predicted':>10}  error", file=stream)
            case = parse(key)
            if key in measured:   # a zoo op already timed in an earlier suite: the same measurement, not another
                row = replace(measured[key], suite=name, count=count)
            else:
                try:
                    row = measure(name, case, count, arch, clock, Path(folder))
                except UserError as e:
                    print(f"  {key:38} skipped: {e}", file=stream)
                    continue
                measured[key] = row
            out.write(row)
            rows.append(row)
            error = (row.predicted_s - row.measured_s) / row.measured_s
            flag = f"  {row.note}" if row.note else ""
            print(f"  {key:38} {_seconds(row.measured_s)} {_seconds(row.triton_s)} {_seconds(row.predicted_s)} "
                  f"{error:+7.1%}{flag}", file=stream, flush=True)
    return rows, []


def mape(rows: list[Row]) -> dict[str, float]:
    suites = dict.fromkeys(r.suite for r in rows)
    return {s: math.fsum(abs(r.predicted_s - r.measured_s) / r.measured_s for r in rows if r.suite == s)
            / sum(r.suite == s for r in rows) for s in suites}
