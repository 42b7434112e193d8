"""The model zoo: tiny variants run the same in onnxruntime, the Graph reference and the IR, and survive an
ONNX round trip; full-size shape-only builds match published parameter and MAC counts."""
import inspect

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from compiler.compare import graphs_equal
from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.export import to_model
from compiler.frontend import from_model
from compiler.ops.interpret import run_graph, run_ir
from compiler.ops.lower import lower
from compiler.zoo import MODELS, build, parameter_count
from compiler.zoo.options import check, describe
from compiler.zoo.ternary import absmean_ternary

# (rtol, atol) for every numerical comparison: graph reference and IR vs onnxruntime, decode vs prefill.
# All tiny models are fp32; measured differences are below 1e-5. The ternary models agree as closely
# because their int8 activations come out identical (a value landing on a rounding boundary would not).
TOLERANCES = {DType.fp32: (1e-3, 1e-4)}

LM = dict(seq=8, layers=2, hidden=32, heads=4, vocab=101)
TINY = {
    "alexnet": dict(image=67, width=1 / 16, fc=32, classes=10),
    "resnet18": dict(image=32, width=0.125, classes=10),
    "resnet50": dict(image=32, width=0.0625, classes=10),
    "vit_b16": dict(image=32, patch=8, layers=2, hidden=32, heads=4, mlp=64, classes=10),
    "bert_base": dict(LM, mlp=64, max_positions=16),
    "gpt2": dict(LM, max_positions=16),
    "llama": dict(LM, mlp=48, max_positions=16),
    "bitnet_b158": dict(LM, mlp=48, max_positions=16),
    "matmulfree_lm": dict(seq=8, layers=2, hidden=32, mlp=48, vocab=101),
}

# Published figures for the default sizes: parameters (with tolerance) and total MACs where one is
# published. AlexNet: "60 million parameters" (Krizhevsky 2012); ResNets: torchvision's model cards
# (11,689,512 / 25,557,032; 1.81 / 4.09 GMACs); ViT-B/16: 86 M (Dosovitskiy 2021, table 1), 17.56
# GMACs at 224; BERT-base: 110 M (Devlin 2019); GPT-2 small: 124 M (Hugging Face gpt2); Llama-2-7B:
# 6.74 B (Touvron 2023). The two ternary models are checked against their closed-form counts below.
PUBLISHED = {
    "alexnet": (60e6, 0.05, 724e6),
    "resnet18": (11.69e6, 0.02, 1.81e9),
    "resnet50": (25.56e6, 0.02, 4.09e9),
    "vit_b16": (86.6e6, 0.02, 17.56e9),
    "bert_base": (110e6, 0.02, None),
    "gpt2": (124.4e6, 0.02, None),
    "llama": (6.74e9, 0.01, None),
}


def feeds_for(graph, seed=0):
    rng = np.random.default_rng(seed)
    feeds = {}
    for name in graph.inputs:
        t = graph.tensor(name)
        if name == "input_ids":
            feeds[name] = rng.integers(0, 101, size=t.shape).astype(np.int64)
        elif name == "token_type_ids":
            feeds[name] = rng.integers(0, 2, size=t.shape).astype(np.int64)
        elif name == "attention_mask":
            mask = np.ones(t.shape, np.int64)
            mask[:, -2:] = 0   # two padding tokens: the additive mask path is exercised
            feeds[name] = mask
        else:
            feeds[name] = rng.standard_normal(t.shape).astype(t.dtype.numpy)
    return feeds


DECODE = dict(mode="decode")   # one token over seq - 1 cached ones: the KV-cache buffers written by TensorScatter
CASES = [(name, {}) for name in MODELS] + [(name, DECODE) for name in ("gpt2", "llama", "bitnet_b158")]


@pytest.mark.parametrize("name, extra", CASES, ids=[n + ("-decode" if e else "") for n, e in CASES])
def test_tiny_model_runs_the_same_everywhere_and_round_trips(name, extra):
    graph = build(name, **TINY[name], **extra)
    model = to_model(graph)
    onnx.checker.check_model(model, full_check=True)
    feeds = feeds_for(graph)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = dict(zip(graph.outputs, session.run(graph.outputs, feeds)))
    rtol, atol = TOLERANCES[DType.fp32]
    for label, got in (("graph", run_graph(graph, feeds)), ("ir", run_ir(lower(graph), feeds))):
        for out in graph.outputs:
            np.testing.assert_allclose(got[out], expected[out], rtol=rtol, atol=atol,
                                       err_msg=f"{name}: {label} reference vs onnxruntime, {out}")
    assert np.abs(expected[graph.outputs[0]]).max() > 1e-3   # a dead network would agree trivially
    assert graphs_equal(graph, from_model(model)) == []


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_full_size_matches_published_counts(name):
    params, tolerance, macs = PUBLISHED[name]
    graph = build(name, weights=False)
    assert all(value is None for key, value in graph.weights.items() if "weight" in key)
    assert parameter_count(graph) == pytest.approx(params, rel=tolerance)
    if macs is not None:
        assert sum(op.macs for op in lower(graph).ops) == pytest.approx(macs, rel=0.01)


def test_alexnet_layers_as_published():
    graph = build("alexnet", weights=False)
    shapes = {n.name: graph.tensor(n.outputs[0]).shape for n in graph.nodes}
    assert shapes["conv1"] == (1, 96, 55, 55) and shapes["pool5"] == (1, 256, 6, 6)
    assert graph.node("conv2").attrs["group"] == 2 and graph.node("conv3").attrs["group"] == 1
    # ONNX LRN divides alpha by size; the paper's k + alpha * sum(a^2) needs alpha = 1e-4 * 5
    assert graph.node("norm1").attrs == dict(size=5, alpha=5e-4, beta=0.75, bias=2.0)
    macs = {op.name: op.macs for op in lower(graph).ops}
    assert macs["conv1"] == 55 * 55 * 96 * 11 * 11 * 3
    assert macs["conv2"] == 27 * 27 * 256 * 48 * 5 * 5   # group 2: each kernel sees 48 of 96 maps


def lm_params(vocab, hidden, layers, mlp, mixer, tied=False):
    """Closed form: embeddings (+ head), per layer mixer + 3 x hidden x mlp (SwiGLU / GLU) + norms."""
    return vocab * hidden * (1 if tied else 2) + layers * (mixer + 3 * hidden * mlp + 2 * hidden) + hidden


def test_ternary_models_match_their_configs():
    # BitNet b1.58 3B: 4 projections d x d; one weight scale per BitLinear (7 per layer).
    bitnet = build("bitnet_b158", weights=False)
    expected = lm_params(32002, 3200, 26, 8640, 4 * 3200 ** 2) + 26 * 7
    assert parameter_count(bitnet) == expected and expected == pytest.approx(3.3e9, rel=0.05)
    # MatMul-free LM 1.3B: MLGRU has 4 projections d x d; each BitLinear has its RMSNorm and scale.
    mmfree = build("matmulfree_lm", weights=False)
    per_layer = 7 + 6 * 2048 + 5632   # 7 scales; norms over the inputs of f, c, g, o, gate, up (d), down
    expected = lm_params(32000, 2048, 24, 5632, 4 * 2048 ** 2) + 24 * per_layer
    assert parameter_count(mmfree) == expected and expected == pytest.approx(1.3e9, rel=0.06)
    ternary = [n for n in mmfree.weights if mmfree.tensor(n).dtype == DType.ternary]
    assert len(ternary) == 24 * 7
    assert not any(n.op == "MatMul" for n in mmfree.nodes if n.name != "logits")


def test_absmean_quantisation():
    w = np.array([[0.9, -0.1, 0.3], [-1.2, 0.05, 0.0]])
    q, gamma = absmean_ternary(w)
    assert gamma == pytest.approx(np.abs(w).mean())
    assert q.tolist() == [[1, 0, 1], [-1, 0, 0]]   # 0.3 / 0.425 rounds to 1, 0.05 / 0.425 to 0


@pytest.mark.parametrize("name", ["gpt2", "llama", "bitnet_b158"])
def test_decode_after_prefill_matches_prefill(name):
    size = dict(TINY[name])
    seq = size.pop("seq")
    ids = np.random.default_rng(1).integers(0, 101, size=(1, seq)).astype(np.int64)
    full = run_graph(build(name, seq=seq, **size), {"input_ids": ids})
    prefix = run_graph(build(name, seq=seq - 1, **size), {"input_ids": ids[:, :-1]})
    step = build(name, seq=seq, mode="decode", **size)
    feeds = {"input_ids": ids[:, -1:]}
    stale = np.full((1, size["heads"], 1, size["hidden"] // size["heads"]), 1e3)   # the slot the step writes
    for i in range(size["layers"]):   # the cache buffers: keys transposed [B, H, Dh, seq], values [B, H, seq, Dh]
        feeds[f"past_key.{i}"] = np.concatenate([prefix[f"present_key.{i}"], stale], axis=2).transpose(0, 1, 3, 2)
        feeds[f"past_value.{i}"] = np.concatenate([prefix[f"present_value.{i}"], stale], axis=2)
    got = run_graph(step, feeds)
    rtol, atol = TOLERANCES[DType.fp32]
    np.testing.assert_allclose(got["logits"][:, -1], full["logits"][:, -1], rtol=rtol, atol=atol)
    np.testing.assert_allclose(got["present_key.0"], full["present_key.0"].transpose(0, 1, 3, 2), rtol=rtol,
                               atol=atol)
    np.testing.assert_allclose(got["present_value.1"], full["present_value.1"], rtol=rtol, atol=atol)
    head_dim = size["hidden"] // size["heads"]
    assert step.tensor("past_key.1").shape == (1, size["heads"], head_dim, seq)
    assert step.tensor("past_value.1").shape == (1, size["heads"], seq, head_dim)


def test_decoder_defaults_build_fast_and_shape_only():
    graph = build("llama", mode="decode", seq=2048, weights=False)
    assert graph.tensor("logits").shape == (1, 1, 32000)
    assert graph.tensor("present_key.31").shape == (1, 32, 128, 2048)
    assert graph.tensor("present_value.31").shape == (1, 32, 2048, 128)
    macs = sum(op.macs for op in lower(graph).ops)
    # one token: every weight but the embedding once, plus QK^T and PV over 2048 positions per layer
    assert macs == parameter_count(graph) - 32000 * 4096 - 65 * 4096 + 32 * 2 * 2048 * 4096


def test_build_rejects_unknown_names_and_arguments():
    with pytest.raises(ModelError, match="resnet18.*bitnet_b158"):
        build("resnet19")
    with pytest.raises(ModelError, match="takes no argument 'seq'.*image"):
        build("resnet18", seq=3)
    with pytest.raises(ModelError, match="option mode='train': expected 'prefill' or 'decode'"):
        build("gpt2", mode="train", weights=False)
    with pytest.raises(ModelError, match="quantise"):
        build("alexnet", dtype="int8", weights=False)


@pytest.mark.parametrize("name", ["resnet18", "resnet50", "alexnet"])
@pytest.mark.parametrize("width", [float("nan"), float("inf"), 0.0, -1.0, 0])
def test_a_width_that_makes_no_model_is_refused_naming_it(name, width):
    with pytest.raises(ModelError, match=rf"{name}' option width={width!r}: expected a finite number above 0"):
        build(name, width=width, weights=False, image=32)


def test_dtype_sets_storage_type():
    graph = build("resnet18", dtype="bf16", weights=False, image=32)
    assert graph.tensor("image").dtype == DType.bf16 and graph.tensor("fc").dtype == DType.bf16


@pytest.mark.parametrize("name", list(MODELS))
def test_every_option_is_described_and_its_stated_least_value_is_the_checked_one(name):
    """`accelsim models NAME` lists what `build` checks: an int option listed as `integer >= N` takes N and
    refuses N - 1; a listed choice is taken and another refused."""
    for key, _default, takes, meaning in describe(MODELS[name]):
        assert meaning, f"{name} option {key} has no meaning in compiler.zoo.options.MEANINGS"
        signature_default = inspect.signature(MODELS[name]).parameters[key].default
        if takes.startswith("integer >= "):
            least = int(takes.removeprefix("integer >= "))
            check(name, key, least, signature_default)
            with pytest.raises(ModelError, match=f"option {key}={least - 1}: expected an integer of at least {least}"):
                check(name, key, least - 1, signature_default)
        elif " | " in takes and takes != "true | false":
            for choice in takes.split(" | "):
                check(name, key, choice, signature_default)
            with pytest.raises(ModelError, match=f"option {key}='other'"):
                check(name, key, "other", signature_default)
