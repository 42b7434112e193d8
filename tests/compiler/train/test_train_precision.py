"""Mixed precision, loss scaling and gradient accumulation in a training step: what is stored in which dtype, the
memory that follows (ZeRO's 16 bytes per parameter for AdamW), and updates equal to the fp32 step's."""
import numpy as np
import pytest

from compiler.builder import Builder
from compiler.dtypes import DType
from compiler.ops.interpret import run_graph
from compiler.train import Optimizer, training_graph

B, IN, HID, OUT = 8, 16, 32, 4
PARAMS = IN * HID + HID * OUT


def mlp(dtype, weights=True):
    b = Builder("mlp", dtype=dtype, weights=weights, seed=1)
    x = b.input("x", (B, IN))
    h = b.node("Relu", [b.node("MatMul", [x, b.weight("w1", (IN, HID))])])
    return b.build([b.node("MatMul", [h, b.weight("w2", (HID, OUT))])])


FEEDS = {"x": np.random.default_rng(2).standard_normal((B, IN)), "labels": np.arange(B) % OUT}


def updates(graph, **options):
    # SGD: the move is linear in the gradient (AdamW's first step is about lr * sign(g), which a tiny gradient
    # entry of either sign flips between precisions)
    step = training_graph(graph, optimizer=Optimizer("sgd", {"lr": 0.1}), **options)
    feeds = {"x": FEEDS["x"].astype(graph.tensors["x"].dtype.numpy), "labels": FEEDS["labels"]}
    out = run_graph(step.graph, feeds)
    # the fp32 master's move where there is one (the narrow copy rounds it), else the parameter's
    moved = {p: step.updated[p][1] if step.state[p] and step.state[p][0].startswith("master/") else step.updated[p][0]
             for p in step.params}
    return step, {p: out[moved[p]].astype(np.float64) - np.asarray(graph.weights[p], np.float64)
                  for p in step.params}


def test_bf16_trains_an_fp32_master_copy_and_fp32_state():
    step = training_graph(mlp(DType.bf16, weights=False), optimizer=Optimizer("adamw"))
    graph = step.graph
    assert [graph.tensors[s].dtype for s in step.state["w1"]] == [DType.fp32] * 3      # master, m, v
    assert graph.tensors[step.grads["w1"]].dtype == DType.bf16
    assert graph.tensors[step.updated["w1"][0]].dtype == DType.bf16                    # the next step's weights
    memory = step.memory().by_category
    # 2 bytes of bf16 weights, 2 of bf16 gradients, 12 of fp32 master, m and v: 16 per parameter
    assert memory["weights"] - 2 * PARAMS < 64 and memory["optimizer"] == 12 * PARAMS
    assert memory["gradients"] == 2 * PARAMS


def test_the_master_copy_s_update_is_cast_back_into_the_parameter_not_beside_it():
    """The step ends with each bf16 parameter's update cast back from its fp32 master into the parameter's own bytes,
    as frameworks copy it: the end of the step holds the weights once (2 bytes a parameter), not a second bf16 copy
    as workspace; and every gradient (2 bytes) with the master, m and v (12 bytes), ZeRO's 16 per parameter."""
    step = training_graph(mlp(DType.bf16, weights=False), optimizer=Optimizer("adamw"))
    curve, _, gradients = step.profile()
    weights, grads, optimizer, activations, workspace = curve[-1]     # the last update, written
    assert workspace == 0 and activations == 4          # the loss (fp32), an output of the step
    assert weights - 2 * PARAMS < 64 and grads == gradients == 2 * PARAMS and optimizer == 12 * PARAMS
    memory = step.memory()
    assert memory.gradients_total == 2 * PARAMS
    assert memory.peak == max(sum(row) for row in curve)


@pytest.mark.parametrize("dtype, rtol", [(DType.bf16, 0.05), (DType.fp16, 0.01)])
def test_a_narrow_step_moves_the_weights_as_the_fp32_step_does(dtype, rtol):
    wide, narrow = mlp(DType.fp32), mlp(dtype)
    _, want = updates(wide)
    step, got = updates(narrow)
    for p in want:
        scale = np.abs(want[p]).max()
        assert np.abs(got[p] - want[p]).max() <= rtol * scale, p
    scaled = dtype == DType.fp16
    assert any(n.op == "Mul" and "unscale" in "".join(n.inputs) for n in step.graph.nodes) == scaled


def test_fp16_gradients_are_scaled_and_unscaled():
    step = training_graph(mlp(DType.fp16), optimizer=Optimizer("sgd", {"momentum": 0.0, "weight_decay": 0.0}))
    fp32 = training_graph(mlp(DType.fp32), optimizer=Optimizer("sgd", {"momentum": 0.0, "weight_decay": 0.0}))
    for s in (step, fp32):
        s.graph.outputs += list(s.grads.values())
    got = run_graph(step.graph, {"x": FEEDS["x"].astype(np.float16), "labels": FEEDS["labels"]})
    want = run_graph(fp32.graph, {"x": FEEDS["x"].astype(np.float32), "labels": FEEDS["labels"]})
    ratio = np.abs(got[step.grads["w2"]].astype(np.float64)).max() / np.abs(want[fp32.grads["w2"]]).max()
    assert ratio == pytest.approx(65536, rel=0.01)      # the stored fp16 gradient carries the loss scale


def test_accumulation_adds_into_fp32_buffers_held_the_whole_step():
    graph = mlp(DType.fp32)
    plain, want = updates(graph)
    step, got = updates(graph, accumulate=True)
    for p in want:
        np.testing.assert_allclose(got[p], want[p], rtol=1e-6, atol=1e-9)    # the first micro-batch: 0 + g
    assert any(s.startswith("accumulated/") for s in step.state["w1"])
    extra = step.memory().by_category["gradients"] - plain.memory().by_category["gradients"]
    assert extra >= 4 * PARAMS - 4 * IN * HID      # the buffers, held while a gradient may already have died
