"""The terminal view of a Result: one row per op, then totals, in engineering units."""
from __future__ import annotations

import io
from typing import Literal

from accelsim.results.units import binary, energy, engineering, seconds, si  # noqa: F401 (the units' one home)

from accelsim.results import roof


COLUMNS: tuple[tuple[str, Literal["left", "right"]], ...] = (
    ("layer", "left"), ("op", "left"), ("shape", "left"), ("MACs | ops", "right"), ("bytes", "right"),
    ("FLOP/B", "right"), ("roof", "left"), ("bound", "left"), ("time", "right"), ("util", "right"))
# a column left out below this width (layer names wrap first): the roofline's two first (the lines under the table
# still count the roofs and say where a bound differs), then shape, then op
DROPPED = (("FLOP/B", 140), ("roof", 140), ("shape", 110), ("op", 90))
WIDTH = 120                                 # off a terminal, and the default
ROWS = 1000                                 # ops shown when no limit is given; JSON and CSV hold every op


def render(result, limit: int | None = None, width: int | None = WIDTH) -> str:
    """The per-op table and the totals, `width` columns wide (narrow: names wrap, then shape and op columns
    go); None for every column at whatever width it takes (`accelsim run --wide`). `limit`: the first N ops;
    0 for all; None for all up to ROWS (a 100,000-node model's table would take minutes to draw)."""
    from rich.console import Console     # here, not at the top: `accelsim archs` uses this module's units only
    from rich.markup import escape
    from rich.table import Table

    arch, model = result.arch, result.model
    title = escape(f"{model['name']} (batch {model['batch']}, {model['dtype']}) on {arch['name']} "
                   f"[{arch['kind']}], {result.fidelity}")
    table = Table(title=title, title_justify="left", show_lines=False, pad_edge=False)
    shown = [name for name, _ in COLUMNS if width is None or all(name != d or width >= w for d, w in DROPPED)]
    for column, justify in COLUMNS:
        if column in shown:
            table.add_column(column, justify=justify, no_wrap=column != "layer", overflow="fold")

    def row(*cells) -> None:
        table.add_row(*(cell for (name, _), cell in zip(COLUMNS, cells) if name in shown))

    if limit is None and len(result.ops) > ROWS:
        limit = ROWS
    limit = None if limit == 0 else limit
    ops = result.ops if limit is None else result.ops[:limit]
    found = roof.kernels(result)
    by_anchor = {kernel.anchor.name: kernel for kernel in found}
    for op in ops:
        work = si(op.macs) if op.macs else f"{si(op.ops)} ops" if op.ops else "-"
        intensity, binds = _roof_cells(by_anchor.get(op.name), op)
        row(escape(f"+ {op.name}" if op.kernel else op.name), op.op, "x".join(map(str, op.shape)), work,
            binary(op.bytes), intensity, binds, op.bound, seconds(op.seconds),
            f"{op.utilisation:.0%}" if op.seconds else "-")
    if limit is not None and len(result.ops) > limit:
        row(f"... {len(result.ops) - limit} more ops (--limit 0 shows all; --json and --csv hold every op)",
            *[""] * (len(COLUMNS) - 1))
    totals = result.totals()
    table.add_section()
    row("total", "", "", si(totals["macs"]), binary(totals["bytes"]), "", "", "",
        seconds(totals["seconds"]), f"{totals['utilisation']:.0%}")
    buffer = io.StringIO()
    console = Console(file=buffer, width=width or 10_000, force_terminal=False, color_system=None)
    console.print(table)
    kernels = sum(1 for op in result.ops if not op.kernel and op.bound != "view")
    lines = [f"{len(result.ops)} ops in {kernels} kernels (a row marked + runs inside the kernel above it)",
             f"latency {seconds(totals['seconds'])} per batch of {model['batch']}: "
             f"{model['batch'] / totals['seconds']:.1f} samples/s{_tokens(model, totals['seconds'])}"
             if totals["seconds"] else "throughput: -",
             "time by bound: " + ", ".join(f"{bound} {share:.0%}" for bound, share in _bound_shares(result)),
             "bytes by level: " + ", ".join(f"{lv} {binary(n)}" for lv, n in totals["bytes_by_level"].items()),
             energy_line(totals)]
    lines += roof_lines(found, roof.machine_balance(arch))
    if result.memory:
        lines.append(memory_line(result.memory))
    lines += [f"note: {note}" for note in result.notes]
    console.print("\n".join(lines))
    return buffer.getvalue()


def _roof_cells(kernel, op) -> tuple[str, str]:
    """A kernel's intensity and roof on its own op's row; a fused op's row (+) shares the kernel's, shown above."""
    if kernel is None:
        return ("", "") if op.kernel else ("-", "-")
    return (roof.per_byte(kernel.intensity) if kernel.intensity else "-"), (kernel.roof or "-")


def roof_lines(kernels, balance: float | None, shown: int = 6) -> list[str]:
    """How the roofs split the kernels, and why a kernel's bound is not the roof that binds it."""
    judged = [k for k in kernels if k.roof]
    if not judged:
        return []
    counts: dict[str, int] = {}
    for kernel in judged:
        counts[kernel.roof] = counts.get(kernel.roof, 0) + 1
    against = f", against a machine balance of {roof.per_byte(balance)} FLOP/B for matrix work" if balance else ""
    head = (f"roof (FLOP per {judged[0].level} byte{against}): "
            + ", ".join(f"{name} {n} kernels" for name, n in counts.items()))
    reasons = [(k.anchor.name, reason) for k in judged if (reason := roof.why(k))]
    if not reasons:
        return [head + "; every kernel's bound is its roof"]
    lines = [head + f"; {len(reasons)} bound by something else:"]
    lines += [f"  {name}: {reason}" for name, reason in reasons[:shown]]
    if len(reasons) > shown:
        lines.append(f"  ... {len(reasons) - shown} more (--json: each op's bound and level_seconds)")
    return lines


def _tokens(model: dict, seconds_: float) -> str:
    """A language model's tokens/s: a decode step's one token per sequence, a prefill's batch x seq."""
    per = model.get("tokens_per_sample")
    if not per:
        return ""
    tokens = model["batch"] * per
    return (f", {tokens / seconds_:,.0f} tokens/s ({model['batch']:,} sequence{'s' * (model['batch'] != 1)} x "
            f"{per:,} token{'s' * (per != 1)})")


def _bound_shares(result):
    total = result.seconds or 1.0
    shares: dict[str, float] = {}
    for op in result.ops:
        shares[op.bound] = shares.get(op.bound, 0.0) + op.seconds / total
    return sorted(shares.items(), key=lambda item: -item[1])


def energy_line(totals: dict) -> str:
    """Dynamic energy only: static (leakage) power is not modelled, so its average power is not the chip's draw."""
    return (f"dynamic energy: {energy(totals['energy_j'])} (average dynamic power "
            f"{si(totals['average_power_w'], 'W')}; static power is not modelled)")


def memory_line(memory: dict) -> str:
    """What the model holds on the device against what the device has, and DOES NOT FIT where it is more."""
    fits = memory["peak"] <= memory["capacity"]
    return (f"memory {binary(memory['peak'])} of {binary(memory['capacity'])} {memory['capacity_level']} (weights "
            f"{binary(memory['weights'])}, activations {binary(memory['activations'])}; inputs "
            f"{binary(memory['inputs'])})" + ("" if fits else "  DOES NOT FIT"))
