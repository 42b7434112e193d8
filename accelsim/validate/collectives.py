"""Published collective measurements (validation/collectives/published.csv: nccl-tests tables and the like, each
row with its source) predicted again by accelsim.comm; accelsim.validate.score scores them per suite on nccl-tests'
bus bandwidth (`accelsim validate score validation/collectives`).

A row's measured busbw is the printed time turned into busbw when the source printed a time (four digits even
for 8 bytes), else the printed busbw. An algorithm the source forced (NCCL_ALGO, NCCL_NVLS_ENABLE=0) is forced
here too; otherwise accelsim's tuner chooses and agreement with the algorithm the source reports is counted.
Invariant: every prediction comes from the current model; the CSV holds measurements only.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from accelsim.arch.system_load import named_system
from accelsim.comm import collective
from accelsim.comm.result import BUS_FACTOR
from accelsim.validate.sourced import is_published, sourced_rows
from compiler.errors import UserError

DATA = Path(__file__).resolve().parents[2] / "validation" / "collectives"
COLUMNS = ("case", "suite", "system", "devices", "op", "algorithm", "forced", "bytes", "time_us", "busbw_GBps",
           "source", "where", "note")
NCCL_NAMES = {"Ring": "ring", "Tree": "tree", "NVLS": "nvls", "NVLSTree": "nvls"}   # NCCL_ALGO -> accelsim


@dataclass(frozen=True)
class Measurement:
    """One published row: `algorithm` as the source names it ('' when unstated), `forced` when the run forced it."""

    case: str
    suite: str
    system: str
    devices: int
    op: str
    algorithm: str
    forced: bool
    size: int
    time_us: float | None
    busbw_GBps: float | None

    @property
    def busbw(self) -> float:
        """Measured bus bandwidth in bytes per second, from the time when the source printed one."""
        if self.time_us is not None:
            return self.size / (self.time_us * 1e-6) * BUS_FACTOR[self.op](self.devices)
        return self.busbw_GBps * 1e9

    @property
    def seconds(self) -> float:
        return self.size * BUS_FACTOR[self.op](self.devices) / self.busbw

    @property
    def accelsim_algorithm(self) -> str | None:
        return NCCL_NAMES[self.algorithm] if self.algorithm else None


@dataclass(frozen=True)
class Prediction:
    row: Measurement
    busbw: float          # bytes per second
    seconds: float
    algorithm: str        # what accelsim ran

    @property
    def error(self) -> float:
        """|predicted - measured| / measured, on busbw."""
        return abs(self.busbw - self.row.busbw) / self.row.busbw

    # what accelsim.validate.score scores: the row's key, its seconds, and the metric (busbw) measured and predicted
    key = property(lambda self: self.row.case)
    measured_s = property(lambda self: self.row.seconds)
    measured = property(lambda self: self.row.busbw)
    predicted = property(lambda self: self.busbw)

    @property
    def agrees(self) -> bool | None:
        """Whether accelsim's tuner chose the algorithm the source reports; None when forced or unstated."""
        if self.row.forced or not self.row.algorithm:
            return None
        return self.algorithm == self.row.accelsim_algorithm


def read(path: str | os.PathLike = DATA / "published.csv") -> list[Measurement]:
    """The rows; UserError for a row without its source (https URL and where in it) or without a measurement."""
    rows = []
    for where, raw in sourced_rows(path, COLUMNS):
        if raw["algorithm"] and raw["algorithm"] not in NCCL_NAMES:
            raise UserError(f"{where}: algorithm {raw['algorithm']!r}; known: {', '.join(NCCL_NAMES)}")
        time_us = float(raw["time_us"]) if raw["time_us"] else None
        busbw = float(raw["busbw_GBps"]) if raw["busbw_GBps"] else None
        if not (time_us or busbw):
            raise UserError(f"{where}: has neither a time nor a busbw")
        rows.append(Measurement(raw["case"], raw["suite"], raw["system"], int(raw["devices"]), raw["op"],
                                raw["algorithm"], raw["forced"] == "yes", int(raw["bytes"]), time_us, busbw))
    return rows


def predict(row: Measurement, source: str | os.PathLike = DATA / "published.csv") -> Prediction:
    """The row's collective on the system it names inside `source` (a preset, or a file beside it)."""
    r = collective(row.op, named_system(row.system, source), row.devices, row.size,
                   row.accelsim_algorithm if row.forced else None)
    return Prediction(row, r.busbw, r.seconds, r.algorithm)


def predictions(path: str | os.PathLike = DATA / "published.csv") -> list[Prediction]:
    return [predict(row, path) for row in read(path)]


def is_dataset(path: str | os.PathLike) -> bool:
    """A folder (or its published.csv) of collective rows, which accelsim.validate.score hands to this module."""
    return is_published(path, COLUMNS)


def table(found: list[Prediction]) -> str:
    """A line per row: measured and predicted busbw, the error, and the algorithm each side ran."""
    lines = [f"{'case':<34} {'meas GB/s':>10} {'pred GB/s':>10} {'error':>7}  {'source ran':<10} accelsim ran"]
    for p in found:
        ran = (p.row.algorithm or "?") + (" (forced)" if p.row.forced else "")
        flag = {True: "", False: "  <- tuner differs", None: ""}[p.agrees]
        lines.append(f"{p.row.case:<34} {p.row.busbw / 1e9:>10.2f} {p.busbw / 1e9:>10.2f} {p.error:>7.1%}  "
                     f"{ran:<10} {p.algorithm}{flag}")
    return "\n".join(lines)
