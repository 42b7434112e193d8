"""Published GPU kernel times (validation/published/published.csv: 882 rows from LLMCompass's A100 measurements,
vLLM's DeepGEMM benchmark README, DeepGEMM's README, stas00/ml-engineering's MAMF table and OpenXLA's H100 GEMM table)
predicted again on the preset each row names.

Measured when the dataset was made (MAPE / Spearman / geometric mean of measured over predicted):
gemm_peak 5.1% / 1.000 / 0.987; gemm_a100_bf16 26.8% / 0.997 / 1.167; gemm_h100_fp8_block 48.6% / 0.838 / 1.990;
softmax 47.6%, layernorm 63.9%, gelu 76.1%. Now, with each suite's harness (the host time the source's timing adds,
as the source states it: dataset.yaml) in place of accelsim's launch, the A100 rows on the 80 GB board they ran on,
a GPU's loads issued a tile ahead, a whole-op L2 tile offered cut along k, and its tensor cores at their clock under
load: gemm_peak 2.8% / 1.000 / 1.030 (the clocks are set from these rows); gemm_a100_bf16 6.6% / 1.000 / 1.054 (the
rows under 100 us are mostly host time); gemm_h100_fp8_block 47.1% / 0.900 / 1.924 (vLLM's block-scaled fp8, priced
as block-scaled GEMMs; as plain fp8 49.6%); softmax 25.2%, layernorm 16.2%, gelu 9.6%; DeepGEMM's block-scaled fp8 on
H800, predicted cold as it was timed: 9.9% / 0.993 / 1.069 (as plain fp8 13.5%); XLA's H100 table, kernel time: bf16
44.3% / 0.990 / 2.005, TF32 48.8% / 0.976 / 2.260 (kernels under 10 us 3.6x fast, 30 us and more within 5-8%). The
targets in
validation/published/dataset.yaml are ratchets a little above those figures. Run this file directly for the table.
"""
from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
import yaml

from accelsim.cli import main
from accelsim.validate import cases, published_gpu
from accelsim.validate.score import metrics, score
from compiler.errors import UserError

ARCHS = Path(__file__).resolve().parents[3] / "archs"
A100_80GB_BYTES_PER_S = 2039e9   # the board the LLMCompass rows ran on (NVIDIA A100 datasheet)
PINNED = re.compile(r"^https://github\.com/[^/]+/[^/]+/blob/[0-9a-f]{40}/")


def peak_flops(arch: str, dtype: str) -> float:
    """Dense matrix peak read straight from the preset's YAML: count x MACs per cycle x 2 x clock."""
    data = yaml.safe_load((ARCHS / f"{arch}.yaml").read_text())
    for unit in data["compute"]:
        if unit["role"] == "matrix" and dtype in unit["macs_per_cycle"]:
            mhz = float((unit.get("clock") or data["clock"]).split()[0])
            return unit["count"] * unit["macs_per_cycle"][dtype] * 2 * mhz * 1e6
    raise AssertionError(f"{arch} has no matrix unit for {dtype}")


@pytest.fixture(scope="module")
def result():
    [scored] = score([published_gpu.DATA / "published.csv"])
    return scored


def test_every_row_has_a_source_and_a_sane_value():
    rows = published_gpu.read()
    assert len(rows) >= 60 and len({r.case for r in rows}) == len(rows), "too few rows, or case names repeat"
    with open(published_gpu.DATA / "published.csv", newline="") as f:
        raw = {r["case"]: r for r in csv.DictReader(f)}
    for r in rows:
        assert PINNED.match(raw[r.case]["source"]), f"{r.case}: source not pinned to a commit"
        assert raw[r.case]["where"] and raw[r.case]["variant"] and raw[r.case]["timing"], r.case
        case = cases.parse(r.key)
        assert r.key.split()[-1] in r.suite or r.suite == "gemm_peak", f"{r.case}: dtype does not match its suite"
        if case.macs:             # faster than the preset's peak is impossible; under 0.1% of it is a typo
            rate = 2 * case.macs / r.measured_s
            assert 1e-3 < rate / peak_flops(r.arch, case.dtype.value) < 1, r.case
        else:                     # one read and one write of fp16 cannot beat the measured board's HBM
            assert 2 * 2 * case.dims[0] * case.dims[1] / r.measured_s < A100_80GB_BYTES_PER_S, r.case


def test_conversions_by_hand():
    """Seconds from the figures as printed, worked by hand (not by the module's rule)."""
    seconds = {r.case: r.measured_s for r in published_gpu.read()}
    assert seconds["mamf-a100-bf16"] == pytest.approx(2 * 1024 * 10240 * 5120 / 271.2e12, rel=1e-5)   # 395.9 us
    assert seconds["mamf-h100-fp8"] == pytest.approx(2 * 1024 * 9216 * 14336 / 1402.6e12, rel=1e-5)  # 192.9 us
    assert seconds["llmcompass-a100-gemm-8192x8192x8192"] == pytest.approx(3.9614e-3)
    assert seconds["llmcompass-a100-softmax-4096x4096-colsweep"] == pytest.approx(4096 * 4096 / 204.5603028420465e9,
                                                                                 rel=1e-5)
    assert seconds["vllm-cutlass-h100-fp8-4096x4096x7168"] == pytest.approx(392.2e-6)


def test_read_refuses_a_row_without_source_or_with_wrong_seconds(tmp_path):
    text = (published_gpu.DATA / "published.csv").read_text().splitlines()
    header, first = text[0], text[1]
    (tmp_path / "no_source.csv").write_text(header + "\n" + first.replace("https://", "http://") + "\n")
    with pytest.raises(UserError, match="source"):
        published_gpu.read(tmp_path / "no_source.csv")
    (tmp_path / "wrong.csv").write_text(header + "\n" + first.replace(",0.00019,", ",0.00029,") + "\n")
    with pytest.raises(UserError, match="means"):
        published_gpu.read(tmp_path / "wrong.csv")


def test_every_suite_keeps_its_ratchet(result):
    """The CURRENT accuracy, per suite, must not get worse than dataset.yaml's targets."""
    rows = [f"{'case':<36} {'measured us':>12} {'predicted us':>12} {'error':>7}"]
    rows += [f"{r.case:<36} {r.measured_s * 1e6:>12.2f} {p * 1e6:>12.2f} {abs(p - r.measured_s) / r.measured_s:>7.1%}"
             for r, p in zip(result.dataset.rows, result.predicted_s)]
    print("\n".join(rows))
    for s in result.suites:
        print(f"{s.suite}: MAPE {s.metrics['mape']:.1%}, median {s.metrics['median']:.1%}, "
              f"Spearman {s.metrics['spearman']:.3f}, target {s.target.text()}")
    scored = {s.suite for s in result.suites if not s.target.report_only}
    assert scored == {"gemm_peak", "gemm_a100_bf16", "gemm_h100_fp8_block", "gemm_h800_fp8_block",
                      "gemm_h100_bf16_xla", "gemm_h100_tf32_xla", "softmax_a100_fp16", "layernorm_a100_fp16",
                      "gelu_a100_fp16"}, "a suite has lost its target"
    assert not result.misses, "; ".join(m.text() for m in result.misses)


def test_large_gemms_are_close(result):
    """Compute-bound GEMMs (1 ms and more, where the host time is under 2%) are what the GEMM model is for: their
    median error stays under 4% (measured 1.6%; 10.8% before the block scheduler dealt the whole grid) and none is
    off by more than 10%."""
    big = [(r, p) for r, p in zip(result.dataset.rows, result.predicted_s)
           if r.case.startswith("gemm") and r.measured_s >= 1e-3]
    m = metrics([r.measured_s for r, _ in big], [p for _, p in big], [r.case for r, _ in big])
    print(f"{m['count']} GEMMs of 1 ms or more: MAPE {m['mape']:.1%}, median {m['median']:.1%}, "
          f"worst {m['worst_case']}")
    assert m["count"] >= 8 and m["median"] <= 0.04
    assert all(0.9 < r.measured_s / p < 1.1 for r, p in big)


def one_row(tmp_path: Path, case: str) -> Path:
    """A folder whose published.csv holds the header and the row of `case` (its dataset.yaml is the test's)."""
    folder = tmp_path / "one"
    folder.mkdir()
    lines = (published_gpu.DATA / "published.csv").read_text().splitlines()
    row = next(line for line in lines if line.startswith(case + ","))
    (folder / "published.csv").write_text(lines[0] + "\n" + row + "\n")
    return folder


def test_the_harness_stands_in_for_the_launch(tmp_path):
    """A suite's harness (the host time the source's timing adds, as dataset.yaml cites it) replaces the one launch
    accelsim prices per kernel: 21 us for LLMCompass's matmuls where the A100 preset launches in 3 us."""
    folder = one_row(tmp_path, "llmcompass-a100-gemm-8192x64x64")
    (folder / "dataset.yaml").write_text("harness: {gemm_a100_bf16: 21 us}\n")
    [p] = published_gpu.predictions(folder / "published.csv")
    assert p.seconds == pytest.approx(p.kernel_s - 3e-6 + 21e-6, rel=1e-12)
    assert p.kernel_s == pytest.approx(cases.predict(cases.parse(p.key), "a100_80gb"), rel=1e-12)
    (folder / "dataset.yaml").write_text("harness: {gemm_a100_bf16: fast}\n")
    with pytest.raises(UserError, match="harness.gemm_a100_bf16"):
        published_gpu.predictions(folder / "published.csv")


def test_a_suite_timed_with_cold_caches_is_predicted_cold(tmp_path):
    """DeepGEMM flushed L2 before each call: dataset.yaml's `caches` says so, and the row is predicted with its
    activations in DRAM (slower than warm, where the 2 MiB and 14 MiB operands sit in the H100's 50 MB L2)."""
    folder = one_row(tmp_path, "deepgemm-h800-fp8-masked-1x1024x7168x2048")
    (folder / "dataset.yaml").write_text("caches: {gemm_h800_fp8_block: cold}\n")
    [cold] = published_gpu.predictions(folder / "published.csv")
    case = cases.parse(cold.key)
    assert cold.kernel_s == pytest.approx(cases.predict(case, "h100", caches="cold"), rel=1e-12)
    assert cold.kernel_s > 1.05 * cases.predict(case, "h100")
    (folder / "dataset.yaml").write_text("caches: {gemm_h800_fp8_block: lukewarm}\n")
    with pytest.raises(UserError, match="caches must map suites to one of warm, cold"):
        published_gpu.predictions(folder / "published.csv")


def test_validate_score_takes_the_folder(tmp_path, capsys):
    """`accelsim validate score` on a copy holding every 8th row prints the rows and passes against the committed
    targets loosened to report-only; held to a target the model cannot reach it exits 1 with a MISS line."""
    lines = (published_gpu.DATA / "published.csv").read_text().splitlines()
    folder = tmp_path / "few"
    folder.mkdir()
    (folder / "published.csv").write_text("\n".join([lines[0], *lines[1::8]]) + "\n")
    (folder / "dataset.yaml").write_text("targets: {}\n")
    assert main(["validate", "score", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "geometric mean of measured / predicted" in out and "gemm 64 12288 12288 bf16" in out
    (folder / "dataset.yaml").write_text("targets:\n  gemm_a100_bf16: {mape: 0.01}\n")
    assert main(["validate", "score", str(folder)]) == 1
    assert "MISS" in capsys.readouterr().out


if __name__ == "__main__":
    found = published_gpu.predictions()
    print(published_gpu.table(found))
    print(f"geometric mean of measured / predicted, all rows: {published_gpu.geomean_ratio(found):.3f}")
