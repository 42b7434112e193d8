"""A model's forward pass switched to the one a training step runs: every BatchNormalization normalises with its
batch's statistics and writes new running statistics, as PyTorch's train mode does.

    running = training_forward(graph)    # {"bn1.running_mean": "bn1/running_mean", "bn1.running_var": ...}

Invariant: only BatchNormalization nodes in inference form change (a second call changes nothing). Each becomes
ONNX's training form (opset 14+: training_mode=1, outputs Y, `<node>/running_mean` and the ONNX running variance
`<node>/running_var_population`), and `<node>/running_var` is PyTorch's buffer: the same update from the unbiased
batch variance, m * input_var + (1 - m) * var * n / (n - 1) = running_var_population * n / (n - 1) - input_var *
m / (n - 1), with n the values per channel. LayerNormalization needs no switch: it normalises alike in both modes.
"""
from __future__ import annotations

import math

import numpy as np

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.graph import Graph, Node, Tensor
from compiler.ops.batchnorm import TRAINING_OPSET
from compiler.ops.shapes import infer_node


def training_forward(graph: Graph) -> dict[str, str]:
    """Switch every BatchNormalization of `graph` (a copy the caller owns: its node list is edited) to training mode;
    returns each running statistic's weight -> the tensor holding its value after the step."""
    running: dict[str, str] = {}
    for node in list(graph.nodes):
        if node.op == "BatchNormalization" and node.domain in ("", "ai.onnx") and not node.attr("training_mode", 0):
            running.update(_switch(graph, node))
    return running


def _switch(graph: Graph, node: Node) -> dict[str, str]:
    x, _, _, input_mean, input_var = node.inputs
    if graph.opset < TRAINING_OPSET:
        raise ModelError(f"{graph.source}: {node.where()}: training a BatchNormalization needs its training mode, "
                         f"which ONNX has from opset {TRAINING_OPSET}; the model is opset {graph.opset}")
    shape = graph.tensor(x).shape
    n = math.prod(shape) // shape[1]
    if n < 2:
        raise ModelError(f"{graph.source}: {node.where()}: {list(shape)} gives one value per channel; a training "
                         f"step's batch variance needs more (PyTorch refuses the same)")
    population = f"{node.name}/running_var_population"
    for name in (f"{node.name}/running_mean", population):
        _unused(graph, name)
    switched = Node(node.name, node.op, node.inputs, (node.outputs[0], f"{node.name}/running_mean", population),
                    {**node.attrs, "training_mode": 1}, domain=node.domain)
    at = graph.nodes.index(node)
    graph.nodes[at] = switched
    infer_node(graph, switched)
    momentum = float(node.attr("momentum", 0.9))
    dtype = graph.tensor(input_var).dtype
    scaled = _add(graph, at + 1, Node(f"{node.name}/running_var_scaled", "Mul", (
        population, _scalar(graph, f"{node.name}/const_n_over_n_minus_1", n / (n - 1), dtype)),
        (f"{node.name}/running_var_scaled",)))
    kept = _add(graph, at + 2, Node(f"{node.name}/running_var_kept", "Mul", (
        input_var, _scalar(graph, f"{node.name}/const_m_over_n_minus_1", momentum / (n - 1), dtype)),
        (f"{node.name}/running_var_kept",)))
    unbiased = _add(graph, at + 3, Node(f"{node.name}/running_var", "Sub", (scaled, kept),
                                         (f"{node.name}/running_var",)))
    return {input_mean: switched.outputs[1], input_var: unbiased}


def _add(graph: Graph, at: int, node: Node) -> str:
    _unused(graph, node.outputs[0])
    graph.nodes.insert(at, node)
    infer_node(graph, node)
    return node.outputs[0]


def _unused(graph: Graph, name: str) -> None:
    if name in graph.tensors:
        raise ModelError(f"{graph.source}: the model already has a tensor named {name!r}; switching BatchNormalization "
                         f"to training mode needs that name")


def _scalar(graph: Graph, name: str, value: float, dtype: DType) -> str:
    _unused(graph, name)
    graph.weights[name] = np.asarray(value, dtype.numpy)
    graph.tensors[name] = Tensor(name, (), dtype)
    return name
