"""Ternary models and recurrences train as their reference code does.

BitLinear in its training form (float latent weights, both operands fake-quantised in the forward pass) has the
straight-through estimator of the BitNet b1.58 reference code, `x + (q(x) - x).detach()` over the whole quantiser
(round, clip and scale): checked here against that code written out in PyTorch, not against the op-by-op mirror
of torch_graph.py. The MatMul-free LM's MLGRU runs in an ONNX Scan, whose gradient is a reverse Scan over the
body's own gradient graph: checked on the whole model and on small Scans with several states, reversed directions
and a final state the loss reads.

Quantised models have structural rounding ties: a causal decoder's first token attends only to itself, so its
context is exactly its value vector, a multiple of one quantisation step, and o_proj's quantiser can land on
k + 1/2; summation order then decides the rounding. The seeds below avoid one (seed 2 of bitnet_b158 hits one).
"""
import numpy as np
import pytest

from compiler import zoo
from compiler.builder import Builder
from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.ops.interpret import run_graph
from compiler.train import Optimizer, parameters, training_graph
from compiler.zoo.layers import scalar
from compiler.zoo.ternary import bitlinear
from tests.compiler.train.train_checks import check_step, close
from tests.compiler.train.torch_graph import torch

F = torch.nn.functional
RTOL = 1e-10            # fp64 throughout, as test_train_transformers.py
SIZES = {"bitnet_b158": dict(batch=2, seq=8, layers=2, hidden=32, heads=2, mlp=64, vocab=50, max_positions=16),
         "matmulfree_lm": dict(batch=2, seq=6, layers=2, hidden=16, mlp=32, vocab=40)}


def reference_bitlinear(x, w, norm_weight=None):
    """BitLinear as the BitNet b1.58 reference code trains it (1bitLLM/bitnet_b1_58 utils_quant, and the MatMul-free
    LM's fused form with its RMSNorm first), written from the paper's equations."""
    if norm_weight is not None:
        x = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-8) * norm_weight
    scale = 127.0 / x.abs().amax(-1, keepdim=True).clamp(min=1e-5)
    x_q = x + ((x * scale).round().clamp(-128, 127) / scale - x).detach()
    scale = 1.0 / w.abs().mean().clamp(min=1e-5)
    w_q = w + ((w * scale).round().clamp(-1, 1) / scale - w).detach()
    return x_q @ w_q


@pytest.mark.parametrize("norm", [False, True], ids=["bitnet", "mmfree"])
def test_bitlinear_gradient_is_the_reference_codes_estimator(norm):
    b = Builder("bitlinear", dtype=DType.fp64)
    y = bitlinear(b, b.input("x", (2, 5, 16)), 8, "proj", norm=norm, latent=True)
    graph = b.build([y])
    rng = np.random.default_rng(0)
    x, target = rng.standard_normal((2, 5, 16)), rng.standard_normal((2, 5, 8))
    step = training_graph(graph, loss="mse")
    step.graph.outputs += list(step.grads.values())
    ours = run_graph(step.graph, {"x": x, step.labels: target})
    w = torch.tensor(graph.weights["proj/weight"], requires_grad=True)
    g = torch.tensor(graph.weights["proj/norm/weight"], requires_grad=True) if norm else None
    loss = F.mse_loss(reference_bitlinear(torch.tensor(x), w, g), torch.tensor(target))
    loss.backward()
    close("loss", ours[step.loss], loss.detach().numpy(), RTOL)
    # a latent weight beyond the ternary range still learns: the estimator spans the clip
    clipped = np.abs(graph.weights["proj/weight"]) > 1.5 * np.abs(graph.weights["proj/weight"]).mean()
    assert clipped.any() and np.abs(ours[step.grads["proj/weight"]][clipped]).min() > 0
    close("gradient of the latent weight", ours[step.grads["proj/weight"]], w.grad.numpy(), RTOL)
    if norm:
        close("gradient of the norm", ours[step.grads["proj/norm/weight"]], g.grad.numpy(), RTOL)


@pytest.mark.parametrize("name", ["bitnet_b158", "matmulfree_lm"])
def test_training_form_computes_the_inference_forms_numbers(name):
    """Same seed, same drawn weights: the fake-quantised float matmul equals the integer one with its scales, but
    for summation order (the MatMul-free LM has no attention, so no structural tie: exact to rounding)."""
    ids = {"input_ids": np.random.default_rng(1).integers(0, 40, (2, SIZES[name]["seq"]))}
    frozen, latent = (zoo.build(name, dtype="fp64", latent=form, **SIZES[name]) for form in (False, True))
    want, got = (run_graph(g, ids)[g.outputs[0]] for g in (frozen, latent))
    close("logits", got, want, 1e-12 if name == "matmulfree_lm" else 1e-2)
    ternary = [w for w in frozen.weights if frozen.tensors[w].dtype == DType.ternary]
    assert ternary and all(latent.tensors[w].dtype == DType.fp64 for w in ternary)
    assert set(ternary) <= set(parameters(latent))


@pytest.mark.parametrize("optimizer", [Optimizer("sgd"), Optimizer("adamw")], ids=str)
@pytest.mark.parametrize("latent", [True, False], ids=["latent", "frozen"])
@pytest.mark.parametrize("name", ["bitnet_b158", "matmulfree_lm"])
def test_ternary_models_step_as_torch(name, latent, optimizer):
    """The whole model, one step; frozen: ternary weights fixed, the embeddings and norms trained through them."""
    graph = zoo.build(name, dtype="fp64", latent=latent, **SIZES[name])
    rng = np.random.default_rng(0)
    seq = SIZES[name]["seq"]
    step = check_step(graph, {"input_ids": rng.integers(0, 40, (2, seq))}, rng.integers(0, 40, (2, seq)), optimizer,
                      RTOL)
    ternary = {w for w in graph.weights if w.endswith("proj/weight")}
    assert ternary and (ternary <= set(step.params) if latent else not ternary & set(step.params))
    if name == "matmulfree_lm":   # the token mixer's projections reach the loss only through the Scan
        assert any("/mlgru/f_proj/" in p for p in step.params)


def recurrence(reverse: bool, states: int, captured: bool = False):
    """A Scan over axis 1 of x [2, 5, 3] (reversed or not): h' = tanh(h * m + x_t), a second state counting
    c' = c + x_t when `states` is 2, and a scan output sigmoid(h') stacked on axis 0 in reverse. Output: the stack
    plus the final h. `captured`: m is a parameter of the outer graph that the body reads by name."""
    body = Builder("cell", dtype=DType.fp64)
    h, *counts = [body.input(name, (2, 3)) for name in ["h", "c"][:states]]
    x = body.input("x_t", (2, 3))
    mix = body.weight("mix", (3,)) if captured else scalar(body, 0.5)
    h_next = body.node("Tanh", [body.node("Add", [body.node("Mul", [h, mix]), x])])
    carried = [h_next] + [body.node("Add", [c, x]) for c in counts]
    cell = body.build(carried + [body.node("Sigmoid", [h_next])])
    b = Builder("scan", dtype=DType.fp64)
    if captured:
        b.weight("mix", (3,))
    xs = b.node("Mul", [b.input("x", (2, 5, 3)), b.weight("w", (3,))])
    inits = [b.node("Tanh", [b.weight("h0", (2, 3))]), b.weight("c0", (2, 3))][:states]
    outs = b.node("Scan", inits + [xs], outputs=states + 1, name="scan", body=cell, num_scan_inputs=1,
                  scan_input_axes=[1], scan_input_directions=[int(reverse)], scan_output_axes=[0],
                  scan_output_directions=[1])
    return b.build([b.node("Add", [outs[-1], outs[0]])])


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("states", [1, 2])
def test_scan_gradient_matches_torch(reverse, states):
    """Loss on stack + final state (broadcast), so both the scan output's and the final state's gradients flow;
    the step's parameters are the initial state (through a Tanh) and a weight on the scan input."""
    graph = recurrence(reverse, states)
    rng = np.random.default_rng(3)
    step = check_step(graph, {"x": rng.standard_normal((2, 5, 3))}, rng.standard_normal((5, 2, 3)),
                      Optimizer("adamw"), RTOL, loss="mse")
    assert set(step.params) == {"w", "h0"}     # c0 reaches no output: its gradient would be zero


def test_a_parameter_read_inside_a_scan_body_is_refused():
    graph = recurrence(False, 1, captured=True)
    with pytest.raises(ModelError, match=r"node 'scan' \(Scan\): its body reads the parameter\(s\) mix"):
        training_graph(graph, loss="mse")
