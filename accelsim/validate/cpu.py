"""`accelsim validate cpu`: time GEMMs (numpy), convolutions (torch) and training steps (torch: forward, backward and
optimizer apart) on this machine at a fixed thread count and write each beside what accelsim predicts. Invariant: the
folder it writes (measurements.csv, dataset.yaml, arch.yaml) is enough to re-predict every row later: each row's case
is a cases.parse key, arch.yaml the hardware it was priced on.
"""
from __future__ import annotations

import csv
import difflib
import io
import math
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import datetime, UTC
from pathlib import Path

from compiler import output
from compiler.errors import UserError
from accelsim.validate.cases import Case, parse, predict
from accelsim.validate.dataset import arch_text, git_commit, new_folder, write_arch
from accelsim.validate.torch_train import WARMUP_STEPS
from accelsim.validate.train_cases import TrainCase, step_cases
from compiler.hardware import Arch

ALEXNET_CONVS = [   # batch 1, 224 x 224 input; conv2, 4 and 5 are split in two groups as in the paper's two GPUs
    "conv 1 3 224 224 96 11 11 4 2 1 fp32",       # conv1 -> 55 x 55
    "conv 1 96 27 27 256 5 5 1 2 2 fp32",         # conv2
    "conv 1 256 13 13 384 3 3 1 1 1 fp32",        # conv3
    "conv 1 384 13 13 384 3 3 1 1 2 fp32",        # conv4
    "conv 1 384 13 13 256 3 3 1 1 2 fp32",        # conv5
]
RESNET50_CONVS = [  # the distinct shapes of torchvision's ResNet-50 (stride on the 3 x 3), one per kind per stage
    "conv 1 3 224 224 64 7 7 2 3 1 fp32",         # stem
    "conv 1 64 56 56 64 1 1 1 0 1 fp32",          # layer1 reduce
    "conv 1 64 56 56 64 3 3 1 1 1 fp32",          # layer1 3 x 3
    "conv 1 64 56 56 256 1 1 1 0 1 fp32",         # layer1 expand
    "conv 1 256 56 56 64 1 1 1 0 1 fp32",         # layer1 reduce (blocks 2-3)
    "conv 1 128 56 56 128 3 3 2 1 1 fp32",        # layer2 3 x 3, stride 2
    "conv 1 256 56 56 512 1 1 2 0 1 fp32",        # layer2 downsample
    "conv 1 128 28 28 128 3 3 1 1 1 fp32",        # layer2 3 x 3
    "conv 1 256 14 14 256 3 3 1 1 1 fp32",        # layer3 3 x 3
    "conv 1 256 14 14 1024 1 1 1 0 1 fp32",       # layer3 expand
    "conv 1 1024 14 14 256 1 1 1 0 1 fp32",       # layer3 reduce
    "conv 1 512 7 7 512 3 3 1 1 1 fp32",          # layer4 3 x 3
    "conv 1 512 7 7 2048 1 1 1 0 1 fp32",         # layer4 expand
    "conv 1 2048 7 7 512 1 1 1 0 1 fp32",         # layer4 reduce
]
SUITES = {
    "gemm": [f"gemm {n} {n} {n} fp32" for n in (64, 96, 128, 256, 384, 512, 1000, 1024, 2048)]
    + ["gemm 1024 64 1024 fp32", "gemm 64 1024 1024 fp32", "gemm 4096 256 256 fp32"]
    + [f"gemm {n} {n} {n} fp64" for n in (256, 512, 1024)],
    "conv": ALEXNET_CONVS + RESNET50_CONVS,
    # training steps (train_cases.MODELS), the three phases timed together, a row each (suites train_<phase>):
    # batches spread each model over a decade of time; every model with both optimizers
    "train": ["train mlp256 16 sgd fp32", "train mlp256 128 adamw fp32", "train mlp256 512 sgd fp32",
              "train mlp1024 8 adamw fp32", "train mlp1024 32 sgd fp32", "train mlp1024 256 adamw fp32",
              "train cnn 8 adamw fp32", "train cnn 64 sgd fp32",
              "train block256 2 adamw fp32", "train block256 16 sgd fp32"],
}
# The guards the committed host datasets are scored against (validation/cpu/host_amd_epyc/dataset.yaml for gemm,
# validation/cpu/host_amd_epyc_train/dataset.yaml for the training phases, which says why): a new dataset gets the
# same ones, so `validate cpu` and `validate score` hold a host to one target.
TARGETS = {"gemm": {"mape": 0.12, "spearman": 0.95}, "conv": {"report_only": True},
           "train_forward": {"mape": 0.35, "spearman": 0.9}, "train_backward": {"mape": 0.35, "spearman": 0.95},
           "train_optimizer": {"report_only": True}}
SAMPLE_S = 0.02      # a timed sample repeats the op until it lasts this long: evens out timer and scheduler noise
TRAIN_SAMPLE_S = 0.1     # a training sample: whole steps, so that a phase of a few microseconds is timed in bulk
TRAIN_ROUNDS = 3         # passes over the training steps; the median of the rounds is kept
BIG_S = 0.3          # ops slower than this get at most BIG_REPEATS samples: gemm and conv stay under a minute
BIG_REPEATS = 3
TIMING = {   # dataset.yaml's `timing:`, per kind of case measured
    "gemm": f"numpy.matmul into a preallocated output, BLAS threads fixed with threadpoolctl; 2 warm-up runs, then "
            f"the median of --repeats samples (at most {BIG_REPEATS} for runs over {BIG_S} s), each as many runs as "
            f"last {SAMPLE_S} s",
    "conv": "torch.nn.functional.conv2d under inference_mode, torch.set_num_threads(threads); sampled as gemm",
    "train": f"the case's Graph run op by op in torch (accelsim/validate/torch_train.py), loss.backward(), then "
             f"torch.optim SGD or AdamW with PyTorch's default implementation on CPU (foreach=None: the "
             f"per-parameter loop); torch.set_num_threads(threads); each phase timed apart, on one thread by the "
             f"thread's CPU time (time.thread_time: other tenants' time slices on a shared core are not counted), on "
             f"more by time.perf_counter; gradients set to None between steps, untimed; per step {WARMUP_STEPS} "
             f"warm-up steps, then the median of --repeats samples, each the mean per phase of as many steps as last "
             f"{TRAIN_SAMPLE_S} s; {TRAIN_ROUNDS} rounds over all steps, the median of the rounds kept",
}


@dataclass(frozen=True)
class Row:
    suite: str
    case: Case | TrainCase
    threads: int
    measured_s: float
    predicted_s: float

    @property
    def error(self) -> float:
        return (self.predicted_s - self.measured_s) / self.measured_s


def suite_keys(suite: str) -> dict[str, list[str]]:
    """{suite: case keys} for `gemm`, `conv`, `train` or `all` (train's keys are steps, without a phase)."""
    if suite == "all":
        return dict(SUITES)
    if suite not in SUITES:
        close = difflib.get_close_matches(suite, [*SUITES, "all"], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UserError(f"--suite {suite!r}: expected one of {', '.join([*SUITES, 'all'])}{hint}")
    return {suite: SUITES[suite]}


# ---- measuring ------------------------------------------------------------------------------------

def _gemm_op(case: Case):
    import numpy as np

    m, n, k = case.dims
    rng = np.random.default_rng(0)
    dtype = {"fp32": np.float32, "fp64": np.float64}[case.dtype.value]
    a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
    c = np.empty((m, n), dtype)
    return lambda: np.matmul(a, b, out=c)


def _conv_op(case: Case):
    import torch

    n, c, h, w, k, r, s, stride, pad, groups = case.dims
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, c, h, w, generator=gen)
    weight = torch.randn(k, c // groups, r, s, generator=gen)

    def op():
        with torch.inference_mode():
            torch.nn.functional.conv2d(x, weight, stride=stride, padding=pad, groups=groups)
    return op


def _timed(op, inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        op()
    return (time.perf_counter() - start) / inner


def measure(case: Case, threads: int, repeats: int) -> float:
    """Median seconds of one run of the case, on `threads` BLAS/OpenMP threads, after warm-up runs."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(threads):
        if case.kind == "gemm":
            op = _gemm_op(case)
        else:
            import torch

            before = torch.get_num_threads()
            torch.set_num_threads(threads)
            op = _conv_op(case)
        try:
            first_s = _timed(op, 1)                    # first touch of the pages, library set-up
            once_s = min(first_s, _timed(op, 1))       # warm
            inner = max(1, math.ceil(SAMPLE_S / once_s))
            samples = min(repeats, BIG_REPEATS) if once_s > BIG_S else repeats
            return statistics.median(_timed(op, inner) for _ in range(samples))
        finally:
            if case.kind == "conv":
                torch.set_num_threads(before)


def torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return str(torch.__version__)   # a TorchVersion, which YAML cannot write


# ---- the arch and the provenance ------------------------------------------------------------------

def _blas() -> str:
    from threadpoolctl import threadpool_info

    blas = [i for i in threadpool_info() if i["user_api"] == "blas"]
    libs = [f"{i['internal_api']} {i.get('version') or ''}".strip() for i in blas]
    return ", ".join(dict.fromkeys(libs)) or "unknown"


def provenance(threads: int, repeats: int, arch_source: str, rows: list[Row]) -> dict:
    """dataset.yaml's content: the machine, the software, how each suite measured was timed and its target."""
    import numpy as np

    from accelsim.importers.host import read_host
    from accelsim.importers.host_preset import vector_bytes

    host = read_host()
    simd = sorted(host.flags & {"avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx_vnni", "amx_tile", "neon"})
    return {
        "machine": {"model": host.model, "cores": host.cores, "clock_ghz": host.clock_ghz,
                    "flags": f"{vector_bytes(host.flags)[1]} ({' '.join(simd) or 'no avx'})"},
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "software": {"python": platform.python_version(), "numpy": np.__version__, "blas": _blas(),
                     "torch": torch_version() or "not installed"},
        "threads": threads,
        "repeats": repeats,
        "timing": {kind: TIMING[kind] for kind in dict.fromkeys(r.case.kind for r in rows)},
        "arch": "arch.yaml",
        "arch_source": arch_source,
        "measurements": "measurements.csv",
        "targets": {suite: TARGETS[suite] for suite in dict.fromkeys(r.suite for r in rows)},
    }


# ---- the run --------------------------------------------------------------------------------------

def _seconds(s: float) -> str:
    return f"{s * 1e3:9.3f} ms" if s >= 1e-3 else f"{s * 1e6:9.1f} us"


def _print_row(row: Row, out) -> None:
    print(f"  {row.case.key:44} {_seconds(row.measured_s)} {_seconds(row.predicted_s)} {row.error:+7.1%}",
          file=out, flush=True)


def _train_rows(steps: list[str], arch: Arch, threads: int, repeats: int, out) -> list[Row]:
    """Every step timed in TRAIN_ROUNDS rounds over the whole list, so that a burst of load on a shared machine
    spoils one round of a step, not all of it; the median of the rounds' medians is kept. A row per phase, in suite
    train_<phase>."""
    from accelsim.validate.torch_train import measure_step   # torch itself is imported only when timing

    rounds = []
    for r in range(TRAIN_ROUNDS):
        rounds.append([measure_step(step_cases(step)[0], threads, repeats, TRAIN_SAMPLE_S) for step in steps])
        print(f"  round {r + 1} of {TRAIN_ROUNDS} timed", file=out, flush=True)
    rows = []
    for i, step in enumerate(steps):
        for case in step_cases(step):
            measured = statistics.median(timed[i][case.phase] for timed in rounds)
            rows.append(Row(f"train_{case.phase}", case, threads, measured, predict(case, arch)))
            _print_row(rows[-1], out)
    return rows


def run_suites(keys: dict[str, list[str]], arch: Arch, threads: int, repeats: int, out=sys.stdout) -> list[Row]:
    rows = []
    for suite, cases in keys.items():
        if suite in ("conv", "train") and torch_version() is None:
            print(f"{suite}: skipped: torch is not installed (pip install 'accelsim[torch]')", file=out)
            continue
        print(f"{suite}: {'case':38} {'measured':>12} {'predicted':>12}  error", file=out)
        if suite == "train":
            rows += _train_rows(cases, arch, threads, repeats, out)
            continue
        for key in cases:
            case = parse(key)
            row = Row(suite, case, threads, measure(case, threads, repeats), predict(case, arch))
            _print_row(row, out)
            rows.append(row)
    # a suite's rows together (train's phases are measured step by step, interleaved)
    order = list(dict.fromkeys(r.suite for r in rows))
    return sorted(rows, key=lambda r: order.index(r.suite))


def mape(rows: list[Row]) -> dict[str, float]:
    """{suite: mean |predicted - measured| / measured}."""
    suites = dict.fromkeys(r.suite for r in rows)
    return {s: statistics.fmean(abs(r.error) for r in rows if r.suite == s) for s in suites}


def write_csv(rows: list[Row], path: Path) -> None:
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(["suite", "case", "threads", "measured_s", "predicted_s"])
    for r in rows:
        writer.writerow([r.suite, r.case.key, r.threads, f"{r.measured_s:.6e}", f"{r.predicted_s:.6e}"])
    output.write_file(path, text.getvalue())


def validate_cpu(suite: str, threads: int, repeats: int, out_dir: str | None, arch: str | None) -> dict[str, float]:
    """Measure, predict, write the dataset folder and print the table; returns the MAPE per suite."""
    import yaml

    from accelsim.importers.host import read_host
    from accelsim.importers.host_preset import preset_name

    if threads < 1 or repeats < 1:
        raise UserError(f"--threads {threads} --repeats {repeats}: both must be positive integers")
    keys = suite_keys(suite)
    text, source = arch_text(arch, threads)
    folder = new_folder(out_dir, preset_name(read_host().model))
    priced = write_arch(folder, text)
    start = time.perf_counter()
    rows = run_suites(keys, priced, threads, repeats)
    write_csv(rows, folder / "measurements.csv")
    dataset = provenance(threads, repeats, source, rows)
    output.write_file(folder / "dataset.yaml", yaml.safe_dump(dataset, sort_keys=False, width=120))
    scores = mape(rows)
    for name, value in scores.items():
        target = TARGETS[name].get("mape")
        goal = f" (target {target:.0%})" if target else " (report only)"
        print(f"{name}: MAPE {value:.1%} over {sum(r.suite == name for r in rows)} cases{goal}")
    print(f"wrote {folder}/: measurements.csv, dataset.yaml, arch.yaml ({time.perf_counter() - start:.0f} s)")
    return scores
