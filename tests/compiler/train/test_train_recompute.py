"""Activation recomputation: the same numbers, less memory, more compute, and clones only where the backward pass
reads what it would otherwise have kept."""
import numpy as np
import pytest

from compiler import zoo
from compiler.ops.interpret import run_graph
from compiler.train import Optimizer, training_graph
from compiler.train.recompute import layer_of

GPT = dict(batch=2, seq=16, layers=2, hidden=32, heads=2, vocab=64, max_positions=32, dtype="fp64")


def feeds(graph, labels_shape, classes, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for name in graph.inputs:
        t = graph.tensors[name]
        out[name] = rng.standard_normal(t.shape) if t.dtype.is_float else rng.integers(0, classes, t.shape)
    out["labels"] = rng.integers(0, classes, labels_shape)
    return out


@pytest.mark.parametrize("model, options, classes, mode", [
    ("gpt2", GPT, 64, "selective"), ("gpt2", GPT, 64, "full"),
    ("resnet18", dict(batch=2, image=32, width=0.25, classes=10, dtype="fp64"), 10, "full"),
])
def test_recomputing_changes_no_number(model, options, classes, mode):
    graph = zoo.build(model, **options)
    plain = training_graph(graph, optimizer=Optimizer("adamw"))
    again = training_graph(graph, optimizer=Optimizer("adamw"), recompute=mode)
    assert any(phase == "recompute" for phase in again.phase.values())
    shape = graph.tensors[graph.outputs[0]].shape[:-1]
    data = feeds(graph, shape, classes)
    want, got = run_graph(plain.graph, data), run_graph(again.graph, data)
    for name in plain.graph.outputs:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_memory_falls_and_compute_rises_from_none_to_selective_to_full():
    graph = zoo.build("gpt2", batch=4, seq=256, layers=4, hidden=128, heads=4, vocab=256, weights=False)
    steps = {mode: training_graph(graph, optimizer=Optimizer("adamw"), recompute=mode)
             for mode in ("none", "selective", "full")}
    saved = {mode: step.memory().peak for mode, step in steps.items()}
    assert saved["none"] > saved["selective"] > saved["full"]
    clones = {mode: sum(p == "recompute" for p in step.phase.values()) for mode, step in steps.items()}
    assert clones["none"] == 0 < clones["selective"] < clones["full"]
    # selective recomputes per attention: the scores' product, scale, mask and Softmax (here 4 layers)
    ops = [n.op for n in steps["selective"].graph.nodes if steps["selective"].phase[n.name] == "recompute"]
    assert ops.count("Softmax") == 4 and ops.count("MatMul") == 4


def test_a_layer_is_the_path_up_to_its_index():
    assert layer_of("layers.3/attn/softmax") == "layers.3"
    assert layer_of("layer2.1/conv1") == "layer2.1"
    assert layer_of("/transformer/h.0/attn/MatMul") == "transformer/h.0"
    assert layer_of("conv1") == "conv1" and layer_of("encoder/fc") == "encoder"


def test_an_unknown_mode_is_refused():
    with pytest.raises(Exception, match="unknown recompute mode 'some'; allowed: none, selective, full"):
        training_graph(zoo.build("gpt2", **GPT), recompute="some")
