"""One model on several archs, side by side: per arch and per op the time, the share of it spent computing
and waiting on each memory level, bytes and energy per level; then the totals in one table, one column per
arch. The terminal view (`compare_text`) and the page (`compare_report`) show the same numbers.

Invariant: every arch runs the same model with the same options, at tile fidelity (the stall split is the
engine's); the first arch is the baseline that speed-ups and energy ratios are taken against.
"""
from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from accelsim.arch import Arch
from accelsim.report import html
from accelsim.report.breakdown import COMPUTE, ceilings, levels, parts, time_shares, total_split
from accelsim.report.compare_figures import arch_labels, compare_figures
from accelsim.report.html import Cell
from accelsim.report.run_page import layer_table, summary, write_pngs, write_text
from accelsim.results.result import Result
from accelsim.results.units import binary, energy as joules, seconds, si


def totals_rows(results: list[Result]) -> list[tuple[str, list[str], list[float]]]:
    """(metric, shown per arch, value per arch): what the side-by-side totals table holds."""
    base = results[0]
    everything = [r.totals() for r in results]
    splits = [total_split(r) for r in results]
    rows = [("dtype", [r.model["dtype"] for r in results], [0.0] * len(results)),
            ("latency", [seconds(r.seconds) for r in results], [r.seconds for r in results]),
            ("speed-up", [f"{base.seconds / r.seconds:.2f}x" if r.seconds else "-" for r in results],
             [base.seconds / r.seconds if r.seconds else 0.0 for r in results]),
            ("samples/s", [f"{r.model['batch'] / r.seconds:.4g}" if r.seconds else "-" for r in results],
             [r.model["batch"] / r.seconds if r.seconds else 0.0 for r in results])]
    named = levels(results)
    for part in parts(results):
        shares = [s.get(part, 0.0) / (r.seconds or 1.0) for s, r in zip(splits, results)]
        # a level the arch lacks is '-', not 0%: nothing waited on it because there is none
        lacks = [part in named and part not in r.arch.get("memory_levels", []) for r in results]
        rows.append(("computing" if part == COMPUTE else f"waiting on {part}",
                     ["-" if lack else f"{v:.1%}" for v, lack in zip(shares, lacks)], shares))
    for level in named:
        moved = [t["bytes_by_level"].get(level) for t in everything]
        rows.append((f"bytes {level}", ["-" if n is None else binary(n) for n in moved], [n or 0 for n in moved]))
    for component in named + [c for c in dict.fromkeys(c for t in everything for c in t["energy_by_component_j"])
                              if c not in named]:
        spent = [t["energy_by_component_j"].get(component) for t in everything]
        rows.append((f"energy {component}", ["-" if j is None else joules(j) for j in spent],
                     [j or 0.0 for j in spent]))
    rows += [("dynamic energy", [joules(t["energy_j"]) for t in everything], [t["energy_j"] for t in everything]),
             ("energy / first", [f"{t['energy_j'] / everything[0]['energy_j']:.2f}x" if everything[0]["energy_j"]
                                 else "-" for t in everything],
              [t["energy_j"] / (everything[0]["energy_j"] or 1.0) for t in everything]),
             ("average dynamic power", [si(t["average_power_w"], "W") for t in everything],
              [t["average_power_w"] for t in everything])]
    return rows


def compare_text(results: list[Result], limit: int | None = None) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=400, force_terminal=False, color_system=None)   # never fold
    for result in results:
        console.print(_arch_table(result, limit))
        console.print()
    model = results[0].model
    table = Table(title=escape(f"{model['name']} (batch {model['batch']}): totals"),
                  title_justify="left", pad_edge=False)
    table.add_column("")
    for name in arch_labels(results):
        table.add_column(escape(name), justify="right")
    for metric, shown, _ in totals_rows(results):
        table.add_row(escape(metric), *shown)
    console.print(table)
    return buffer.getvalue()


def _arch_table(result: Result, limit: int | None) -> Table:
    """Columns: time, % computing, % waiting per level, bytes per level, energy per level (the compute units'
    energy summed into one `compute` column). Headers break at '_' so the table stays narrow."""
    own = list(result.arch.get("memory_levels", []))
    waits = [p for p in parts([result]) if p != COMPUTE]
    model = result.model
    table = Table(title=escape(f"{model['name']} (batch {model['batch']}, {model['dtype']}) on {result.arch['name']}: "
                               "time, % of it computing and waiting per level, bytes (B) and energy (J) per level"),
                  title_justify="left", pad_edge=False)
    table.add_column("layer", no_wrap=True)
    for header in ["time", "%\ncompute"] + [f"% wait\n{p}" for p in waits] + [f"B\n{lv}" for lv in own] \
            + [f"J\n{lv}" for lv in own] + ["J\ncompute"]:
        table.add_column(escape(header.replace("_", "_\n")), justify="right", no_wrap=True)

    def row(name: str, secs: float, shares: dict, moved: dict, spent: dict) -> list[str]:
        units = sum(j for part, j in spent.items() if part not in own)
        return ([name, seconds(secs)] + [_pct(shares.get(p)) for p in [COMPUTE] + waits]
                + [binary(moved.get(lv, 0)) for lv in own] + [joules(spent.get(lv, 0.0)) for lv in own]
                + [joules(units)])

    shown = result.ops if limit is None else result.ops[:limit]
    for op in shown:
        table.add_row(*row(escape(op.name), op.seconds, time_shares(op) if op.seconds > 0 else {},
                           op.bytes_by_level, op.energy_j))
    if len(shown) < len(result.ops):
        table.add_row(f"... {len(result.ops) - len(shown)} more ops")
    totals, split = result.totals(), total_split(result)
    table.add_section()
    table.add_row(*row(f"total ({len(result.ops)} ops)", result.seconds,
                       {p: s / (result.seconds or 1.0) for p, s in split.items()},
                       totals["bytes_by_level"], totals["energy_by_component_j"]))
    return table


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def compare_report(results: list[Result], archs: list[Arch], html_path: str | None = None,
                   plot_dir: str | None = None) -> list[Path]:
    """Write the comparison page and/or its figures as PNGs; returns the paths written (the loop nests are each
    Result's own mappings)."""
    roofs = [ceilings(r, a) for r, a in zip(results, archs)]
    figures = compare_figures(results, roofs)
    written = write_pngs(figures, plot_dir) if plot_dir else []
    if not html_path:
        return written
    names = arch_labels(results)
    side = [[metric] + [Cell(s, v) for s, v in zip(shown, values)] for metric, shown, values in totals_rows(results)]
    blocks = [html.section("Totals, side by side", html.table(["metric"] + names, side, table_id="totals",
                                                              sortable=False, scroll=False)),
              html.section("Figures", html.figures([f for f in figures if not f.name.startswith("roofline")]))]
    for i, (name, result) in enumerate(zip(names, results)):
        roof = next(f for f in figures if f.name.startswith(f"roofline_{i}_"))
        blocks.append(html.section(f"{name}", summary(result), html.notes(result.notes), html.figure(roof),
                                   html.section("Per op", layer_table(result, f"ops-{i}"), level=3),
                                   html.section("Mappings (loop nests)", html.nests(result.loop_nests()),
                                                level=3)))
    model = results[0].model
    title = f"accelsim compare: {model['name']} (batch {model['batch']}) on {', '.join(names)}"
    subtitle = "; ".join(f"{r.arch['name']} from {r.arch['file']}" for r in results)
    written.append(write_text(html_path, html.page(title, subtitle, blocks)))
    return written
