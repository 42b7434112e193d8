"""The zoo's transformers and its ternary model, in small configurations, train as PyTorch does: one step with SGD
and with AdamW gives torch.autograd's loss and gradients and torch.optim's updates
(tests/compiler/train/train_checks.py).

GPT-2 (learned positions, tied head, LayerNorm, GELU from Erf), BERT (padding mask from a Cast, post-LN, the Tanh
pooler), Llama (RMSNorm from Pow/ReduceMean/Sqrt/Div, rotary Slice/Neg/Concat, SiLU), ViT (a patch Conv) and
BitNet b1.58 (MatMulInteger behind Round, Clip and Cast: the straight-through estimator of torch_graph.py).
Built in fp64 (the zoo accepts it), so the only differences are summation order: see RTOL.
"""
import numpy as np
import pytest

from compiler import zoo
from compiler.dtypes import DType
from compiler.ops.interpret import run_graph
from compiler.train import Optimizer, parameters, training_graph
from tests.compiler.train.train_checks import check_step, close
from tests.compiler.train.torch_graph import run_torch, torch

# Largest error seen, of a tensor's largest entry, over these models, both optimizers and three seeds: 4e-13 with
# SGD, 1e-11 with AdamW (its first step divides g by |g| + eps, which magnifies rounding in an entry near eps).
# 1e-10 leaves a margin for another BLAS's summation order and still fails any wrong rule, whose errors are O(1).
RTOL = 1e-10
OPTIMIZERS = [Optimizer("sgd"), Optimizer("adamw")]
TEXT = dict(batch=2, seq=8, hidden=32, mlp=64, vocab=50, max_positions=16)
SIZES = {"gpt2": dict(TEXT, layers=2, heads=2), "llama": dict(TEXT, layers=2, heads=4),
         "bert_base": dict(TEXT, layers=2, heads=4), "bitnet_b158": dict(TEXT, layers=2, heads=2),
         "vit_b16": dict(batch=2, image=16, patch=8, layers=1, hidden=32, heads=2, mlp=64, classes=10)}


def model(name: str, dtype: str = "fp64", seed: int = 0):
    """(graph, feeds, labels): token ids or an image; labels are classes of the first output's last axis."""
    graph = zoo.build(name, dtype=dtype, **SIZES[name])
    rng = np.random.default_rng(seed)
    if name == "vit_b16":
        return graph, {"image": rng.standard_normal((2, 3, 16, 16))}, rng.integers(0, 10, 2)
    feeds = {"input_ids": rng.integers(0, 50, (2, 8))}
    if name == "bert_base":   # the second sequence padded after 5 tokens, so the mask changes the numbers
        feeds |= {"token_type_ids": rng.integers(0, 2, (2, 8)),
                  "attention_mask": np.array([[1] * 8, [1] * 5 + [0] * 3])}
    # BERT's first output is the last hidden state [2, 8, 32]: its 32 features are scored as classes
    classes = graph.tensor(graph.outputs[0]).shape[-1]
    return graph, feeds, rng.integers(0, classes, (2, 8))


def key_biases(graph) -> list[str]:
    """Attention key biases: softmax over keys ignores the shift q . b_k, the same for every key, so their gradient
    is 0 exactly; computed, it is rounding noise (1e-17) on both sides, and AdamW's first step turns noise into an
    update of arbitrary sign (g / (|g| + eps)). They are checked to be zero instead of against torch."""
    return [p for p in parameters(graph) if p.endswith(("k_proj/bias", "key/bias"))]


def trained(graph) -> list[str]:
    return [p for p in parameters(graph) if p not in key_biases(graph)]


@pytest.mark.parametrize("optimizer", OPTIMIZERS, ids=lambda o: o.name)
@pytest.mark.parametrize("name", ["gpt2", "llama", "bert_base", "bitnet_b158", "vit_b16"])
def test_step_matches_torch(name, optimizer):
    graph, feeds, labels = model(name)
    step = check_step(graph, feeds, labels, optimizer, RTOL, params=trained(graph))
    if name != "bert_base":   # BERT's pooler does not reach the last hidden state
        assert set(step.params) == set(trained(graph))


def test_bert_pooler_trains():
    """The pooler (Gather of the [CLS] token, a Linear, Tanh) scored as a classifier over its 32 features."""
    graph, feeds, _ = model("bert_base")
    graph.outputs = ["pooler"]
    step = check_step(graph, feeds, np.array([3, 17]), Optimizer("adamw"), RTOL, params=trained(graph))
    assert {"pooler/dense/weight", "pooler/dense/bias"} <= set(step.params)


def test_bitnet_trains_through_the_ternary_layers():
    """BitLinear weights are ternary (not parameters); the token embedding reaches the loss only through them, so
    its gradient, equal to torch's in test_step_matches_torch, is the straight-through estimator's."""
    graph, _, _ = model("bitnet_b158")
    ternary = [w for w in graph.weights if graph.tensors[w].dtype == DType.ternary]
    assert ternary and not set(ternary) & set(parameters(graph))
    assert "embed_tokens" in training_graph(graph).params


@pytest.mark.parametrize("name", ["gpt2", "bert_base", "vit_b16"])
def test_key_bias_gradient_is_zero(name):
    graph, feeds, labels = model(name)
    step = training_graph(graph)
    step.graph.outputs += list(step.grads.values())
    ours = run_graph(step.graph, {**feeds, step.labels: labels})
    assert key_biases(graph)
    for bias in key_biases(graph):
        weight = ours[step.grads[bias.replace("/bias", "/weight")]]
        assert np.abs(ours[step.grads[bias]]).max() <= 1e-12 * np.abs(weight).max(), bias


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_fp32_gradients_match_torch(name):
    """The zoo's default dtype. Loss and gradients within 1e-5 of each tensor's largest entry of torch's, in fp64
    on the same weights (7e-7 seen: about 6 fp32 epsilons through two layers). Updates are left to the fp64
    tests: x' - x in fp32 cancels to ulp(x) / (lr g), ~1e-4 of a step, whatever the arithmetic."""
    graph, feeds, labels = model(name, dtype="fp32")
    step = training_graph(graph, params=trained(graph))
    step.graph.outputs += list(step.grads.values())
    ours = run_graph(step.graph, {**feeds, step.labels: labels})
    env, leaves = run_torch(graph, feeds, step.params)
    logits = env[graph.outputs[0]]
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.tensor(labels).reshape(-1))
    loss.backward()
    close("loss", ours[step.loss], loss.detach().numpy(), 1e-5)
    for p in step.params:
        assert ours[step.grads[p]].dtype == np.float32
        close(f"gradient of {p}", ours[step.grads[p]], leaves[p].grad.numpy(), 1e-5)
