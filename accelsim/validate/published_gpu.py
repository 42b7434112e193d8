"""Published GPU kernel times (validation/published/published.csv: GEMMs and a few vector ops that others measured
on A100, H100 and H200, each row with its source) predicted again by accelsim on the preset each row names; scored on
seconds per suite by accelsim.validate.score (`accelsim validate score validation/published`).

A row keeps the figure as printed (`reported`, `reported_unit`) and the seconds derived from it (`measured_s`, by the
rule in `conversion`); read() checks the two agree, so a hand edit of one without the other is caught.
Invariant: every prediction comes from the current model (accelsim.validate.cases.predict); the CSV holds
measurements only.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from accelsim.validate.sourced import agreeing, figures, is_published, settings, sourced_rows
from compiler.errors import UserError
from compiler.hardware import Arch

DATA = Path(__file__).resolve().parents[2] / "validation" / "published"
COLUMNS = ("case", "suite", "arch", "variant", "key", "reported", "reported_unit", "measured_s", "conversion",
           "timing", "source", "where", "note")
UNITS = ("ms", "us", "TFLOPS", "FLOP/s", "G elements/s")
FLOP_RATES = {"TFLOPS": 1e12, "FLOP/s": 1.0}   # FLOPs per second each rate unit means
AGREE = 1e-4   # measured_s is written to 6 significant digits


@dataclass(frozen=True)
class Measurement:
    case: str
    suite: str
    arch: str          # the preset the row is predicted on
    key: str           # an accelsim.validate.cases key: "gemm 1024 10240 5120 bf16"
    reported: float    # the figure as the source printed it, in reported_unit
    reported_unit: str
    measured_s: float

    def seconds_from_report(self) -> float:
        """The seconds the printed figure means, by this module's reading of its unit: a time as printed,
        2 M N K / rate for TFLOPS and FLOP/s (2 B M N K for a batch), elements / rate for G elements/s."""
        from accelsim.validate import cases

        if self.reported_unit == "ms":
            return self.reported * 1e-3
        if self.reported_unit == "us":
            return self.reported * 1e-6
        case = cases.parse(self.key)
        if self.reported_unit in FLOP_RATES:
            return 2 * case.macs / (self.reported * FLOP_RATES[self.reported_unit])
        rows, cols = case.dims[:2]
        return rows * cols / (self.reported * 1e9)


@dataclass(frozen=True)
class Prediction:
    row: Measurement
    seconds: float        # what the source's timing would read: the kernels accelsim prices and the harness's host time
    kernel_s: float = math.nan   # the kernels alone, as `accelsim run` reports them

    @property
    def error(self) -> float:
        """|predicted - measured| / measured."""
        return abs(self.seconds - self.row.measured_s) / self.row.measured_s

    # what accelsim.validate.score scores: the row's key, its seconds, and the metric (seconds) measured and predicted
    key = property(lambda self: self.row.key)
    measured_s = property(lambda self: self.row.measured_s)
    measured = property(lambda self: self.row.measured_s)
    predicted = property(lambda self: self.seconds)


def read(path: str | os.PathLike = DATA / "published.csv") -> list[Measurement]:
    """The rows; UserError naming the file and line for a row without its source, with an unknown unit, a
    non-positive figure, a key accelsim cannot build, or seconds that disagree with the printed figure."""
    from accelsim.validate import cases

    rows = []
    for where, raw in sourced_rows(path, COLUMNS):
        if raw["reported_unit"] not in UNITS:
            raise UserError(f"{where}: reported_unit {raw['reported_unit']!r}; known: {', '.join(UNITS)}")
        reported, measured = figures(where, raw)
        cases.parse(raw["key"])   # a UserError naming the key when accelsim cannot build it
        row = Measurement(raw["case"], raw["suite"], raw["arch"], raw["key"], reported, raw["reported_unit"],
                          measured)
        rows.append(agreeing(where, row, AGREE))
    if not rows:
        raise UserError(f"{path}: no rows")
    return rows


def predictions(path: str | os.PathLike = DATA / "published.csv", sample: int | None = None) -> list[Prediction]:
    """Every row (or every `sample`-th row of each suite, always keeping its first and last) predicted on its
    preset."""
    from accelsim.arch.reference import named_arch
    from accelsim.validate import cases

    rows = read(path)
    host = harness(Path(path).parent / "dataset.yaml")
    held = caches(Path(path).parent / "dataset.yaml")
    if sample:
        rows = [r for s in dict.fromkeys(r.suite for r in rows) for r in thinned(
            [r for r in rows if r.suite == s], sample)]
    archs: dict = {}
    found = []
    for row in rows:
        if row.arch not in archs:
            archs[row.arch] = named_arch(row.arch, path)   # a preset, or a file beside the CSV
        kernel = cases.predict(cases.parse(row.key), archs[row.arch], caches=held.get(row.suite, "warm"))
        extra = host[row.suite] - _launch(archs[row.arch]) if row.suite in host else 0.0
        found.append(Prediction(row, kernel + extra, kernel))
    return found


def harness(path: Path) -> dict[str, float]:
    """{suite: seconds} from dataset.yaml's `harness`: the host time a source's timing puts around every call (an
    eager PyTorch op between time.time() and torch.cuda.synchronize()), as the source itself states it. It stands in
    for the one launch accelsim prices per kernel; a suite without one is scored on its kernels alone. UserError
    naming the file and suite for a time that is not one."""
    from accelsim.arch.units import UnitError, parse_time

    table = settings(path).get("harness") or {}
    if not isinstance(table, dict):
        raise UserError(f"{path}: harness must map suites to times ('21 us')")
    found = {}
    for suite, text in table.items():
        if suite in ("source", "sources"):        # where the figures come from, for the reader
            continue
        try:
            found[suite] = parse_time(text)
        except UnitError as e:
            raise UserError(f"{path}: harness.{suite}: {e}") from None
    return found


def caches(path: Path) -> dict[str, str]:
    """{suite: "cold"} from dataset.yaml's `caches`: the suites whose source flushed the caches before each call, so
    a row's operands come from DRAM (compiler.passes.boundary); the rest are timed warm, in a loop. UserError
    naming the file and suite for another value."""
    from compiler.passes.boundary import CACHES

    table = settings(path).get("caches") or {}
    if not isinstance(table, dict) or any(value not in CACHES for value in table.values()):
        raise UserError(f"{path}: caches must map suites to one of {', '.join(CACHES)}; got {table!r}")
    return dict(table)


def _launch(arch: Arch) -> float:
    """The launch accelsim prices once per kernel on `arch` (every GPU preset gives its units the same)."""
    return max(u.launch_overhead_s for u in arch.compute)


def thinned(rows: list, step: int) -> list:
    """Every `step`-th row, and the last one always (a sample of a suite keeps its largest case)."""
    picked = rows[::step]
    return picked + ([rows[-1]] if rows and rows[-1] is not picked[-1] else [])


def is_dataset(path: str | os.PathLike) -> bool:
    """A folder (or its published.csv) of published GPU kernel times, which accelsim.validate.score hands here."""
    return is_published(path, COLUMNS)


def geomean_ratio(found: list[Prediction]) -> float:
    """Geometric mean of measured / predicted: above 1 means accelsim predicts too fast."""
    return math.exp(math.fsum(math.log(p.row.measured_s / p.seconds) for p in found) / len(found))


def table(found: list[Prediction]) -> str:
    """A line per row: measured and predicted microseconds (the kernels alone, then with the harness's host time),
    measured / predicted, the error."""
    lines = [f"{'case':<44} {'preset':<6} {'measured us':>12} {'kernels us':>11} {'predicted us':>12} "
             f"{'meas/pred':>9} {'error':>7}"]
    for p in found:
        lines.append(f"{p.row.case:<44} {p.row.arch:<6} {p.row.measured_s * 1e6:>12.2f} {p.kernel_s * 1e6:>11.2f} "
                     f"{p.seconds * 1e6:>12.2f} {p.row.measured_s / p.seconds:>9.3f} {p.error:>7.1%}")
    return "\n".join(lines)
