"""Vocabulary parallelism (compiler/parallel/vocab.py and the training step's vocab-parallel cross-entropy): each
tensor rank holds its rows of the token embedding and looks up only the ids in its range, one collective sums the
ranks' lookups, and the loss is computed from the logits' shards with three all-reduces over the tokens instead of
gathering [tokens, vocab]. The whole model's outputs, loss and gradients are the second source."""
import copy

import numpy as np
import pytest

from compiler.builder import Builder
from compiler.dtypes import DType
from compiler.ops.base import COMM_DOMAIN
from compiler.ops.interpret import run_graph
from compiler.parallel.group import run_ranks
from compiler.parallel.tensor import partition, split_axis
from compiler.train import training_graph
from tests.compiler.parallel.test_tensor_parallel import model, ranks

LOOKUPS = {"gpt2": "embed", "llama": "embed", "bert_base": "embeddings/word"}


@pytest.mark.parametrize("name", sorted(LOOKUPS))
@pytest.mark.parametrize("tp", [2, 4])
@pytest.mark.parametrize("sp", [False, True], ids=["plain", "sp"])
def test_each_rank_looks_up_the_ids_in_its_rows_and_one_collective_sums_them(name, tp, sp):
    graph, feeds = model(name)
    node = graph.node(LOOKUPS[name])
    table, ids = graph.weights[node.inputs[0]], feeds[node.inputs[1]]
    rows = table.shape[0] // tp
    parts = []
    for rank in ranks(name, tp, sp):
        assert rank.tensors[node.inputs[0]].shape == (rows, table.shape[1])
        probe = copy.copy(rank)
        probe.outputs = rank.outputs + [node.outputs[0]]
        parts.append(probe)
    got = run_ranks(parts, feeds)
    for r, out in enumerate(got):
        mine = (ids >= r * rows) & (ids < (r + 1) * rows)
        np.testing.assert_array_equal(out[node.outputs[0]], table[ids] * mine[..., None])
    readers = [n for n in parts[0].nodes if node.outputs[0] in n.inputs]
    assert [(n.op, n.domain, n.attr("axis")) for n in readers] == \
        [("ReduceScatter", COMM_DOMAIN, 1) if sp else ("AllReduce", COMM_DOMAIN, None)]


def test_gpt2s_tied_table_is_split_by_rows_for_both_the_lookup_and_the_head():
    graph, _ = model("gpt2")
    for r, rank in enumerate(ranks("gpt2", 2, False)):
        np.testing.assert_array_equal(rank.weights["embed_tokens"], graph.weights["embed_tokens"][32 * r:32 * (r + 1)])
        assert rank.node("embed").inputs[0] == rank.node("lm_head").inputs[1] == "embed_tokens"
        assert not [n for n in rank.nodes if n.op == "Shard" and n.inputs == ("embed_tokens",)]


def test_berts_two_token_types_stay_whole():
    rank = ranks("bert_base", 2, False)[0]
    assert rank.tensors["embeddings/token_type_embeddings"].shape == (2, 32)
    assert rank.tensors["embeddings/word_embeddings"].shape == (32, 32)


@pytest.mark.parametrize("name", ["gpt2", "llama", "vit_b16"])
@pytest.mark.parametrize("tp", [2, 4])
@pytest.mark.parametrize("sp", [False, True], ids=["plain", "sp"])
def test_the_loss_reads_the_logits_shards_through_three_all_reduces_over_the_tokens(name, tp, sp):
    graph, _ = model(name)
    whole = graph.tensors[graph.outputs[0]].shape
    step = training_graph(ranks(name, tp, sp)[0])
    comm = [n for n in step.graph.nodes if n.domain == COMM_DOMAIN and step.phase[n.name] == "loss"]
    assert [(n.op, n.attr("reduction", "sum")) for n in comm] == \
        [("AllReduce", "max"), ("AllReduce", "sum"), ("Shard", "sum"), ("AllReduce", "sum")]
    rows = int(np.prod(whole[:-1]))
    assert all(step.graph.tensors[n.outputs[0]].shape == (rows, 1) for n in comm if n.op == "AllReduce")
    gathered = [o for n in step.graph.nodes for o in n.outputs if o and step.graph.tensors[o].shape in
                (whole, (rows, whole[-1]))]
    assert not gathered, f"{gathered} hold the logits over every class"


def classifier(scale: float):
    """x [6, 8] -> 16 classes, the weight scaled so the logits reach thousands (exp() of them overflows unless the
    row's maximum is taken out first)."""
    b = Builder("classifier", dtype=DType.fp64)
    x = b.input("x", (6, 8))
    graph = b.build([b.node("MatMul", [x, b.weight("w", (8, 16))], name="head")])
    graph.weights["w"] = graph.weights["w"] * scale
    return graph, {"x": np.random.default_rng(3).standard_normal((6, 8))}


@pytest.mark.parametrize("scale", [1.0, 1000.0])
def test_the_ranks_losses_and_gradients_are_the_whole_models_at_every_class_boundary(scale):
    graph, feeds = classifier(scale)
    labels = np.array([0, 3, 4, 8, 11, 15])     # at the edges of the ranks' classes 0-3, 4-7, 8-11, 12-15
    step = training_graph(graph)
    step.graph.outputs += [step.grads["w"]]
    whole = run_graph(step.graph, {**feeds, "labels": labels})
    want, full = whole[step.loss], whole[step.grads["w"]]
    assert np.isfinite(want) and want > (10 if scale > 1 else 0)
    steps = [training_graph(partition(graph, 4, rank=r)) for r in range(4)]
    for s in steps:
        s.graph.outputs += [s.grads["w"]]
    got = run_ranks([s.graph for s in steps], {**feeds, "labels": labels})
    np.testing.assert_allclose([g[steps[0].loss] for g in got], [want] * 4, rtol=1e-12)
    assert split_axis(full.shape, got[0][steps[0].grads["w"]].shape) == 1
    for r, (s, g) in enumerate(zip(steps, got)):
        np.testing.assert_allclose(g[s.grads["w"]], np.split(full, 4, axis=1)[r], rtol=0,
                                   atol=1e-12 * np.abs(full).max())
