"""BatchNormalization (opsets 9-15, and the legacy `spatial` attribute): inference form -> one Map; training mode
(opset 14+, training_mode=1) -> the batch's per-channel statistics (two Reduces), the normalising Map and the
running statistics' per-channel updates.

Invariant: y = (x - mean) / sqrt(var + epsilon) * scale + B with per-channel parameters (per activation when
spatial=0). In inference mean and var are the inputs; in training they are the batch's over every axis but 1 (the
population variance), and running_mean = input_mean * momentum + mean * (1 - momentum), running_var likewise from
the population variance, as the ONNX spec and onnxruntime compute them (PyTorch's buffer takes the unbiased
variance instead: compiler/train/modes.py adds that correction where a training step wants PyTorch's numbers).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map, Move, Operand, Reduce, Role
from compiler.ops.base import OpDef, fail, given, map_op, operand, out, output_operand, register, require

PARAMETERS = ("scale", "B", "input_mean", "input_var")
TRAINING_OPSET = 14      # training_mode and the three-output training form (opsets 9-13 marked it by five outputs)


@register("BatchNormalization")
class BatchNormalization(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x, *parameters = require(node, ins, 5)
        training = _check_mode(node, graph)
        if len(x.shape) < 2 or not x.dtype.is_float:
            raise fail(node, f"input is {x.dtype.value} {list(x.shape)}; expected a float N x C x ... tensor")
        expected = _parameter_shape(node, x.shape)
        for name, t in zip(PARAMETERS, parameters):
            if t.shape != expected:
                per = "one per channel" if len(expected) == 1 else "spatial=0: one per activation"
                raise fail(node, f"{name} has shape {list(t.shape)}, expected {list(expected)} ({per})")
        outs = [out(node, x.shape, x.dtype)]
        if training:    # running_mean and running_var take the type of input_mean and input_var
            outs += [out(node, parameters[1 + i].shape, parameters[1 + i].dtype, i) for i in (1, 2)
                     if i < len(node.outputs) and node.outputs[i]]
        return outs

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        if not node.attr("training_mode", 0):
            return [_normalize(node, *given(node, args, 5))]
        x, scale, bias, mean, var = given(node, args, 5)
        batch_mean, batch_var = (s.reshape(-1) for s in moments(x, statistic_axes(x.ndim)))
        momentum = float(node.attr("momentum", 0.9))
        return [_normalize(node, x, scale, bias, batch_mean, batch_var),
                (mean * momentum + batch_mean * (1 - momentum)).astype(mean.dtype),
                (var * momentum + batch_var * (1 - momentum)).astype(var.dtype)][:len(node.outputs)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        if node.attr("training_mode", 0):
            return _lower_training(node, graph)
        # The per-channel factor scale/sqrt(var+eps) and shift fold ahead of time (O(C) work), so
        # each element costs a multiply and an add.
        return map_op(node, graph, lambda *a: _normalize(node, *a), ops_per_element=2)


def _check_mode(node: Node, graph: Graph) -> bool:
    """Whether the node is in training mode, after refusing the forms not supported."""
    training = bool(node.attr("training_mode", 0))
    extra = any(node.outputs[1:])
    if graph.opset < TRAINING_OPSET and (training or extra):
        raise fail(node, f"training mode needs opset {TRAINING_OPSET} or later (training_mode=1, outputs Y, "
                         f"running_mean, running_var); the model is opset {graph.opset}, whose five-output training "
                         f"form is not supported")
    if not training and extra:
        raise fail(node, "only Y is an output in inference (training_mode=0); running_mean and running_var are "
                         "training outputs (training_mode=1)")
    if training and len(node.outputs) > 3:
        raise fail(node, f"training mode has three outputs (Y, running_mean, running_var), not {len(node.outputs)}")
    if training and node.attr("spatial", 1) == 0:
        raise fail(node, "training mode with spatial=0 (statistics per activation) is not supported")
    return training


def _parameter_shape(node: Node, shape: tuple[int, ...]) -> tuple[int, ...]:
    return shape[1:] if node.attr("spatial", 1) == 0 else shape[1:2]


def _normalize(node: Node, x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
               var: np.ndarray) -> np.ndarray:
    work: type[np.floating[Any]] = np.float64 if x.dtype == np.float64 else np.float32
    epsilon = float(node.attr("epsilon", 1e-5))
    # (C,) parameters line up with axis 1; spatial=0 parameters already have x's trailing shape
    lead = (-1,) + (1,) * (x.ndim - 2) if len(_parameter_shape(node, x.shape)) == 1 else scale.shape
    scale, bias, mean, var = (np.asarray(p).astype(work).reshape(lead) for p in (scale, bias, mean, var))
    y = (x.astype(work) - mean) * (scale / np.sqrt(var + work(epsilon))) + bias
    normalized: np.ndarray = y.astype(x.dtype)
    return normalized


# -- the batch's statistics (shared with NormStats, compiler/ops/train/norm.py, so both give the same numbers) ----

def statistic_axes(rank: int) -> tuple[int, ...]:
    """The axes a batch statistic reduces: every axis but the channels (1)."""
    return (0,) + tuple(range(2, rank))


def work_dtype(dtype: DType) -> DType:
    """Statistics are computed and kept in fp64 for fp64 data, fp32 otherwise."""
    return DType.fp64 if dtype == DType.fp64 else DType.fp32


def in_work(x: ArrayLike) -> np.ndarray:
    """x as the statistics read it: fp64 for fp64 data, fp32 otherwise (work_dtype)."""
    array = np.asarray(x)
    return array.astype(np.float64 if array.dtype == np.float64 else np.float32)


def moments(x: ArrayLike, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(mean, population variance) of x over `axes`, kept as size-1 axes; two passes, in the work precision."""
    wide = in_work(x)
    mean = wide.mean(axis=axes, keepdims=True)
    return mean, np.square(wide - mean).mean(axis=axes, keepdims=True)


def _lower_training(node: Node, graph: Graph) -> list[IROp]:
    """mean and var Reduces over the batch axes (never cut: a chunk takes whole channels), the normalising Map and,
    per running statistic, a Map over the channels. Per-channel operands enter the element-wise ops as [1, C, 1...]
    views, so that a chunk along any axis slices them alike."""
    x = operand(graph, node.inputs[0])
    axes = statistic_axes(len(x.shape))
    channels = x.shape[1]
    aligned = (1, channels) + (1,) * (len(x.shape) - 2)
    dtype = work_dtype(x.dtype)
    mean, var = (Operand(f"{node.name}:{what}", (channels,), dtype, Role.output) for what in ("mean", "var"))
    views = {what: aligned_view(node, source, aligned, what)
             for what, source in (("scale", operand(graph, node.inputs[1])), ("B", operand(graph, node.inputs[2])),
                                  ("mean", mean), ("var", var))}
    ops: list[IROp] = [
        # per element: the mean's add (1), then the variance's subtract, square and add (3)
        Reduce(name=mean.tensor, node=node.name, op=node.op, inputs=(x,), output=mean, axes=axes,
               ops_per_element=1, fn=lambda a: moments(a, axes)[0].reshape(-1)),
        views["mean"][0],
        Reduce(name=var.tensor, node=node.name, op=node.op, inputs=(x, views["mean"][1]), output=var, axes=axes,
               ops_per_element=3, fn=lambda a, m: _variance(a, m, axes)),
        views["var"][0], views["scale"][0], views["B"][0],
        # as in inference, the per-channel factor and shift fold (O(C)): a multiply and an add per element
        Map(name=node.name, node=node.name, op=node.op,
            inputs=(x, views["scale"][1], views["B"][1], views["mean"][1], views["var"][1]),
            output=output_operand(node, graph), ops_per_element=2, fn=lambda *a: _normalize(node, *a))]
    momentum = float(node.attr("momentum", 0.9))
    for i, batch in ((1, mean), (2, var)):
        if i < len(node.outputs) and node.outputs[i]:
            written = output_operand(node, graph, i)
            ops.append(Map(name=f"{node.name}:{i}", node=node.name, op=node.op,
                           inputs=(operand(graph, node.inputs[2 + i]), read(batch)), output=written,
                           ops_per_element=2,    # a multiply and a multiply-add per channel
                           fn=lambda r, b, dt=written.dtype.numpy: (r * momentum + b * (1 - momentum)).astype(dt)))
    return ops


def _variance(x: ArrayLike, mean: ArrayLike, axes: tuple[int, ...]) -> np.ndarray:
    wide = in_work(x)
    variance: np.ndarray = np.square(wide - np.asarray(mean, wide.dtype)).mean(axis=axes).reshape(-1)
    return variance


def read(o: Operand) -> Operand:
    """An op's output as the next op's input."""
    return Operand(o.tensor, o.shape, o.dtype, Role.input)


def aligned_view(node: Node, source: Operand, shape: tuple[int, ...], what: str) -> tuple[Move, Operand]:
    """`source` seen as `shape`, the same elements with the data's rank (a per-channel [C] as [1, C, 1...]): the view
    (no bytes move) and the operand that reads it (a weight seen through a view is still a weight)."""
    source = read(source) if source.role == Role.output else source
    view = Operand(f"{node.name}:{what}@aligned", shape, source.dtype, Role.output)
    return (Move(name=view.tensor, node=node.name, op=node.op, inputs=(source,), output=view, view=True,
                 fn=lambda a: np.asarray(a).reshape(shape)), Operand(view.tensor, shape, source.dtype, source.role))
