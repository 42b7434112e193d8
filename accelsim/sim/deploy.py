"""What an int8 deployment does to a graph before it quantises it (TensorRT, ONNX Runtime's quantisation
pre-processing, PyTorch's conv-bn fusion): a BatchNormalization after a Conv is folded into the Conv's weights and bias.

Invariant: the folded graph computes the same function in exact arithmetic; in fp32 its outputs differ from the
original's by roundings only (the Conv's products are scaled before they are summed instead of after).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from compiler.graph import Graph, Node


def fold_batchnorm(graph: Graph) -> tuple[Graph, int]:
    """The graph with every inference BatchNormalization whose input is a float Conv's output, read by it alone,
    with constant statistics, folded into that Conv (which then writes the BatchNormalization's output); and how many
    were folded. The original graph is left as it was."""
    uses = Counter(name for node in graph.nodes for name in node.inputs if name) + Counter(graph.outputs)
    producers = graph.producers()
    weights, tensors = dict(graph.weights), dict(graph.tensors)
    convs: dict[str, Node] = {}
    dropped: set[str] = set()
    for bn in graph.nodes:
        conv = producers.get(bn.inputs[0]) if bn.op == "BatchNormalization" and bn.inputs else None
        if conv is None or conv.op != "Conv" or uses[bn.inputs[0]] != 1 or not _inference(bn):
            continue
        folded = _folded(graph, conv, bn)
        if folded is None:
            continue
        (w_name, w), (b_name, b) = folded
        for name, value in ((w_name, w), (b_name, b)):
            weights[name] = value
            tensors[name] = replace(graph.tensor(conv.inputs[1]), name=name, shape=value.shape)
        convs[conv.name] = Node(conv.name, "Conv", (conv.inputs[0], w_name, b_name), (bn.outputs[0],),
                                dict(conv.attrs), conv.domain)
        dropped.add(bn.name)
    if not dropped:
        return graph, 0
    nodes = [convs.get(node.name, node) for node in graph.nodes if node.name not in dropped]
    return replace(graph, nodes=nodes, weights=weights, tensors=tensors), len(dropped)


def _inference(bn: Node) -> bool:
    """A BatchNormalization that normalises by its stored statistics and writes only its output."""
    return not bn.attr("training_mode", 0) and len([o for o in bn.outputs if o]) == 1 and len(bn.inputs) == 5


def _folded(graph: Graph, conv: Node, bn: Node):
    """((weight name, W * k), (bias name, (b - mean) * k + beta)) with k = scale / sqrt(var + eps) per output
    channel, in the Conv's weight dtype; None where a value is not a constant or the Conv's operands are not float."""
    w = graph.value(conv.inputs[1])
    has_bias = len(conv.inputs) > 2 and bool(conv.inputs[2])
    bias = graph.value(conv.inputs[2]) if has_bias else 0.0
    params = [graph.value(name) for name in bn.inputs[1:5]]
    if w is None or bias is None or any(p is None for p in params):
        return None
    if not (graph.tensor(conv.inputs[0]).dtype.is_float and graph.tensor(conv.inputs[1]).dtype.is_float):
        return None
    scale, beta, mean, var = (np.asarray(p, dtype=np.float64) for p in params)
    k = scale / np.sqrt(var + float(bn.attr("epsilon", 1e-5)))
    w = np.asarray(w)
    folded_w = (w.astype(np.float64) * k.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
    folded_b = ((np.asarray(bias, dtype=np.float64) - mean) * k + beta).astype(w.dtype)
    return (_fresh(graph, f"{conv.name}:folded_weight"), folded_w), (_fresh(graph, f"{conv.name}:folded_bias"),
                                                                      folded_b)


def _fresh(graph: Graph, name: str) -> str:
    while name in graph.tensors:
        name += "_"
    return name
