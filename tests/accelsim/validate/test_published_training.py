"""Published, measured training throughput (validation/training/published.csv) predicted again by accelsim.sim.train.

Each row is predicted shape-only at tile fidelity and compared as a ratio predicted / measured (above 1: accelsim is
too fast). The bound is a factor, stated below and not fitted to the data; a row outside it, or one accelsim cannot
simulate, is an xfail(strict=True) whose reason names the likely cause in the model, so a fix that brings it inside
turns the xfail into a loud failure until the mark goes.

Run this file directly (python tests/accelsim/validate/test_published_training.py) to print the table.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from accelsim.sim.train import train

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "validation" / "training" / "published.csv"

# Every row within a factor of 4 either way. Why 4: the published figures for one configuration differ by up to 1.6x
# between frameworks on the same GPU (BERT-large seq 128 fp16 on an A100: 580 sequences/s in PyTorch, 357 in
# TensorFlow; ResNet-50 fp16: 2,470 images/s in PyTorch, 3,411 in MXNet), and accelsim models neither a framework's
# kernel choices nor its fusion; a factor of 4 is two such spreads on top of that. The geometric mean of the error
# over the table is held to the square root of that, GEOMEAN_BOUND: a typical row must sit well inside the bound.
BOUND = 4.0
GEOMEAN_BOUND = math.sqrt(BOUND)

# Rows accelsim cannot predict within BOUND, or at all, with the cause in the model. A row whose prediction
# raises is marked with its exception; a fix then passes the row, and the strict xfail fails until this goes.
KNOWN: dict[str, tuple[str, type]] = {}


@dataclass(frozen=True)
class Row:
    case: str
    model: str                    # zoo name
    options: tuple                # (key, int) pairs for the zoo model
    arch: str
    batch: int
    microbatch: int | None
    dtype: str
    optimizer: str
    recompute: str
    devices: int                  # devices the measurement ran on
    samples: int | None           # the training length, for a row measured as a time
    measured: float
    unit: str


def read(path: Path = DATA) -> list[Row]:
    """The rows to predict; a row without a source URL, a table and a date is refused."""
    rows = []
    with open(path, newline="") as f:
        for raw in csv.DictReader(f):
            name, *options = raw["model"].split()
            missing = [key for key in ("source", "table", "date") if not raw[key].strip()]
            if missing or not raw["source"].startswith("https://"):
                raise ValueError(f"{path}: row {raw['case']!r} lacks its provenance ({', '.join(missing) or 'URL'})")
            rows.append(Row(
                case=raw["case"], model=name,
                options=tuple((k, int(v)) for k, v in (o.split("=") for o in options)),
                arch=raw["arch"], batch=int(raw["batch"]),
                microbatch=int(raw["microbatch"]) if raw["microbatch"] else None,
                dtype=raw["dtype"], optimizer=raw["optimizer"], recompute=raw["recompute"],
                devices=int(raw["devices"]), samples=int(raw["samples"]) if raw["samples"] else None,
                measured=float(raw["measured"]), unit=raw["unit"]))
    return rows


def simulate(row: Row):
    """One device's training step, shape-only at tile fidelity; rows that differ only in the measurement (the
    same configuration in another framework) share one simulation."""
    return _train(row.model, row.options, row.arch, row.batch, row.microbatch, row.dtype, row.optimizer, row.recompute)


@cache
def _train(model, options, arch, batch, microbatch, dtype, optimizer, recompute):
    return train(model, arch, batch=batch, microbatch=microbatch, optimizer=optimizer, dtype=dtype,
                 recompute=recompute, fidelity="tile", weights=False, **dict(options))


def maxtext_flops_per_token(layers: int, hidden: int, heads: int, mlp: int, vocab: int, seq: int, **_) -> float:
    """MaxText's own count (MaxText/train.py calculate_training_tflops at commit 76bd53b): 6 x parameters per token,
    plus causal attention, 12 x heads x layers x head_dim x seq / 2. Parameters of its default decoder: q, k, v, o
    and a two-matrix MLP per layer, two RMSNorm scales per layer, a tied embedding and a final norm."""
    params = layers * (4 * hidden * hidden + 2 * hidden * mlp + 2 * hidden) + vocab * hidden + hidden
    return 6.0 * params + 12.0 * heads * layers * (hidden // heads) * seq / 2


def ratio(row: Row) -> float:
    """Predicted / measured, as rates: above 1, accelsim predicts a faster step than was measured."""
    result = simulate(row)
    rate = result.throughput()
    if row.unit in ("images/s", "sequences/s"):
        return rate["samples_per_second"] * row.devices / row.measured
    if row.unit == "TFLOP/s/chip (MaxText)":            # already per chip
        return rate["tokens_per_second"] * maxtext_flops_per_token(**dict(row.options)) / 1e12 / row.measured
    if row.unit == "days":                               # the whole run, split perfectly over the devices
        predicted_days = math.ceil(row.samples / row.batch) * result.seconds / row.devices / 86400
        return row.measured / predicted_days
    raise ValueError(f"{row.case}: unit {row.unit!r} has no comparison")


ROWS = read()


def _param(row: Row):
    if row.case not in KNOWN:
        return pytest.param(row, id=row.case)
    reason, raises = KNOWN[row.case]
    marks = [pytest.mark.xfail(strict=True, reason=reason, raises=raises)]
    return pytest.param(row, id=row.case, marks=marks)


def test_the_data_is_well_formed():
    cases = [row.case for row in ROWS]
    assert len(cases) == len(set(cases)), "case names repeat"
    assert all(row.measured > 0 and row.devices >= 1 for row in ROWS)
    assert all((row.unit == "days") == (row.samples is not None) for row in ROWS), "a time needs its samples"
    assert set(KNOWN) <= set(cases), f"KNOWN names rows that are not in the data: {set(KNOWN) - set(cases)}"


def test_maxtext_count_matches_its_published_parameter_count():
    # The 22B config is named for its parameter count: the formula must give about 22e9 parameters.
    per_token = maxtext_flops_per_token(layers=48, hidden=6144, heads=24, mlp=24576, vocab=32768, seq=0)
    assert 21.5e9 < per_token / 6 < 22.5e9


@pytest.mark.parametrize("row", [_param(row) for row in ROWS])
def test_prediction_within_bound(row):
    r = ratio(row)
    print(f"{row.case}: predicted / measured = {r:.2f}")
    assert 1 / BOUND <= r <= BOUND, f"{row.case}: predicted / measured = {r:.2f}, outside 1/{BOUND:g}..{BOUND:g}"


def ratios() -> dict[str, float]:
    """Every row accelsim can simulate; the KNOWN ones that raise are left out (their tests say why)."""
    out = {}
    for row in ROWS:
        expected = KNOWN.get(row.case, (None, ()))[1]
        try:
            out[row.case] = ratio(row)
        except expected:
            continue
    return out


def geometric_mean_error(values) -> float:
    """exp(mean |log ratio|): 1.5 means a typical row is off by 1.5x, either way."""
    logs = [abs(math.log(r)) for r in values]
    return math.exp(sum(logs) / len(logs))


def test_geometric_mean_error():
    by_case = ratios()
    print(table(by_case))
    error = geometric_mean_error(by_case.values())
    assert error <= GEOMEAN_BOUND, \
        f"geometric-mean error {error:.2f}x over {len(by_case)} rows exceeds {GEOMEAN_BOUND:.2f}x"


def table(by_case: dict[str, float]) -> str:
    lines = [f"{'case':<28} {'arch':<7} {'measured':>10} {'unit':<24} {'pred/meas':>9}"]
    for row in ROWS:
        shown = f"{by_case[row.case]:9.2f}" if row.case in by_case else f"{'raises':>9}"
        flag = "  known: " + KNOWN[row.case][0][:60] + "..." if row.case in KNOWN else ""
        lines.append(f"{row.case:<28} {row.arch:<7} {row.measured:>10g} {row.unit:<24} {shown}{flag}")
    bias = math.exp(sum(math.log(r) for r in by_case.values()) / len(by_case))
    lines.append(f"geometric-mean error {geometric_mean_error(by_case.values()):.2f}x over {len(by_case)} rows "
                 f"(bound {GEOMEAN_BOUND:.2f}x); geometric-mean ratio {bias:.2f} (below 1: accelsim too slow); "
                 f"each row within {BOUND:g}x")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(ratios()))
