"""A model cut into pipeline stages computes what it computed whole: forward, run stage after stage, and a training
step, each stage's backward pass seeded by the gradients the stage after it sends back."""
import numpy as np
import pytest

from compiler import zoo
from compiler.errors import ModelError
from compiler.ops.interpret import run_graph
from compiler.parallel.pipeline import blocks, split, structure
from compiler.train import training_graph
from tests.compiler.train.train_checks import close

TEXT = dict(batch=2, seq=8, layers=4, hidden=32, heads=2, mlp=64, vocab=50, max_positions=16)
MODELS = {"gpt2": TEXT, "llama": TEXT, "bert_base": TEXT,
          "vit_b16": dict(batch=2, image=16, patch=8, layers=4, hidden=32, heads=2, mlp=64, classes=10),
          "resnet50": dict(batch=2, image=32, width=0.25, classes=10)}


def model(name: str):
    graph = zoo.build(name, dtype="fp64", **MODELS[name])
    rng = np.random.default_rng(0)
    feeds = {i: rng.standard_normal(graph.tensors[i].shape) if graph.tensors[i].dtype.is_float
             else rng.integers(0, 2 if "mask" in i or "type" in i else 50, graph.tensors[i].shape)
             for i in graph.inputs}
    return graph, feeds


def forward(stages, feeds: dict) -> dict:
    env = dict(feeds)
    for stage in stages:
        env.update(run_graph(stage.graph, {i: env[i] for i in stage.graph.inputs}))
    return env


@pytest.mark.parametrize("pp", [2, 4])
@pytest.mark.parametrize("name", list(MODELS))
def test_stages_run_in_order_compute_the_models_outputs(name, pp):
    graph, feeds = model(name)
    want = run_graph(graph, feeds)
    stages = split(graph, pp)
    got = forward(stages, feeds)
    for output in graph.outputs:
        close(output, got[output], want[output], 1e-12)
    assert sorted(n.name for s in stages for n in s.graph.nodes) == sorted(n.name for n in graph.nodes)
    assert [len(s.blocks) for s in stages] == [len(blocks(graph)) // pp] * pp
    for before, after in zip(stages, stages[1:]):
        assert before.sent == after.received and before.sent


def test_a_uniform_models_middle_stages_are_the_same_work():
    graph, _ = model("gpt2")
    stages = split(graph, 4)
    assert structure(stages[1].graph) == structure(stages[2].graph) != structure(stages[0].graph)


def test_a_tensor_read_two_stages_later_is_passed_through_the_stage_between():
    graph, _ = model("bert_base")
    stages = split(graph, 4)
    mask = "extended_mask/unsqueeze"
    assert all(mask in s.sent for s in stages[:3]) and mask in stages[3].received


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_a_pipelined_step_gives_the_whole_models_gradients(name):
    """Backward from the last stage to the first, each sending its inputs' gradients to the stage before. GPT-2's
    tied embedding is read by the first stage (the Gather) and the last (the head): its two parts add up."""
    graph, feeds = model(name)
    graph.outputs = graph.outputs[:1]
    labels = np.random.default_rng(1).integers(0, 50, (2, 8))
    whole = training_graph(graph)
    whole.graph.outputs += list(whole.grads.values())
    want = run_graph(whole.graph, {**feeds, whole.labels: labels})
    stages = split(graph, 4)
    steps = [training_graph(s.graph, loss="stage" if s.index < 3 else "cross_entropy", input_grads=True)
             for s in stages]
    env = forward(stages, feeds)
    grads, arriving = {}, {}
    for stage, step in reversed(list(zip(stages, steps))):
        given = {i: env[i] for i in stage.graph.inputs} | {f"{o}/grad": arriving[o] for o in stage.sent}
        if step.labels:
            given[step.labels] = labels
        step.graph.outputs += list(step.grads.values())
        out = run_graph(step.graph, given)
        for p, g in step.grads.items():
            grads[p] = grads.get(p, 0) + out[g]
        assert set(step.input_grads) == set(stage.received)
        arriving = {i: out[g] for i, g in step.input_grads.items()}
    assert set(grads) == set(whole.grads)
    for p, g in whole.grads.items():
        close(f"gradient of {p}", grads[p], want[g], 1e-12)


def test_a_degree_that_does_not_divide_the_blocks_says_which_would():
    graph, _ = model("gpt2")
    with pytest.raises(ModelError, match=r"pipeline degree 3 does not divide the model's 4 blocks .*among 1, 2, 4"):
        split(graph, 3)


def test_a_model_without_blocks_cannot_be_pipelined():
    graph = zoo.build("alexnet", batch=2, image=67, width=0.25, fc=64, classes=10)
    with pytest.raises(ModelError, match="no repeated blocks"):
        split(graph, 2)
    assert len(split(graph, 1)) == 1
