"""Reports label what they print: every figure axis names its unit, the sweep's tables print numbers for people
(thousands separators, significant digits, the objective's unit), and inference pages drop training columns."""
import re

import accelsim
from accelsim.report import figures, sweep_page
from accelsim.report.breakdown import ceilings
from accelsim.commands.sweep import cell_text
from accelsim.arch import load_arch

UNIT = re.compile(r"\((s|ms|us|ns|J|mJ|uJ|nJ|pJ|B|KiB|MiB|GiB|op/B[^)]*|op/s|k cells)\)")


def _drawn(monkeypatch, module):
    monkeypatch.setattr(module, "png", lambda figure: figure)     # keep the matplotlib figure, not its bytes


def test_every_run_figure_axis_names_its_unit(monkeypatch):
    _drawn(monkeypatch, figures)
    result = accelsim.run("resnet18", arch="tpu_v1", image=32)
    for figure in figures.run_figures(result, ceilings(result, load_arch("tpu_v1"))):
        ax = figure.png.axes[0]
        assert UNIT.search(ax.get_xlabel()), (figure.name, ax.get_xlabel())
        if figure.name == "roofline":
            assert ax.get_xlabel().startswith("arithmetic intensity (op/B") and ax.get_ylabel() == \
                "attained performance (op/s)"


def test_sweep_tables_and_axes_print_numbers_for_people(tmp_path, monkeypatch):
    _drawn(monkeypatch, sweep_page)
    rows = [{"rows": r, "bandwidth": 1.6e10, "model": "m", "status": "ok", "reason": "",
             "latency": 0.000123456789 * r, "energy": 1.9e-3 * r} for r in (1, 2)]
    units = {"latency": "s", "energy": "J"}
    (scatter,) = sweep_page.pareto_figures(rows, [True, True], ["latency", "energy"], units)
    ax = scatter.png.axes[0]
    assert ax.get_xlabel() == "latency (us), lower is better" and ax.get_ylabel() == "energy (mJ), lower is better"
    assert max(x for x, _ in ax.collections[0].get_offsets()) == 0.000123456789 * 2 / 1e-6
    monkeypatch.undo()
    sweep_page.sweep_report(rows, rows, ["latency", "energy"], html=str(tmp_path / "s.html"), units=units)
    page = (tmp_path / "s.html").read_text()
    table = page[page.index('id="points"'):]
    assert "latency (s)" in table and "energy (J)" in table and "123.5 us" in table and "1.9 mJ" in table
    assert "16,000,000,000" in table and ">0.000123" not in table     # data-sort keeps the raw value
    assert [cell_text(v) for v in (1.6e10, 0.000123456789, 25600000000, [8, 16], "ws")] == \
        ["16,000,000,000", "123.5 u", "25,600,000,000", "8,16", "ws"]
