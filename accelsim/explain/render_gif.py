"""The systolic film as an animated GIF: matplotlib draws each cycle's PE grid and C, Pillow writes the frames.

Invariant: one GIF frame per cycle of the cycle-level model, in order, holding that Frame's numbers (the
last frame is shown a little longer); the artists are made once and only their text and colours change.
"""
from __future__ import annotations

from accelsim.explain.film import Film, Frame
from compiler import output

PE_W, PE_H, GAP = 3.4, 1.35, 0.12        # a PE's box, in layout units (1 unit = 0.55 inch)
C_W, C_H = 0.85, 0.42                    # an element of C
INCH_PER_UNIT = 0.55
HOLD = 4                                 # extra copies of the last frame: a pause before the GIF loops
COLOURS = {"w": "#1f5fa8", "a": "#c0600a", "s": "#2a7a2a", "busy": "#fff3e6", "sum": "#eef7ee",
           "idle": "#fafafa", "new": "#fff59d", "spare": "#888888"}
LINE_COLOURS = ("w", "a", "s", "spare")  # the lines of a PE box, in the order of Film.marks


def write_gif(film: Film, path, fps: float = 2.0) -> int:
    """Write the GIF; returns the frames grabbed (cycles + HOLD)."""
    from matplotlib.animation import PillowWriter
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    grid_w = film.cols * (PE_W + GAP)
    n_lines = len(film.marks)                            # 3, or 4 for OS (its second accumulator bank)
    pe_h = PE_H * n_lines / 3
    width = 0.8 + grid_w + 0.6 + film.n * C_W + 0.4
    height = 1.6 + max(film.rows * (pe_h + GAP), (film.m + 1) * C_H) + 0.3
    fig = Figure(figsize=(width * INCH_PER_UNIT, height * INCH_PER_UNIT))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)                               # y grows downwards, as on the page
    ax.axis("off")
    mono = {"family": "monospace", "size": 7}
    title = ax.text(0.2, 0.45, "", fontsize=11, weight="bold", va="center")
    ports = ax.text(0.2, 1.0, "", fontsize=7, va="center", color="#444")
    boxes, lines = [], []
    for r in range(film.rows):
        ax.text(0.1, 1.6 + r * (pe_h + GAP) + pe_h / 2, f"row {r}", fontsize=6, color="#888", va="center")
        for c in range(film.cols):
            x0, y0 = 0.8 + c * (PE_W + GAP), 1.6 + r * (pe_h + GAP)
            if r == 0:
                ax.text(x0 + 0.05, 1.5, f"col {c}", fontsize=6, color="#888")
            boxes.append(ax.add_patch(Rectangle((x0, y0), PE_W, pe_h, facecolor=COLOURS["idle"], edgecolor="#999")))
            lines.append([ax.text(x0 + 0.1, y0 + (i + 0.55) * pe_h / n_lines, "", color=COLOURS[key], va="center",
                                  fontdict=mono) for i, key in enumerate(LINE_COLOURS[:n_lines])])
    cx = 0.8 + grid_w + 0.6
    ax.text(cx, 1.5, "C = A @ B", fontsize=7, weight="bold")
    c_boxes, c_text = {}, {}
    for i in range(film.m):
        for j in range(film.n):
            c_boxes[i, j] = ax.add_patch(Rectangle((cx + j * C_W, 1.6 + i * C_H), C_W, C_H, facecolor="white",
                                                   edgecolor="#ccc"))
            c_text[i, j] = ax.text(cx + j * C_W + 0.08, 1.6 + (i + 0.55) * C_H, "", fontdict=mono, va="center")

    def draw(frame: Frame) -> None:
        title.set_text(f"{film.dataflow.value.upper()}  cycle {frame.cycle} of {film.cycles - 1}")
        ports.set_text("   ".join(f"{name}: {text}" for name, text in zip(
            film.port_names + ("out",), (frame.w_in, frame.x_in, frame.y_out)) if text))
        for box, texts, cell in zip(boxes, lines, (cell for row in frame.cells for cell in row)):
            box.set_facecolor(COLOURS["busy"] if cell.x is not None else
                              COLOURS["sum"] if cell.psum is not None else COLOURS["idle"])
            parts = film.lines(cell)
            if n_lines == 3 and cell.spare is not None:    # WS, IS: the other weight bank, in brackets
                parts = ((cell.w, f"{cell.w_label} ({cell.spare})"),) + parts[1:]
            for text, mark, (value, label) in zip(texts, film.marks, parts):
                text.set_text(f"{mark} {value:>4} {label}" if value is not None else f"{mark}    .")
            texts[0].set_backgroundcolor(COLOURS["new"] if cell.w_new else "none")
        new = set(frame.out_new)
        for (i, j), text in c_text.items():
            value = frame.out[i][j]
            text.set_text("" if value is None else str(value))
            text.set_color("black" if frame.out_final[i][j] else "#999")
            text.set_weight("bold" if frame.out_final[i][j] else "normal")
            c_boxes[i, j].set_facecolor(COLOURS["new"] if (i, j) in new else "white")

    writer = PillowWriter(fps=fps)
    grabbed = 0
    with output.replacing(path) as temporary, writer.saving(fig, str(temporary), dpi=100):
        for frame in film.frames + (film.frames[-1],) * HOLD:
            draw(frame)
            writer.grab_frame()
            grabbed += 1
    return grabbed
