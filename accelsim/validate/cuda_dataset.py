"""The dataset folder `accelsim validate cuda` writes: measurements.csv (row by row), arch.yaml (the preset the
predictions are for), dataset.yaml (the GPU, the software, the settings, each suite's target).

Invariant: dataset.yaml is written before the first case and rewritten at the end with what was reached, so a
stopped run still leaves a folder `accelsim validate score` reads.
"""
from __future__ import annotations

import math
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from compiler import output
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.hardware import Arch
from compiler.hardware.profiles import profile
from accelsim.validate.cases import parse
from accelsim.validate.dataset import arch_text, git_commit, new_folder, write_arch
from accelsim.validate.cuda_suites import TARGETS, ZOO, suite_keys

DEFAULT_BUDGET_S = 480    # the default run fits in 8 minutes
INTERPRETER_NOTE = ("note: --device cpu-interpreter times Triton's interpreter on this CPU, not a GPU: the "
                    "numbers check the harness, never the model")


def work_list(suite: str, fp8: bool, arch: Arch, keys: list[str] = (),
              stream=sys.stdout) -> list[tuple[str, str, int]]:
    """(suite, case key, count) in run order; the zoo suite expands to zoo_<model> suites of distinct ops;
    `keys` given, just those (suite "custom")."""
    from accelsim.validate.cases import parse
    from accelsim.validate.zoo_cases import model_cases

    if keys:
        return [("custom", parse(key).key, 1) for key in keys]
    work = []
    for name, keys in suite_keys(suite, fp8).items():
        if name != "zoo":
            work += [(name, key, 1) for key in keys]
            continue
        for model, options in ZOO.items():
            cases = model_cases(model, DType.bf16, arch, **options)
            print(f"zoo_{model}: {len(cases.counts)} distinct ops ({sum(cases.counts.values())} in all), "
                  f"{cases.covered_s / cases.total_s:.0%} of its predicted time; not measured: "
                  f"{', '.join(sorted(cases.skipped))}", file=stream)
            work += [(f"zoo_{model}", key, count) for key, count in cases.counts.items()]
    return work


def _targets(work) -> dict:
    suites = dict.fromkeys(name for name, _, _ in work)
    return {s: TARGETS.get(s, {"report_only": True}) for s in suites}


def validate_cuda(suite: str, arch: str, out_dir: str, repeats: int, budget_s: float | None,
                  device: str = "cuda", keys: list[str] = ()) -> int:
    """Measure, predict and write the dataset folder; returns 1 when a generated kernel disagrees with the vendor."""
    import yaml

    from accelsim.validate.cuda import COLD, CsvOut, mape, run_cases
    from accelsim.validate.cuda_device import CudaClock, InterpreterClock, device_info, has_fp8

    if repeats < 1:
        raise UserError(f"--repeats {repeats}: must be a positive integer")
    for key in keys:   # a bad --case fails before anything is written
        if parse(key).kind == "train":
            raise UserError(f"--case {key!r}: training cases are measured on the host (accelsim validate cpu "
                            f"--suite train), not here")
    suite_keys(suite, fp8=True)   # a bad --suite fails before anything is written
    if device == "cpu-interpreter":
        os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton is first imported
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UserError("validate cuda needs PyTorch (pip install 'accelsim[torch]') and triton") from None
    clock = (InterpreterClock if device == "cpu-interpreter" else CudaClock)(repeats)
    text, source = arch_text(arch, 1)
    folder = new_folder(out_dir, f"cuda-{Path(str(arch)).stem}")
    priced = write_arch(folder, text)
    if not profile(priced.kind).cuda and device == "cuda":
        raise UserError(f"--arch {arch}: a {priced.kind.value} preset; a GPU is validated against a simt one "
                        f"(h200, h100, a100, v100, gtx580)")
    work = work_list(suite, has_fp8(clock), priced, keys)
    if device == "cpu-interpreter":
        print(INTERPRETER_NOTE)
    meta = {"device": device_info(clock), "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "commit": git_commit(), "arch": "arch.yaml", "arch_source": source, "repeats": repeats,
            "timing": "CUDA events, median, L2 flushed before each run" if device == "cuda" else "perf_counter",
            "caches": COLD,
            "measured_s": "the vendor library through PyTorch; triton_s: accelsim's generated kernels",
            "measurements": "measurements.csv", "targets": _targets(work), "cases_planned": len(work)}
    output.write_file(folder / "dataset.yaml", yaml.safe_dump(meta, sort_keys=False, width=120))
    out = CsvOut(folder / "measurements.csv")
    start = time.perf_counter()
    try:
        rows, left = run_cases(work, priced, clock, out, math.inf if budget_s is None else budget_s)
    finally:
        out.close()
    meta.update(cases_measured=len(rows), cases_not_reached=len(left), wall_s=round(time.perf_counter() - start, 1))
    output.write_file(folder / "dataset.yaml", yaml.safe_dump(meta, sort_keys=False, width=120))
    for name, value in mape(rows).items():
        target = TARGETS.get(name, {}).get("mape")
        print(f"{name}: MAPE {value:.1%} over {sum(r.suite == name for r in rows)} cases"
              + (f" (target {target:.0%})" if target else " (report only)"))
    if device == "cpu-interpreter":
        print(INTERPRETER_NOTE)
    mismatches = [r for r in rows if r.mismatch]
    for r in mismatches:
        print(f"MISMATCH {r.case.key}: generated Triton differs from {r.library} by {r.triton_error:.2e}")
    print(f"wrote {folder}/: measurements.csv, dataset.yaml, arch.yaml ({meta['wall_s']:.0f} s)")
    return 1 if mismatches else 0
