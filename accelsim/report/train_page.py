"""The report of one `train`: the step's summary (time per phase, throughput, MFU, memory against the device and
its largest tensors), a sortable per-layer table of forward, recompute, backward and optimizer time, then the run
page's figures, per-op table and loop nests of the simulated step (one micro-batch's passes and the update).

Invariant: every number is the TrainResult's, so the page and `train --json` never disagree.
"""
from __future__ import annotations

from pathlib import Path

from accelsim.arch import Arch
from accelsim.results.units import binary, seconds, si
from accelsim.results.training import PHASES, TrainResult
from accelsim.report import html
from accelsim.report.figures import run_figures
from accelsim.report.breakdown import ceilings
from accelsim.report.html import Cell
from accelsim.report.run_page import layer_table, subtitle, write_text


def train_report(result: TrainResult, arch: Arch, html_path: str) -> Path:
    step = result.result
    blocks = [html.section("Training step", summary(result), html.notes(result.notes + step.notes)),
              html.section("Memory at the peak", memory_table(result)),
              html.section("Per layer", layers_table(result)),
              html.section("Figures (the simulated step)", html.figures(run_figures(step, ceilings(step, arch)))),
              html.section("Per op (one micro-batch's passes, then the update)", layer_table(step, "ops")),
              html.section("Mappings (loop nests)", html.nests(step.loop_nests()) or
                           "<p>None: at roofline fidelity no op is mapped.</p>")]
    title = f"accelsim train: {step.model['name']} (batch {result.batch}) on {step.arch['name']}"
    return write_text(html_path, html.page(title, subtitle(step), blocks))


def summary(result: TrainResult) -> str:
    phase = result.phase_seconds
    rate = result.throughput()
    items = [("step", seconds(result.seconds))]
    items += [(name, seconds(phase[name])) for name in PHASES if phase[name] or name != "recompute"]
    items += [("samples/s", f"{rate['samples_per_second']:,.1f}")]
    if "tokens_per_second" in rate:
        items.append(("tokens/s", f"{rate['tokens_per_second']:,.0f}"))
    items += [("model FLOPs per step", si(result.model_flops, "FLOP")), ("MFU", f"{result.mfu:.1%}"),
              ("peak memory", f"{binary(result.memory['peak'])} of {binary(result.memory['capacity'])}"
                              + ("" if result.fits else " (does not fit)"))]
    if result.steps is not None:
        items.append(("time to train", f"{result.steps:,} steps, {seconds(result.steps * result.seconds)}"))
    return html.cards(items)


def memory_table(result: TrainResult) -> str:
    m = result.memory
    rows = [[name, Cell(binary(m[name]), m[name])] for name in ("weights", "gradients", "optimizer", "activations",
                                                                "workspace")]
    largest = [[t["tensor"], t["category"], Cell(binary(t["bytes"]), t["bytes"])] for t in m["largest"]]
    return (html.table(["category", "bytes"], rows, [["peak", Cell(binary(m["peak"]), m["peak"])]], "memory")
            + f"<p>The peak comes at node {html.text(m['peak_node'])} ({html.text(m['peak_phase'])}); its largest "
              f"tensors:</p>" + html.table(["tensor", "category", "bytes"], largest, table_id="largest"))


def layers_table(result: TrainResult) -> str:
    rows = [[layer.name, layer.op, *(Cell(seconds(layer.seconds[p]), layer.seconds[p]) for p in PHASES),
             layer.bound] for layer in result.layers]
    totals = result.phase_seconds
    footer = [[f"total ({len(rows)} layers)", "", *(Cell(seconds(totals[p]), totals[p]) for p in PHASES), ""]]
    return html.table(["layer", "op", *PHASES, "bound"], rows, footer, "layers")
