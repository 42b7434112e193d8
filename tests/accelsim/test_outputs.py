"""What a command writes: never one of its own inputs (nor two outputs in one file), never into a folder (a stream
such as /dev/null or a FIFO is written straight into), always at the path it names, and on a full disk the previous
file stays whole with nothing left beside it."""
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import accelsim
from accelsim.cli import main

PREVIOUS = b'{"previous": "good result"}\n'


ROOT = Path(accelsim.__file__).parents[1]


@pytest.fixture
def files(tmp_path):
    """A one-Relu ONNX model, its inputs and an arch file, as a user's inputs."""
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "in.onnx")
    np.savez(tmp_path / "in.npz", x=np.ones((1, 4), np.float32))
    (tmp_path / "myarch.yaml").write_text((ROOT / "archs/tpu_v1.yaml").read_text())
    (tmp_path / "link.onnx").symlink_to("in.onnx")
    return tmp_path


def _contents(folder) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("argv, flag, said", [
    (["eval", "in.onnx", "--inputs", "in.npz", "--out", "in.npz"], "--out in.npz", "the inputs file in.npz"),
    (["run", "in.onnx", "--arch", "myarch.yaml", "--csv", "myarch.yaml"], "--csv myarch.yaml", "the arch file"),
    (["run", "in.onnx", "--json", "in.onnx"], "--json in.onnx", "the model file in.onnx, which this command reads"),
    (["run", "in.onnx", "--json", "link.onnx"], "--json link.onnx", "the model file in.onnx"),
    (["export", "in.onnx", "--out", "in.onnx"], "--out in.onnx", "the model file in.onnx"),
    (["compare", "in.onnx", "--arch", "tpu_v1", "--arch", "myarch.yaml", "--html", "myarch.yaml"],
     "--html myarch.yaml", "the arch file myarch.yaml"),
    (["run", "in.onnx", "--json", "r.txt", "--csv", "r.txt"], "--csv r.txt", "the --json file r.txt, which this "
                                                                             "command also writes"),
])
def test_an_output_never_overwrites_an_input(files, argv, flag, said, capsys, monkeypatch):
    monkeypatch.chdir(files)
    before = _contents(files)
    ran = []
    monkeypatch.setattr("accelsim.sim.build.build", lambda *a, **k: ran.append(1))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{flag}: that is {said}" in err and "internal error" not in err
    assert _contents(files) == before and not ran


def test_an_output_never_overwrites_the_models_external_data(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], np.ones(16, np.float32).tobytes(), raw=True)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], initializer=[weight])
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), "m.onnx",
                    save_as_external_data=True, location="weights.bin", size_threshold=0)
    before = _contents(tmp_path)
    ran = []
    monkeypatch.setattr("accelsim.sim.build.build", lambda *a, **k: ran.append(1))
    assert main(["run", "m.onnx", "--json", "weights.bin"]) == 2
    assert "--json weights.bin: that is the external data of the model m.onnx" in capsys.readouterr().err
    assert _contents(tmp_path) == before and not ran


@pytest.mark.parametrize("argv", [["run", "in.onnx", "--json", "{target}"], ["run", "in.onnx", "--html", "{target}"],
                                  ["eval", "in.onnx", "--out", "{target}"], ["export", "in.onnx", "--out", "{target}"],
                                  ["sweep", str(ROOT / "examples/sweep/systolic.yaml"), "--db", "{target}"]])
def test_a_folder_is_refused_before_anything_runs(files, argv, capsys, monkeypatch):
    monkeypatch.chdir(files)
    os.mkdir("target")
    ran = []
    monkeypatch.setattr("accelsim.sim.build.build", lambda *a, **k: ran.append(1))
    monkeypatch.setattr("accelsim.sim.model.load_model", lambda *a, **k: ran.append(1))
    assert main([a.format(target="target") for a in argv]) == 2
    err = capsys.readouterr().err
    assert f"{argv[-2]} target: is a folder" in err and "internal error" not in err and not ran
    assert not any(p.name.startswith(".") for p in files.iterdir())


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_sweep_database_is_a_file_not_a_stream(files, kind, capsys, monkeypatch):
    monkeypatch.chdir(files)
    target = "/dev/null" if kind == "device" else "target"
    if kind == "fifo":
        os.mkfifo("target")
    assert main(["sweep", str(ROOT / "examples/sweep/systolic.yaml"), "--db", target]) == 2
    assert f"--db {target}: is a FIFO or device" in capsys.readouterr().err


def test_a_stream_is_written_straight_into(files, capsys, monkeypatch):
    """/dev/null, /dev/stdout, a FIFO (a shell's >(jq ...)): nothing in them to keep, so no file is made beside."""
    import json
    import threading

    monkeypatch.chdir(files)
    assert main(["run", "in.onnx", "--arch", "h100", "--json", "/dev/null"]) == 0
    assert main(["eval", "in.onnx", "--out", "/dev/full"]) == 2
    assert "--out /dev/full: cannot write (No space left on device)" in capsys.readouterr().err
    os.mkfifo("pipe")
    got = []
    reader = threading.Thread(target=lambda: got.append(Path("pipe").read_text()))
    reader.start()
    assert main(["run", "in.onnx", "--arch", "h100", "--json", "pipe"]) == 0
    reader.join(30)
    assert json.loads(got[0])["model"]
    assert not os.path.exists("/dev/full.npz") and not any(p.name.startswith(".") for p in files.iterdir())


def test_a_plot_folder_that_is_a_file_is_refused_before_anything_runs(files, capsys, monkeypatch):
    monkeypatch.chdir(files)
    ran = []
    monkeypatch.setattr("accelsim.sim.build.build", lambda *a, **k: ran.append(1))
    before = _contents(files)
    assert main(["run", "in.onnx", "--plot", "in.npz"]) == 2
    assert "--plot in.npz: is not a folder" in capsys.readouterr().err and not ran and _contents(files) == before


def test_a_repeated_command_replaces_its_own_previous_output(files, capsys, monkeypatch):
    monkeypatch.chdir(files)
    (files / "y.npz").write_bytes(PREVIOUS)
    for _ in range(2):     # the second run reads nothing it writes: y.npz is its output, as it was the first's
        assert main(["eval", "in.onnx", "--inputs", "in.npz", "--out", "y.npz"]) == 0
    with np.load("y.npz", allow_pickle=False) as saved:
        assert saved.files == ["y"]
    assert not any(p.name.startswith(".") for p in files.iterdir())


def test_eval_writes_the_file_it_names_and_says(files, capsys, monkeypatch):
    monkeypatch.chdir(files)
    assert main(["eval", "in.onnx", "--inputs", "in.npz", "--out", "outputs"]) == 0
    assert "wrote 1 arrays to outputs\n" in capsys.readouterr().out
    assert not os.path.exists("outputs.npz")
    with np.load("outputs", allow_pickle=False) as saved:
        assert saved.files == ["y"] and (saved["y"] == 1).all()


@pytest.mark.parametrize("argv", [
    ["run", "{model}", "--json", "{target}"], ["run", "{model}", "--csv", "{target}"],
    ["run", "{model}", "--trace", "{target}"], ["run", "{model}", "--html", "{target}"],
    ["eval", "{model}", "--out", "{target}"], ["export", "{model}", "--out", "{target}"],
])
def test_a_full_disk_keeps_the_previous_output_whole(files, small_disk, argv, capsys):
    target = small_disk.path / "previous"
    target.write_bytes(PREVIOUS)
    small_disk.fill()
    assert main([a.format(model=files / "in.onnx", target=target) for a in argv]) == 2
    err = capsys.readouterr().err
    assert f"{target}: cannot write (No space left on device)" in err and "internal error" not in err
    assert target.read_bytes() == PREVIOUS
    assert sorted(p.name for p in small_disk.path.iterdir()) == ["filler", "previous"]
