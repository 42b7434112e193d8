"""Reports: the time split every figure draws, `run --html/--plot`, and the sweep page from hand-made rows
(the browser side of the same pages is tests/accelsim/report/test_report_browser.py)."""
import base64
import html
import re

import pytest

from accelsim.sim.api import run
from accelsim.arch import load_arch
from accelsim.cli import main
from accelsim.report import sweep_report
from accelsim.report.breakdown import (COMPUTE, attained, ceilings, intensity, layers, roofline_points, time_split,
                                       total_split)
from compiler.errors import UserError

PNG = b"\x89PNG\r\n\x1a\n"
SMALL = {"image": 32}


@pytest.fixture(scope="module")
def tile():
    return run("resnet18", arch="tpu_v1", **SMALL)


@pytest.fixture(scope="module")
def roofline():
    return run("resnet18", arch="tpu_v1", fidelity="roofline", **SMALL)


def test_time_split_is_the_engines_account_and_adds_up(tile):
    timed = [op for op in tile.ops if op.seconds > 0]
    assert timed and len(timed) < len(tile.ops)   # the flatten view takes no time and has no split
    for op in timed:
        split = time_split(op)
        assert sum(split.values()) == pytest.approx(op.seconds, rel=1e-9), op.name
        assert split[COMPUTE] == pytest.approx(op.seconds * op.compute_cycles / op.cycles, rel=1e-9)
        for level, n in op.stall_cycles_by_level.items():
            assert split.get(level, 0.0) == pytest.approx(op.seconds * n / op.cycles, rel=1e-9)
    totals = tile.totals()
    assert total_split(tile)["ddr3"] == pytest.approx(
        sum(op.seconds * op.stall_cycles_by_level.get("ddr3", 0) / op.cycles for op in timed))
    assert totals["stall_cycles_by_level"]["ddr3"] > 0.3 * totals["cycles"]   # batch 1 on DDR3 waits on weights
    assert sum(layer.seconds for layer in layers(tile)) == pytest.approx(tile.seconds)
    assert [layer.node for layer in layers(tile)][:3] == ["conv1", "bn1", "bn1_relu"]


def test_roofline_fidelity_blames_the_bound_for_the_rest(roofline):
    for op in (op for op in roofline.ops if op.seconds > 0):
        split = time_split(op)
        assert sum(split.values()) == pytest.approx(op.seconds)
        if op.bound == COMPUTE:
            assert split == {COMPUTE: op.seconds}
        else:   # a level (or latency) bound: compute overlaps it, the bound takes the rest
            assert set(split) == {COMPUTE, op.bound} and split[op.bound] == pytest.approx(
                op.seconds - op.compute_seconds)


def test_roofline_points_sit_under_every_ceiling(tile):
    roofs = ceilings(tile, load_arch("tpu_v1"))
    assert roofs.peaks["matrix peak (int8)"] == pytest.approx(2 * 65536 * 700e6)
    assert roofs.bandwidths["ddr3"] == 34e9
    conv1 = tile.ops[0]
    assert intensity(conv1, "ddr3") == pytest.approx(2 * conv1.macs / conv1.bytes_by_level["ddr3"])
    assert attained(conv1) == pytest.approx(2 * conv1.macs / conv1.seconds)
    # a kernel's point (an epilogue on a systolic array runs in the output stage beside the array, so alone it may add
    # less time than its work takes: only the kernel as a whole is under the roofs)
    for level, bandwidth in roofs.bandwidths.items():
        for x, y in roofline_points(tile, level):
            assert y <= max(roofs.peaks.values()) * (1 + 1e-9), level
            assert y <= bandwidth * x * (1 + 1e-9), level     # the tile engine never beats a level's bandwidth line


def test_run_html_and_plot(tmp_path, capsys):
    page, plots, data = tmp_path / "r.html", tmp_path / "png", tmp_path / "r.json"
    assert main(["run", "resnet18", "--opt", "image=32", "--arch", "tpu_v1", "--html", str(page), "--plot", str(plots),
                 "--json", str(data)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {page}" in out and "samples/s" in out
    names = sorted(p.name for p in plots.iterdir())
    assert names == ["energy.png", "roofline.png", "time_split.png", "traffic.png"]
    text = page.read_text()
    # self-contained: no fetch of any kind, and the figures are the --plot files, byte for byte
    assert not re.search(r"https?://|<link|<script src|<img src=\"(?!data:)", text)
    for name in names:
        assert base64.b64encode((plots / name).read_bytes()).decode() in text
        assert (plots / name).read_bytes()[:8] == PNG
    body = text[text.index('id="ops"'):]
    body = body[:body.index("</tbody>")]
    assert body.count("<tr>") == len(run("resnet18", arch="tpu_v1", **SMALL).ops) + 1   # + the header row
    assert "wait ddr3" in text and "energy ddr3" in text and "bytes weight_fifo" in text


def test_loop_nests_are_what_accelsim_map_prints(capsys):
    nests = run("resnet18", arch="tpu_v1", **SMALL).loop_nests()
    assert main(["map", "resnet18", "--opt", "image=32", "--arch", "tpu_v1", "--layer", "layer1.0/conv1"]) == 0
    printed = capsys.readouterr().out
    assert nests["layer1.0/conv1"] in printed and "for " in nests["layer1.0/conv1"]
    assert "view" in nests["flatten"] and "vector op" in nests["bn1"]


def test_run_html_at_roofline_fidelity_has_no_nests(tmp_path, capsys):
    page = tmp_path / "r.html"
    assert main(["run", "resnet18", "--opt", "image=32", "--fidelity", "roofline", "--html", str(page),
                 "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert captured.out.lstrip().startswith("{") and f"wrote {page}" in captured.err   # stdout stays JSON
    assert "no op is mapped" in page.read_text()


def test_unwritable_report_is_one_line_error(tmp_path, capsys):
    target = tmp_path / "missing" / "r.html"
    assert main(["run", "resnet18", "--opt", "image=32", "--html", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("accelsim: error: --html") and str(target) in err[0]


def _rows():
    rows = [{"rows": r, "dataflow": d, "model": "resnet18", "status": "ok", "reason": "",
             "latency_s": 1.0 / r * (1.5 if d == "os" else 1.0), "energy_j": r * 1e-3}
            for r in (8, 16, 32, 64) for d in ("ws", "os")]
    rows.append({"rows": 128, "dataflow": "ws", "model": "resnet18", "status": "invalid",
                 "reason": "tile <b>too big</b> for sram"})
    front = [r for r in rows if r["status"] == "ok" and r["dataflow"] == "ws"]
    return rows, front


def test_sweep_report_page_and_plot(tmp_path):
    rows, front = _rows()
    written = sweep_report(rows, front, ["latency_s", "energy_j"], html=str(tmp_path / "s.html"),
                           plot_dir=str(tmp_path / "png"))
    assert [p.name for p in written] == ["pareto.png", "s.html"]
    text = (tmp_path / "s.html").read_text()
    assert text.count('<tr class="front">') == len(front) == 4
    table = text[text.index('id="points"'):]
    assert table.count("<tr") == len(rows) + 1
    assert html.escape("tile <b>too big</b> for sram") in text and "<b>too big</b>" not in text   # escaped
    assert re.search(r"best latency_s.*?0\.01562", text, re.S)   # 1/64, the fastest point
    assert (tmp_path / "png" / "pareto.png").read_bytes()[:8] == PNG


def test_sweep_report_one_or_three_objectives(tmp_path):
    rows, front = _rows()
    for row in rows:
        if row["status"] == "ok":
            row["edp"] = row["latency_s"] * row["energy_j"]
    one = sweep_report(rows, front[:1], ["latency_s"], plot_dir=str(tmp_path / "one"))
    three = sweep_report(rows, front, ["latency_s", "energy_j", "edp"], plot_dir=str(tmp_path / "three"))
    assert [p.name for p in one] == ["pareto.png"]
    assert [p.name for p in three] == ["pareto.png", "pareto_latency_s_edp.png", "pareto_energy_j_edp.png"]


def test_sweep_report_point_without_a_number_shows_a_dash(tmp_path):
    rows, front = _rows()
    rows[2]["energy_j"] = None   # e.g. an area objective where no area model applies
    rows[3]["energy_j"] = float("nan")
    sweep_report(rows, front, ["latency_s", "energy_j"], html=str(tmp_path / "s.html"))
    text = (tmp_path / "s.html").read_text()
    cells = re.findall(r"<tr[^>]*>(.*?)</tr>", text[text.index('id="points"'):], re.S)
    assert [re.findall(r"<td[^>]*>([^<]*)</td>", c)[-3] for c in cells[3:5]] == ["-", "-"]   # energy_j column
    with pytest.raises(UserError, match="no objectives"):
        sweep_report(rows, front, [])


def test_sweep_fronts_are_drawn_per_model(tmp_path):
    rows, front = _rows()
    other = [dict(r, model="alexnet", latency_s=(r.get("latency_s") or 0) * 3) for r in rows]
    written = sweep_report(rows + other, front + [r for r in other if r["status"] == "ok" and r["dataflow"] == "ws"],
                           ["latency_s", "energy_j"], html=str(tmp_path / "s.html"))
    text = written[0].read_text()
    assert text.count('<tr class="front">') == 8 and "models</div><div class=\"v\">2<" in text
