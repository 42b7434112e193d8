"""The figures of a `compare` report: the same model on several archs, side by side, one bar per arch.

Invariant: the archs appear in the order given on the command line, in every figure, each with the same
colour per part (compute, a memory level) as in its own run report.
"""
from __future__ import annotations

from accelsim.report.breakdown import COMPUTE, Ceilings, layers, parts, total_split
from accelsim.report.breakdown import levels as memory_levels
from accelsim.report.figures import MAX_BARS, Figure, canvas, outside_legend, palette, png, roofline, unit_colour
from accelsim.results.result import Result
from accelsim.results.units import binary_scale, energy_scale, time_scale

ARCH_COLOURS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]


def compare_figures(results: list[Result], roofs: list[Ceilings]) -> list[Figure]:
    names = arch_labels(results)
    colours = palette([lv for c in roofs for lv in c.bandwidths] + parts(results))
    figures = [total_time(results, names, colours), layer_times(results, names), energy(results, names, colours),
               traffic(results, names, colours)]
    figures += [roofline(r, c, colours, name=f"roofline_{i}_{r.arch['name']}")
                for i, (r, c) in enumerate(zip(results, roofs))]
    return figures


def arch_labels(results: list[Result]) -> list[str]:
    """Arch names, numbered where two runs share one (the same preset under two dtypes, say)."""
    names = [r.arch["name"] for r in results]
    return [f"{n} #{i + 1}" if names.count(n) > 1 else n for i, n in enumerate(names)]


def total_time(results: list[Result], names: list[str], colours: dict[str, str]) -> Figure:
    """One stacked bar per arch: the model's time computing and waiting on each level."""
    order = parts(results)
    splits = [total_split(r) for r in results]
    figure = canvas(8.0, 1.2 + 0.55 * len(results))
    ax = figure.add_subplot()
    scale, unit = time_scale(max(r.seconds for r in results))
    left = [0.0] * len(results)
    for part in order:
        widths = [s.get(part, 0.0) / scale for s in splits]
        ax.barh(range(len(names)), widths, left=left, color=colours[part],
                label=part if part == COMPUTE else f"waiting on {part}")
        left = [a + b for a, b in zip(left, widths)]
    base = results[0].seconds
    for i, r in enumerate(results):
        note = f" {r.seconds / scale:.3g} {unit}" + (f" ({base / r.seconds:.2f}x)" if i and r.seconds else "")
        ax.annotate(note, (left[i], i), va="center", fontsize=8)
    ax.set_xlim(0, max(left) * 1.25 or 1.0)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit})")
    ax.set_title(f"Where the time goes: {results[0].model['name']} (batch {results[0].model['batch']})", fontsize=10)
    outside_legend(ax)
    caption = ("Total time per arch, split into computing and waiting on each memory level; (Nx) is the speed-up "
               "over the first.")
    return Figure("compare_time", "Time split per arch", caption, png(figure))


def layer_times(results: list[Result], names: list[str]) -> Figure:
    """Per layer, one bar per arch: which layers the difference comes from."""
    per_arch = [{layer.node: layer.seconds for layer in layers(r)} for r in results]
    nodes = list(dict.fromkeys(n for seconds in per_arch for n, s in seconds.items() if s > 0))
    if len(nodes) > MAX_BARS // 2:
        longest = set(sorted(nodes, key=lambda n: -max(s.get(n, 0.0) for s in per_arch))[:MAX_BARS // 2])
        nodes = [n for n in nodes if n in longest]
    figure = canvas(8.0, max(2.5, 0.8 + 0.12 * len(nodes) * len(results) + 0.1 * len(nodes)))
    ax = figure.add_subplot()
    scale, unit = time_scale(max((s.get(n, 0.0) for s in per_arch for n in nodes), default=0.0))
    _grouped_bars(ax, nodes, per_arch, names, scale, fontsize=7)
    ax.set_xlabel(f"time ({unit})")
    ax.set_title("Time per layer, per arch", fontsize=10)
    outside_legend(ax)
    caption = f"The longest layers (up to {MAX_BARS // 2}, in execution order), one bar per arch."
    return Figure("compare_layers", "Time per layer", caption, png(figure))


def energy(results: list[Result], names: list[str], colours: dict[str, str]) -> Figure:
    """One stacked bar per arch: dynamic energy by component."""
    totals = [r.totals()["energy_by_component_j"] for r in results]
    components = list(dict.fromkeys(c for t in totals for c in t))
    figure = canvas(8.0, 1.2 + 0.55 * len(results))
    ax = figure.add_subplot()
    scale, unit = energy_scale(max(sum(t.values()) for t in totals))
    left = [0.0] * len(results)
    units = [c for c in components if c not in colours]
    for component in components:
        widths = [t.get(component, 0.0) / scale for t in totals]
        colour = colours[component] if component in colours else unit_colour(units.index(component))
        ax.barh(range(len(names)), widths, left=left, color=colour, label=component)
        left = [a + b for a, b in zip(left, widths)]
    ax.set_xlim(0, max(left) * 1.15 or 1.0)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel(f"dynamic energy ({unit})")
    ax.set_title("Energy by component, per arch", fontsize=10)
    outside_legend(ax)
    return Figure("compare_energy", "Energy per arch", "Dynamic energy per component (compute units and memory "
                  "levels), stacked.", png(figure))


def traffic(results: list[Result], names: list[str], colours: dict[str, str]) -> Figure:
    """Per memory level (by name), one bar per arch."""
    totals = [r.totals()["bytes_by_level"] for r in results]
    levels = memory_levels(results)
    figure = canvas(8.0, max(2.2, 0.6 + len(levels) * (0.15 + 0.12 * len(results))))
    ax = figure.add_subplot()
    scale, unit = binary_scale(max((n for t in totals for n in t.values()), default=0.0))
    _grouped_bars(ax, levels, totals, names, scale, fontsize=8)
    ax.set_xlabel(f"bytes ({unit})")
    ax.set_title("Traffic per memory level, per arch", fontsize=10)
    outside_legend(ax)
    return Figure("compare_traffic", "Traffic per arch", "Bytes crossing each memory level (a level one arch "
                  "lacks has no bar).", png(figure))


def _grouped_bars(ax, labels: list[str], per_arch: list[dict], names: list[str], scale: float, fontsize: int) -> None:
    """One horizontal bar per arch for each label, grouped, first label on top; a label an arch lacks is 0."""
    height = 0.8 / len(per_arch)
    for i, (name, values) in enumerate(zip(names, per_arch)):
        ax.barh([j + i * height for j in range(len(labels))], [values.get(label, 0) / scale for label in labels],
                height=height, color=ARCH_COLOURS[i % len(ARCH_COLOURS)], label=name)
    ax.set_yticks([j + height * (len(per_arch) - 1) / 2 for j in range(len(labels))], labels, fontsize=fontsize)
    ax.invert_yaxis()
