"""Scoring a validation dataset: how far accelsim's predicted times are from measured ones, per suite, against targets.

A dataset is a folder with measurements.csv (suite,case,measured_s,predicted_s, and threads on a CPU; any other
columns, as `validate cuda` writes, are kept for people and ignored here), dataset.yaml (provenance and
`targets:` per suite) and arch.yaml (the preset the predictions are for). Invariant: with repredict=True the CSV's
predicted_s is ignored and every case is predicted again by the current model on the dataset's own arch.yaml, so a
change that makes the model less accurate misses a committed target (tests/accelsim/validate/test_validation.py).
"""
from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accelsim.validate.sourced import settings
from compiler import output
from compiler.passes.boundary import CACHES
from compiler.errors import UserError, read_text
from compiler.references import referenced

COLUMNS = ("suite", "case", "measured_s", "predicted_s")   # required; "threads" is optional (1 without it)
TARGET_KEYS = ("mape", "spearman", "report_only")


@dataclass(frozen=True)
class Row:
    suite: str
    case: str  # a key accelsim.validate.cases.parse reads: "gemm 512 512 512 fp32"
    threads: int
    measured_s: float
    predicted_s: float  # as recorded in the CSV; score(repredict=True) replaces it


@dataclass(frozen=True)
class Target:
    """What one suite must reach: MAPE at most `mape`, Spearman at least `spearman`; report_only checks nothing."""

    mape: float | None = None
    spearman: float | None = None
    report_only: bool = False

    def text(self) -> str:
        if self.report_only:
            return "report only"
        parts = ([f"MAPE<={self.mape:.0%}"] if self.mape is not None else []) + \
                ([f"rho>={self.spearman:.2f}"] if self.spearman is not None else [])
        return " ".join(parts) or "none"


@dataclass(frozen=True)
class Dataset:
    name: str  # the folder as given, for messages
    folder: Path
    rows: tuple[Row, ...]
    targets: dict[str, Target]
    meta: dict  # dataset.yaml as read (provenance)


@dataclass(frozen=True)
class Miss:
    """A target not reached: `metric` ("mape" or "spearman") is `value` where the target asks for `limit`."""

    dataset: str
    suite: str
    metric: str
    value: float
    limit: float

    def text(self) -> str:
        if self.metric == "mape":
            return (f"{self.dataset}: {self.suite}: MAPE {self.value:.1%} > target {self.limit:.1%} "
                    f"(by {(self.value - self.limit) * 100:.1f} points)")
        return (f"{self.dataset}: {self.suite}: Spearman {self.value:.3f} < target {self.limit:.3f} "
                f"(by {self.limit - self.value:.3f})")


@dataclass(frozen=True)
class SuiteScore:
    suite: str
    metrics: dict
    target: Target
    misses: tuple[Miss, ...]


@dataclass(frozen=True)
class DatasetScore:
    dataset: Dataset
    repredicted: bool
    predicted_s: tuple[float, ...]  # one per dataset.rows, the figures scored
    suites: tuple[SuiteScore, ...]

    @property
    def misses(self) -> list[Miss]:
        return [m for s in self.suites for m in s.misses]


def ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their average: [10, 20, 20, 30] -> [1, 2.5, 2.5, 4]."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return ((ends - counts + 1 + ends) / 2.0)[inverse]


def spearman(a, b) -> float:
    """Spearman's rank correlation: Pearson's r of the ranks; nan when either side has no spread."""
    ra, rb = ranks(np.asarray(a, dtype=float)), ranks(np.asarray(b, dtype=float))
    da, db = ra - ra.mean(), rb - rb.mean()
    denominator = math.sqrt(float(da @ da) * float(db @ db))
    return float(da @ db) / denominator if denominator > 0 else math.nan


def metrics(measured, predicted, cases=None) -> dict:
    """count, mape (mean |pred-meas|/meas), median and worst relative error, worst_case, spearman."""
    measured, predicted = np.asarray(measured, dtype=float), np.asarray(predicted, dtype=float)
    if measured.shape != predicted.shape or measured.ndim != 1 or len(measured) == 0:
        raise ValueError(f"metrics: need two equal, non-empty 1-D sequences, "
                         f"got {measured.shape} and {predicted.shape}")
    error = np.abs(predicted - measured) / measured
    worst = int(np.argmax(error))
    return {"count": len(measured), "mape": float(error.mean()), "median": float(np.median(error)),
            "worst": float(error[worst]), "worst_case": None if cases is None else list(cases)[worst],
            "spearman": spearman(measured, predicted)}


def load(folder_or_csv: str | os.PathLike) -> Dataset:
    """The dataset in a folder, or the one whose measurements.csv is given; UserError naming file and column."""
    path = Path(folder_or_csv)
    folder = path if path.is_dir() else path.parent
    yaml_path = folder / "dataset.yaml"
    meta = settings(yaml_path)
    csv_path = dataset_file(folder, meta, "measurements") if path.is_dir() else path
    if not csv_path.is_file():
        raise UserError(f"{csv_path}: no such file (a dataset is a folder holding measurements.csv, dataset.yaml "
                        f"and arch.yaml)")
    if not yaml_path.is_file():
        raise UserError(f"{yaml_path}: no such file (the dataset's provenance and targets)")
    return Dataset(str(path), folder, _rows(csv_path), _targets(meta.get("targets") or {}, yaml_path), meta)


FILES = {"measurements": "measurements.csv", "arch": "arch.yaml"}   # dataset.yaml's key -> the file where it has none


def dataset_file(folder: Path, meta: dict, key: str) -> Path:
    """The file dataset.yaml's `key` names (FILES[key] where it names none), found in the dataset's folder and never
    outside it: a downloaded dataset whose `arch: ../../.ssh/id_ed25519` (or a link) would be read is refused."""
    try:
        return referenced(meta.get(key, FILES[key]), folder)
    except UserError as error:
        raise UserError(f"{folder / 'dataset.yaml'}: {key}: {error}; a dataset's files lie in its folder") from None


def _rows(csv_path: Path) -> tuple[Row, ...]:
    reader = csv.DictReader(io.StringIO(read_text(csv_path)))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise UserError(f"{csv_path}: missing column {', '.join(missing)} (expected {','.join(COLUMNS)})")
    rows = []
    for line, record in enumerate(reader, start=2):
        def number(column, cast=float, record=record, line=line):
            try:
                value = cast(record[column])
            except (TypeError, ValueError):
                raise UserError(f"{csv_path}: line {line}: column {column}: expected a number, "
                                f"got {record[column]!r}") from None
            if not value > 0:
                raise UserError(f"{csv_path}: line {line}: column {column}: must be positive, got {value}")
            return value
        threads = number("threads", int) if "threads" in record else 1
        rows.append(Row(record["suite"], record["case"], threads, number("measured_s"),
                        number("predicted_s")))
    if not rows:
        raise UserError(f"{csv_path}: no rows")
    return tuple(rows)


def _targets(data, yaml_path: Path) -> dict[str, Target]:
    if not isinstance(data, dict):
        raise UserError(f"{yaml_path}: targets: expected a mapping of suite to targets")
    targets = {}
    for suite, spec in data.items():
        if not isinstance(spec, dict):
            raise UserError(f"{yaml_path}: targets.{suite}: expected keys {', '.join(TARGET_KEYS)}")
        for key, value in spec.items():
            if key not in TARGET_KEYS:
                raise UserError(f"{yaml_path}: targets.{suite}.{key}: unknown key (expected {', '.join(TARGET_KEYS)})")
            kind = bool if key == "report_only" else (int, float)
            if not isinstance(value, kind) or (key != "report_only" and isinstance(value, bool)):
                raise UserError(f"{yaml_path}: targets.{suite}.{key}: {value!r} is not a "
                                f"{'true/false' if key == 'report_only' else 'number'}")
        targets[str(suite)] = Target(spec.get("mape"), spec.get("spearman"), spec.get("report_only", False))
    return targets


def predicted_now(dataset: Dataset) -> tuple[float, ...]:
    """Every row's seconds as the current model predicts them on the dataset's arch.yaml."""
    from accelsim.arch import load_arch
    from accelsim.validate import cases

    arch_path = dataset_file(dataset.folder, dataset.meta, "arch")
    if not arch_path.is_file():
        raise UserError(f"{arch_path}: no such file (the preset the dataset was predicted for; "
                        f"--as-recorded scores the CSV's predicted_s without it)")
    arch = load_arch(arch_path)
    held = dataset.meta.get("caches", "warm")       # "cold" where the timing flushed the caches (validate cuda)
    if held not in CACHES:
        raise UserError(f"{dataset.folder / 'dataset.yaml'}: caches {held!r}; choose from {', '.join(CACHES)}")
    seconds = {}
    for row in dataset.rows:
        if row.case not in seconds:
            seconds[row.case] = cases.predict(cases.parse(row.case), arch, caches=held)
    return tuple(seconds[row.case] for row in dataset.rows)


def check(dataset: str, suite: str, m: dict, target: Target) -> tuple[Miss, ...]:
    """The targets `m` misses; none when report_only."""
    if target.report_only:
        return ()
    misses = []
    if target.mape is not None and not m["mape"] <= target.mape:
        misses.append(Miss(dataset, suite, "mape", m["mape"], target.mape))
    if target.spearman is not None and not m["spearman"] >= target.spearman:   # nan (one case) misses too
        misses.append(Miss(dataset, suite, "spearman", m["spearman"], target.spearman))
    return tuple(misses)


def score(paths, repredict: bool = True) -> list[DatasetScore]:
    """Per dataset, per suite (in order of first appearance) metrics, target and misses. A folder of published
    collective rows (validation/collectives) is predicted and scored on busbw by accelsim.validate.collectives; a folder
    of published GPU kernel times (validation/published) on seconds by accelsim.validate.published_gpu, and its
    workloads.csv (whole models, decode steps, attention) by accelsim.validate.published_workloads: two scores for the
    folder, one for either CSV named alone."""
    from accelsim.validate import collectives, published_gpu, published_workloads

    scores = []
    for path in paths:
        if collectives.is_dataset(path):
            scores.append(_published(path, collectives))
            continue
        kinds = [(source, name) for source, name in ((published_gpu, "published.csv"),
                                                     (published_workloads, published_workloads.CSV))
                 if source.is_dataset(path)]
        if kinds:
            scores += [_published(path, source, name) for source, name in kinds]
            continue
        dataset = load(path)
        predicted = predicted_now(dataset) if repredict else tuple(r.predicted_s for r in dataset.rows)
        suites = []
        for suite in dict.fromkeys(r.suite for r in dataset.rows):
            index = [i for i, r in enumerate(dataset.rows) if r.suite == suite]
            m = metrics([dataset.rows[i].measured_s for i in index], [predicted[i] for i in index],
                        [dataset.rows[i].case for i in index])
            target = dataset.targets.get(suite, Target(report_only=True))
            suites.append(SuiteScore(suite, m, target, check(dataset.name, suite, m, target)))
        scores.append(DatasetScore(dataset, repredict, predicted, tuple(suites)))
    return scores


def _published(path, source, csv_name: str = "published.csv") -> DatasetScore:
    """A folder's `csv_name` of published rows predicted again by `source` (accelsim.validate.collectives: metrics on
    busbw, not seconds; published_gpu and published_workloads: on seconds) per suite against the targets in its
    dataset.yaml; the rows' seconds, measured and predicted, are kept for the plot."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    meta = settings(folder / "dataset.yaml")
    targets = _targets(meta.get("targets") or {}, folder / "dataset.yaml")
    found = source.predictions(folder / csv_name)
    rows = tuple(Row(p.row.suite, p.key, 1, p.measured_s, p.seconds) for p in found)
    dataset = Dataset(str(path) if csv_name == "published.csv" else str(folder / csv_name), folder, rows, targets, meta)
    suites = []
    for suite in dict.fromkeys(p.row.suite for p in found):
        mine = [p for p in found if p.row.suite == suite]
        m = metrics([p.measured for p in mine], [p.predicted for p in mine], [p.row.case for p in mine])
        target = targets.get(suite, Target(report_only=True))
        suites.append(SuiteScore(suite, m, target, check(dataset.name, suite, m, target)))
    return DatasetScore(dataset, True, tuple(p.seconds for p in found), tuple(suites))


def plot(scores: list[DatasetScore], out: str | os.PathLike) -> Path:
    """A log-log PNG of predicted against measured seconds: a colour per suite, a marker per dataset, y = x and each
    MAPE target's band."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 6.0), dpi=120)
    FigureCanvasAgg(figure)   # Agg: no display needed, and pyplot's global state stays untouched
    axes = figure.add_subplot()
    colours = {}
    for d, s in enumerate(scores):
        for suite in s.suites:
            index = [i for i, r in enumerate(s.dataset.rows) if r.suite == suite.suite]
            colour = colours.setdefault(suite.suite, f"C{len(colours) % 10}")
            label = suite.suite if len(scores) == 1 else f"{s.dataset.folder.name}: {suite.suite}"
            axes.scatter([s.dataset.rows[i].measured_s for i in index], [s.predicted_s[i] for i in index], s=18,
                         color=colour, marker="o^sDvP"[d % 6], label=f"{label} (MAPE {suite.metrics['mape']:.0%})")
    values = [v for s in scores for v in (*s.predicted_s, *(r.measured_s for r in s.dataset.rows))]
    line = np.geomspace(min(values) / 2, max(values) * 2, 50)
    axes.plot(line, line, color="black", linewidth=1, label="y = x")
    bands = sorted({suite.target.mape for s in scores for suite in s.suites
                    if suite.target.mape is not None and not suite.target.report_only})
    for band in bands:
        axes.fill_between(line, line * max(1 - band, 1e-3), line * (1 + band), color="grey",
                          alpha=0.15, linewidth=0, label=f"target +/-{band:.0%}")
    axes.set(xscale="log", yscale="log", xlabel="measured (s)", ylabel="predicted (s)",
             title=", ".join(s.dataset.folder.name for s in scores))
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize="small")
    out = Path(out)
    with output.replacing(out, f"--plot {out}") as temporary:
        figure.savefig(temporary, format="png")
    return out
