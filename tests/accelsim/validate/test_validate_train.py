"""Training validation cases: keys parse strictly, build the models their comments describe, predict every phase,
run in torch as the same function accelsim's numpy reference computes, and `validate cpu --suite train` writes a
row per phase (timed here on a tiny step only)."""
import csv
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from accelsim.arch import load_arch
from accelsim.cli import main
from accelsim.validate import cpu
from accelsim.validate.cases import parse, predict
from accelsim.validate.train_cases import MODELS, PHASES, step_cases
from compiler.errors import UserError

ROOT = Path(__file__).resolve().parents[3]
HOST = ROOT / "validation" / "cpu" / "host_amd_epyc_train" / "arch.yaml"
# parameters counted by hand from each model's layers (weights + biases; the block's two layer norms, four
# attention projections and 4 x 256 MLP)
PARAMETERS = {
    "mlp256": (784 * 256 + 256) + (256 * 256 + 256) + (256 * 10 + 10),
    "mlp1024": (784 * 1024 + 1024) + (1024 * 1024 + 1024) + (1024 * 10 + 10),
    "cnn": (3 * 9 * 16 + 16) + (16 * 9 * 32 + 32) + (32 * 8 * 8 * 128 + 128) + (128 * 10 + 10),
    "block256": 2 * 2 * 256 + 4 * (256 * 256 + 256) + (256 * 1024 + 1024) + (1024 * 256 + 256),
}

# the ops of each model, by hand: a key must always build the same Graph (a changed model is a new name), and
# block256 is built with compiler/zoo/layers.py, so a change there shows up here first
OPS = {
    "mlp256": {"Gemm": 3, "Relu": 2},
    "mlp1024": {"Gemm": 3, "Relu": 2},
    "cnn": {"Conv": 2, "Relu": 3, "MaxPool": 2, "Flatten": 1, "Gemm": 2},
    # 2 norms; Q, K, V, output and the MLP's 2 projections (MatMul + bias Add each); 3 head splits and 1 merge
    # (Reshape + Transpose each); K's transpose, QK, the scale, softmax, PV; 2 residual Adds; GELU from Erf
    # (Div, Erf, Add, Mul, Mul)
    "block256": {"LayerNormalization": 2, "MatMul": 6 + 2, "Add": 6 + 2 + 1, "Reshape": 4, "Transpose": 4 + 1,
                 "Mul": 1 + 2, "Softmax": 1, "Div": 1, "Erf": 1},
}


@pytest.fixture(scope="module")
def host():
    return load_arch(HOST)


def test_every_suite_step_parses_into_its_phases():
    for step in cpu.SUITES["train"]:
        cases = step_cases(step)
        assert [c.phase for c in cases] == list(PHASES)
        for case in cases:
            assert parse(case.key) == case and case.key == f"{step} {case.phase}"


@pytest.mark.parametrize("model", MODELS)
def test_every_model_predicts_each_phase(host, model):
    """(The committed dataset's re-score predicts every suite step; this names the model that fails.)"""
    seconds = [predict(case, host) for case in step_cases(f"train {model} 2 sgd fp32")]
    assert all(s > 0 for s in seconds)


def test_the_optimizer_phase_depends_on_the_parameters_not_the_batch(host):
    def seconds(step):
        return {c.phase: predict(c, host) for c in step_cases(step)}

    small, large = seconds("train mlp1024 8 adamw fp32"), seconds("train mlp1024 64 adamw fp32")
    assert small["optimizer"] == pytest.approx(large["optimizer"])
    assert large["forward"] > 2 * small["forward"] and large["backward"] > 2 * small["backward"]
    sgd = seconds("train mlp1024 8 sgd fp32")
    assert small["optimizer"] > sgd["optimizer"]        # AdamW reads and writes two moments, SGD one


@pytest.mark.parametrize("model", MODELS)
def test_models_have_the_parameters_counted_by_hand(model):
    from compiler.train import parameters

    graph = parse(f"train {model} 2 sgd fp32 forward").graph()
    assert sum(math.prod(graph.tensors[p].shape) for p in parameters(graph)) == PARAMETERS[model]


@pytest.mark.parametrize("model", MODELS)
def test_models_are_the_ops_counted_by_hand(model):
    from collections import Counter

    graph = parse(f"train {model} 2 sgd fp32 forward").graph()
    assert Counter(node.op for node in graph.nodes) == OPS[model]


@pytest.mark.parametrize("model", MODELS)
def test_torch_computes_what_the_numpy_reference_does(model):
    """The torch translation against compiler/ops/interpret.py on the same weights and inputs: logits and loss."""
    torch = pytest.importorskip("torch")
    from accelsim.validate.torch_train import torch_step
    from compiler.ops.interpret import run_graph

    step = torch_step(parse(f"train {model} 3 adamw fp32 forward"))
    graph = step.graph
    for name in graph.weights:
        if graph.weights[name] is None:
            graph.weights[name] = step.values[name].detach().numpy()
    feeds = {name: step.values[name].numpy() for name in graph.inputs}
    expected = run_graph(graph, feeds)[graph.outputs[0]]
    with torch.no_grad():
        got = step.outputs().numpy()
        loss = float(step.forward())
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    rows = expected.reshape(-1, expected.shape[-1]).astype(np.float64)
    log_prob = rows - rows.max(1, keepdims=True)
    log_prob -= np.log(np.exp(log_prob).sum(1, keepdims=True))
    assert loss == pytest.approx(-log_prob[np.arange(len(rows)), step.labels.numpy()].mean(), rel=1e-5)


@pytest.mark.parametrize("key, words", [
    ("train mlp999 16 sgd fp32 forward", ["MODEL 'mlp999'", "mlp256"]),
    ("train mlp256 16 adam fp32 forward", ["OPTIMIZER 'adam'", "adamw"]),
    ("train mlp256 16 sgd fp32 loss", ["PHASE 'loss'", "backward"]),
    ("train mlp256 16 sgd bf16 forward", ["DTYPE 'bf16'", "fp32"]),
    ("train mlp256 0 sgd fp32 forward", ["BATCH", "positive"]),
    ("train mlp256 16 sgd fp32", ["expected train MODEL BATCH OPTIMIZER DTYPE PHASE"]),
    ("trian mlp256 16 sgd fp32 forward", ["starts with one of", "train"]),
])
def test_bad_train_keys_are_named(key, words):
    with pytest.raises(UserError) as e:
        parse(key)
    assert all(w in str(e.value) for w in words) and repr(key) in str(e.value)


def test_a_misspelt_suite_is_a_clear_error(tmp_path, capsys):
    assert main(["validate", "cpu", "--suite", "trian", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--suite 'trian': expected one of gemm, conv, train, all (did you mean 'train'?)" in err
    assert not any(tmp_path.iterdir())


def test_cuda_refuses_a_training_case(tmp_path, capsys):
    assert main(["validate", "cuda", "--device", "cpu-interpreter", "--case", "train mlp256 4 sgd fp32 forward",
                 "--out", str(tmp_path)]) == 2
    assert "validate cpu --suite train" in capsys.readouterr().err


def test_cli_writes_a_row_per_phase(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    monkeypatch.setattr(cpu, "SUITES", {"train": ["train mlp256 4 sgd fp32"]})
    monkeypatch.setattr(cpu, "TRAIN_SAMPLE_S", 1e-3)
    assert main(["validate", "cpu", "--suite", "train", "--repeats", "2", "--out", str(tmp_path)]) == 0
    with (tmp_path / "measurements.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["suite"], r["case"]) for r in rows] == [
        (f"train_{p}", f"train mlp256 4 sgd fp32 {p}") for p in PHASES]
    assert all(float(r["measured_s"]) > 0 and float(r["predicted_s"]) > 0 for r in rows)
    dataset = yaml.safe_load((tmp_path / "dataset.yaml").read_text())
    assert dataset["targets"] == {"train_forward": {"mape": 0.35, "spearman": 0.9},
                                  "train_backward": {"mape": 0.35, "spearman": 0.95},
                                  "train_optimizer": {"report_only": True}}
    assert set(dataset["timing"]) == {"train"} and "foreach" in dataset["timing"]["train"]
    assert "train_optimizer: MAPE" in capsys.readouterr().out


def test_validate_cpu_and_the_committed_dataset_hold_one_training_target():
    committed = yaml.safe_load((HOST.parent / "dataset.yaml").read_text())
    assert committed["targets"] == {suite: cpu.TARGETS[suite] for suite in committed["targets"]}
    assert set(committed["targets"]) == {f"train_{p}" for p in PHASES}
