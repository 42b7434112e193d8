"""What `accelsim explain systolic` draws: a Film of Frames, one per cycle, each a grid of Cells (a PE's registers).

The models fill them (accelsim.explain.systolic for WS and IS, accelsim.explain.systolic_os for OS); the renderers
(text, HTML, GIF) only draw them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelsim.arch import Dataflow
from accelsim.sim import cycle

PAD = "pad"             # a zero the core is fed to fill a ragged tile
IO_REGISTERS = 3        # the core's (docs/rtl.md): the closed form's io_registers for WS and IS


@dataclass(frozen=True)
class Cell:
    """What one PE holds during one cycle. None: nothing valid there (the register holds a value no output reads).
    WS / IS: `w` is the weight register in use (the bank of the PE's activation, else the bank loaded last),
    `spare` the other bank; `w_new`: written at the edge before this cycle; `x` the activation passing east,
    `psum` the partial sum passing south. OS: `w` is B's value passing south, `x` A's passing east, `psum` the
    accumulator in use (of the latest fold to reach the PE), `spare` the other accumulator bank (a fold draining),
    `w_new` always False. Labels name the element (`B[1,2]`, `C[0,1] k=0..2`, or `pad`)."""
    w: int | None
    w_label: str
    w_new: bool
    spare: int | None
    spare_label: str
    x: int | None
    x_label: str
    psum: int | None
    psum_label: str          # e.g. "C[0,1] k0-2": the partial sum of C[0,1] over k = 0..2


@dataclass(frozen=True)
class Frame:
    cycle: int
    cells: tuple             # [rows][cols] of Cell
    w_in: str                # the weight row accepted in this cycle ("" if none)
    x_in: str                # the streamed row accepted in this cycle
    y_out: str               # the output row appearing in this cycle
    out: tuple               # [m][n] of C as the outputs so far left it: int or None
    out_final: tuple         # [m][n] bool: the value is the finished sum (the last k fold has passed)
    out_new: tuple           # (i, j) written in this cycle


@dataclass(frozen=True)
class Film:
    dataflow: Dataflow
    rows: int
    cols: int
    a: np.ndarray            # int [m, k]
    b: np.ndarray            # int [k, n]
    stationary: str          # "B" (WS: the weights), "A" (IS: the inputs) or "C" (OS: the outputs)
    streamed: str            # "A", "B" or (OS) "A and B"
    folds: int               # stationary tiles, F
    stream: int              # rows streamed per tile, T (OS: k-steps per output tile)
    cycles: int              # the cycle-level model's total: the last output appears in cycle `cycles - 1`
    closed_form: int         # docs/rtl.md / accelsim.price.systolic.native_cycles for the same GEMM
    busy: int                # PE-cycles holding a valid activation (OS: A value) (padding included)
    frames: tuple

    @property
    def m(self) -> int:
        return self.a.shape[0]

    @property
    def k(self) -> int:
        return self.a.shape[1]

    @property
    def n(self) -> int:
        return self.b.shape[1]

    @property
    def last_output_cycle(self) -> int:
        return max(f.cycle for f in self.frames if f.y_out)

    @property
    def io_registers(self) -> int:
        return cycle.OS_IO_REGISTERS if self.dataflow is Dataflow.OS else IO_REGISTERS

    @property
    def port_names(self) -> tuple:
        """What the two input ports of a Frame (w_in, x_in) carry."""
        return ("B in", "A in") if self.dataflow is Dataflow.OS else ("weights in", "streamed in")

    @property
    def marks(self) -> tuple:
        """One mark per line of a PE box (`lines`): S the stationary operand (OS: ↓ B passing south), → the value
        passing east, Σ the sum (OS: accumulating in place, and Σ' the other accumulator bank)."""
        return ("↓", "→", "Σ", "Σ'") if self.dataflow is Dataflow.OS else ("S", "→", "Σ")

    def lines(self, cell: Cell) -> tuple:
        """(value, label) of each line of a PE box, in the order of `marks`."""
        three = ((cell.w, cell.w_label), (cell.x, cell.x_label), (cell.psum, cell.psum_label))
        return three + ((cell.spare, cell.spare_label),) if self.dataflow is Dataflow.OS else three

    def formula(self) -> str:
        """docs/rtl.md's closed form with this GEMM's numbers in it."""
        r, c, f, t, io = self.rows, self.cols, self.folds, self.stream, self.io_registers
        return (f"ROWS + (F-1)*max(T,ROWS) + T + (ROWS-1) + (COLS-1) + {io} = {r} + {f - 1}*{max(t, r)} + {t} + "
                f"{r - 1} + {c - 1} + {io} = {self.closed_form}")
