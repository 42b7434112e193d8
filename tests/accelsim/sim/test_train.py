"""`accelsim train` and accelsim.sim.train: the step split by phase, micro-batches, memory against the device,
throughput, MFU and the time to train; and every bad input a clear error."""
import json
import re

import pytest

from accelsim.cli import main
from accelsim.sim.train import train
from compiler import zoo
from compiler.errors import UserError
from compiler.builder import Builder

GPT = dict(seq=32, layers=1, hidden=64, heads=2, vocab=512, max_positions=64)


def test_the_step_adds_up_and_the_json_carries_every_figure(capsys):
    assert main(["train", "gpt2", "--arch", "h100", "--batch", "4", "--seq", "32", "--opt", "layers=1", "--opt",
                 "hidden=64", "--opt", "heads=2", "--opt", "vocab=512", "--opt", "max_positions=64",
                 "--optimizer", "adamw", "--tokens", "1000000", "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    step = data["step"]
    assert step["seconds"] == pytest.approx(step["forward"] + step["backward"] + step["optimizer"])
    assert step["backward"] > step["forward"] > 0 and step["optimizer"] > 0
    memory = data["memory"]
    assert memory["peak"] == sum(memory[k] for k in ("weights", "gradients", "optimizer", "activations", "workspace"))
    assert memory["capacity"] == 80 * 2**30 and data["fits"] is True
    rate = data["throughput"]
    assert rate["samples_per_second"] == pytest.approx(4 / step["seconds"])
    assert rate["tokens_per_second"] == pytest.approx(4 * 32 / step["seconds"])
    assert 0 < data["mfu"] < 1 and data["model_flops"] > 0
    assert data["steps"] == -(-1_000_000 // (4 * 32))
    assert data["time_to_train_seconds"] == pytest.approx(data["steps"] * step["seconds"])
    assert data["version"] == 1 and data["arch"]["name"] == "h100"


def test_micro_batches_repeat_forward_and_backward_but_not_the_update():
    whole = train("gpt2", "h100", batch=8, optimizer="adamw", **GPT)
    split = train("gpt2", "h100", batch=8, microbatch=2, optimizer="adamw", **GPT)
    assert split.microsteps == 4 and whole.microsteps == 1 and split.batch == whole.batch == 8
    micro = train("gpt2", "h100", batch=2, optimizer="adamw", **GPT)
    # four passes at batch 2 (plus the gradient accumulation each adds), one update
    assert split.phase_seconds["forward"] == pytest.approx(4 * micro.phase_seconds["forward"])
    assert split.phase_seconds["backward"] > 4 * micro.phase_seconds["backward"]
    assert split.phase_seconds["optimizer"] == pytest.approx(micro.phase_seconds["optimizer"], rel=0.05)
    # activations scale with the micro-batch, the accumulators are held as gradients
    assert split.memory["activations"] < whole.memory["activations"]
    assert split.model_flops == pytest.approx(whole.model_flops, rel=0.02)


def test_the_json_counts_the_model_s_parameters_once(capsys):
    """model.parameters is the model's (compiler.zoo.parameter_count), not the step graph's weights, which also
    hold SGD's momentum (fp32) or, in bf16, AdamW's fp32 master copy, m and v. AlexNet with its grouped convolutions
    has Caffe's bvlc_alexnet count; GPT-2's, one block and its head tied to the embedding, is counted by hand."""
    assert main(["train", "alexnet", "--arch", "gtx580", "--batch", "1", "--fidelity", "roofline", "--json", "-"]) == 0
    alexnet = json.loads(capsys.readouterr().out)["model"]["parameters"]
    assert alexnet == zoo.parameter_count(zoo.build("alexnet", weights=False)) == 60_965_224
    h, vocab, positions, blocks = GPT["hidden"], GPT["vocab"], GPT["max_positions"], GPT["layers"]
    block = 2 * 2 * h + 4 * (h * h + h) + (h * 4 * h + 4 * h) + (4 * h * h + h)    # norms, attention, MLP
    by_hand = vocab * h + positions * h + blocks * block + 2 * h
    result = train("gpt2", "h100", batch=2, optimizer="adamw", fidelity="roofline", **GPT)
    assert result.to_dict()["model"]["parameters"] == by_hand == zoo.parameter_count(zoo.build("gpt2", **GPT))


def test_a_step_that_does_not_fit_says_so_with_the_numbers():
    # memory comes from liveness, not from the fidelity: the roofline's step says the same, 15 times sooner
    result = train("gpt2", "gtx580", batch=64, seq=1024, layers=2, fidelity="roofline")
    assert not result.fits
    note = result.notes[0]
    assert "does not fit" in note and "gtx580" in note and "3.00 GiB" in note and "largest:" in note
    assert "DOES NOT FIT" in result.table()


def mlp_without_a_float_output():
    b = Builder("argmax")
    x = b.input("x", (2, 4))
    y = b.node("MatMul", [x, b.weight("w", (4, 3))])
    return b.build([b.node("ArgMax", [y], axis=1)]) if False else b.build([b.node("Cast", [y], to=7)])


@pytest.mark.parametrize("argv, needles", [
    (["--batch", "-4"], ["--batch -4", "positive"]),
    (["--optimizer", "adam"], ["invalid choice: 'adam'"]),
    (["--batch", "8", "--microbatch", "3"], ["microbatch 3 does not divide batch 8"]),
    (["--arch", "tpu_v1"], ["tpu_v1", "cannot train", "int8"]),
    (["--dtype", "int8"], ["--dtype int8", "float"]),
    (["--epochs", "2"], ["--dataset-size"]),
    (["--samples", "10", "--tokens", "5"], ["one training length"]),
    (["--tokens", "1000"], ["language models"]),
])
def test_bad_input_is_one_clear_line(argv, needles, capsys):
    with pytest.raises(SystemExit) as exit_:
        code = main(["train", "gpt2" if "--tokens" not in argv else "resnet18", *(
            ["--opt", "layers=1", "--opt", "hidden=64", "--opt", "heads=2", "--opt", "vocab=512", "--seq", "8"]
            if "--tokens" not in argv else ["--opt", "image=32"]), "--arch", "h100", *argv])
        raise SystemExit(code)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err, err
    assert "Traceback" not in err


def test_a_model_with_no_float_output_has_no_loss_target():
    with pytest.raises(Exception) as error:
        train(mlp_without_a_float_output(), "h100")
    assert "cross-entropy needs float scores" in str(error.value)


@pytest.mark.parametrize("length, needle", [
    (dict(epochs=1e308, dataset_size=10**12), "epochs x dataset_size: inf samples"),
    (dict(epochs=5e6, dataset_size=10**12), "epochs x dataset_size: 5e+18 samples"),
    (dict(samples=10**30), "samples: over 2^99 samples"),
    (dict(tokens=10**400), "tokens: over 2^1323 samples"),
])
def test_a_length_past_any_count_is_refused_before_simulating(length, needle):
    """--epochs 1e308 with a dataset of 1e12 samples made inf samples (an internal OverflowError); a length is at most
    2^62 samples (4.6e18), and refused before the step is simulated."""
    with pytest.raises(UserError, match=re.escape(f"{needle}; at most 2^62")):
        train("gpt2", "h100", fidelity="roofline", **GPT, **length)


def test_the_longest_length_is_counted():
    assert train("gpt2", "h100", fidelity="roofline", samples=2**62, **GPT).samples == 2**62
