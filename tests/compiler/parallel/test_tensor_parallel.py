"""Tensor parallelism (compiler/parallel/tensor.py): the tp ranks' graphs, run together, compute the model's outputs and
its gradients; each layer has Megatron's collectives and each rank does 1/tp of the layer's multiply-accumulates."""
import functools
import re
from collections import Counter

import numpy as np
import pytest

from compiler import zoo
from compiler.errors import ModelError
from compiler.ops.base import COMM_DOMAIN
from compiler.ops.interpret import run_graph
from compiler.ops.lower import lower
from compiler.parallel.group import run_ranks
from compiler.parallel.tensor import partition, split_axis
from compiler.train import training_graph

TEXT = dict(batch=2, seq=8, layers=2, hidden=32, heads=4, mlp=64, vocab=64, max_positions=16)
MODELS = {"gpt2": TEXT, "llama": TEXT, "bert_base": TEXT,
          # 16 patches + the class token: 17 tokens, so sequence parallelism splits the batch of 4 instead
          "vit_b16": dict(batch=4, image=16, patch=4, layers=2, hidden=32, heads=4, mlp=64, classes=8)}
LAYER = re.compile(r"^((?:layers|encoder)\.\d+)/")
CASES = [(name, tp, sp) for name in MODELS for tp in (2, 4) for sp in (False, True)]


def case_id(case) -> str:
    return f"{case[0]}-tp{case[1]}-{'sp' if case[2] else 'plain'}"


@functools.cache
def model(name: str):
    graph = zoo.build(name, dtype="fp64", **MODELS[name])
    rng = np.random.default_rng(0)
    feeds = {i: rng.standard_normal(graph.tensors[i].shape) if graph.tensors[i].dtype.is_float
             else rng.integers(0, 2 if "mask" in i or "type" in i else 50, graph.tensors[i].shape)
             for i in graph.inputs}
    return graph, feeds


@functools.cache
def ranks(name: str, tp: int, sp: bool):
    graph, _ = model(name)
    return [partition(graph, tp, sp, rank=r) for r in range(tp)]


def whole(name: str, parts: list[np.ndarray], shape) -> np.ndarray:
    """The whole tensor from every rank's: a split one concatenated along its split axis, a whole one rank 0's."""
    axis = split_axis(tuple(shape), parts[0].shape)
    return parts[0] if axis is None else np.concatenate(parts, axis=axis)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_ranks_run_together_compute_the_models_outputs(case):
    name, tp, sp = case
    graph, feeds = model(name)
    want = run_graph(graph, feeds)
    got = run_ranks(ranks(name, tp, sp), feeds)
    for out in graph.outputs:
        value = whole(out, [g[out] for g in got], want[out].shape)
        error = np.abs(value - want[out]).max() / np.abs(want[out]).max()
        assert error <= 1e-12, f"{out}: off by {error:.1e}"
        if split_axis(want[out].shape, got[0][out].shape) is None:   # a whole output is the same on every rank
            assert all(np.array_equal(g[out], got[0][out]) for g in got), out


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_training_step_gradients_are_slices_of_the_models(case):
    name, tp, sp = case
    graph, feeds = model(name)
    step = training_graph(graph)
    labels = np.random.default_rng(1).integers(0, graph.tensors[graph.outputs[0]].shape[-1],
                                               step.graph.tensors[step.labels].shape)
    step.graph.outputs += list(step.grads.values())
    want = run_graph(step.graph, {**feeds, step.labels: labels})
    steps = [training_graph(g) for g in ranks(name, tp, sp)]
    for s in steps:
        s.graph.outputs += list(s.grads.values())
    got = run_ranks([s.graph for s in steps], {**feeds, steps[0].labels: labels})
    assert sorted(steps[0].params) == sorted(step.params)
    np.testing.assert_allclose([g[steps[0].loss] for g in got], [want[step.loss]] * tp, rtol=1e-12)
    # a gradient the model gives as zero (a key bias: softmax ignores a shift along the keys) is rounding noise
    floor = 1e-3 * max(np.abs(want[step.grads[p]]).max() for p in step.params)
    split = 0
    for p in step.params:
        full = want[step.grads[p]]
        axis = split_axis(graph.tensors[p].shape, steps[0].graph.tensors[p].shape)
        split += axis is not None
        for r, (s, g) in enumerate(zip(steps, got)):
            part = full if axis is None else np.split(full, tp, axis=axis)[r]
            error = np.abs(g[s.grads[p]] - part).max() / max(np.abs(full).max(), floor)
            assert error <= 1e-12, f"gradient of {p} on rank {r} (split on {axis}): off by {error:.1e}"
    assert split >= 4 * MODELS[name]["layers"], "the layers' weights are split"


def per_layer(graph) -> dict[str, Counter]:
    """Collectives per layer: one that makes a layer's partial sums whole (or a Shard, which splits what it reads)
    belongs to the layer that made its input, one that brings a tensor into a layer to the layer reading it (BERT's
    post-norm output enters the next layer), and a gradient's to the forward node it mirrors. ParallelEnter and Shard
    move nothing forward and are not counted themselves."""
    producer, readers = graph.producers(), {}
    for node in graph.nodes:
        for name in node.inputs:
            readers.setdefault(name, []).append(node)

    def layer(node) -> str | None:
        while node is not None and node.domain == COMM_DOMAIN:
            forward = node.name.split("/grad/")[0]
            if forward != node.name:
                node = graph.node(forward)
            elif node.op in ("AllReduce", "ReduceScatter", "Shard"):
                node = producer.get(node.inputs[0])
            else:
                node = readers.get(node.outputs[0], [None])[0]
        m = LAYER.match(node.name) if node is not None else None
        return m.group(1) if m else None
    counts: dict[str, Counter] = {}
    for node in graph.nodes:
        where = layer(node) if node.domain == COMM_DOMAIN and node.op not in ("ParallelEnter", "Shard") else None
        if where:
            counts.setdefault(where, Counter())[node.op] += 1
    return counts


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_each_layer_has_megatrons_collectives(case):
    name, tp, sp = case
    rank = ranks(name, tp, sp)[0]
    forward = per_layer(rank)
    assert len(forward) == MODELS[name]["layers"], forward
    want = Counter({"AllGather": 2, "ReduceScatter": 2}) if sp else Counter({"AllReduce": 2})
    assert all(c == want for c in forward.values()), forward
    # the backward pass mirrors them, f's and g's conjugates (with SP the replicated weights that read 1/tp of the
    # tokens, the norms' and the row-parallel biases, add an all-reduce of their gradients, as Megatron's do)
    step = training_graph(rank)
    both = per_layer(step.graph)
    for layer, counts in both.items():
        if sp:
            assert (counts["AllGather"], counts["ReduceScatter"]) == (4, 4), (layer, counts)
        else:
            assert counts == Counter({"AllReduce": 4}), (layer, counts)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_each_rank_does_a_tp_th_of_each_layers_macs(case):
    name, tp, sp = case
    graph, _ = model(name)

    def macs(g) -> Counter:
        count = Counter()
        for op in lower(g).ops:
            m = LAYER.match(op.node)
            if m:
                count[m.group(1)] += op.macs
        return count
    full = macs(graph)
    for rank in ranks(name, tp, sp):
        mine = macs(rank)
        assert set(mine) == set(full) and all(full[k] > 0 and mine[k] * tp == full[k] for k in full), (mine, full)


def test_a_rank_graph_alone_refuses_to_run():
    graph, feeds = model("gpt2")
    with pytest.raises(ModelError, match=r"a single rank's graph cannot compute it; run all ranks' graphs together "
                                         r"\(compiler.parallel.group.run_ranks\)"):
        run_graph(ranks("gpt2", 2, False)[0], feeds)


@pytest.mark.parametrize("name", ["gpt2", "bert_base", "vit_b16"])
@pytest.mark.parametrize("tp", [3, 8])
def test_a_degree_that_does_not_divide_the_heads_is_refused_naming_them(name, tp):
    graph, _ = model(name)
    scope = {"gpt2": "layers.0/attn", "bert_base": "encoder.0/attention", "vit_b16": "encoder.0/attention"}[name]
    with pytest.raises(ModelError, match=f"tensor degree {tp} does not divide the 4 heads of {scope}$"):
        partition(graph, tp)


def test_a_degree_that_does_not_divide_the_mlp_width_is_refused_naming_it():
    graph = zoo.build("llama", dtype="fp64", **{**TEXT, "mlp": 66})
    with pytest.raises(ModelError, match="tensor degree 4 does not divide the 66 features of layers.0/mlp/gate_proj"):
        partition(graph, 4)


@pytest.mark.parametrize("tp, rank, message", [(0, 0, "degree must be an integer >= 1, not 0"),
                                               (-2, 0, "not -2"), (2.0, 0, "not 2.0"), (True, 0, "not True"),
                                               (2, 2, "rank 2 is not one of the 2 tensor-parallel ranks"),
                                               (2, -1, "rank -1 is not one")])
def test_bad_degrees_and_ranks_are_refused(tp, rank, message):
    with pytest.raises(ModelError, match=message):
        partition(model("gpt2")[0], tp, rank=rank)


def test_a_degree_of_one_is_the_model_itself():
    graph, feeds = model("llama")
    one = partition(graph, 1)
    assert one is not graph and [n.op for n in one.nodes] == [n.op for n in graph.nodes]
    np.testing.assert_array_equal(run_graph(one, feeds)["logits"], run_graph(graph, feeds)["logits"])


def test_a_classifier_the_degree_does_not_divide_stays_whole():
    graph = zoo.build("vit_b16", dtype="fp64", **{**MODELS["vit_b16"], "classes": 10})
    rank = partition(graph, 4)
    assert rank.tensors["head.weight"].shape == (10, 32)
    assert not [n for n in rank.nodes if n.domain == COMM_DOMAIN and n.op in ("AllGather", "AllReduce")
                and not LAYER.match(n.name)]


def test_bitnet_latent_splits_its_ternary_layers_with_per_shard_scales():
    """BitNet's training form: the fake-quantised MatMuls split like any other, but each rank quantises its own
    shard (the weight's absmean, a row-parallel input's absmax over its features), so the outputs differ from the
    unsplit model's by quantisation noise, not by the factor a missing collective gives."""
    graph = zoo.build("bitnet_b158", dtype="fp64", latent=True, **TEXT)
    feeds = {"input_ids": np.random.default_rng(0).integers(0, 64, (2, 8))}
    want = run_graph(graph, feeds)["logits"]
    parts = [partition(graph, 4, rank=r) for r in range(4)]
    assert all(c == Counter({"AllReduce": 2}) for c in per_layer(parts[0]).values())
    absmean = parts[0].node("layers.0/attn/q_proj/weight_quant/absmean")
    assert parts[0].tensors[absmean.inputs[0]].shape == (32, 8)         # the rank's shard of q_proj's weight
    got = run_ranks(parts, feeds)[0]["logits"]
    assert 0 < np.abs(got - want).max() / np.abs(want).max() < 0.25
    steps = [training_graph(g) for g in parts]
    for s in steps:
        s.graph.outputs += list(s.grads.values())
    labels = np.random.default_rng(1).integers(0, 64, (2, 8))
    out = run_ranks([s.graph for s in steps], {**feeds, "labels": labels})
    for p in steps[0].params:      # a replicated parameter's gradient is the same on every rank
        if split_axis(graph.tensors[p].shape, parts[0].tensors[p].shape) is None:
            for r in range(1, 4):
                np.testing.assert_allclose(out[r][steps[r].grads[p]], out[0][steps[0].grads[p]], rtol=1e-12,
                                           atol=1e-14, err_msg=p)


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_a_decode_steps_kv_cache_is_given_to_each_rank_by_heads(name):
    """Megatron's inference keeps each rank's heads of the cache: a rank is given its own heads of past keys and
    values (never the whole cache, sliced on the device), and the ranks together compute the decode step."""
    graph = zoo.build(name, dtype="fp64", mode="decode", **TEXT)
    rng = np.random.default_rng(0)
    feeds = {i: rng.standard_normal(graph.tensors[i].shape) if graph.tensors[i].dtype.is_float
             else rng.integers(0, 50, graph.tensors[i].shape) for i in graph.inputs}
    parts = [partition(graph, 2, rank=r) for r in range(2)]
    heads = TEXT["heads"]
    for i in graph.inputs:
        if i.startswith("past_"):      # keys [batch, heads, head_dim, seq], values [batch, heads, seq, head_dim]
            assert parts[0].tensors[i].shape[:2] == (2, heads // 2)
            assert sorted(parts[0].tensors[i].shape[2:]) == sorted((TEXT["seq"], TEXT["hidden"] // heads))
            assert not [n for n in parts[0].nodes if i in n.inputs and n.domain == COMM_DOMAIN]
    mine = [{i: v[:, r * heads // 2:(r + 1) * heads // 2] if i.startswith("past_") else v for i, v in feeds.items()}
            for r in range(2)]
    want = run_graph(graph, feeds)
    got = run_ranks(parts, mine)
    for out in graph.outputs:
        value = whole(out, [g[out] for g in got], want[out].shape)
        np.testing.assert_allclose(value, want[out], rtol=0, atol=1e-12 * np.abs(want[out]).max())
