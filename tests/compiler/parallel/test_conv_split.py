"""Channel parallelism of convolutional layers (compiler/parallel/channels.py): AlexNet split over two ranks as on
Krizhevsky et al.'s two GTX 580s, and ResNet's convolutions split by output channels; the ranks run together
compute the model's outputs and every gradient of its training step."""
import copy
import functools
from collections import Counter

import numpy as np
import pytest

from compiler import zoo
from compiler.errors import ModelError
from compiler.graph import Node
from compiler.ops.base import COMM_DOMAIN
from compiler.ops.interpret import run_graph
from compiler.ops.lower import lower
from compiler.ops.shapes import finalize
from compiler.parallel.group import run_ranks
from compiler.parallel.tensor import partition, split_axis
from compiler.train import training_graph

ALEXNET = dict(batch=2, image=63, width=1 / 16, fc=32, classes=10)   # channels 6, 16, 24, 24, 16; pool5 1x1
RESNET = dict(batch=2, image=32, width=1 / 8, classes=8)
CONVS = [f"conv{i}" for i in range(1, 6)]


@functools.cache
def model(name: str):
    graph = zoo.build(name, dtype="fp64", **(ALEXNET if name == "alexnet" else RESNET))
    return graph, {"image": np.random.default_rng(0).standard_normal(graph.tensors["image"].shape)}


@functools.cache
def ranks(name: str, tp: int, groups: bool):
    return [partition(model(name)[0], tp, rank=r, groups=groups) for r in range(tp)]


def lrn_per_half(graph):
    """The model as cuda-convnet ran it on two GPUs: every LRN normalises each half of the channels alone (a Slice
    and an LRN per half, a Concat), written independently of the partition pass."""
    out = copy.deepcopy(graph)
    nodes = []
    for node in out.nodes:
        if node.op != "LRN":
            nodes.append(node)
            continue
        channels = out.tensors[node.inputs[0]].shape[1]
        normed = []
        for h in range(2):
            half = f"{node.name}/half{h}"
            bounds = [f"{half}/{what}" for what in ("starts", "ends", "axes")]
            for name, value in zip(bounds, ([h * channels // 2], [(h + 1) * channels // 2], [1])):
                nodes.append(Node(name, "Constant", (), (name,), {"value": np.array(value, np.int64)}))
            nodes.append(Node(half, "Slice", (node.inputs[0], *bounds), (half,)))
            nodes.append(Node(f"{half}/lrn", "LRN", (half,), (f"{half}/lrn",), dict(node.attrs)))
            normed.append(f"{half}/lrn")
        nodes.append(Node(node.name, "Concat", tuple(normed), node.outputs, {"axis": 1}))
    out.nodes = nodes
    return finalize(out)


def check_outputs(graph, parts, feeds, rtol=1e-12):
    want = run_graph(graph, feeds)
    got = run_ranks(parts, feeds)
    for out in graph.outputs:
        for g in got:
            error = np.abs(g[out] - want[out]).max() / np.abs(want[out]).max()
            assert error <= rtol, f"{out}: off by {error:.1e}"
    return want


def check_gradients(graph, parts, feeds, rtol=1e-12) -> int:
    """Every rank's loss is the model's and its gradient of each parameter the model's, sliced as the parameter is;
    returns how many parameters are split."""
    step = training_graph(graph)
    labels = np.array([1, 7])
    step.graph.outputs += list(step.grads.values())
    want = run_graph(step.graph, {**feeds, step.labels: labels})
    steps = [training_graph(g) for g in parts]
    for s in steps:
        s.graph.outputs += list(s.grads.values())
    got = run_ranks([s.graph for s in steps], {**feeds, steps[0].labels: labels})
    assert sorted(steps[0].params) == sorted(step.params)
    np.testing.assert_allclose([g[steps[0].loss] for g in got], want[step.loss], rtol=rtol)
    split = 0
    for p in step.params:
        full = want[step.grads[p]]
        axis = split_axis(graph.tensors[p].shape, steps[0].graph.tensors[p].shape)
        split += axis is not None
        for r, (s, g) in enumerate(zip(steps, got)):
            part = full if axis is None else np.split(full, len(parts), axis=axis)[r]
            error = np.abs(g[s.grads[p]] - part).max() / np.abs(full).max()
            assert error <= rtol, f"gradient of {p} on rank {r} (split on {axis}): off by {error:.1e}"
    return split


def test_the_paper_split_computes_alexnet_with_lrn_per_gpu():
    graph, feeds = model("alexnet")
    parts = ranks("alexnet", 2, True)
    reference = lrn_per_half(graph)
    check_outputs(reference, parts, feeds)
    whole = run_graph(graph, feeds)["fc8"]
    assert np.abs(run_graph(reference, feeds)["fc8"] - whole).max() > 1e-9 * np.abs(whole).max(), \
        "the reference's per-GPU LRN differs from the whole model's, so the comparison tells them apart"
    assert check_gradients(reference, parts, feeds) == 16        # every layer's weight and bias split in two


def test_plain_tensor_parallelism_gathers_at_lrn_and_computes_alexnet_exactly():
    graph, feeds = model("alexnet")
    parts = ranks("alexnet", 2, False)
    check_outputs(graph, parts, feeds)
    assert check_gradients(graph, parts, feeds) == 16
    gathered = {n.inputs[0] for n in parts[0].nodes if n.op == "AllGather"}
    assert {"conv1_relu", "conv2_relu"} <= gathered, "the maps are gathered whole before each LRN"


def forward_collectives(graph) -> list[tuple[str, str, str]]:
    """(op, the node that made what it moves, the node that reads the result) of each forward collective."""
    producer = graph.producers()
    readers = {}
    for node in graph.nodes:
        for name in node.inputs:
            readers.setdefault(name, node.name)
    return [(n.op, producer[n.inputs[0]].name, readers.get(n.outputs[0], "output")) for n in graph.nodes
            if n.domain == COMM_DOMAIN]


def test_the_gpus_talk_only_into_conv3_and_the_fully_connected_layers():
    rank = ranks("alexnet", 2, True)[0]
    assert forward_collectives(rank) == [("AllGather", "pool2", "conv3"), ("AllGather", "flatten", "fc6"),
                                         ("AllGather", "drop6", "fc7"), ("AllGather", "drop7", "fc8"),
                                         ("AllGather", "fc8", "output")]
    # the loss reads each GPU's half of the logits instead (all-reduces over the images of their maxima, their sums
    # of exponentials and the label's score), and the backward pass mirrors the other gathers: nothing else
    step = training_graph(rank)
    loss = [n for n in step.graph.nodes if n.domain == COMM_DOMAIN and step.phase[n.name] == "loss" and n.op != "Shard"]
    assert [(n.op, step.graph.tensors[n.outputs[0]].shape) for n in loss] == [("AllReduce", (2, 1))] * 3
    backward = Counter(n.op for n in step.graph.nodes if n.domain == COMM_DOMAIN and "/grad/" in n.name)
    assert backward == Counter({"ReduceScatter": 4}), backward
    # the grouped layers run on their own GPU's maps: each rank's conv2, conv4, conv5 are ungrouped halves
    whole = model("alexnet")[0]
    for conv in ("conv2", "conv4", "conv5"):
        w = whole.tensors[f"{conv}/weight"].shape
        assert rank.node(conv).attrs["group"] == 1 and whole.node(conv).attrs["group"] == 2
        assert rank.tensors[f"{conv}/weight"].shape == (w[0] // 2, *w[1:])
    assert rank.tensors["conv3/weight"].shape == (12, 16, 3, 3), "conv3: half its kernels, over all 16 maps"


@pytest.mark.parametrize("groups", [False, True])
def test_each_rank_does_half_of_each_convolutions_macs(groups):
    graph, _ = model("alexnet")

    def macs(g) -> Counter:
        count = Counter()
        for op in lower(g).ops:
            if op.node in CONVS + ["fc6", "fc7", "fc8"]:
                count[op.node] += op.macs
        return count
    full = macs(graph)
    for rank in ranks("alexnet", 2, groups):
        assert {k: 2 * v for k, v in macs(rank).items()} == full


def test_a_degree_that_does_not_divide_the_groups_is_refused_naming_the_layer():
    with pytest.raises(ModelError, match=r"groups=3 splits every layer as the model's channel groups do, but node "
                                         r"'conv2' \(Conv\) has 2 groups, which 3 devices cannot share out evenly"):
        partition(model("alexnet")[0], 3, groups=True)


def test_without_groups_a_grouped_conv_the_degree_does_not_divide_runs_whole():
    graph, feeds = model("alexnet")
    parts = [partition(graph, 4, rank=r) for r in range(4)]
    assert parts[0].tensors["conv2/weight"].shape == graph.tensors["conv2/weight"].shape
    assert parts[0].tensors["conv3/weight"].shape == (6, 16, 3, 3)
    check_outputs(graph, parts, feeds)


def test_resnet_splits_its_convolutions_and_batch_norms_by_channel():
    graph, feeds = model("resnet18")
    parts = ranks("resnet18", 2, False)
    check_outputs(graph, parts, feeds)
    split = check_gradients(graph, parts, feeds)
    convs = [n.name for n in graph.nodes if n.op == "Conv"]
    assert split >= 3 * len(convs), "every conv's weight and its batch norm's scale and shift are split"
    assert parts[0].tensors["bn1.running_mean"].shape == (4,)
