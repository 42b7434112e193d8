"""The figures of a `run` report, drawn with matplotlib's Agg canvas (no display, no pyplot state) into PNG
bytes: the same bytes go to `--plot DIR` and, base64-encoded, into the `--html` page.

Invariant: a part (compute, a memory level) keeps its colour in every figure of a report (`palette`).
"""
from __future__ import annotations

import io
from dataclasses import dataclass

from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from accelsim.report.breakdown import COMPUTE, OTHER, Ceilings, layers, parts, roofline_points
from accelsim.results.result import Result
from accelsim.results.units import binary_scale, energy_scale, time_scale

MAX_BARS = 40            # layers drawn in a per-layer figure; the longest ones, kept in execution order
DPI = 110
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
SIZES = [90, 36, 22, 14, 10, 8, 6]       # each inside the one before: a point on two levels shows both


@dataclass(frozen=True)
class Figure:
    """One drawn figure: `name` is its file stem under --plot DIR."""

    name: str
    title: str
    caption: str
    png: bytes


def canvas(width_in: float, height_in: float) -> MplFigure:
    figure = MplFigure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def png(figure: MplFigure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def outside_legend(ax) -> None:
    """The legend right of the axes (constrained layout makes room), never over a bar."""
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def unit_colour(index: int) -> str:
    """Compute units' energy in blues (the memory levels have the palette's other colours)."""
    return ["tab:blue", "#9ecae1", "#08519c", "#6baed6"][index % 4]


def palette(names: list[str]) -> dict[str, str | tuple]:
    """compute is always blue and `other` grey; levels take the next tab10 colours in the order given."""
    colours = ["tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive",
               "tab:cyan"]
    # then tab20's light shades of the same (no blue, no grey): 16 levels apart before any repeats
    light = colormaps["tab20"].colors
    colours += [light[i] for i in (3, 5, 7, 9, 11, 13, 17, 19)]
    out, i = {COMPUTE: "tab:blue", OTHER: "tab:gray"}, 0
    for name in names:
        if name not in out:
            out[name] = colours[i % len(colours)]
            i += 1
    return out


def label(result: Result) -> str:
    model = result.model
    return f"{model['name']} (batch {model['batch']}, {model['dtype']}) on {result.arch['name']}"


def run_figures(result: Result, roofs: Ceilings) -> list[Figure]:
    colours = palette(list(roofs.bandwidths) + parts([result]))
    return [roofline(result, roofs, colours), time_split(result, colours), energy(result, colours),
            traffic(result, colours)]


def roofline(result: Result, roofs: Ceilings, colours: dict[str, str], name: str = "roofline") -> Figure:
    """Every kernel once per level it moves bytes across: x its operations per byte there, y what it attained; an op
    fused into another's kernel is part of that kernel's point (breakdown.roofline_points)."""
    figure = canvas(7.5, 4.8)
    ax = figure.add_subplot()
    xs_all, ys_all = [], []
    for i, level in enumerate(roofs.bandwidths):
        points = roofline_points(result, level)
        if points:
            xs, ys = zip(*points)
            # open markers, a shape and size per level: an op that moves the same bytes across two levels
            # (a weight through DRAM and the weight FIFO) lands on one spot, and both stay visible
            ax.scatter(xs, ys, s=SIZES[i % len(SIZES)], marker=MARKERS[i % len(MARKERS)], facecolors="none",
                       edgecolors=colours[level], linewidths=1.1, label=f"kernels at {level}", zorder=3)
            xs_all += xs
            ys_all += ys
    peak = max(roofs.peaks.values())
    ridges = [peak / bw for bw in roofs.bandwidths.values() if bw > 0]
    lo = min(xs_all + ridges) / 4
    hi = max(xs_all + ridges) * 4
    for level, bw in roofs.bandwidths.items():
        knee = min(peak / bw, hi)
        ax.plot([lo, knee], [bw * lo, bw * knee], color=colours[level], lw=1.2, ls="--")
    for (what, value), style in zip(roofs.peaks.items(), ("-", ":")):
        ax.axhline(value, color="black", lw=1.2, ls=style, label=f"{what} {value:.3g} op/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(min(ys_all + [peak]) / 10, peak * 3)
    ax.set_xlabel("arithmetic intensity (op/B: operations per byte crossing the level)")
    ax.set_ylabel("attained performance (op/s)")
    ax.set_title(f"Roofline: {label(result)}", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")   # under the roofs, bottom right is empty
    caption = ("Each kernel is drawn once per memory level it moves bytes across (2 operations per MAC, 1 per "
               "vector op), an op fused into it (a + row of the table) counted in its point; dashed lines are each "
               "level's bandwidth ceiling, solid the matrix peak.")
    return Figure(name, "Roofline", caption, png(figure))


def _top_layers(result: Result):
    rows = [layer for layer in layers(result) if layer.seconds > 0]
    if len(rows) <= MAX_BARS:
        return rows, ""
    keep = {id(layer) for layer in sorted(rows, key=lambda layer: -layer.seconds)[:MAX_BARS]}
    left = [layer for layer in rows if id(layer) not in keep]
    share = sum(layer.seconds for layer in left) / sum(layer.seconds for layer in rows)
    return ([layer for layer in rows if id(layer) in keep],
            f" The {len(left)} shortest layers ({share:.1%} of the time) are not drawn.")


def time_split(result: Result, colours: dict[str, str]) -> Figure:
    """One horizontal bar per layer, stacked: computing, then waiting on each level."""
    rows, dropped = _top_layers(result)
    order = parts([result])
    figure = canvas(8.0, max(2.5, 0.6 + 0.2 * len(rows)))
    ax = figure.add_subplot()
    scale, unit = time_scale(max((layer.seconds for layer in rows), default=0.0))
    y = list(range(len(rows)))
    left = [0.0] * len(rows)
    for part in order:
        widths = [layer.split.get(part, 0.0) / scale for layer in rows]
        if any(widths):
            ax.barh(y, widths, left=left, color=colours[part], label=part if part == COMPUTE else f"waiting on {part}")
            left = [a + b for a, b in zip(left, widths)]
    ax.set_yticks(y, [layer.node for layer in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit})")
    ax.set_title(f"Time per layer: {label(result)}", fontsize=10)
    outside_legend(ax)
    caption = "Per layer (graph node): time computing and time the unit waited on each memory level." + dropped
    return Figure("time_split", "Time split per layer", caption, png(figure))


def energy(result: Result, colours: dict[str, str]) -> Figure:
    totals = result.totals()["energy_by_component_j"]
    names = sorted(totals, key=lambda n: -totals[n])
    figure = canvas(7.0, max(2.2, 0.6 + 0.35 * len(names)))
    ax = figure.add_subplot()
    scale, unit = energy_scale(max(totals.values(), default=0.0))
    units = [n for n in names if n not in colours]
    ax.barh(names, [totals[n] / scale for n in names],
            color=[colours[n] if n in colours else unit_colour(units.index(n)) for n in names])
    for i, n in enumerate(names):
        share = totals[n] / (sum(totals.values()) or 1.0)
        ax.annotate(f" {share:.1%}", (totals[n] / scale, i), va="center", fontsize=8)
    ax.margins(x=0.12)
    ax.invert_yaxis()
    ax.set_xlabel(f"dynamic energy ({unit})")
    ax.set_title(f"Energy by component: {label(result)}", fontsize=10)
    caption = "Dynamic energy: each component's actions (MACs, vector ops, accesses) times its energy per action."
    return Figure("energy", "Energy breakdown", caption, png(figure))


def traffic(result: Result, colours: dict[str, str]) -> Figure:
    totals = result.totals()
    levels = list(result.arch.get("memory_levels", []))
    read, written = totals.get("bytes_read_by_level"), totals.get("bytes_written_by_level")
    figure = canvas(7.0, max(2.2, 0.6 + 0.35 * len(levels)))
    ax = figure.add_subplot()
    scale, unit = binary_scale(max(totals["bytes_by_level"].values(), default=0.0))
    if read is not None:   # tile fidelity: loads out of and stores into each level
        r = [read.get(lv, 0) / scale for lv in levels]
        w = [written.get(lv, 0) / scale for lv in levels]
        ax.barh(levels, r, color=[colours[lv] for lv in levels], label="read (loads out of it)")
        ax.barh(levels, w, left=r, color=[colours[lv] for lv in levels], alpha=0.45, hatch="//",
                label="written (stores into it)")
        outside_legend(ax)
    else:
        ax.barh(levels, [totals["bytes_by_level"].get(lv, 0) / scale for lv in levels],
                color=[colours[lv] for lv in levels])
    ax.margins(x=0.05)
    ax.invert_yaxis()
    ax.set_xlabel(f"bytes ({unit})")
    ax.set_title(f"Traffic per memory level: {label(result)}", fontsize=10)
    caption = "Bytes crossing each memory level over the whole model, outermost level first."
    return Figure("traffic", "Traffic breakdown", caption, png(figure))
