"""A Result, its JSON and its pages name the arch and model files without a path of the machine they ran on: a
preset by its name, a file under the working folder relative to it, any other file by its name."""
import json
import shutil

from accelsim.arch.load import presets_dir
from accelsim.cli import main
from accelsim.results.result import Result, shown_file


def test_a_preset_is_named_a_file_in_the_working_folder_is_relative_and_another_is_its_name(tmp_path,
                                                                                             monkeypatch):
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / "my").mkdir(parents=True)
    elsewhere.mkdir()
    for folder in (work / "my", elsewhere):
        shutil.copy(presets_dir() / "tpu_v1.yaml", folder / "sa.yaml")
    monkeypatch.chdir(work)
    assert shown_file(str(presets_dir() / "tpu_v1.yaml")) == "tpu_v1"
    assert shown_file(str(presets_dir() / "systems" / "dgx_h100.yaml")) == "dgx_h100"
    assert shown_file(str(work / "my" / "sa.yaml")) == "my/sa.yaml" == shown_file("my/sa.yaml")
    assert shown_file(str(elsewhere / "sa.yaml")) == "sa.yaml"
    assert shown_file(str(tmp_path / "gone.onnx")) == "gone.onnx"
    assert shown_file("zoo model 'resnet18'") == "zoo model 'resnet18'"
    result = Result(model={"source": str(elsewhere / "m.onnx")}, arch={"file": str(presets_dir() / "a100.yaml")},
                    fidelity="tile", ops=[])
    assert result.model["source"] == "m.onnx" and result.arch["file"] == "a100"


def test_run_json_and_page_hold_no_absolute_path(tmp_path, monkeypatch, capsys):
    shutil.copy(presets_dir() / "tpu_v1.yaml", tmp_path / "copy.yaml")
    monkeypatch.chdir(tmp_path)
    for arch, shown in (("tpu_v1", "tpu_v1"), (str(presets_dir() / "tpu_v1.yaml"), "tpu_v1"),
                        (str(tmp_path / "copy.yaml"), "copy.yaml")):
        assert main(["run", "resnet18", "--opt", "image=32", "--opt", "width=0.125", "--arch", arch,
                     "--fidelity", "roofline", "--json", "r.json", "--html", "r.html"]) == 0
        capsys.readouterr()
        assert json.loads((tmp_path / "r.json").read_text())["arch"]["file"] == shown
        for name in ("r.json", "r.html"):
            text = (tmp_path / name).read_text()
            assert str(tmp_path) not in text and str(presets_dir()) not in text, (arch, name)
