"""A file the user gives that is not UTF-8 text is refused naming the file, the line and the byte (a UserError:
exit 2), by every reader of text: arch and system YAML, SCALE-Sim .cfg and topology .csv, a validation dataset,
a sweep spec."""
import shutil
from pathlib import Path

import pytest

from accelsim.arch import load_arch
from accelsim.arch.system_load import load_system
from accelsim.importers.scalesim import read_cfg
from accelsim.validate.score import load, score
from compiler.errors import UserError, read_text
from compiler.topology import load_topology

ROOT = Path(__file__).resolve().parents[2]
BAD = b"\xff\xfe"     # never valid in UTF-8 (a UTF-16 byte-order mark)


def _spoilt(source: Path, target: Path, line: int) -> Path:
    lines = source.read_bytes().split(b"\n")
    lines[line - 1] += b" # " + BAD
    target.write_bytes(b"\n".join(lines))
    return target


@pytest.mark.parametrize("reader, source, name", [
    (load_arch, ROOT / "archs/tpu_v1.yaml", "bad.yaml"),
    (load_system, ROOT / "archs/systems/dgx_h100.yaml", "bad.yaml"),
    (read_cfg, ROOT / "tests/golden/scalesim_16x8_ws.cfg", "bad.cfg"),
    (load_topology, ROOT / "tests/golden/scalesim_gemm.csv", "bad.csv"),
])
def test_every_reader_names_the_file_line_and_byte(reader, source, name, tmp_path):
    path = _spoilt(source, tmp_path / name, 2)
    with pytest.raises(UserError, match=rf"{name}: line 2: byte 0xff is not UTF-8"):
        reader(path)


def test_a_validation_dataset_with_a_bad_measurements_csv(tmp_path):
    folder = next(p for p in sorted((ROOT / "validation/cpu").iterdir()) if (p / "measurements.csv").is_file())
    shutil.copytree(folder, tmp_path / "ds")
    (tmp_path / "ds/measurements.csv").write_bytes(b"suite,case,measured_s,predicted_s\ngemm,x" + BAD + b",1,1\n")
    with pytest.raises(UserError, match=r"measurements.csv: line 2: byte 0xff"):
        load(tmp_path / "ds")


@pytest.mark.parametrize("name", ["published.csv", "dataset.yaml"])
def test_a_published_dataset_with_a_bad_file(name, tmp_path):
    shutil.copytree(ROOT / "validation/published", tmp_path / "pub")
    _spoilt(ROOT / "validation/published" / name, tmp_path / "pub" / name, 3)
    with pytest.raises(UserError, match=rf"{name}: line 3: byte 0xff"):
        score([tmp_path / "pub"], repredict=False)


def test_a_sweep_spec_that_is_not_utf8(tmp_path):
    from accelsim.sweep.spec import SpecError, load_spec

    (tmp_path / "spec.yaml").write_bytes(b"base: systolic_8x8\nmodels: [resnet18]\n# " + BAD + b"\n")
    with pytest.raises(SpecError, match=r"spec.yaml: line 3: byte 0xff is not UTF-8"):
        load_spec(tmp_path / "spec.yaml")


def test_text_reads_with_universal_newlines(tmp_path):
    (tmp_path / "crlf.txt").write_bytes("a\r\nb\rc\n\u00e9".encode())
    assert read_text(tmp_path / "crlf.txt") == "a\nb\nc\n\u00e9"
