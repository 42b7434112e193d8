"""The report of one `run`: summary, figures, a sortable per-op table and the loop nests, written as one
self-contained HTML page (`--html FILE`) and/or the figures as PNG files (`--plot DIR`).

Invariant: the page shows the Result it is given and nothing else; every number is the Result's (or, for
the shares, breakdown's split of it), so the page and `--json` never disagree.
"""
from __future__ import annotations

from pathlib import Path

from accelsim.arch import Arch
from accelsim.report import html
from accelsim.report.breakdown import COMPUTE, ceilings, parts, time_shares, total_split
from accelsim.report.figures import Figure, label, run_figures
from accelsim.report.html import Cell
from accelsim.results.result import Result
from accelsim.results.units import binary, energy as joules, seconds, si
from compiler import output
from compiler.errors import UserError


def run_report(result: Result, arch: Arch, html_path: str | None = None, plot_dir: str | None = None) -> list[Path]:
    """Write the page and/or the PNGs; returns the paths written. The loop nests are the Result's own mappings."""
    nests = result.loop_nests()
    figures = run_figures(result, ceilings(result, arch))
    written = write_pngs(figures, plot_dir) if plot_dir else []
    if html_path:
        blocks = [html.section("Summary", summary(result), html.notes(result.notes)),
                  html.section("Figures", html.figures(figures)),
                  html.section("Per op", layer_table(result, "ops")),
                  html.section("Mappings (loop nests)", html.nests(nests) if nests else
                               "<p>None: at roofline fidelity no op is mapped.</p>")]
        written.append(write_text(html_path, html.page(f"accelsim run: {label(result)}", subtitle(result), blocks)))
    return written


def subtitle(result: Result) -> str:
    arch = result.arch
    return (f"{arch['name']} [{arch['kind']}] from {arch['file']}, {result.fidelity} fidelity; model from "
            f"{result.model['source']}, {result.model['parameters']:,} parameters")


def summary(result: Result) -> str:
    totals = result.totals()
    split = total_split(result)
    waits = sorted(((p, s) for p, s in split.items() if p != COMPUTE), key=lambda item: -item[1])
    rate = f"{result.model['batch'] / totals['seconds']:,.1f} samples/s" if totals["seconds"] else "-"
    items = [("latency", seconds(totals["seconds"])), ("throughput", rate),
             ("MACs", si(totals["macs"])), ("utilisation", f"{totals['utilisation']:.1%}"),
             ("dynamic energy", joules(totals["energy_j"])),
             ("average dynamic power", si(totals["average_power_w"], "W")),
             ("computing", f"{split.get(COMPUTE, 0.0) / (totals['seconds'] or 1):.1%} of the time")]
    per = result.model.get("tokens_per_sample")
    if per and totals["seconds"]:        # a language model: a decode step's token per sequence, a prefill's seq
        items.insert(2, ("tokens/s", f"{result.model['batch'] * per / totals['seconds']:,.0f}"))
    items += [(f"waiting on {part}", f"{s / (totals['seconds'] or 1):.1%}") for part, s in waits[:3]]
    return html.cards(items)


def layer_table(result: Result, table_id: str) -> str:
    """One row per op; time shares, bytes and energy per level as columns; the totals in the footer."""
    levels = list(result.arch.get("memory_levels", []))
    waits = [p for p in parts([result]) if p != COMPUTE]
    components = list(dict.fromkeys(c for op in result.ops for c in op.energy_j))
    headers = (["layer", "op", "shape", "MACs", "vector ops", "time", "bound", "util", "computing"]
               + [f"wait {p}" for p in waits] + [f"bytes {lv}" for lv in levels]
               + [f"energy {c}" for c in components] + ["energy"])
    rows = []
    for op in result.ops:
        shares = time_shares(op) if op.seconds > 0 else {}
        rows.append([op.name, op.op, "x".join(map(str, op.shape)), Cell(si(op.macs), op.macs),
                     Cell(si(op.ops), op.ops), Cell(seconds(op.seconds), op.seconds), op.bound,
                     Cell(f"{op.utilisation:.0%}", op.utilisation), _share(shares.get(COMPUTE))]
                    + [_share(shares.get(p)) for p in waits]
                    + [Cell(binary(op.bytes_by_level.get(lv, 0)), op.bytes_by_level.get(lv, 0)) for lv in levels]
                    + [Cell(joules(op.energy_j.get(c, 0.0)), op.energy_j.get(c, 0.0)) for c in components]
                    + [Cell(joules(sum(op.energy_j.values())), sum(op.energy_j.values()))])
    totals = result.totals()
    split = total_split(result)
    whole = totals["seconds"] or 1.0
    footer = [[f"total ({len(result.ops)} ops)", "", "", Cell(si(totals["macs"]), totals["macs"]),
               Cell(si(totals["ops"]), totals["ops"]), Cell(seconds(totals["seconds"]), totals["seconds"]), "",
               Cell(f"{totals['utilisation']:.0%}", totals["utilisation"]), _share(split.get(COMPUTE, 0.0) / whole)]
              + [_share(split.get(p, 0.0) / whole) for p in waits]
              + [Cell(binary(totals["bytes_by_level"].get(lv, 0)), totals["bytes_by_level"].get(lv, 0))
                 for lv in levels]
              + [Cell(joules(totals["energy_by_component_j"].get(c, 0.0)), totals["energy_by_component_j"].get(c, 0.0))
                 for c in components]
              + [Cell(joules(totals["energy_j"]), totals["energy_j"])]]
    return html.table(headers, rows, footer, table_id=table_id)


def _share(value: float | None) -> Cell:
    return Cell("-", -1.0) if value is None else Cell(f"{value:.1%}", value)


def write_pngs(figures: list[Figure], plot_dir: str) -> list[Path]:
    folder = Path(plot_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"--plot {plot_dir}: cannot write ({error.strerror})") from None
    return [output.write_file(folder / f"{fig.name}.png", fig.png, f"--plot {plot_dir}: {fig.name}.png")
            for fig in figures]


def write_text(target: str, text: str) -> Path:
    """The page `text` to `target` (written aside and renamed: compiler.output)."""
    return output.write_file(target, text, f"--html {target}")
