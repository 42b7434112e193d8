"""`accelsim validate cpu` end to end on a tiny suite: the dataset folder it writes is complete and re-loadable."""
import csv

import pytest
import yaml

from accelsim.arch import load_arch
from accelsim.cli import main
from accelsim.validate import cpu
from accelsim.validate.cases import parse

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

TINY = {"gemm": ["gemm 64 64 64 fp32", "gemm 96 64 32 fp64"], "conv": ["conv 1 8 14 14 16 3 3 1 1 1 fp32"]}


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(cpu, "SUITES", TINY)
    monkeypatch.setattr(cpu, "SAMPLE_S", 1e-4)


def test_cli_writes_dataset(tiny, tmp_path, capsys):
    assert main(["validate", "cpu", "--suite", "all", "--repeats", "2", "--out", str(tmp_path)]) == 0
    with (tmp_path / "measurements.csv").open() as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert reader.fieldnames == ["suite", "case", "threads", "measured_s", "predicted_s"]
    expected = TINY["gemm"] + (TINY["conv"] if HAVE_TORCH else [])
    assert [r["case"] for r in rows] == expected
    for r in rows:
        assert r["suite"] == parse(r["case"]).kind and r["threads"] == "1"
        assert float(r["measured_s"]) > 0 and float(r["predicted_s"]) > 0
    dataset = yaml.safe_load((tmp_path / "dataset.yaml").read_text())
    for key in ("machine", "date", "commit", "software", "threads", "repeats", "arch", "targets"):
        assert key in dataset, key
    assert {"model", "cores", "flags"} <= set(dataset["machine"])
    assert {"python", "numpy", "blas", "torch"} <= set(dataset["software"])
    assert dataset["targets"] == {"gemm": {"mape": 0.12, "spearman": 0.95}, "conv": {"report_only": True}}
    assert dataset["threads"] == 1 and dataset["repeats"] == 2
    arch = load_arch(tmp_path / dataset["arch"])
    assert arch.matrix.count == 1   # priced on as many cores as threads were used
    out = capsys.readouterr().out
    assert "gemm: MAPE" in out and ("conv: MAPE" in out if HAVE_TORCH else "conv: skipped" in out)


def test_threads_set_the_modelled_cores(tiny, tmp_path):
    assert main(["validate", "cpu", "--suite", "gemm", "--threads", "2", "--repeats", "1", "--out", str(tmp_path)]) == 0
    assert load_arch(tmp_path / "arch.yaml").matrix.count == 2
    with (tmp_path / "measurements.csv").open() as f:
        assert {r["threads"] for r in csv.DictReader(f)} == {"2"}


@pytest.mark.parametrize("argv, message", [
    (["--suite", "fft"], "--suite 'fft': expected one of gemm, conv, all"),
    (["--threads", "0"], "--threads 0"),
    (["--repeats", "0"], "must be positive"),
    (["--arch", "no_such_arch"], "unknown arch"),
])
def test_bad_arguments_exit_2(tiny, tmp_path, capsys, argv, message):
    assert main(["validate", "cpu", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("accelsim: error:") and message in err
    assert not (tmp_path / "measurements.csv").exists()


def test_a_dataset_is_never_written_over(tmp_path, capsys, monkeypatch):
    (tmp_path / "dataset.yaml").write_text("targets: {gemm: {mape: 0.15}}  # hand-written\n")
    before = (tmp_path / "dataset.yaml").read_text()
    assert main(["validate", "cpu", "--suite", "gemm", "--repeats", "1", "--out", str(tmp_path)]) == 2
    assert "already holds files" in capsys.readouterr().err and (tmp_path / "dataset.yaml").read_text() == before
    assert not (tmp_path / "measurements.csv").exists()


def test_the_default_folder_is_new_and_outside_the_committed_datasets(tmp_path, monkeypatch):
    import accelsim.validate.cpu as cpu

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cpu, "run_suites", lambda *a, **k: [])
    monkeypatch.setattr(cpu, "mape", lambda rows: {})
    assert main(["validate", "cpu", "--suite", "gemm", "--repeats", "1"]) == 0
    (made,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert made.name.startswith("host_") and (made / "dataset.yaml").is_file()


def test_validate_cpu_and_the_committed_dataset_hold_one_gemm_target():
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    committed = yaml.safe_load((root / "validation" / "cpu" / "host_amd_epyc" / "dataset.yaml").read_text())
    assert committed["targets"]["gemm"] == cpu.TARGETS["gemm"]
