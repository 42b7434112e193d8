"""Systolic array area in Yosys generic cells, fitted to accelsim/data/rtl_area.json (benchmarks/rtl_area.py).

Per weight variant, cells ~= a * rows * cols + b * (rows + cols) + c by least squares over the synthesized sizes.
"""
from __future__ import annotations

import json
from importlib import resources
from typing import NamedTuple

import numpy as np

from compiler.memo import memo

VARIANTS = ("int8", "ternary")


class AreaFit(NamedTuple):
    """cells ~= per_pe * rows * cols + per_edge * (rows + cols) + fixed, i.e. (a, b, c), and how well it fits."""

    per_pe: float          # a: one PE (multiplier or add/subtract, adder, weight banks, registers)
    per_edge: float        # b: per PE row and per PE column (skew, de-skew, accumulator column; minus top-row adders)
    fixed: float           # c: handshake and counters
    max_rel_error: float   # largest |fit - synthesized| / synthesized over the data points


@memo(size=1)
def synthesized() -> dict:
    """accelsim/data/rtl_area.json as written by benchmarks/rtl_area.py."""
    return json.loads(resources.files("accelsim").joinpath("data/rtl_area.json").read_text())


def points(variant: str) -> list[tuple[int, int, int]]:
    """(rows, cols, cells) of every synthesized array of this variant."""
    _check(variant)
    return [(e["rows"], e["cols"], e["cells"]) for e in synthesized()["arrays"] if e["variant"] == variant]


@memo(size=16)
def fit(variant: str) -> AreaFit:
    """Least-squares (a, b, c) over the variant's synthesized sizes, with its max relative error."""
    rows, cols, cells = (np.array(column, dtype=np.float64) for column in zip(*points(variant)))
    terms = np.stack([rows * cols, rows + cols, np.ones_like(rows)], axis=1)
    coefficients, *_ = np.linalg.lstsq(terms, cells, rcond=None)
    error = np.max(np.abs(terms @ coefficients - cells) / cells)
    return AreaFit(*(float(x) for x in coefficients), float(error))


def area_cells(rows: int, cols: int, ternary: bool = False) -> float:
    """Fitted cell count of a rows x cols core (int8 weights, or ternary ones) without its accumulator memory."""
    if rows < 1 or cols < 1:
        raise ValueError(f"an array needs at least one row and one column, not {rows} x {cols}")
    a, b, c, _ = fit("ternary" if ternary else "int8")
    return a * rows * cols + b * (rows + cols) + c


def _check(variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"unknown area variant {variant!r}; known: {', '.join(VARIANTS)}")
