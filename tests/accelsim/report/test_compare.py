"""`accelsim compare`: the same model on several archs side by side, and the TPU v1 DDR3 / GDDR5 example
of docs/compare.md, whose commands are run here and whose shown output is checked against what they print."""
import contextlib
import dataclasses
import io
import re
import shlex
from pathlib import Path

import pytest

from accelsim.arch import load_arch
from accelsim.cli import main
from accelsim.sim.api import compare
from accelsim.report.compare import totals_rows

ROOT = Path(__file__).resolve().parents[3]
GDDR5 = ROOT / "examples" / "archs" / "tpu_v1_gddr5.yaml"
DOC = ROOT / "docs" / "compare.md"
SMALL = {"image": 32}


@pytest.fixture(scope="module")
def pair():
    return compare("resnet18", [load_arch("tpu_v1"), load_arch(GDDR5)], **SMALL)


def test_the_gddr5_preset_changes_only_the_weight_memory():
    base, fast = load_arch("tpu_v1"), load_arch(GDDR5)
    assert dataclasses.replace(fast, name=base.name, description=base.description, source_file=base.source_file,
                               memory=base.memory) == base
    assert fast.memory[1:] == base.memory[1:]
    ddr3, gddr5 = base.memory[0], fast.memory[0]
    assert (ddr3.name, gddr5.name) == ("ddr3", "gddr5")
    assert (ddr3.bandwidth_bytes_per_s, gddr5.bandwidth_bytes_per_s) == (34e9, 180e9)
    assert gddr5.read_energy_j == pytest.approx(64 * 8 * 14e-12, rel=0.01)   # 14 pJ/bit, per 64-byte access
    assert (gddr5.latency_s, gddr5.capacity_bytes, gddr5.holds) == (ddr3.latency_s, ddr3.capacity_bytes, ddr3.holds)


def test_faster_weight_memory_cuts_the_wait_on_it_and_nothing_else_moves(pair):
    ddr3, gddr5 = pair
    assert [op.name for op in ddr3.ops] == [op.name for op in gddr5.ops]
    t0, t1 = ddr3.totals(), gddr5.totals()
    # the same bytes cross every level: only their speed (and price) changed
    assert t0["bytes_by_level"]["ddr3"] == t1["bytes_by_level"]["gddr5"]
    for level in ("weight_fifo", "unified_buffer", "accumulators"):
        assert t0["bytes_by_level"][level] == t1["bytes_by_level"][level]
    # the same accesses, priced at 7.2 instead of 10.4 nJ
    ratio = t1["energy_by_component_j"]["gddr5"] / t0["energy_by_component_j"]["ddr3"]
    assert ratio == pytest.approx(7.2 / 10.4, rel=1e-6)
    wait0 = t0["stall_cycles_by_level"]["ddr3"] / t0["cycles"]
    wait1 = t1["stall_cycles_by_level"].get("gddr5", 0) / t1["cycles"]
    assert wait0 > 0.25 and wait1 < wait0 / 3
    assert 1.2 < ddr3.seconds / gddr5.seconds < 180 / 34
    for a, b in zip(ddr3.ops, gddr5.ops):
        assert b.seconds <= a.seconds * (1 + 1e-9), a.name   # no op gets slower from faster DRAM


def test_totals_side_by_side_are_the_results_own(pair):
    ddr3, gddr5 = pair
    rows = {metric: (shown, values) for metric, shown, values in totals_rows(list(pair))}
    assert rows["latency"][1] == [ddr3.seconds, gddr5.seconds]
    assert rows["speed-up"][1] == pytest.approx([1.0, ddr3.seconds / gddr5.seconds])
    assert rows["bytes ddr3"][0][1] == "-" and rows["bytes gddr5"][0][0] == "-"
    shares = [rows[m][1] for m in rows if m == "computing" or m.startswith("waiting on ")]
    assert [sum(col) for col in zip(*shares)] == pytest.approx([1.0, 1.0])   # each arch's time, all of it
    metrics = list(rows)
    assert metrics.index("waiting on gddr5") == metrics.index("waiting on ddr3") + 1   # level 0 beside level 0


def test_cli_prints_per_arch_tables_then_totals(capsys, tmp_path):
    html, plots = tmp_path / "cmp.html", tmp_path / "png"
    assert main(["compare", "resnet18", "--opt", "image=32", "--arch", "tpu_v1", "--arch", str(GDDR5),
                 "--limit", "5", "--html", str(html), "--plot", str(plots)]) == 0
    out = capsys.readouterr().out
    assert out.index("on tpu_v1: time") < out.index("on tpu_v1_gddr5: time") < out.index(": totals")
    assert out.count("... 65 more ops") == 2 and "│conv1 " in out
    # at 32 x 32 the weight-bound layers dominate: GDDR5 runs the whole model 3.45x faster
    assert re.search(r"│speed-up\s+│\s+1\.00x │\s+3\.\d\dx│", out)
    assert sorted(p.name for p in plots.iterdir()) == sorted(
        ["compare_time.png", "compare_layers.png", "compare_energy.png", "compare_traffic.png",
         "roofline_0_tpu_v1.png", "roofline_1_tpu_v1_gddr5.png"])
    page = html.read_text()
    assert 'id="ops-0"' in page and 'id="ops-1"' in page and 'id="totals"' in page
    assert page.count("<figure") == 6 and "http://" not in page and "https://" not in page


@pytest.mark.parametrize("args, needles", [
    (["--arch", "tpu_v1"], ["two or more --arch", "tpu_v1"]),
    (["--arch", "tpu_v1", "--arch", "no_such_chip"], ["no_such_chip"]),
    (["--arch", "tpu_v1", "--arch", "tpu_v4", "--limit", "0"], ["--limit 0"]),
])
def test_bad_input_is_one_line(capsys, args, needles):
    assert main(["compare", "resnet18", "--opt", "image=32", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("accelsim: error:"), err
    for needle in needles:
        assert needle in err[0]


# -- docs/compare.md: every command is run, every output line shown must be one it prints -------------------

NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", text, re.S)


def _same(shown: str, printed: str) -> bool:
    """The same line up to drift in the model: numbers within 5% (1 point for percentages), the rest equal."""
    if " ".join(NUMBER.sub("#", shown).split()) != " ".join(NUMBER.sub("#", printed).split()):
        return False
    for a, b, tail in zip(NUMBER.findall(shown), NUMBER.findall(printed), re.split(NUMBER, shown)[1:]):
        x, y = float(a), float(b)
        if abs(x - y) > (1.0 if tail.startswith("%") else 0.05 * max(abs(x), abs(y)) + 1e-12):
            return False
    return True


def _check_shown(shown_blocks: list[str], printed: str) -> None:
    lines = printed.splitlines()
    at = 0
    for block in shown_blocks:
        for line in block.strip("\n").splitlines():
            found = next((i for i in range(at, len(lines)) if _same(line, lines[i])), None)
            assert found is not None, f"docs/compare.md shows a line the command no longer prints:\n{line}\n" \
                                      f"(re-run the command and paste its output)"
            at = found + 1


def _run_doc_block(kind: str, code: str, tmp_path: Path, monkeypatch) -> str:
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        if kind == "python":
            exec(compile(code, str(DOC), "exec"), {"__name__": "docs_compare"})
        else:
            for line in code.strip().splitlines():
                args = shlex.split(line)[1:]
                args = [str(tmp_path / a) if a.startswith(("alexnet.", "alexnet_", "resnet18.", "resnet18_"))
                        else a for a in args]   # the report examples write into the test's folder
                assert main(args) == 0, line
    return out.getvalue()


def test_docs_compare_md_commands_print_what_it_shows(tmp_path, monkeypatch):
    blocks = _blocks(DOC.read_text())
    runnable = [i for i, (kind, _) in enumerate(blocks) if kind in ("sh", "python")]
    assert len(runnable) == 3
    for n, i in enumerate(runnable):
        end = runnable[n + 1] if n + 1 < len(runnable) else len(blocks)
        shown = [code for kind, code in blocks[i + 1:end] if kind == "text"]
        printed = _run_doc_block(*blocks[i], tmp_path, monkeypatch)
        _check_shown(shown, printed)
    assert (tmp_path / "alexnet.html").stat().st_size > 50_000
    assert (tmp_path / "resnet18_png" / "roofline.png").is_file()
