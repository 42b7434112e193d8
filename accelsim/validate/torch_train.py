"""The host's side of a training case: the case's Graph run in PyTorch op by op (torch.autograd gives the backward
pass, torch.optim the update), and each phase of the step timed on its own.

Invariant: torch trains exactly the Graph accelsim trains: the same nodes (an op this file cannot translate is an
error, never skipped; a node folded at build time is the constant accelsim folded it to), the same parameters
(compiler.train.parameters), cross-entropy over the output with mean reduction, and the optimizer with accelsim's
hyper-parameters (compiler.train.step.DEFAULTS); the optimizer runs PyTorch's default implementation on CPU
(foreach=None, which on CPU tensors is the per-parameter loop).
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.graph import Graph, Node
from compiler.train import parameters
from compiler.train.step import DEFAULTS
from accelsim.validate.train_cases import PHASES, TrainCase

WARMUP_STEPS = 3        # the first step allocates the optimizer's state and torch's kernels' scratch


def _conv(node: Node, x, w, b=None):
    import torch.nn.functional as F

    pads = node.attr("pads", [0, 0, 0, 0])
    if pads[:2] != pads[2:]:
        raise UserError(f"node {node.name!r}: asymmetric padding {pads} has no torch conv2d argument")
    return F.conv2d(x, w, b, stride=node.attr("strides", [1, 1]), padding=pads[:2],
                    dilation=node.attr("dilations", [1, 1]), groups=node.attr("group", 1))


def _max_pool(node: Node, x):
    import torch.nn.functional as F

    pads = node.attr("pads", [0, 0, 0, 0])
    if pads[:2] != pads[2:]:
        raise UserError(f"node {node.name!r}: asymmetric padding {pads} has no torch max_pool2d argument")
    return F.max_pool2d(x, node.attr("kernel_shape"), stride=node.attr("strides", [1, 1]), padding=pads[:2],
                        ceil_mode=bool(node.attr("ceil_mode", 0)))


def _gemm(node: Node, a, b, c=None):
    a = a.T if node.attr("transA", 0) else a
    b = b.T if node.attr("transB", 0) else b
    if node.attr("alpha", 1.0) != 1.0 or node.attr("beta", 1.0) != 1.0:
        raise UserError(f"node {node.name!r}: Gemm's alpha and beta other than 1 are not translated")
    return a @ b if c is None else c + a @ b


def _layer_norm(node: Node, x, scale, bias=None):
    import torch.nn.functional as F

    axis = node.attr("axis", -1) % x.dim()
    return F.layer_norm(x, x.shape[axis:], scale, bias, eps=node.attr("epsilon", 1e-5))


def _out_shape(graph: Graph, node: Node) -> tuple[int, ...]:
    return tuple(graph.tensors[node.outputs[0]].shape)


# ONNX op -> torch, for the ops train_cases.MODELS use: (node, graph, *inputs) -> output
OPS: dict[str, Callable] = {
    "Add": lambda n, g, a, b: a + b, "Mul": lambda n, g, a, b: a * b, "Div": lambda n, g, a, b: a / b,
    "Relu": lambda n, g, x: x.relu(), "Erf": lambda n, g, x: x.erf(),
    "MatMul": lambda n, g, a, b: a @ b, "Gemm": lambda n, g, *xs: _gemm(n, *xs),
    "Conv": lambda n, g, *xs: _conv(n, *xs), "MaxPool": lambda n, g, x: _max_pool(n, x),
    "Flatten": lambda n, g, x: x.reshape(_out_shape(g, n)),
    "Reshape": lambda n, g, x, shape: x.reshape(_out_shape(g, n)),
    "Transpose": lambda n, g, x: x.permute(*n.attr("perm", list(range(x.dim()))[::-1])),
    "Softmax": lambda n, g, x: x.softmax(dim=n.attr("axis", -1)),
    "LayerNormalization": lambda n, g, *xs: _layer_norm(n, *xs),
}


@dataclass
class TorchStep:
    """One training step of a case's Graph in torch: `forward()` returns the loss; `optimizer.step()` updates."""

    graph: Graph
    values: dict                 # graph name -> tensor: parameters (leaves requiring grad), constants, inputs
    labels: object               # class ids, one per row of the output's last axis
    params: list
    optimizer: object

    def outputs(self):
        """The graph's output (logits), node by node; nodes folded at build time are skipped (their outputs are
        among `values`)."""
        values = dict(self.values)
        for node in self.graph.nodes:
            if node.outputs[0] not in values:
                values[node.outputs[0]] = OPS[node.op](node, self.graph, *(values[name] for name in node.inputs
                                                                            if name))
        return values[self.graph.outputs[0]]

    def forward(self):
        """The loss: cross-entropy with mean reduction, the output's last axis the classes."""
        import torch.nn.functional as F

        scores = self.outputs()
        return F.cross_entropy(scores.reshape(-1, scores.shape[-1]), self.labels)


def _tensor(value, dtype):
    import torch

    array = np.asarray(value)
    return torch.tensor(array, dtype=dtype) if array.dtype.kind == "f" else torch.tensor(array)


def torch_step(case: TrainCase) -> TorchStep:
    """The case's model, inputs, labels and optimizer in torch, on the CPU; parameters drawn (seeded) as
    N(0, 1 / fan-in), the Builder's rule, since their values do not change the time."""
    import torch

    if case.dtype != DType.fp32:
        raise UserError(f"validation case {case.key!r}: the host measures fp32 training only")
    graph = case.graph()
    missing = sorted({node.op for node in graph.nodes} - set(OPS))
    if missing:
        raise UserError(f"validation case {case.key!r}: no torch translation of {', '.join(missing)} "
                        f"(accelsim/validate/torch_train.py)")
    gen = torch.Generator().manual_seed(0)
    trained = set(parameters(graph))
    values, params = {}, []
    for name, value in {**graph.weights, **graph.constants}.items():
        if name in trained:
            shape = graph.tensors[name].shape
            fan_in = math.prod(shape[1:]) if len(shape) > 1 else shape[0]
            values[name] = (torch.randn(shape, generator=gen) / math.sqrt(fan_in)).requires_grad_(True)
            params.append(values[name])
        elif value is not None:
            values[name] = _tensor(value, torch.float32)
    for name in graph.inputs:
        values[name] = torch.randn(graph.tensors[name].shape, generator=gen)
    logits = graph.tensors[graph.outputs[0]].shape
    labels = torch.randint(0, logits[-1], (math.prod(logits[:-1]),), generator=gen)
    return TorchStep(graph, values, labels, params, _optimizer(case.optimizer, params))


def _optimizer(name: str, params: list):
    import torch

    s = DEFAULTS[name]
    if name == "sgd":
        return torch.optim.SGD(params, lr=s["lr"], momentum=s["momentum"], weight_decay=s["weight_decay"])
    return torch.optim.AdamW(params, lr=s["lr"], betas=(s["beta1"], s["beta2"]), eps=s["eps"],
                             weight_decay=s["weight_decay"])


def _steps(step: TorchStep, count: int, clock: Callable[[], float]) -> dict[str, float]:
    """Mean seconds per phase over `count` steps, each phase timed on its own; gradients are set to None between
    steps (torch's default zero_grad), untimed."""
    spent = dict.fromkeys(PHASES, 0.0)
    for _ in range(count):
        start = clock()
        loss = step.forward()
        forward_end = clock()
        loss.backward()
        backward_end = clock()
        step.optimizer.step()
        end = clock()
        step.optimizer.zero_grad(set_to_none=True)
        spent["forward"] += forward_end - start
        spent["backward"] += backward_end - forward_end
        spent["optimizer"] += end - backward_end
    return {phase: s / count for phase, s in spent.items()}


def clock_for(threads: int) -> Callable[[], float]:
    """On one thread, the thread's CPU time: torch then runs every op, forward and backward, on the calling thread,
    and the time slices a shared core gives other tenants are not counted (on the 2-core CI guests, with two other
    processes busy, wall time read block256's forward at 1.9x its quiet time); a busy neighbour still slows the
    thread itself through shared caches and the host (CPU time at load 5.8 read 0-38% above a quieter run's). On
    more threads, wall time."""
    return time.thread_time if threads == 1 else time.perf_counter


def measure_step(case: TrainCase, threads: int, repeats: int, sample_s: float) -> dict[str, float]:
    """Median seconds of each phase of the case's training step on `threads` torch threads (clock_for): WARMUP_STEPS
    steps, then `repeats` samples of as many steps as last about `sample_s`, each sample a mean per phase."""
    import torch
    from threadpoolctl import threadpool_limits

    clock = clock_for(threads)
    before = torch.get_num_threads()
    with threadpool_limits(threads):
        torch.set_num_threads(threads)
        try:
            step = torch_step(case)
            _steps(step, WARMUP_STEPS, clock)
            once_s = sum(_steps(step, 1, clock).values())
            inner = max(1, math.ceil(sample_s / once_s))
            samples = [_steps(step, inner, clock) for _ in range(repeats)]
        finally:
            torch.set_num_threads(before)
    return {phase: statistics.median(s[phase] for s in samples) for phase in PHASES}
