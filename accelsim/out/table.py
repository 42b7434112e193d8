"""The terminal view of a Result: one row per op, then totals, in engineering units."""
from __future__ import annotations

import io


def si(value: float, unit: str = "") -> str:
    """1.23e9 -> '1.23 G'; keeps three significant digits."""
    if value == 0:
        return f"0 {unit}".strip()
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}".strip()


def engineering(value: float, unit: str) -> str:
    """4 significant digits and an SI prefix: 0.001052 s -> '1.052 ms', 3.178e6 cells -> '3.178 M cells'."""
    if value == 0:
        return f"0 {unit}"
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"),
                           (1e-12, "p")):
        if abs(value) >= factor:
            break
    joined = f"{prefix} {unit}" if unit == "cells" else f"{prefix}{unit}"
    return f"{value / factor:.4g} {joined}".replace("  ", " ").strip()


def binary(nbytes: float) -> str:
    """Capacities the way datasheets give them: 24 MiB, 768 KiB, 141 GiB."""
    for factor, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if nbytes >= factor:
            return f"{nbytes / factor:.3g} {unit}"
    return f"{nbytes:.0f} B"


def seconds(value: float) -> str:
    if value == 0:
        return "0"
    for factor, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "us")):
        if value >= factor:
            return f"{value / factor:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


COLUMNS = (("layer", "left"), ("op", "left"), ("shape", "left"), ("MACs | ops", "right"), ("bytes", "right"),
           ("bound", "left"), ("time", "right"), ("util", "right"))
DROPPED = (("shape", 110), ("op", 90))     # a column left out below this width (layer names wrap first)
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
    for op in ops:
        work = si(op.macs) if op.macs else f"{si(op.ops)} ops" if op.ops else "-"
        row(escape(f"+ {op.name}" if op.kernel else op.name), op.op, "x".join(map(str, op.shape)), work, si(op.bytes, "B"), op.bound,
            seconds(op.seconds), f"{op.utilisation:.0%}" if op.seconds else "-")
    if limit is not None and len(result.ops) > limit:
        row(f"... {len(result.ops) - limit} more ops (--limit 0 shows all; --json and --csv hold every op)",
            "", "", "", "", "", "", "")
    totals = result.totals()
    table.add_section()
    row("total", "", "", si(totals["macs"]), si(totals["bytes"], "B"), "",
        seconds(totals["seconds"]), f"{totals['utilisation']:.0%}")
    buffer = io.StringIO()
    console = Console(file=buffer, width=width or 10_000, force_terminal=False, color_system=None)
    console.print(table)
    kernels = sum(1 for op in result.ops if not op.kernel and op.bound != "view")
    lines = [f"{len(result.ops)} ops in {kernels} kernels (a row marked + runs inside the kernel above it)",
             f"latency {seconds(totals['seconds'])} per batch of {model['batch']}: "
             f"{model['batch'] / totals['seconds']:.1f} samples/s" if totals["seconds"] else "throughput: -",
             "time by bound: " + ", ".join(f"{bound} {share:.0%}" for bound, share in _bound_shares(result)),
             "bytes by level: " + ", ".join(f"{lv} {si(n, 'B')}" for lv, n in totals["bytes_by_level"].items()),
             f"energy: {si(totals['energy_j'], 'J')} (average {si(totals['average_power_w'], 'W')} "
             f"against a {si(arch.get('tdp_w', 0), 'W')} TDP)"]
    if result.memory:
        lines.append(memory_line(result.memory))
    lines += [f"note: {note}" for note in result.notes]
    console.print("\n".join(lines))
    return buffer.getvalue()


def _bound_shares(result):
    total = result.seconds or 1.0
    shares: dict[str, float] = {}
    for op in result.ops:
        shares[op.bound] = shares.get(op.bound, 0.0) + op.seconds / total
    return sorted(shares.items(), key=lambda item: -item[1])


def memory_line(memory: dict) -> str:
    """What the model holds on the device against what the device has, and DOES NOT FIT where it is more."""
    fits = memory["peak"] <= memory["capacity"]
    return (f"memory {binary(memory['peak'])} of {binary(memory['capacity'])} {memory['capacity_level']} (weights "
            f"{binary(memory['weights'])}, activations {binary(memory['activations'])}; inputs "
            f"{binary(memory['inputs'])})" + ("" if fits else "  DOES NOT FIT"))
