"""The report of a design-space sweep: summary, the Pareto front drawn over every valid point, and a sortable
table of all points (invalid ones with their reason). `accelsim sweep --html/--plot` calls `sweep_report`.

Invariant: the page draws the rows it is given; it decides nothing. Which points are on the front is the
caller's `pareto_rows` (the sweep computed it), so the page and the sweep's store never disagree.
"""
from __future__ import annotations

import itertools
import math
import numbers
from pathlib import Path

from accelsim.report import html as markup
from accelsim.report.figures import Figure, canvas, png
from accelsim.report.html import Cell
from accelsim.report.run_page import write_pngs, write_text
from accelsim.results.units import engineering, plain, prefix_scale
from compiler.errors import UserError

FIXED = ("model", "status", "reason")      # row keys that are not the point's parameters
MAX_PAIRS = 3                              # objective pairs drawn (3 objectives: all three pairs)


def sweep_report(rows: list[dict], pareto_rows: list[dict], objectives: list[str], html: str | None = None,
                 plot_dir: str | None = None, units: dict[str, str] | None = None) -> list[Path]:
    """Write the sweep page (`html`) and/or its Pareto figures as PNGs (`plot_dir`); returns the paths.

    rows: one dict per (point, model): its parameters, 'model', each objective -> float, 'status' ('ok' or
    'invalid') and 'reason'. pareto_rows: the rows on the front. objectives: names such as 'latency_s'.
    A valid row without a number for an objective (area where no area model applies) shows '-' there and
    is left out of the figures that objective is drawn in. units: objective -> its unit ('s'), where known."""
    if not objectives:
        raise UserError("sweep report: no objectives given (e.g. ['latency_s', 'energy_j'])")
    front = [_on(row, pareto_rows) for row in rows]
    units = units or {}
    figures = pareto_figures(rows, front, objectives, units)
    written = write_pngs(figures, plot_dir) if plot_dir else []
    if html:
        blocks = [markup.section("Summary", _summary(rows, front, objectives, units)),
                  markup.section("Pareto front", markup.figures(figures)),
                  markup.section("Points", _points_table(rows, front, objectives, units))]
        subtitle = f"{len(rows)} points; objectives (minimised): {', '.join(objectives)}"
        written.append(write_text(html, markup.page("accelsim sweep", subtitle, blocks)))
    return written


def _on(row: dict, pareto_rows: list[dict]) -> bool:
    return any(row is p for p in pareto_rows) or row in pareto_rows


def parameters(rows: list[dict], objectives: list[str]) -> list[str]:
    """Parameter columns: every key a row has that is neither fixed nor an objective, first seen first."""
    skip = set(FIXED) | set(objectives)
    return list(dict.fromkeys(k for row in rows for k in row if k not in skip))


def _summary(rows: list[dict], front: list[bool], objectives: list[str], units: dict[str, str]) -> str:
    ok = [row for row in rows if row.get("status") == "ok"]
    items = [("points", str(len(rows))), ("valid", str(len(ok))), ("invalid", str(len(rows) - len(ok))),
             ("on the front", str(sum(front))), ("models", str(len({row.get("model") for row in rows})))]
    for o in objectives:
        values = [row[o] for row in ok if number(row.get(o))]
        if values:
            items.append((f"best {o}", engineering(min(values), units.get(o, ""))))
    reasons: dict[str, int] = {}
    for row in rows:
        if row.get("status") != "ok":
            reason = str(row.get("reason") or "no reason given")
            reasons[reason] = reasons.get(reason, 0) + 1
    lines = [f"{n} invalid: {reason}" for reason, n in sorted(reasons.items(), key=lambda item: -item[1])[:8]]
    return markup.cards(items) + markup.notes(lines)


def _points_table(rows: list[dict], front: list[bool], objectives: list[str], units: dict[str, str]) -> str:
    params = parameters(rows, objectives)
    headers = ["#", "front", "model"] + params + [_titled(o, units) for o in objectives] + ["status", "reason"]
    body = []
    for i, (row, on) in enumerate(zip(rows, front)):
        body.append([Cell(str(i), i), "yes" if on else "", str(row.get("model", ""))]
                    + [_value(row.get(p)) for p in params]
                    + [Cell(engineering(row[o], units.get(o, "")), row[o])
                       if row.get("status") == "ok" and number(row.get(o)) else "-" for o in objectives]
                    + [str(row.get("status", "")), str(row.get("reason") or "")])
    return markup.table(headers, body, table_id="points", row_classes=["front" if on else "" for on in front])


def _value(value) -> Cell | str:
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, numbers.Integral):
        return Cell(plain(int(value)), int(value))
    if isinstance(value, numbers.Real):
        return Cell(plain(float(value)), float(value))
    return str(value)


def _axis(values: list[float], unit: str) -> tuple[float, str]:
    """(divisor, unit) for an objective's axis: seconds as ms, joules as mJ, cells as k cells; no unit, as they are."""
    if not unit or not values or not max(map(abs, values)):
        return 1.0, unit
    factor, prefix = prefix_scale(max(map(abs, values)))
    return factor, (f"{prefix} {unit}" if unit == "cells" and prefix else f"{prefix}{unit}")


def _titled(objective: str, units: dict[str, str]) -> str:
    """An objective with its unit, where known: 'latency (s)'."""
    return f"{objective} ({units[objective]})" if units.get(objective) else objective


def pareto_figures(rows: list[dict], front: list[bool], objectives: list[str],
                   units: dict[str, str] | None = None) -> list[Figure]:
    """One scatter per pair of objectives (or the sorted values of a single one), the front highlighted."""
    ok = [(row, on) for row, on in zip(rows, front) if row.get("status") == "ok"]
    if len(objectives) == 1:
        return [_ranked(ok, objectives[0], units or {})]
    pairs = list(itertools.combinations(objectives, 2))[:MAX_PAIRS]
    return [_scatter(ok, x, y, staircase=len(objectives) == 2, name="pareto" if i == 0 else f"pareto_{x}_{y}",
                     units=units or {})
            for i, (x, y) in enumerate(pairs)]


def number(value) -> bool:
    """A real number to draw (not None, not a bool, not NaN)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and not math.isnan(value)


def _scatter(ok: list[tuple[dict, bool]], x: str, y: str, staircase: bool, name: str, units: dict[str, str]) -> Figure:
    """Each model's points in its own colour (one model: grey and red) and its own front: the sweep's front is
    per model, and a staircase through two models' points would join what cannot be traded."""
    figure = canvas(7.0, 4.8)
    ax = figure.add_subplot()
    drawn = [(row, on) for row, on in ok if number(row.get(x)) and number(row.get(y))]
    (sx, ux), (sy, uy) = (_axis([row[k] for row, _ in drawn], units.get(k, "")) for k in (x, y))
    models = list(dict.fromkeys(str(row.get("model", "")) for row, _ in drawn))
    for j, model in enumerate(models):
        mine = [(row[x] / sx, row[y] / sy, on) for row, on in drawn if str(row.get("model", "")) == model]
        colour, star = ("tab:gray", "tab:red") if len(models) == 1 else (f"C{j % 10}", f"C{j % 10}")
        prefix = f"{model}: " if len(models) > 1 else ""
        rest = [(a, b) for a, b, on in mine if not on]
        if rest:
            ax.scatter(*zip(*rest), s=12, alpha=0.6, color=colour, label=f"{prefix}valid points")
        best = sorted((a, b) for a, b, on in mine if on)
        if best:
            if staircase:
                ax.step(*zip(*best), where="post", color=star, lw=1.2, zorder=2)
            ax.scatter(*zip(*best), s=48, marker="*", color=star, edgecolor="black", lw=0.5, zorder=3,
                       label=f"{prefix}Pareto front ({len(best)})")
    for key, setter in ((x, ax.set_xscale), (y, ax.set_yscale)):
        values = [row[key] for row, _ in drawn]
        if values and min(values) > 0 and max(values) / min(values) > 50:
            setter("log")
    ax.set_xlabel(f"{_titled(x, {x: ux})}, lower is better")
    ax.set_ylabel(f"{_titled(y, {y: uy})}, lower is better")
    ax.set_title(f"Pareto front: {x} against {y}", fontsize=10)
    ax.grid(True, alpha=0.3)
    if drawn:
        ax.legend(fontsize=7)
    caption = ("Every valid point; the stars are the front the sweep found"
               + (" (the staircase joins them)." if staircase else ", projected onto this pair of objectives."))
    return Figure(name, f"Pareto front: {x} against {y}", caption, png(figure))


def _ranked(ok: list[tuple[dict, bool]], objective: str, units: dict[str, str]) -> Figure:
    figure = canvas(7.0, 3.6)
    ax = figure.add_subplot()
    ranked = sorted((row[objective], on) for row, on in ok if number(row.get(objective)))
    scale, unit = _axis([v for v, _ in ranked], units.get(objective, ""))
    ax.scatter(range(len(ranked)), [v / scale for v, _ in ranked], s=12,
               color=["tab:red" if on else "C0" for _, on in ranked])
    ax.set_xlabel("rank of the point, best first")
    ax.set_ylabel(f"{_titled(objective, {objective: unit})}, lower is better")
    ax.set_title(f"{objective} over all valid points", fontsize=10)
    ax.grid(True, alpha=0.3)
    return Figure("pareto", f"{objective} over all valid points", "One objective: the best points in red.",
                  png(figure))
