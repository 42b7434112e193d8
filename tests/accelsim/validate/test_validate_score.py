"""accelsim.validate.score: metrics on hand-made numbers, a synthetic dataset scored both ways, the plot, bad input."""
import argparse
import csv
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from accelsim.arch import load_arch
from accelsim.validate import cases
from accelsim.commands.validate import add_score_parser
from accelsim.validate.score import load, metrics, ranks, score, spearman
from compiler.errors import UserError

ROOT = Path(__file__).resolve().parents[3]
GEMMS = ["gemm 128 128 128 fp32", "gemm 256 256 256 fp32", "gemm 512 512 512 fp32", "gemm 1024 1024 1024 fp32"]
NEAR = [1.05, 0.95, 1.10, 0.92]   # measured / predicted: MAPE about 7%, order kept
CONV = "conv 1 16 14 14 16 3 3 1 1 1 fp32"


def test_metrics_on_hand_made_numbers():
    m = metrics([1.0, 2.0, 4.0], [1.1, 1.0, 5.0], ["a", "b", "c"])   # relative errors 0.1, 0.5, 0.25
    assert m["count"] == 3
    assert m["mape"] == pytest.approx((0.1 + 0.5 + 0.25) / 3)
    assert m["median"] == pytest.approx(0.25)
    assert m["worst"] == pytest.approx(0.5) and m["worst_case"] == "b"
    assert m["spearman"] == pytest.approx(0.5)   # ranks 1,2,3 against 2,1,3


def test_spearman_ties_monotone_and_reversed():
    assert list(ranks(np.array([10, 20, 20, 30]))) == [1, 2.5, 2.5, 4]
    # y ranks 1, 2, 3.5, 5, 3.5: r = 8 / sqrt(10 * 9.5)
    assert spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(8 / math.sqrt(95))
    x = np.linspace(0.1, 3, 9)
    assert spearman(x, np.exp(x) ** 3) == pytest.approx(1.0)   # monotone, far from linear
    assert spearman(x, -x) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 2, 3], [4, 4, 4]))


def write_dataset(folder: Path, measured_over_predicted, recorded_over_measured=1.0, conv=True) -> Path:
    """A dataset on xeon_spr whose measured times are the current model's times scaled per case."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "archs" / "xeon_spr.yaml", folder / "arch.yaml")
    arch = load_arch(folder / "arch.yaml")
    rows = [("gemm", key, f) for key, f in zip(GEMMS, measured_over_predicted)]
    rows += [("conv", CONV, 3.0)] if conv else []   # far off, but report_only
    with open(folder / "measurements.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["suite", "case", "threads", "measured_s", "predicted_s"])
        for suite, key, factor in rows:
            measured = cases.predict(cases.parse(key), arch) * factor
            out.writerow([suite, key, 56, f"{measured:.6e}", f"{measured * recorded_over_measured:.6e}"])
    (folder / "dataset.yaml").write_text("host: synthetic\narch: arch.yaml\ntargets:\n"
                                         "  gemm: {mape: 0.15, spearman: 0.95}\n  conv: {report_only: true}\n")
    return folder


def handler_args(*argv):
    parser = argparse.ArgumentParser()
    add_score_parser(parser.add_subparsers(dest="validate_command", required=True))
    return parser.parse_args(["score", *argv])


def test_near_dataset_passes_when_repredicted(tmp_path, capsys):
    # predicted_s as recorded is 3x off: repredict must ignore it, --as-recorded must not
    folder = write_dataset(tmp_path / "near", NEAR, recorded_over_measured=3.0)
    [result] = score([folder], repredict=True)
    gemm, conv = result.suites
    assert (gemm.suite, gemm.metrics["count"]) == ("gemm", 4)
    assert gemm.metrics["mape"] == pytest.approx(np.mean([abs(1 / f - 1) for f in NEAR]), rel=1e-4)
    assert gemm.metrics["spearman"] == pytest.approx(1.0)
    assert result.misses == [] and conv.target.report_only and conv.metrics["mape"] > 0.5
    args = handler_args(str(folder))
    assert args.handler(args) == 0
    text = capsys.readouterr().out
    assert "PASS" in text and "MISS" not in text and "report only" in text

    [recorded] = score([folder / "measurements.csv"], repredict=False)
    assert [(m.suite, m.metric) for m in recorded.misses] == [("gemm", "mape")]
    assert recorded.misses[0].value == pytest.approx(2.0, rel=1e-4)


def test_fifty_percent_off_misses_and_says_by_how_much(tmp_path, capsys):
    folder = write_dataset(tmp_path / "slow", [1.5] * 4, conv=False)
    [result] = score([folder], repredict=True)
    [miss] = result.misses
    assert (miss.suite, miss.metric, miss.limit) == ("gemm", "mape", 0.15)
    assert miss.value == pytest.approx(1 / 3, rel=1e-4)   # |p - 1.5p| / 1.5p
    assert "MAPE 33.3% > target 15.0% (by 18.3 points)" in miss.text()
    args = handler_args(str(folder))
    assert args.handler(args) == 1
    out = capsys.readouterr().out
    assert "MISS" in out and "gemm" in out and "by 18.3 points" in out


def test_plot_writes_a_png(tmp_path, capsys):
    folder = write_dataset(tmp_path / "near", NEAR)
    out = tmp_path / "score.png"
    args = handler_args(str(folder), "--plot", str(out))
    assert args.handler(args) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_missing_column_names_file_and_column(tmp_path):
    folder = write_dataset(tmp_path / "bad", NEAR, conv=False)
    text = (folder / "measurements.csv").read_text().replace("measured_s", "measured")
    (folder / "measurements.csv").write_text(text)
    with pytest.raises(UserError, match=r"measurements\.csv: missing column measured_s"):
        load(folder)


@pytest.mark.parametrize("damage, needle", [
    (lambda d: (d / "dataset.yaml").unlink(), r"dataset\.yaml: no such file"),
    (lambda d: (d / "dataset.yaml").write_text("targets: {gemm: {mape: high}}\n"), r"targets\.gemm\.mape"),
    (lambda d: (d / "dataset.yaml").write_text("targets: {gemm: {mapd: 0.1}}\n"), r"targets\.gemm\.mapd: unknown"),
    (lambda d: (d / "measurements.csv").write_text("suite,case,threads,measured_s,predicted_s\ngemm,x,1,fast,1\n"),
     r"line 2: column measured_s"),
    (lambda d: (d / "arch.yaml").unlink(), r"arch\.yaml: no such file"),
])
def test_bad_dataset_is_a_user_error(tmp_path, damage, needle):
    folder = write_dataset(tmp_path / "bad", NEAR[:2], conv=False)
    damage(folder)
    with pytest.raises(UserError, match=needle):
        score([folder], repredict=True)


SECRET = "aws_secret_access_key = s3cr3tFAKE"


def outside(folder: Path) -> Path:
    """A secret file beside the dataset's folder, not in it."""
    secret = folder.parent / "credentials"
    secret.write_text(f"suite,case,measured_s,predicted_s\n{SECRET}\n")
    return secret


def setting(folder: Path, key: str, value: str) -> None:
    """dataset.yaml with its top-level `key` set to `value` (a key given twice is refused)."""
    path = folder / "dataset.yaml"
    lines = [line for line in path.read_text().splitlines() if not line.startswith(f"{key}:")]
    path.write_text("\n".join([*lines, f"{key}: {value}"]) + "\n")


@pytest.mark.parametrize("key, value, file", [
    ("measurements", "../credentials", "measurements"), ("measurements", "{secret}", "measurements"),
    ("arch", "../credentials", "arch"), ("arch", "{secret}", "arch"), ("arch", "sub/../../credentials", "arch"),
])
def test_a_file_dataset_yaml_names_outside_its_folder_is_refused(tmp_path, key, value, file):
    folder = write_dataset(tmp_path / "ds", NEAR[:2], conv=False)
    secret = outside(folder)
    setting(folder, key, value.format(secret=secret))
    with pytest.raises(UserError, match=rf"dataset\.yaml: {file}: .* resolves to .*credentials, outside .*ds; a "
                                        rf"dataset's files lie in its folder") as e:
        score([folder], repredict=True)
    assert "s3cr3t" not in str(e.value)


@pytest.mark.parametrize("name", ["measurements.csv", "arch.yaml", "dataset.yaml"])
def test_a_link_out_of_the_dataset_folder_is_refused(tmp_path, name):
    folder = write_dataset(tmp_path / "ds", NEAR[:2], conv=False)
    secret = outside(folder)
    (folder / name).unlink()
    (folder / name).symlink_to(secret)
    with pytest.raises(UserError, match=r"resolves to .*credentials, outside .*ds") as e:
        score([folder], repredict=True)
    assert "s3cr3t" not in str(e.value)


def test_the_files_dataset_yaml_names_are_read_from_its_folder(tmp_path, monkeypatch):
    folder = write_dataset(tmp_path / "ds", NEAR, conv=False)
    (folder / "sub").mkdir()
    (folder / "measurements.csv").rename(folder / "sub" / "times.csv")
    (folder / "arch.yaml").rename(folder / "xeon.yaml")
    setting(folder, "measurements", "sub/times.csv")
    setting(folder, "arch", "xeon.yaml")
    monkeypatch.chdir(tmp_path)
    [result] = score([Path("ds")], repredict=True)
    assert result.suites[0].metrics["count"] == 4 and result.misses == []


def test_a_yaml_error_in_dataset_yaml_names_the_line_not_its_text(tmp_path):
    folder = write_dataset(tmp_path / "ds", NEAR[:2], conv=False)
    (folder / "dataset.yaml").write_text("host: x\ntoken_s3cr3t: : b\n")
    with pytest.raises(UserError, match=r"dataset\.yaml: line 2: YAML syntax error: mapping values") as e:
        score([folder], repredict=True)
    assert "s3cr3t" not in str(e.value)


def published_copy(tmp_path: Path, source: Path, column: str, value: str) -> Path:
    """`source`'s folder copied into tmp/ds with the first row's `column` set to `value` and only that row kept."""
    folder = tmp_path / "ds"
    folder.mkdir(parents=True)
    shutil.copy(source.parent / "dataset.yaml", folder / "dataset.yaml")
    with open(source, newline="") as f:
        reader = csv.DictReader(f)
        row = next(reader)
        fields = reader.fieldnames
    with open(folder / source.name, "w", newline="") as f:
        out = csv.DictWriter(f, fields)
        out.writeheader()
        out.writerow({**row, column: value})
    return folder


@pytest.mark.parametrize("source, column, name", [
    (ROOT / "validation" / "collectives" / "published.csv", "system", "dgx_h100"),
    (ROOT / "validation" / "published" / "published.csv", "arch", "a100_80gb"),
])
def test_a_published_row_names_a_preset_or_a_file_beside_it_never_one_outside(tmp_path, source, column, name):
    preset = ROOT / "archs" / ("systems/" if column == "system" else "") / f"{name}.yaml"
    folder = published_copy(tmp_path, source, column, "../credentials")
    outside(folder)
    with pytest.raises(UserError, match=r"'\.\./credentials' resolves to .*credentials, outside .*ds and .*archs"):
        score([folder])
    (folder / "mine.yaml").write_text(preset.read_text())
    with open(folder / source.name) as f:
        text = f.read()
    (folder / source.name).write_text(text.replace("../credentials", "mine.yaml"))
    [beside] = score([folder])
    assert beside.predicted_s == score([published_copy(tmp_path / "preset", source, column, name)])[0].predicted_s


@pytest.mark.parametrize("source", [ROOT / "validation" / "collectives" / "published.csv",
                                    ROOT / "validation" / "published" / "published.csv"])
def test_a_published_csv_linked_from_outside_the_folder_is_refused(tmp_path, source):
    folder = published_copy(tmp_path, source, "case", "linked")
    (folder.parent / "elsewhere.csv").write_text((folder / source.name).read_text())
    (folder / source.name).unlink()
    (folder / source.name).symlink_to(folder.parent / "elsewhere.csv")
    with pytest.raises(UserError, match=r"published\.csv: 'published\.csv' resolves to .*elsewhere\.csv, outside .*ds; "
                                        r"a dataset's files lie in its folder"):
        score([folder])
