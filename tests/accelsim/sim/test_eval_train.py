"""`accelsim eval MODEL --train`: the loss, gradients, updated parameters and optimizer state it prints and writes are
PyTorch's (torch.autograd, torch.optim) for the same weights, inputs and labels; bad labels, losses and optimizers
end in one line and exit 2."""
import numpy as np
import pytest

import accelsim
from accelsim.cli import main
from compiler import zoo
from compiler.errors import UserError
from compiler.train import Optimizer, parameters
from tests.compiler.train.train_checks import close, torch_optimizer
from tests.compiler.train.torch_graph import run_torch, torch

F = torch.nn.functional
RNG = np.random.default_rng(7)
ALEXNET = dict(batch=2, image=63, width=1 / 16, fc=32, classes=10)     # tests/compiler/train/test_train_conv.py
GPT2 = dict(batch=2, seq=8, layers=1, hidden=32, heads=2, mlp=64, vocab=128, max_positions=16)
FP64 = 1e-9             # fp64 differs from torch in summation order only (1e-11 seen with AdamW)
FP32 = 1e-5             # test_train_transformers.py::test_fp32_gradients_match_torch: 7e-7 seen


def argv(name: str, sizes: dict, dtype: str) -> list[str]:
    """The `eval --train` command line for a zoo model at `sizes`."""
    options = [item for key, value in sizes.items() if key != "batch" for item in ("--opt", f"{key}={value}")]
    return ["eval", name, "--train", "--batch", str(sizes["batch"]), *options, "--opt", f"dtype={dtype}"]


def step_of(tmp_path, command: list[str], feeds: dict) -> dict:
    """Run the CLI with `feeds` (labels included) as --inputs; returns the arrays it wrote to --out."""
    np.savez(tmp_path / "in.npz", **feeds)
    out = tmp_path / "out.npz"
    assert main([*command, "--inputs", str(tmp_path / "in.npz"), "--out", str(out), "--limit", "0"]) == 0
    with np.load(out) as data:
        return {key: data[key] for key in data.files}


def torch_step(graph, feeds: dict, labels: np.ndarray, params: list[str], optimizer: Optimizer):
    """PyTorch's loss, gradients and torch.optim's step on the zoo's graph; returns (loss, leaves, optimizer)."""
    env, leaves = run_torch(graph, feeds, params)
    logits = env[graph.outputs[0]]
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.tensor(labels).reshape(-1))
    loss.backward()
    before = {p: leaves[p].detach().clone() for p in params}
    update = torch_optimizer(optimizer, [leaves[p] for p in params])
    update.step()
    return loss.detach().numpy(), leaves, update, before


def test_alexnet_sgd_step_is_torchs(tmp_path, capsys):
    feeds = {"image": RNG.standard_normal((2, 3, 63, 63))}
    labels = np.array([1, 7])
    ours = step_of(tmp_path, argv("alexnet", ALEXNET, "fp64"), {**feeds, "labels": labels})
    printed = capsys.readouterr().out
    graph = zoo.build("alexnet", dtype="fp64", **ALEXNET)
    params = parameters(graph)
    loss, leaves, sgd, before = torch_step(graph, feeds, labels, params, Optimizer("sgd"))
    assert len(params) == 16 and sorted(ours) == sorted(
        ["loss"] + [f"{kind}/{p}" for p in params for kind in ("gradient", "updated")] + [f"state/sgd.v/{p}"
                                                                                          for p in params])
    close("loss", ours["loss"], loss, FP64)
    for p in params:
        close(f"gradient of {p}", ours[f"gradient/{p}"], leaves[p].grad.numpy(), FP64)
        close(f"update of {p}", ours[f"updated/{p}"] - before[p].numpy(), (leaves[p].detach() - before[p]).numpy(),
              FP64)
        close(f"momentum of {p}", ours[f"state/sgd.v/{p}"], sgd.state[leaves[p]]["momentum_buffer"].numpy(), FP64)
    assert printed.startswith(f"loss {float(loss):.6g} (cross_entropy; sgd: lr 0.01, momentum 0.9")
    row = next(line.split() for line in printed.splitlines() if line.startswith("fc8/weight "))
    moved = leaves["fc8/weight"].detach() - before["fc8/weight"]
    assert row == ["fc8/weight", "[10,", "32]", f"{float(torch.linalg.vector_norm(leaves['fc8/weight'].grad)):.4g}",
                   f"{float(torch.linalg.vector_norm(moved)):.4g}"], printed
    assert "16 parameters, 13,170 values" in printed and f"wrote {len(ours)} arrays" in printed


def test_gpt2_adamw_step_is_torchs(tmp_path, capsys):
    """Key biases get a zero gradient exactly (softmax ignores a shift common to every key): computed, it is rounding
    noise on both sides, so they are checked to be ~0 rather than against torch's noise."""
    feeds = {"input_ids": RNG.integers(0, 128, (2, 8))}
    labels = RNG.integers(0, 128, (2, 8))
    ours = step_of(tmp_path, argv("gpt2", GPT2, "fp64") + ["--optimizer", "adamw"], {**feeds, "labels": labels})
    graph = zoo.build("gpt2", dtype="fp64", **GPT2)
    key_biases = [p for p in parameters(graph) if p.endswith("k_proj/bias")]
    params = [p for p in parameters(graph) if p not in key_biases]
    loss, leaves, adamw, before = torch_step(graph, feeds, labels, params, Optimizer("adamw"))
    assert key_biases and all(f"gradient/{p}" in ours for p in parameters(graph))
    close("loss", ours["loss"], loss, FP64)
    for p in params:
        close(f"gradient of {p}", ours[f"gradient/{p}"], leaves[p].grad.numpy(), FP64)
        close(f"update of {p}", ours[f"updated/{p}"] - before[p].numpy(), (leaves[p].detach() - before[p]).numpy(),
              FP64)
        close(f"first moment of {p}", ours[f"state/adamw.m/{p}"], adamw.state[leaves[p]]["exp_avg"].numpy(), FP64)
        close(f"second moment of {p}", ours[f"state/adamw.v/{p}"], adamw.state[leaves[p]]["exp_avg_sq"].numpy(), FP64)
    for bias in key_biases:
        weight = ours[f"gradient/{bias.replace('/bias', '/weight')}"]
        assert np.abs(ours[f"gradient/{bias}"]).max() <= 1e-12 * np.abs(weight).max(), bias


def test_fp32_gradients_are_torchs_to_fp32_precision(tmp_path, capsys):
    """The zoo's default dtype against torch in fp64 on the same weights; updates are left to the fp64 tests (an fp32
    x' - x cancels to ulp(x) / (lr g))."""
    feeds = {"input_ids": RNG.integers(0, 128, (2, 8))}
    labels = RNG.integers(0, 128, (2, 8)).astype(np.int32)
    ours = step_of(tmp_path, argv("gpt2", GPT2, "fp32"), {**feeds, "labels": labels})
    graph = zoo.build("gpt2", **GPT2)
    params = [p for p in parameters(graph) if not p.endswith("k_proj/bias")]
    loss, leaves, _, _ = torch_step(graph, feeds, labels.astype(np.int64), params, Optimizer("sgd"))
    close("loss", ours["loss"], loss, FP32)
    for p in params:
        assert ours[f"gradient/{p}"].dtype == np.float32 and ours[f"updated/{p}"].dtype == np.float32
        close(f"gradient of {p}", ours[f"gradient/{p}"], leaves[p].grad.numpy(), FP32)


def test_random_labels_are_seeded_and_in_range(capsys):
    tiny = dict(GPT2, batch=1)
    first = accelsim.evaluate_step("gpt2", seed=3, **tiny)
    again = accelsim.evaluate_step("gpt2", seed=3, **tiny)
    other = accelsim.evaluate_step("gpt2", seed=4, **tiny)
    labels = first.feeds["labels"]
    assert labels.shape == (1, 8) and labels.dtype.kind == "i" and 0 <= labels.min() and labels.max() < 128
    assert len(np.unique(labels)) > 1 and np.array_equal(labels, again.feeds["labels"])
    assert not np.array_equal(labels, other.feeds["labels"])
    assert float(first.loss) == float(again.loss) != float(other.loss)
    target = accelsim.evaluate_step("gpt2", loss="mse", **tiny).feeds["target"]     # mse's name for its labels
    assert target.shape == (1, 8, 128) and target.dtype == np.float32 and 0.5 < target.std() < 1.5


def test_the_table_shows_limit_parameters_then_a_count(capsys):
    assert main(argv("gpt2", dict(GPT2, batch=1), "fp32") + ["--limit", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["parameter", "shape", "gradient", "L2", "update", "L2"]
    assert [line.split()[0] for line in lines[2:5]] == ["embed_tokens", "embed_positions", "layers.0/norm1/weight"]
    assert lines[5] == "... 17 more parameters (--limit 0 for all)" and lines[6].startswith("20 parameters, ")


def labels_file(tmp_path, labels) -> str:
    np.savez(tmp_path / "labels.npz", labels=labels)
    return str(tmp_path / "labels.npz")


@pytest.mark.parametrize("extra, labels, needles", [
    ([], np.zeros((1, 8), np.float32), ["labels are float32 [1, 8]", "integer class indices in [0, 128)"]),
    ([], np.zeros((1, 7), np.int64), ["labels are int64 [1, 7]", "of shape [1, 8]"]),
    ([], np.full((1, 8), 128), ["labels hold class 128", "[0, 128)"]),
    ([], np.full((1, 8), -1), ["labels hold class -1"]),
    (["--loss", "mse"], np.zeros((1, 8, 128), np.int64), ["labels are int64", "mse", "float targets"]),
    (["--loss", "model"], None, ["loss 'model'", "'logits'", "not a float scalar"]),
    (["--limit", "-1"], None, ["--limit -1"]),
])
def test_bad_labels_and_losses_are_one_line(extra, labels, needles, tmp_path, capsys):
    inputs = [] if labels is None else ["--inputs", labels_file(tmp_path, labels)]
    assert main(argv("gpt2", dict(GPT2, batch=1), "fp32") + extra + inputs) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("accelsim: error: ") and "Traceback" not in err
    for needle in needles:
        assert needle in err, err


def test_an_unknown_optimizer_is_named(capsys):
    with pytest.raises(SystemExit) as done:
        main(argv("gpt2", dict(GPT2, batch=1), "fp32") + ["--optimizer", "adam"])
    assert done.value.code == 2 and "invalid choice: 'adam'" in capsys.readouterr().err
    with pytest.raises(UserError, match="unknown optimizer 'adam'; allowed: sgd, adamw"):
        accelsim.evaluate_step("gpt2", optimizer="adam", **GPT2)
    with pytest.raises(UserError, match="takes no setting 'betas'"):
        accelsim.evaluate_step("gpt2", optimizer="adamw", settings={"betas": 0.9}, **GPT2)


def test_training_flags_need_train(capsys):
    assert main(["eval", "gpt2", "--opt", "layers=1", "--optimizer", "adamw"]) == 2
    assert "--optimizer applies to a training step: add --train" in capsys.readouterr().err
