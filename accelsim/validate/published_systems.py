"""Published multi-device training speeds (validation/training/published_systems.csv: Megatron-LM, MT-NLG and the
like, each row with its source and configuration) predicted again by accelsim.parallel.train_parallel, and scored on
the seconds of one training step and on MFU.

A row's measurement is turned into seconds per step by the source's own arithmetic: a step time as printed, tokens
per second per GPU as batch x sequence / (rate x GPUs), and Megatron's teraFLOP/s per GPU through its FLOP count,
which includes the recomputed forward pass (Narayanan et al. 2021, eq. 3). Both MFUs divide accelsim's model FLOPs by
the same peak, so the measured and the predicted MFU differ exactly as the step times do.
Invariant: the CSV holds measurements only; every prediction comes from the current model.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from accelsim.validate.score import metrics, spearman
from accelsim.validate.sourced import sourced_rows
from compiler.errors import UserError

DATA = Path(__file__).resolve().parents[2] / "validation" / "training" / "published_systems.csv"
COLUMNS = ("case", "suite", "model", "system", "devices", "parallel", "batch", "dtype", "optimizer", "recompute",
           "measured", "unit", "params_billion", "scored", "run", "source", "where", "date", "note")
UNITS = ("s/step", "tokens/s/GPU", "TFLOP/s/GPU megatron", "MFU")
RUNS = ("ci", "full", "none")   # predicted in every test run, only when asked for (slow), never (cannot simulate)


@dataclass(frozen=True)
class Published:
    """One published measurement and the configuration it ran: `model` a zoo name and `options` its sizes."""

    case: str
    suite: str
    model: str
    options: tuple[tuple[str, int], ...]
    system: str
    devices: int
    parallel: str
    batch: int
    dtype: str
    optimizer: str
    recompute: str
    measured: float
    unit: str
    params_billion: float | None
    scored: bool
    run: str

    @property
    def sizes(self) -> dict[str, int]:
        return dict(self.options)

    @property
    def seconds(self) -> float | None:
        """Seconds per training step by the source's arithmetic; None for a figure that is not a rate (MFU)."""
        if self.unit == "s/step":
            return self.measured
        if self.unit == "tokens/s/GPU":
            return self.batch * self.sizes["seq"] / (self.measured * self.devices)
        if self.unit == "TFLOP/s/GPU megatron":
            return megatron_flops(self.batch, **self.sizes) / (self.measured * 1e12 * self.devices)
        return None


def megatron_flops(batch: int, layers: int, hidden: int, vocab: int, seq: int, **_) -> float:
    """Narayanan et al. 2021, eq. 3: the FLOPs of one step with activation recomputation (a second forward pass of
    every layer, not of the logits), 96 B s l h^2 (1 + s/6h + V/16lh): the count behind Megatron's teraFLOP/s."""
    return 96.0 * batch * seq * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


def megatron_model_flops(batch: int, layers: int, hidden: int, vocab: int, seq: int, **_) -> float:
    """Korthikanti et al. 2022, section 6.4: the FLOPs of one step without recomputation, 72 B s l h^2 (1 + s/6h +
    V/12lh), the numerator of its MFU."""
    return 72.0 * batch * seq * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (12 * layers * hidden))


@dataclass(frozen=True)
class Prediction:
    row: Published
    seconds: float         # predicted step
    mfu: float             # predicted
    measured_mfu: float    # accelsim's model FLOPs over the measured step, at accelsim's peak
    model_flops: float
    bubble: float          # on the slowest device, seconds in the step
    exposed: float         # data-parallel communication not hidden
    communication: float   # seconds on the links in the step, busiest rank, all collectives
    fits: bool
    wall_seconds: float    # what the simulation cost on this machine

    @property
    def ratio(self) -> float:
        """Measured / predicted step time: above 1, accelsim predicts a faster step than was measured."""
        return self.row.seconds / self.seconds

    @property
    def error(self) -> float:
        return abs(self.seconds - self.row.seconds) / self.row.seconds


def read(path: str | os.PathLike = DATA) -> list[Published]:
    """The rows; UserError for a row without its source (https URL and where in it), or with an unknown unit, run
    or scored flag."""
    rows = []
    for where, raw in sourced_rows(path, COLUMNS, required=("date",)):
        if raw["unit"] not in UNITS or raw["run"] not in RUNS or raw["scored"] not in ("yes", "no"):
            raise UserError(f"{where}: unit must be one of {UNITS}, run one of {RUNS}, scored yes or no")
        name, *options = raw["model"].split()
        rows.append(Published(
            case=raw["case"], suite=raw["suite"], model=name,
            options=tuple((k, int(v)) for k, v in (o.split("=") for o in options)),
            system=raw["system"], devices=int(raw["devices"]), parallel=raw["parallel"], batch=int(raw["batch"]),
            dtype=raw["dtype"], optimizer=raw["optimizer"], recompute=raw["recompute"],
            measured=float(raw["measured"]), unit=raw["unit"],
            params_billion=float(raw["params_billion"]) if raw["params_billion"] else None,
            scored=raw["scored"] == "yes", run=raw["run"]))
    return rows


def predict(row: Published) -> Prediction:
    """One step of the row's configuration on its system, shape-only at tile fidelity."""
    from accelsim.parallel.train import train_parallel

    if row.run == "none":
        raise UserError(f"{row.case}: marked run=none (accelsim cannot simulate it; the note says why)")
    start = time.perf_counter()
    result = train_parallel(row.model, row.system, devices=row.devices, parallel=row.parallel, batch=row.batch,
                            optimizer=row.optimizer, dtype=row.dtype, recompute=row.recompute, **row.sizes)
    wall = time.perf_counter() - start
    slowest = max(range(len(result.ends)), key=result.device_seconds)
    mine = [r for r in result.roles if r.device == slowest]
    measured_mfu = result.model_flops / (row.seconds * result.devices * result.peak_flops)
    return Prediction(row, result.seconds, result.mfu(), measured_mfu, result.model_flops,
                      bubble=max(r.bubble for r in mine), exposed=sum(r.exposed for r in mine),
                      communication=max(sum(r.communication.values()) for r in result.roles),
                      fits=result.fits, wall_seconds=wall)


def predictions(rows: list[Published], runs: tuple[str, ...] = ("ci",)) -> list[Prediction]:
    """Every row whose `run` is in `runs`, predicted."""
    return [predict(row) for row in rows if row.run in runs]


def score(found: list[Prediction]) -> dict:
    """Over the scored rows: MAPE, median and worst error of the step time (metrics()), the geometric mean of
    measured / predicted, and Spearman's rank correlation of the measured and predicted MFU (does accelsim order the
    configurations by efficiency as the measurements do?)."""
    scored = [p for p in found if p.row.scored]
    if not scored:
        raise ValueError("score: no scored row among the predictions")
    m = metrics([p.row.seconds for p in scored], [p.seconds for p in scored], [p.row.case for p in scored])
    m["geomean_ratio"] = math.exp(sum(math.log(p.ratio) for p in scored) / len(scored))
    m["spearman_mfu"] = spearman([p.measured_mfu for p in scored], [p.mfu for p in scored])
    m["mfu_mape"] = sum(abs(p.mfu - p.measured_mfu) / p.measured_mfu for p in scored) / len(scored)
    return m


def table(found: list[Prediction]) -> str:
    """A line per prediction: measured and predicted step and MFU, the error, and where the predicted step goes."""
    lines = [f"{'case':<26} {'meas s':>8} {'pred s':>8} {'error':>7} {'meas MFU':>8} {'pred MFU':>8} "
             f"{'bubble':>7} {'comm':>7} {'exposed':>7} {'sim s':>6}"]
    for p in found:
        flag = "" if p.row.scored else "  (not scored)"
        lines.append(f"{p.row.case:<26} {p.row.seconds:>8.3f} {p.seconds:>8.3f} {p.error:>7.1%} "
                     f"{p.measured_mfu:>8.1%} {p.mfu:>8.1%} {p.bubble / p.seconds:>7.1%} "
                     f"{p.communication / p.seconds:>7.1%} {p.exposed / p.seconds:>7.1%} {p.wall_seconds:>6.1f}{flag}")
    if any(p.row.scored for p in found):
        m = score(found)
        lines.append(f"{m['count']} scored rows: step MAPE {m['mape']:.1%}, median {m['median']:.1%}, worst "
                     f"{m['worst']:.1%} ({m['worst_case']}); measured/predicted geometric mean "
                     f"{m['geomean_ratio']:.3f} (below 1: accelsim too slow); MFU MAPE {m['mfu_mape']:.1%}, "
                     f"Spearman {m['spearman_mfu']:.3f}")
    return "\n".join(lines)
