"""The report of a step (or a batch of inference) on a system: the summary, the pipeline as drawn by its schedule
(one row per pipeline position, each micro-batch's forward and backward pass, the waits between them visible as
gaps), a table per stage (passes, bubble, communication, exposed seconds, memory) and the collectives by link level.

Invariant: every number is the ParallelResult's, so the page and `--json` never disagree; the drawing is
inline SVG (works offline).
"""
from __future__ import annotations

from pathlib import Path

from accelsim.results.parallel import CATEGORIES, ParallelResult
from accelsim.results.units import binary, seconds, si
from accelsim.report import html
from accelsim.report.html import Cell
from accelsim.report.run_page import write_text

WIDTH, ROW = 960, 22
COLOURS = {"F": "#4e79a7", "B": "#f28e2b"}


def parallel_report(result: ParallelResult, html_path: str) -> Path:
    what = "step" if result.training else "batch"
    blocks = [html.section(f"One {what} on {result.system}", summary(result), html.notes(result.notes)),
              html.section("The pipeline", pipeline_svg(result)),
              html.section("Per stage", stage_table(result)),
              html.section("Communication", comm_table(result))]
    title = f"accelsim {'train' if result.training else 'run'} on {result.system}: {result.plan.text()}"
    return write_text(html_path, html.page(title, f"{result.devices} devices", blocks))


def summary(result: ParallelResult) -> str:
    rate = result.throughput()
    memory = result.memory
    items = [("step" if result.training else "batch", seconds(result.seconds)),
             ("pipeline", seconds(result.pipeline_seconds)),
             ("exposed communication", seconds(result.communication()["exposed_seconds"])),
             ("samples/s", f"{rate['samples_per_second']:,.1f}")]
    if "tokens_per_second" in rate:
        items.append(("tokens/s", f"{rate['tokens_per_second']:,.0f}"))
    items += [("model FLOPs", si(result.model_flops, "FLOP")), ("MFU", f"{result.mfu():.1%}"),
              ("peak memory per device", f"{binary(memory['peak'])} of {binary(result.capacity)}"
                                         + ("" if result.fits else " (does not fit)")),
              ("stage programs simulated", str(result.simulated))]
    return html.cards(items)


def pipeline_svg(result: ParallelResult) -> str:
    """Each pass a bar at its start and length; forward blue, backward orange, labelled by micro-batch."""
    span = max((end for *_, end in result.passes), default=0.0) or 1.0
    positions = sorted({r.device for r in result.roles})
    height = ROW * len(positions) + 30
    scale = (WIDTH - 80) / span
    parts = [f'<svg width="{WIDTH}" height="{height}" role="img" aria-label="pipeline schedule">']
    for row, d in enumerate(positions):
        y = 10 + row * ROW
        parts.append(f'<text x="0" y="{y + 14}" font-size="11">position {d}</text>')
        for device, kind, mb, stage, start, end in result.passes:
            if device != d:
                continue
            x, w = 70 + start * scale, max(0.5, (end - start) * scale)
            parts.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{ROW - 4}" fill="{COLOURS[kind]}" '
                         f'stroke="#fff" stroke-width="0.3"><title>{"forward" if kind == "F" else "backward"} '
                         f'micro-batch {mb}, stage {stage}: {html.text(seconds(end - start))}</title></rect>')
    parts.append(f'<text x="70" y="{height - 4}" font-size="11">time 0</text>'
                 f'<text x="{WIDTH - 60}" y="{height - 4}" font-size="11">{html.text(seconds(span))}</text></svg>')
    return "".join(parts) + "<p>Forward passes in blue, backward in orange; gaps are the pipeline's bubble.</p>"


def stage_table(result: ParallelResult) -> str:
    """Per stage its times and memory; inference has no backward pass, optimizer, gradients or exposed reduction."""
    times = ["forward", "backward", "optimizer", "bubble", "communication", "exposed"]
    kept = list(CATEGORIES)
    if not result.training:
        times = ["forward", "bubble", "communication"]
        kept = [c for c in CATEGORIES if c not in ("gradients", "optimizer")]
    rows = []
    for r in result.roles:
        span = f"{r.blocks[0]} .. {r.blocks[-1]}" if len(r.blocks) > 1 else (r.blocks[0] if r.blocks else "-")
        value = {"forward": r.forward, "backward": r.backward, "optimizer": r.optimizer, "bubble": r.bubble,
                 "communication": sum(r.communication.values()), "exposed": r.exposed}
        rows.append([r.stage, r.device, span] + [Cell(seconds(value[t]), value[t]) for t in times]
                    + [Cell(binary(r.memory["peak"]), r.memory["peak"])]
                    + [Cell(binary(r.memory[c]), r.memory[c]) for c in kept])
    return html.table(["stage", "position", "blocks", *times, "memory", *kept], rows, table_id="stages")


def comm_table(result: ParallelResult) -> str:
    rows = [[e["collective"], e["level"], Cell(seconds(e["seconds"]), e["seconds"])]
            for e in result.communication()["by_collective"]]
    return html.table(["collective", "link level", f"time per {'step' if result.training else 'batch'}"], rows,
                      table_id="communication") or "<p>No communication.</p>"
