"""The systolic film as terminal text: a summary, then each cycle's PE grid as boxes of three lines
(S: the stationary operand, →: the value passing east, Σ: the partial sum passing south; OS: ↓ B passing south,
→ A passing east, Σ the sum accumulating in place, Σ' the other accumulator bank), then C against numpy.

Invariant: prints only what the Film holds; the numbers the tutorial quotes come from here.
"""
from __future__ import annotations

from accelsim.explain.film import Cell, Film, Frame
from accelsim.arch import Dataflow


def describe(film: Film) -> str:
    """What runs where, and the cycle counts: the model's, the last output's and docs/rtl.md's closed form."""
    rows, cols = film.rows, film.cols
    if film.dataflow is Dataflow.WS:
        roles = ("B stays in the PEs (PE(r, c) holds a weight B[k, n]), A's rows flow east, partial sums "
                 "flow south; C comes out a row at a time")
    elif film.dataflow is Dataflow.OS:
        roles = ("C stays in the PEs (PE(r, c) accumulates C[m, n] in place), A's columns flow east, B's rows "
                 "flow south; each tile's finished sums drain south, a row at a time")
    else:
        roles = ("A stays in the PEs (PE(r, c) holds an input A[m, k], as A.T), B's columns flow east, partial "
                 "sums flow south; C comes out a column at a time")
    pe_cycles = rows * cols * film.cycles
    macs = film.m * film.k * film.n
    if film.dataflow is Dataflow.OS:
        folds = (f"folds F = {film.folds} output tile{'s' if film.folds > 1 else ''} of {rows} x {cols}, "
                 f"T = {film.stream} k-steps (a column of A and a row of B) streamed per fold; in each PE box: "
                 f"↓ the value of B passing south, -> the value of A passing east, Σ the sum accumulating in place, "
                 f"Σ' the other accumulator bank (the fold before, draining)")
    else:
        folds = (f"folds F = {film.folds} stationary tile{'s' if film.folds > 1 else ''} of {rows} x {cols}, "
                 f"T = {film.stream} {'columns of B' if film.dataflow is Dataflow.IS else 'rows of A'} streamed per "
                 f"fold; in each PE box: S the stationary value, -> the value "
                 f"passing east, Σ the partial sum passing south")
    lines = [
        f"{film.dataflow.value.upper()}: C[{film.m}x{film.n}] = A[{film.m}x{film.k}] @ B[{film.k}x{film.n}] "
        f"on a {rows} x {cols} array; {roles}",
        folds,
        f"cycle-level model: {film.cycles} cycles; the last output appears in cycle {film.last_output_cycle}",
        f"docs/rtl.md closed form: {film.formula()} cycles",
        f"utilisation: {macs} useful MACs in {pe_cycles} PE-cycles = {100 * macs / pe_cycles:.1f}%; "
        f"PEs hold a valid value in {film.busy} PE-cycles ({100 * film.busy / pe_cycles:.1f}%, zero padding "
        f"included)",
    ]
    return "\n".join(lines) + "\n"


def box_width(film: Film) -> int:
    """The widest PE box of the whole film, so that every cycle's grid lines up."""
    return max(len(line) for f in film.frames for row in f.cells for cell in row for line in _box(film, cell))


def frame_text(film: Film, frame: Frame, width: int) -> str:
    ports = [f"{name}: {text}" for name, text in zip(film.port_names + ("out",), (frame.w_in, frame.x_in,
                                                                                    frame.y_out)) if text]
    boxes = [[_box(film, cell) for cell in row] for row in frame.cells]
    rule = "+" + "+".join("-" * (width + 2) for _ in boxes[0]) + "+"
    lines = [f"cycle {frame.cycle}" + ("   " + "   ".join(ports) if ports else ""), rule]
    for row in boxes:
        for i in range(len(row[0])):
            lines.append("| " + " | ".join(box[i].ljust(width) for box in row) + " |")
        lines.append(rule)
    return "\n".join(lines) + "\n"


def matrix_text(film: Film) -> str:
    """C as the model's output rows left it, beside numpy's A @ B."""
    final = film.frames[-1]
    got = [[v for v in row] for row in final.out]
    want = (film.a @ film.b).tolist()
    width = max(len(str(v)) for row in want + got for v in row)
    lines = ["C from the model's output rows:"]
    lines += ["  " + " ".join(str(v).rjust(width) for v in row) for row in got]
    lines.append(f"A @ B (numpy): {'equal' if got == want else 'DIFFERENT'}")
    return "\n".join(lines) + "\n"


def _box(film: Film, cell: Cell) -> list[str]:
    def part(mark, value, label):
        mark = mark.replace("→", "->").ljust(2)
        return f"{mark} {value:>4} {label}" if value is not None else f"{mark}    ."
    return [part(mark, value, label) for mark, (value, label) in zip(film.marks, film.lines(cell))]
