"""What a user gets wrong ends in one clear line and exit 2, before anything long runs: output folders that do
not exist, option values of the wrong type, names close to a real one, inputs of the wrong kind of number."""
import numpy as np
import pytest

import accelsim
from accelsim.args import MERGED
from accelsim.cli import main
from compiler.errors import UserError


@pytest.mark.parametrize("argv, flag", [
    (["run", "resnet18", "--json", "{missing}/r.json"], "--json"),
    (["run", "resnet18", "--csv", "{missing}/r.csv"], "--csv"),
    (["run", "resnet18", "--html", "{missing}/r.html"], "--html"),
    (["run", "resnet18", "--trace", "{missing}/t.json"], "--trace"),
    (["export", "resnet18", "--out", "{missing}/m.onnx"], "--out"),
    (["eval", "resnet18", "--out", "{missing}/o.npz"], "--out"),
    (["cosim", "resnet18", "--layer", "conv1", "--model-vcd", "{missing}/w.vcd"], "--model-vcd"),
    (["cosim", "resnet18", "--layer", "conv1", "--waves", "{missing}/w.vcd"], "--rtl-vcd"),
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


def _keywords(*functions) -> list[str]:
    import inspect

    return sorted({name for fn in functions for name, p in inspect.signature(fn).parameters.items()
                   if p.kind is not p.VAR_KEYWORD})


def _opt_cases():
    from accelsim.parallel.search import search
    from accelsim.rtl.cosim import cosim
    from accelsim.sim.api import compare, evaluate, run
    from accelsim.sim.build import build
    from accelsim.sim.model import load_model
    from accelsim.sim.train import train

    commands = [(["run", "gpt2"], (run, build, load_model)), (["eval", "gpt2"], (evaluate, load_model)),
                (["map", "gpt2"], (build, load_model)), (["compare", "gpt2", "--arch", "h100", "--arch", "a100"],
                                                          (compare, run)),
                (["train", "gpt2"], (train,)), (["cosim", "gpt2", "--layer", "x"], (cosim,)),
                (["plan", "gpt2", "--system", "dgx_h100", "--batch", "8"], (search,))]
    return [(argv, key) for argv, functions in commands for key in _keywords(*functions) if key not in MERGED]


@pytest.mark.parametrize("argv, key", _opt_cases())
def test_an_opt_naming_what_the_command_sets_itself_is_refused(argv, key, capsys, monkeypatch):
    """Every keyword the command's own call takes, given as --opt, is refused before anything runs (`run --opt
    dtype=int8` reached accelsim.sim.api.run twice: an internal TypeError)."""
    ran = []
    monkeypatch.setattr("accelsim.sim.build.build", lambda *a, **k: ran.append(1))
    assert main(argv + ["--opt", "layers=1", "--opt", f"{key}=1"]) == 2
    err = capsys.readouterr().err
    assert f"--opt {key}=1: " in err and ("use --" in err or "is not a model option" in err) and not ran


def test_an_opt_of_the_model_still_reaches_it(capsys):
    assert main(["eval", "alexnet", "--opt", "image=63", "--opt", "fc=16", "--opt", "classes=10", "--opt",
                 "dtype=fp64", "--opt", "width=0.1"]) == 0
    assert "fc8: shape [1, 10] float64" in capsys.readouterr().out


def test_a_negative_limit_is_refused(capsys):
    assert main(["run", "resnet18", "--opt", "image=32", "--limit", "-3"]) == 2
    assert "--limit -3: must be 0 (all) or more" in capsys.readouterr().err


def test_an_opt_the_command_folds_in_itself_says_the_same_as_its_flag(capsys):
    """--opt seq=8 and --seq 8 build the same model (model_options merges them); both at once is refused."""
    base = ["run", "gpt2", "--arch", "h100", "--fidelity", "roofline", "--opt", "layers=1", "--json", "-"]
    assert main(base + ["--opt", "seq=8"]) == 0
    by_opt = capsys.readouterr().out
    assert main(base + ["--seq", "8"]) == 0
    assert capsys.readouterr().out == by_opt
    assert main(base + ["--seq", "8", "--opt", "seq=16"]) == 2
    assert "--opt seq=16: --seq is given too; give one" in capsys.readouterr().err


@pytest.mark.parametrize("argv, said", [
    (["run", "resnet18", "--opt", "image=32", "--json", ""], "--json '': an empty name; name a file to write ('-' for"),
    (["train", "gpt2", "--opt", "layers=1", "--arch", "h100", "--html", ""], "--html '': an empty name"),
    (["train", "gpt2", "--opt", "layers=1", "--arch", "h100", "--limit", "-3"], "--limit -3: must be 0 (all) or more"),
    (["run", "gpt2", "--opt", "layers=1", "--system", "dgx_h100", "--parallel", "tp=8,tp=1"],
     "--parallel: tp is given twice (tp=8, tp=1); give each once")])
def test_what_would_be_ignored_or_half_taken_is_refused_before_anything_runs(argv, said, capsys, monkeypatch):
    ran = []
    monkeypatch.setattr("accelsim.sim.build.build", lambda *a, **k: ran.append(1))
    monkeypatch.setattr("accelsim.sim.train.train", lambda *a, **k: ran.append(1))
    assert main(argv) == 2
    assert said in capsys.readouterr().err and not ran
