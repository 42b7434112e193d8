"""`accelsim explain systolic`: a small GEMM through the PE grid, cycle by cycle, from the cycle-level model;
as text on the terminal, or animated in one offline HTML page or a GIF (--out).

Invariant: bad sizes, dataflows or file names are a UserError (one line, exit 2), raised before anything is written.
"""
from __future__ import annotations

import argparse

from accelsim.commands.command import Command
from compiler.errors import UserError


def add_explain(explain: argparse.ArgumentParser) -> None:
    """`explain`'s actions: `systolic`."""
    actions = explain.add_subparsers(dest="explain_command", metavar="WHAT", required=True)
    sy = actions.add_parser("systolic", help="a small GEMM C = A @ B moving through a systolic array, cycle by "
                            "cycle, from the cycle-level model (accelsim/engine/cycle/systolic.py; OS: "
                            "systolic_os.py)")
    sy.add_argument("--rows", type=int, required=True, help="PE rows (WS, IS: the k extent of one stationary "
                    "tile; OS: the m extent of one output tile)")
    sy.add_argument("--cols", type=int, required=True, help="PE columns")
    sy.add_argument("--m", type=int, required=True, help="rows of A and C")
    sy.add_argument("--k", type=int, help="columns of A, rows of B (default: --rows, one fold)")
    sy.add_argument("--n", type=int, help="columns of B and C (default: --cols)")
    sy.add_argument("--dataflow", default="ws", help="ws (the default): B stays in the PEs; is: A stays in the "
                    "PEs; os: C accumulates in the PEs (the output-stationary model, which has no RTL)")
    sy.add_argument("--seed", type=int, default=0, help="seed of the random operands, integers in -4..4 "
                    "(default 0)")
    sy.add_argument("--out", metavar="FILE.html|FILE.gif", help="write an animation (default: print every "
                    "cycle as text)")
    sy.add_argument("--cycle", type=int, metavar="N", help="print only cycle N (text view)")
    sy.add_argument("--fps", type=float, default=2.0, help="GIF frames (cycles) per second (default 2)")
    sy.set_defaults(handler=_systolic)


def _systolic(args) -> int:
    from accelsim.explain.render_text import box_width, describe, frame_text, matrix_text
    from accelsim.explain.systolic import explain

    out = args.out
    if out and not out.lower().endswith((".html", ".htm", ".gif")):
        raise UserError(f"--out {out}: write an animation to a .html or .gif file")
    if args.fps <= 0:
        raise UserError(f"--fps {args.fps}: must be positive")
    if out and args.cycle is not None:
        raise UserError("--cycle picks one cycle of the text view; drop it with --out")
    film = explain(args.rows, args.cols, args.m, args.k, args.n, args.dataflow, args.seed)
    if args.cycle is not None and not 0 <= args.cycle < film.cycles:
        raise UserError(f"--cycle {args.cycle}: this run has cycles 0..{film.cycles - 1}")
    print(describe(film), end="")
    if out and out.lower().endswith(".gif"):
        from accelsim.explain.render_gif import write_gif

        write_gif(film, out, args.fps)
        print(f"wrote {out}: {film.cycles} frames, one per cycle (0..{film.cycles - 1})")
    elif out:
        from accelsim.explain.render_html import write_html

        write_html(film, out)
        print(f"wrote {out}: {film.cycles} frames, one per cycle (0..{film.cycles - 1}); open it in a browser")
    else:
        frames = film.frames if args.cycle is None else (film.frames[args.cycle],)
        width = box_width(film)
        print()
        for frame in frames:
            print(frame_text(film, frame, width))
    print(matrix_text(film), end="")
    return 0


COMMAND = Command("explain", "teaching views drawn from the models (an animated systolic array)", add_explain)
