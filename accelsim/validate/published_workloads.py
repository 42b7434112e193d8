"""Published whole-workload times (validation/published/workloads.csv: whole-model inference latencies, Llama decode
steps and attention kernels that others measured on V100, A100 and H100, each row with its source) predicted again
by accelsim on the preset each row names; scored on seconds per suite by accelsim.validate.score.

A row keeps the figure as printed and the seconds derived from it; read() checks the two agree. A row accelsim
cannot express yet (a causal mask, a weight-only dtype, grouped-query attention, an unnamed GPU) stays in the data
with `status` saying why, and is not predicted. Invariant: every prediction comes from the current model; the CSV
holds measurements only.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from accelsim.validate.published_gpu import Prediction, thinned
from accelsim.validate.sourced import agreeing, figures, is_published, settings, sourced_rows
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.hardware import Arch

DATA = Path(__file__).resolve().parents[2] / "validation" / "published"
CSV = "workloads.csv"
COLUMNS = ("case", "suite", "kind", "arch", "variant", "workload", "causal", "reported", "reported_unit",
           "measured_s", "conversion", "timing", "status", "source", "where", "note")
KINDS = ("model", "decode", "attention")   # a zoo model's forward pass; one decode step of it; one attention case
UNITS = ("ms", "us", "TFLOPS", "tokens/s")
SCORED = "scored"                          # any other status is "unscored: why"
AGREE = 1e-4                               # measured_s is written to 6 significant digits


@dataclass(frozen=True)
class Workload:
    """What accelsim builds for a row: a zoo model with its options, or an accelsim.validate.cases key.

    Model keys read "NAME DTYPE key=value ...": `bert_base fp16 batch=8 seq=128`, `llama bf16 mode=decode seq=128`.
    """

    key: str
    model: str
    dtype: DType
    options: tuple[tuple[str, int | str], ...]

    @property
    def batch(self) -> int:
        return int(dict(self.options).get("batch", 1))


def parse_workload(key: str, kind: str) -> Workload:
    """The Workload a row's key names; a UserError naming the key otherwise. An attention key is a cases key."""
    from accelsim.validate import cases
    from compiler.zoo import MODELS

    if kind == "attention":
        case = cases.parse(key)
        if case.kind != "attention":
            raise UserError(f"workload {key!r}: an attention row needs an `attention B H SQ SKV D DTYPE` key")
        return Workload(key, "attention", case.dtype, ())
    words = key.split()
    if len(words) < 2 or words[0] not in MODELS:
        raise UserError(f"workload {key!r}: expected `MODEL DTYPE key=value ...` with MODEL one of {', '.join(MODELS)}")
    options = []
    for word in words[2:]:
        name, eq, value = word.partition("=")
        if not eq or not name or not value:
            raise UserError(f"workload {key!r}: {word!r} is not key=value")
        options.append((name, int(value) if value.isdigit() else value))
    if (kind == "decode") != (dict(options).get("mode") == "decode"):
        raise UserError(f"workload {key!r}: a {kind} row {'needs' if kind == 'decode' else 'cannot have'} mode=decode")
    return Workload(key, words[0], DType.parse(words[1]), tuple(options))


@dataclass(frozen=True)
class Measurement:
    case: str
    suite: str
    kind: str
    arch: str            # the preset the row is predicted on
    workload: Workload
    causal: bool         # attention only: the source computed (and counted the FLOPs of) half the scores
    reported: float      # the figure as the source printed it, in reported_unit
    reported_unit: str
    measured_s: float
    status: str

    @property
    def scored(self) -> bool:
        return self.status == SCORED

    @property
    def key(self) -> str:
        return self.workload.key

    def seconds_from_report(self) -> float:
        """The seconds the printed figure means: a time as printed; for TFLOPS the source's FLOP count
        4 B H SQ SKV D (halved under a causal mask) over the rate; for tokens/s the batch over the rate."""
        from accelsim.validate import cases

        if self.reported_unit == "ms":
            return self.reported * 1e-3
        if self.reported_unit == "us":
            return self.reported * 1e-6
        if self.reported_unit == "tokens/s":
            return self.workload.batch / self.reported
        flops = 2 * cases.parse(self.key).macs / (2 if self.causal else 1)
        return flops / (self.reported * 1e12)


def read(path: str | os.PathLike = DATA / CSV) -> list[Measurement]:
    """Every row, scored or not; UserError naming the file and line for a row without its source, an unknown kind,
    unit or status, a non-positive figure, a key accelsim cannot read, or seconds that disagree with the figure."""
    rows = []
    for where, raw in sourced_rows(path, COLUMNS, required=("status",)):
        if raw["kind"] not in KINDS:
            raise UserError(f"{where}: kind {raw['kind']!r}; known: {', '.join(KINDS)}")
        if raw["reported_unit"] not in UNITS:
            raise UserError(f"{where}: reported_unit {raw['reported_unit']!r}; known: {', '.join(UNITS)}")
        if raw["status"] != SCORED and not raw["status"].startswith("unscored: "):
            raise UserError(f"{where}: status {raw['status']!r}; expected {SCORED!r} or 'unscored: <why>'")
        if raw["causal"] not in (("yes", "no") if raw["kind"] == "attention" else ("",)):
            raise UserError(f"{where}: causal {raw['causal']!r}; yes or no for attention rows, empty otherwise")
        reported, measured = figures(where, raw)
        try:
            workload = parse_workload(raw["workload"], raw["kind"])
        except UserError as e:
            raise UserError(f"{where}: {e}") from None
        row = Measurement(raw["case"], raw["suite"], raw["kind"], raw["arch"], workload, raw["causal"] == "yes",
                          reported, raw["reported_unit"], measured, raw["status"])
        rows.append(agreeing(where, row, AGREE))
    if not rows:
        raise UserError(f"{path}: no rows")
    return rows


def predict(workload: Workload, arch: Arch, fuse: str = "runtime") -> float:
    """Seconds accelsim predicts for `workload` on `arch` (an Arch) with ops formed into kernels as `fuse` says
    (compiler.passes.fuse.FUSIONS): an attention case's single graph; a zoo model built and simulated whole (a
    decode step is launched as one captured graph, by accelsim.sim.build.default_launch)."""
    from accelsim.sim.api import run
    from accelsim.validate import cases

    if workload.model == "attention":
        return cases.predict(cases.parse(workload.key), arch, fuse)
    options = dict(workload.options)   # a zoo model's run is read back from accelsim.sim.cache when it is there
    return run(workload.model, arch=arch, dtype=workload.dtype, batch=options.pop("batch", 1), fuse=fuse,
               **options).seconds


def builds(path: Path) -> dict[str, str]:
    """{suite: fusion} from dataset.yaml's `builds`: how the source's implementation formed kernels where it is
    not accelsim's default for the target (PyTorch's unfused attention writes its scores to memory: `none`).
    UserError naming the file and suite for a fusion accelsim does not know."""
    from compiler.passes.fuse import FUSIONS

    table = settings(path).get("builds") or {}
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise UserError(f"{path}: builds must map suites to {{fusion: ...}}")
    for suite, options in table.items():
        if set(options) != {"fusion"} or options["fusion"] not in FUSIONS:
            raise UserError(f"{path}: builds.{suite}: {options!r}; give fusion: one of {', '.join(FUSIONS)}")
    return {suite: options["fusion"] for suite, options in table.items()}


def predictions(path: str | os.PathLike = DATA / CSV, sample: int | None = None) -> list[Prediction]:
    """Every scored row (or every `sample`-th scored row of each suite, always keeping its first and last) predicted
    on its preset; rows sharing a key and preset are predicted once."""
    from accelsim.arch.reference import named_arch

    rows = [r for r in read(path) if r.scored]
    fusion = builds(Path(path).parent / "dataset.yaml")
    if sample:
        rows = [r for s in dict.fromkeys(r.suite for r in rows) for r in thinned(
            [r for r in rows if r.suite == s], sample)]
    archs: dict = {}
    seconds: dict = {}
    found = []
    for row in rows:
        if row.arch not in archs:
            archs[row.arch] = named_arch(row.arch, path)   # a preset, or a file beside the CSV
        built = (row.key, row.arch, fusion.get(row.suite, "runtime"))
        if built not in seconds:
            try:
                seconds[built] = predict(row.workload, archs[row.arch], built[2])
            except UserError as e:   # an option the zoo model does not take, a dtype the preset lacks
                raise UserError(f"{path}: {row.case!r}: {e}") from None
        found.append(Prediction(row, seconds[built]))
    return found


def is_dataset(path: str | os.PathLike) -> bool:
    """A folder (or its workloads.csv) of published workload times beside a dataset.yaml, which
    accelsim.validate.score hands here."""
    return is_published(path, COLUMNS, CSV)
