"""What a user gets wrong ends in one clear line and exit 2, before anything long runs: output folders that do
not exist, option values of the wrong type, names close to a real one, inputs of the wrong kind of number."""
import numpy as np
import pytest

import accelsim
from accelsim.cli import main
from compiler.errors import UserError


@pytest.mark.parametrize("argv, flag", [
    (["run", "resnet18", "--json", "{missing}/r.json"], "--json"),
    (["run", "resnet18", "--csv", "{missing}/r.csv"], "--csv"),
    (["run", "resnet18", "--html", "{missing}/r.html"], "--html"),
    (["run", "resnet18", "--trace", "{missing}/t.json"], "--trace"),
    (["export", "resnet18", "--out", "{missing}/m.onnx"], "--out"),
    (["eval", "resnet18", "--out", "{missing}/o.npz"], "--out"),
    (["cosim", "resnet18", "--layer", "conv1", "--vcd", "{missing}/w.vcd"], "--vcd"),
])
def test_outputs_are_checked_before_anything_runs(argv, flag, tmp_path, capsys, monkeypatch):
    ran = []
    monkeypatch.setattr("accelsim.sim.build.build", lambda *a, **k: ran.append(1))
    assert main([a.format(missing=tmp_path / "nowhere") for a in argv]) == 2
    err = capsys.readouterr().err
    assert f"{flag} " in err and "nowhere does not exist" in err and "internal error" not in err and not ran


@pytest.mark.parametrize("option, expected", [("image=abc", "expected an integer"), ("image=0", "at least 1"),
                                              ("image=1.5", "expected an integer"), ("width=abc", "a number")])
def test_a_model_option_of_the_wrong_type_is_named(option, expected, capsys):
    assert main(["run", "resnet18", "--opt", option]) == 2
    err = capsys.readouterr().err
    assert f"option {option.split('=')[0]}=" in err and expected in err and "internal error" not in err


@pytest.mark.parametrize("argv, suggestion", [(["run", "resnet81"], "did you mean 'resnet18'"),
                                              (["run", "resnet18", "--arch", "tpu_v2"], "did you mean 'tpu_v")])
def test_a_misspelt_name_gets_a_suggestion(argv, suggestion, capsys):
    assert main(argv) == 2 and suggestion in capsys.readouterr().err


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"accelsim {accelsim.__version__}"


@pytest.mark.parametrize("dtype", [np.complex64, np.int64, "U3", bool])
def test_inputs_of_another_kind_of_number_are_refused_not_cast(dtype):
    with pytest.raises(UserError, match=r"input .image. is .*, the model expects fp32.*does not cast"):
        accelsim.evaluate("resnet18", inputs={"image": np.zeros((1, 3, 32, 32), dtype)}, image=32)


def test_float_token_ids_are_refused_and_integer_ones_of_any_width_taken():
    with pytest.raises(UserError, match="'input_ids' is float32, the model expects int64"):
        accelsim.evaluate("gpt2", inputs={"input_ids": np.ones((1, 8), np.float32)}, layers=1, seq=8)
    _, out = accelsim.evaluate("gpt2", inputs={"input_ids": np.ones((1, 8), np.int32)}, layers=1, seq=8)
    assert np.isfinite(out["logits"]).all()
