"""`accelsim explain systolic`: every number in every frame is the register the cycle-level model holds, and it
is the element its label names (checked against A and B, not against the model); the last output appears in
the model's last cycle, which is docs/rtl.md's closed form; the probe leaves the model's results unchanged;
the HTML and GIF hold the same frames. WS and IS run the RTL core's model, OS the output-stationary one."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from accelsim.sim import cycle
from accelsim.explain.render_gif import write_gif
from accelsim.explain.render_html import film_data, write_html
from accelsim.explain.systolic import PAD, explain
from accelsim.rtl.workloads import suite

ACCELSIM = Path(sys.executable).with_name("accelsim")
ELEMENT = re.compile(r"^([ABC])\[(\d+),(\d+)\]$")
PARTIAL = re.compile(r"^C\[(\d+),(\d+)\] k=(\d+)(?:\.\.(\d+))?$")

# (rows, cols, m, k, n): one tile; ragged k and n with several folds; m below ROWS (loads not hidden); tall m
SHAPES = [(2, 2, 2, 2, 2), (3, 2, 4, 5, 3), (4, 3, 2, 9, 7), (2, 3, 7, 3, 4), (1, 1, 3, 2, 2)]


def element(film, label):
    name, i, j = ELEMENT.match(label).groups()
    return int({"A": film.a, "B": film.b}[name][int(i), int(j)])


def partial_sum(film, label):
    i, j, k0, k1 = PARTIAL.match(label).groups()
    k1 = k0 if k1 is None else k1
    ks = range(int(k0), int(k1) + 1)
    return int(sum(film.a[int(i), kk] * film.b[kk, int(j)] for kk in ks))


@pytest.mark.parametrize("dataflow", ["ws", "is", "os"])
@pytest.mark.parametrize("shape", SHAPES)
def test_every_register_holds_the_element_its_label_names(shape, dataflow):
    rows, cols, m, k, n = shape
    film = explain(rows, cols, m, k, n, dataflow, seed=sum(shape))
    held, passing = ("A", "B") if dataflow == "is" else ("B", "A")      # OS: `w` is B's value passing south
    seen = {"S": 0, "x": 0, "psum": 0}
    for frame in film.frames:
        for r, line in enumerate(frame.cells):
            for c, cell in enumerate(line):
                if cell.w is not None:
                    assert cell.w == (0 if cell.w_label == PAD else element(film, cell.w_label)), (frame.cycle, r, c)
                    assert cell.w_label == PAD or cell.w_label[0] == held
                    seen["S"] += 1
                if cell.x is not None:
                    assert cell.x == (0 if cell.x_label == PAD else element(film, cell.x_label)), (frame.cycle, r, c)
                    assert cell.x_label == PAD or cell.x_label[0] == passing
                    seen["x"] += 1
                if cell.psum is not None and cell.psum_label != PAD:
                    assert cell.psum == partial_sum(film, cell.psum_label), (frame.cycle, r, c, cell.psum_label)
                    seen["psum"] += 1
                if dataflow == "os" and cell.spare is not None:          # the other accumulator bank
                    assert cell.spare == (0 if cell.spare_label == PAD else partial_sum(film, cell.spare_label))
                    seen["spare"] = seen.get("spare", 0) + 1
    assert min(seen.values()) > 0, seen
    if dataflow == "os" and film.folds > 1 and rows > 1:      # folds overlap: one drains while the next adds
        assert seen["spare"] > 0
    # every streamed value visits every PE of its row: rows * cols PE-cycles per streamed row per fold
    assert film.busy == rows * cols * film.folds * film.stream


@pytest.mark.parametrize("dataflow", ["ws", "is"])
@pytest.mark.parametrize("shape", SHAPES)
def test_the_last_output_appears_in_the_models_last_cycle_as_docs_rtl_md_says(shape, dataflow):
    rows, cols, m, k, n = shape
    film = explain(rows, cols, m, k, n, dataflow)
    assert len(film.frames) == film.cycles
    assert [f.cycle for f in film.frames] == list(range(film.cycles))
    assert film.last_output_cycle == film.cycles - 1 == film.closed_form - 1
    f, t = film.folds, film.stream
    assert film.cycles == rows + (f - 1) * max(t, rows) + t + (rows - 1) + (cols - 1) + 3   # docs/rtl.md
    last = film.frames[-1]
    np.testing.assert_array_equal(np.array(last.out), film.a @ film.b)
    assert all(all(row) for row in last.out_final)
    # C fills in only as output rows appear: nothing before the first, everything final only at the end
    assert all(v is None for f in film.frames[:rows + cols + 1 + rows] for row in f.out for v in row)
    assert not all(all(row) for row in film.frames[-2].out_final)


@pytest.mark.parametrize("shape", SHAPES)
def test_os_last_output_appears_in_the_models_last_cycle_as_the_closed_form_says(shape):
    rows, cols, m, k, n = shape
    film = explain(rows, cols, m, k, n, "os", seed=3)
    assert [f.cycle for f in film.frames] == list(range(film.cycles))
    assert film.last_output_cycle == film.cycles - 1 == film.closed_form - 1
    f, t = film.folds, film.stream
    assert (f, t) == (-(-m // rows) * -(-n // cols), k)
    # accelsim/price/systolic.py for OS, two accumulator banks, 2 io registers (docs/rtl.md)
    assert film.cycles == rows + (f - 1) * max(t, rows) + t + (rows - 1) + (cols - 1) + 2
    last = film.frames[-1]
    np.testing.assert_array_equal(np.array(last.out), film.a @ film.b)
    assert all(all(row) for row in last.out_final)
    # the first output is fold 0's bottom row: its last k-step (cycle k - 1) + ROWS + COLS + 1
    first = next(fr.cycle for fr in film.frames if fr.y_out)
    assert first == k - 1 + rows + cols + 1
    assert all(v is None for fr in film.frames[:first] for row in fr.out for v in row)
    assert not all(all(row) for row in film.frames[-2].out_final)


def test_os_keeps_c_in_the_pes_and_drains_it_south_a_row_per_cycle():
    film = explain(3, 3, 3, 4, 3, "os", seed=1)            # one fold, k = 4 steps, accepted in cycles 0..3
    # PE(r, c) gets step s in cycle s + 1 + r + c: PE(2, 1) has A[2,0] and B[0,1] in cycle 4
    cell = film.frames[4].cells[2][1]
    assert (cell.x_label, cell.w_label) == ("A[2,0]", "B[0,1]")
    assert (cell.x, cell.w) == (film.a[2, 0], film.b[0, 1]) and cell.psum is None
    assert film.frames[5].cells[2][1].psum_label == "C[2,1] k=0"
    # column c drains from cycle 3 + 1 + 3 + c = 7 + c: PE(2, c) shows row 2, then row 1, then row 0
    for c in range(3):
        drained = [film.frames[7 + c + j].cells[2][c] for j in range(3)]
        assert [d.psum_label for d in drained] == [f"C[{2 - j},{c}] k=0..3" for j in range(3)]
        assert [d.psum for d in drained] == [int((film.a @ film.b)[2 - j, c]) for j in range(3)]
    # the de-skew aligns them: rows 2, 1, 0 of C appear in cycles 10, 11, 12 (= 3 + ROWS + COLS + 1 + j)
    assert [(f.cycle, f.y_out) for f in film.frames if f.y_out] == [
        (10 + j, f"C row {2 - j}, n=0..2 (final)") for j in range(3)]


def test_is_holds_a_in_the_pes_and_ws_holds_b():
    ws, is_ = explain(3, 3, 3, 3, 3, "ws", seed=1), explain(3, 3, 3, 3, 3, "is", seed=1)
    np.testing.assert_array_equal(ws.a, is_.a)
    cell_ws, cell_is = ws.frames[-3].cells[2][1], is_.frames[-3].cells[2][1]
    assert cell_ws.w_label == "B[2,1]" and cell_ws.w == ws.b[2, 1]
    assert cell_is.w_label == "A[1,2]" and cell_is.w == is_.a[1, 2]       # PE(r, c) holds A[c, r]: A.T


@pytest.mark.parametrize("rows, cols, ternary", [(3, 5, False), (4, 4, True)])
def test_the_probe_leaves_the_models_results_unchanged(rows, cols, ternary):
    for stim in suite(rows, cols, ternary):
        plain, waves = cycle.run(stim, acc_depth=64, waves=True)
        probed, probed_waves, probe = cycle.probe(stim, acc_depth=64)
        for name in ("w_accept", "x_accept", "y_cycle", "y_data", "y_last"):
            np.testing.assert_array_equal(getattr(plain, name), getattr(probed, name), name)
        assert plain.cycles == probed.cycles == probe.psum.shape[0]
        np.testing.assert_array_equal(waves.y_row, probed_waves.y_row)
        # the probe is of the registers: a valid activation moves one PE east per cycle, unchanged
        moved = probe.valid[:-1, :, :-1].astype(bool)
        np.testing.assert_array_equal(probe.value[1:, :, 1:][moved], probe.value[:-1, :, :-1][moved])
        assert probe.valid[1:, :, 1:][moved].all()


def run_cli(*args):
    return subprocess.run([str(ACCELSIM), "explain", "systolic", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, needle", [
    (["--rows", "0", "--cols", "2", "--m", "2"], "--rows 0: must be at least 1"),
    (["--rows", "2", "--cols", "17", "--m", "2"], "--cols 17"),
    (["--rows", "2", "--cols", "2", "--m", "65"], "--m 65"),
    (["--rows", "2", "--cols", "2", "--m", "2", "--k", "-1"], "--k -1"),
    (["--rows", "1", "--cols", "1", "--m", "64", "--k", "64", "--n", "64"], "at most 600"),
    (["--rows", "2", "--cols", "2", "--m", "2", "--dataflow", "xs"], "expected ws, os or is"),
    (["--rows", "2", "--cols", "2", "--m", "2", "--out", "x.png"], ".html or .gif"),
    (["--rows", "2", "--cols", "2", "--m", "2", "--cycle", "99"], "cycles 0..8"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle, tmp_path):
    proc = subprocess.run([str(ACCELSIM), "explain", "systolic", *args], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accelsim: error:") and needle in lines[0], proc.stderr
    assert not list(tmp_path.iterdir())                  # nothing written


def test_text_view_prints_the_grid_and_checks_c():
    proc = run_cli("--rows", "2", "--cols", "2", "--m", "2", "--cycle", "5")
    assert proc.returncode == 0, proc.stderr
    film = explain(2, 2, 2)
    assert f"cycle-level model: {film.cycles} cycles; the last output appears in cycle {film.cycles - 1}" \
        in proc.stdout
    assert "cycle 5" in proc.stdout and "cycle 4" not in proc.stdout
    cell = film.frames[5].cells[1][0]
    assert f"Σ  {cell.psum:>4} {cell.psum_label}" in proc.stdout
    assert "A @ B (numpy): equal" in proc.stdout


@pytest.mark.parametrize("dataflow", ["ws", "os"])
def test_html_page_is_offline_and_holds_the_films_frames(tmp_path, dataflow):
    film = explain(3, 2, 4, 5, 3, dataflow)
    page = tmp_path / "film.html"
    write_html(film, page)
    text = page.read_text()
    assert "http" not in text and "src=" not in text and "@import" not in text     # nothing fetched
    data = json.loads(re.search(r'<script id="film" type="application/json">(.*?)</script>', text, re.S).group(1))
    assert data == json.loads(json.dumps(film_data(film)))
    assert len(data["frames"]) == film.cycles and data["frames"][-1]["out"] == (film.a @ film.b).tolist()
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node to run the page's script")
    script = re.search(r"<script>\n(.*?)</script>", text, re.S).group(1)
    runner = tmp_path / "draw.js"
    runner.write_text(script + "\nconst data = " + json.dumps(data) + ";\n"
                      "for (const i of [0, data.frames.length - 1]) console.log(svgFrame(data, i));\n")
    proc = subprocess.run([node, str(runner)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    first, last = proc.stdout.split("</svg>")[:2]
    assert f"cycle {film.cycles - 1} of {film.cycles - 1}" in last and "cycle 0 of" in first
    drawn = re.findall(r'font-weight="bold">(-?\d+)</text>', last)     # final values of C, bold
    assert [int(v) for v in drawn] == (film.a @ film.b).ravel().tolist()


@pytest.mark.parametrize("dataflow", ["is", "os"])
def test_gif_has_one_frame_per_cycle(tmp_path, dataflow):
    film = explain(2, 2, 3, 3, 2, dataflow)
    path = tmp_path / "film.gif"
    write_gif(film, path, fps=4)
    with Image.open(path) as gif:
        assert gif.n_frames == film.cycles            # the held last frame merges into the last cycle's
        pictures = []
        for i in (0, film.cycles // 2, film.cycles - 1):
            gif.seek(i)
            pictures.append(np.asarray(gif.convert("L")))
    assert all((a != b).any() for a, b in zip(pictures, pictures[1:]))


def test_os_text_view_draws_b_a_and_both_accumulator_banks():
    proc = run_cli("--rows", "2", "--cols", "2", "--m", "4", "--k", "3", "--n", "2", "--dataflow", "os",
                   "--cycle", "6")
    assert proc.returncode == 0, proc.stderr
    film = explain(2, 2, 4, 3, 2, "os")
    assert f"+ 2 = {film.closed_form} cycles" in proc.stdout and "A @ B (numpy): equal" in proc.stdout
    cell = film.frames[6].cells[1][0]       # fold 1 adds in bank 1 while fold 0 drains bank 0
    assert cell.psum_label.startswith("C[3,0]") and cell.spare_label == "C[0,0] k=0..2"
    for mark, (value, label) in zip(("↓ ", "->", "Σ ", "Σ'"), film.lines(cell)):
        assert f"{mark} {value:>4} {label}" in proc.stdout
    # the port accepted fold 1's k-step 1 (steps go in back to back, 3 per fold) in cycle 4
    assert (film.frames[4].w_in, film.frames[4].x_in) == ("B row k=1, n=0..1", "A column k=1, m=2..3")


def test_cli_writes_html_and_gif(tmp_path):
    for name in ("f.html", "f.gif"):
        proc = run_cli("--rows", "2", "--cols", "2", "--m", "3", "--dataflow", "is", "--out", str(tmp_path / name))
        assert proc.returncode == 0, proc.stderr
        # IS, k = n = 2: F = ceil(k/2) * ceil(m/2) = 2 folds of T = n = 2 columns: 2 + 1*2 + 2 + 1 + 1 + 3 = 11
        assert f"wrote {tmp_path / name}: 11 frames, one per cycle (0..10)" in proc.stdout
        assert (tmp_path / name).stat().st_size > 1000
