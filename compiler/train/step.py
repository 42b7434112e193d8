"""A training step as one Graph: the model's forward pass, a loss, the backward pass and the optimizer's update.

    step = training_graph(zoo.build("alexnet", batch=128), loss="cross_entropy", optimizer=Optimizer("sgd"))
    step.graph      # inputs: the model's and `labels`; outputs: the loss, every updated parameter and state

Invariant: the forward pass is the training one (BatchNorm on batch statistics, compiler.train.modes); the
parameters are the model's float weights that reach the loss (not BatchNorm's running statistics, not shapes or
tables, not scalars); each gets one gradient and one update node, and its optimizer state enters as weights that
start at zero (a first step) and leave as outputs, as do the new running statistics. A Graph per step.
"""
from __future__ import annotations

import copy
import math
from typing import Any
from dataclasses import dataclass, field

import numpy as np

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.graph import Graph, Node, Tensor
from compiler.ops.base import COMM_DOMAIN, normalize_axis
from compiler.ops.reduce import AXES_INPUT_OPSET
from compiler.ops.shapes import opdef
from compiler.train import rules  # noqa: F401  (registers every gradient rule)
from compiler.train.autodiff import Tape, backprop, differentiate
from compiler.train.memory import Memory, liveness, profile
from compiler.train.modes import training_forward
from compiler.train.recompute import MODES, recompute as rerun

# model: its first output is its own loss (an ONNX training graph); stage: a pipeline stage, no loss of its own (the
# gradients of its outputs arrive as inputs `<output>/grad`, its float inputs' gradients leave as outputs)
LOSSES = ("cross_entropy", "mse", "model", "stage")
DEFAULTS = {"sgd": {"lr": 0.01, "momentum": 0.9, "weight_decay": 5e-4},
            "adamw": {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01}}
STATE = {"sgd": ("v",), "adamw": ("m", "v")}
FP16_LOSS_SCALE = 65536.0      # PyTorch's GradScaler starts there


@dataclass(frozen=True)
class Optimizer:
    """An optimizer and its hyper-parameters (PyTorch's names and defaults, AlexNet's for SGD)."""

    name: str = "sgd"
    settings: dict[str, float] = field(default_factory=dict)
    step: int = 1                                 # AdamW's bias correction uses the step number

    def __post_init__(self) -> None:
        if self.name not in DEFAULTS:
            raise ModelError(f"unknown optimizer {self.name!r}; allowed: {', '.join(DEFAULTS)}")
        unknown = sorted(set(self.settings) - set(DEFAULTS[self.name]))
        if unknown:
            raise ModelError(f"optimizer {self.name} takes no setting {unknown[0]!r}; it takes "
                             f"{', '.join(DEFAULTS[self.name])}")
        for key, value in self.settings.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
                raise ModelError(f"optimizer {self.name}: {key}={value!r} must be a finite number >= 0")
        if not isinstance(self.step, int) or self.step < 1:
            raise ModelError(f"optimizer step {self.step!r} must be an integer >= 1")

    @property
    def attrs(self) -> dict[str, Any]:
        return {**DEFAULTS[self.name], **self.settings}

    @property
    def state(self) -> tuple[str, ...]:
        if self.name == "sgd" and not self.attrs["momentum"]:
            return ()
        return STATE[self.name]


@dataclass
class TrainingStep:
    graph: Graph
    loss: str | None                             # None for a pipeline stage
    labels: str | None                           # the input the loss compares with (None: the model's own loss)
    params: list[str]
    grads: dict[str, str]                        # parameter -> its gradient tensor
    state: dict[str, list[str]]                  # parameter -> its optimizer state (weights, zero at step 1)
    updated: dict[str, list[str]]                # parameter -> [new parameter, new state...] (graph outputs)
    phase: dict[str, str]                        # node name -> forward, loss, backward, recompute or optimizer
    owner: dict[str, str]                        # node name -> the forward node (layer) it belongs to
    running: dict[str, str]                      # BatchNorm running statistic -> its value after the step (outputs)
    input_grads: dict[str, str] = field(default_factory=dict)   # a stage's float input -> its gradient (outputs)

    def memory(self) -> Memory:
        """Peak memory over this step's schedule, by category (compiler.train.memory)."""
        return liveness(self.graph, self.phase, *self._held(), in_place=self._in_place())

    def profile(self) -> tuple[list[tuple[int, ...]], int, int]:
        """Bytes live at each node of the schedule by category, the activations kept for the backward pass and every
        gradient's bytes (compiler.train.memory.profile)."""
        return profile(self.graph, self.phase, *self._held(), in_place=self._in_place())

    def _in_place(self) -> dict[str, str]:
        """Each parameter's new value -> the parameter: the update writes it into the parameter's bytes (an fp32
        master's update is cast back into the narrow parameter, not into a second copy of it)."""
        return {outs[0]: p for p, outs in self.updated.items()}

    def _held(self) -> tuple[set[str], set[str], set[str]]:
        """The gradients, the optimizer's state and the gradient accumulators, as liveness counts them."""
        state = {s for v in self.state.values() for s in v}
        accumulated = {s for s in state if s.startswith("accumulated/")}
        return set(self.grads.values()), state - accumulated, accumulated


def parameters(graph: Graph) -> list[str]:
    """The weights training updates: float, rank >= 1, not read as a shape or axis list, not BatchNorm's running
    statistics, not the zoo's tables (named const*)."""
    fixed: set[str] = set()
    for node in graph.nodes:
        if node.op == "BatchNormalization":
            fixed.update(node.inputs[3:5])
        fixed.update(node.inputs[i] for i in opdef(graph, node).value_inputs if i < len(node.inputs))
    return [name for name in graph.weights
            if name not in fixed and name not in graph.constants and graph.tensors[name].dtype.is_float
            and graph.tensors[name].shape and not name.rsplit("/", 1)[-1].startswith("const")]


def training_graph(graph: Graph, loss: str = "cross_entropy", optimizer: Optimizer = Optimizer(),
                   params: list[str] | None = None, accumulate: bool = False,
                   loss_scale: float | None = None, recompute: str = "none", input_grads: bool = False) -> TrainingStep:
    """One training step of `graph`. Parameters stored narrower than fp32 (bf16, fp16, fp8) train mixed-precision:
    an fp32 master copy and fp32 optimizer state, the update cast back to the parameter's dtype. `accumulate`: one
    micro-batch of several, each gradient added into an fp32 accumulator (a weight, live the whole step).
    `loss_scale`: the gradient of the loss starts at this value and every gradient is divided by it before the
    update (fp16's loss scaling); default 65,536 when any parameter is fp16. `recompute`: none, selective or full
    (compiler.train.recompute). `input_grads`: the gradients of the model's float inputs leave as outputs too (a
    pipeline stage's, for the stage before it; loss="stage" implies it)."""
    if loss not in LOSSES:
        raise ModelError(f"unknown loss {loss!r}; allowed: {', '.join(LOSSES)}")
    if recompute not in MODES:
        raise ModelError(f"unknown recompute mode {recompute!r}; allowed: {', '.join(MODES)}")
    if not graph.outputs:
        raise ModelError(f"{graph.source}: the model has no output to compute a loss from")
    graph = _copy(graph)
    running = training_forward(graph)
    phase = {node.name: "forward" for node in graph.nodes}
    tape = Tape(graph, scope="loss")
    wanted = parameters(graph) if params is None else list(params)
    if loss_scale is None and any(graph.tensors[p].dtype == DType.fp16 for p in wanted):
        loss_scale = FP16_LOSS_SCALE
    sent = list(graph.outputs)
    received = [i for i in graph.inputs if graph.tensors[i].dtype.is_float] if input_grads or loss == "stage" else []
    if loss == "stage":        # the next stage's gradients (already loss-scaled) seed this one's backward pass
        loss_name = labels = None
        seeds = {out: _input(graph, f"{out}/grad", graph.tensors[out].shape, graph.tensors[out].dtype) for out in sent
                 if graph.tensors[out].dtype.is_float}
        grads = backprop(graph, seeds, wanted + received, tape)
    else:
        loss_name, labels = {"cross_entropy": _cross_entropy, "mse": _mse, "model": _own}[loss](tape, sent[0])
        phase = {node.name: phase.get(node.name, "loss") for node in graph.nodes}    # the loss may drop a gather
        grads = differentiate(graph, loss_name, wanted + received, seed=loss_scale or 1.0, tape=tape)
    through = {i: grads.pop(i) for i in received if i in grads}
    phase.update({node.name: "backward" for node in graph.nodes if node.name not in phase})
    if not grads:
        raise ModelError(f"{graph.source}: no parameter of the model reaches the loss; there is nothing to train")
    owner_of = {node.name: node.name for node in graph.nodes if phase[node.name] == "forward"}
    owner_of.update(tape.owner)
    rerun(graph, phase, owner_of, recompute)
    trained = [p for p in wanted if p in grads]
    tape.scope = "optimizer"
    owner = _owners(graph, phase, trained)
    state, updated, kept = {}, {}, {}
    for p in trained:
        tape.at_name = owner.get(p)
        kept[p] = _update_input(tape, graph, p, grads[p], accumulate, loss_scale, phase)
        master = kept[p]["master"]
        state[p] = kept[p]["state"] + [_zeros_like(graph, master, f"{optimizer.name}.{kind}/{p}")
                                       for kind in optimizer.state]
        moments = state[p][len(kept[p]["state"]):]
        attrs = {**optimizer.attrs, **({"step": optimizer.step} if optimizer.name == "adamw" else {})}
        made = tape.node("SGD" if optimizer.name == "sgd" else "AdamW", [master, kept[p]["grad"], *moments],
                         outputs=1 + len(moments), training=True, **attrs)
        outs = list(made) if isinstance(made, tuple) else [made]
        if master != p:        # the fp32 master's update, cast back for the next step's compute
            outs = [tape.node("Cast", [outs[0]], to=graph.tensors[p].dtype.onnx)] + outs
        updated[p] = outs
    tape.at_name = None
    graph.outputs = ([loss_name] if loss_name else sent) + list(through.values()) \
        + [name for p in trained for name in updated[p]] + list(running.values())
    phase.update({node.name: "optimizer" for node in graph.nodes if node.name not in phase})
    owner_of.update(tape.owner)
    return TrainingStep(graph, loss_name, labels, trained, {p: grads[p] for p in trained}, state, updated, phase,
                        owner_of, running, through)


def _update_input(tape: Tape, graph: Graph, p: str, grad: str, accumulate: bool, loss_scale: float | None,
                  phase: dict[str, str]) -> dict[str, Any]:
    """What the optimizer reads for p: the fp32 master (p itself when p is fp32), the gradient as it updates
    (accumulated, unscaled, in fp32) and the extra state that takes (master copy, accumulator). The cast and the
    accumulation run once per micro-batch: they belong to the backward pass."""
    extra: list[str] = []
    master = p
    if _narrow(graph.tensors[p].dtype):
        master = _zeros_like(graph, p, f"master/{p}", DType.fp32, copy=True)
        extra.append(master)
    if _narrow(graph.tensors[grad].dtype):
        grad = tape.node("Cast", [grad], to=DType.fp32.onnx)
        phase[grad] = "backward"
    if accumulate:
        buffer = _zeros_like(graph, master, f"accumulated/{p}")
        extra.append(buffer)
        grad = tape.node("Add", [buffer, grad])
        phase[grad] = "backward"
    if loss_scale and loss_scale != 1:
        grad = tape.node("Mul", [grad, tape.const(np.asarray(1.0 / loss_scale), DType.fp32, "unscale")])
    return {"master": master, "grad": grad, "state": extra}


def _narrow(dtype: DType) -> bool:
    """Narrower than fp32: a float its master copy and its optimizer state do not stay in."""
    return dtype.is_float and dtype.bits < 32


def _owners(graph: Graph, phase: dict[str, str], params: list[str]) -> dict[str, str]:
    """Parameter -> the forward node that first reads it (the layer its update is reported with)."""
    owner: dict[str, str] = {}
    for node in graph.nodes:
        if phase.get(node.name) == "forward":
            for name in node.inputs:
                owner.setdefault(name, node.name)
    return {p: owner[p] for p in params if p in owner}


def _cross_entropy(t: Tape, logits: str) -> tuple[str, str]:
    shape = t.shape(logits)
    if len(shape) < 2 or not t.dtype(logits).is_float:
        raise ModelError(f"{t.graph.source}: cross-entropy needs float scores [N, classes] or [batch, tokens, vocab]; "
                         f"the model's output {logits!r} is {t.dtype(logits).value} {list(shape)}")
    labels = _input(t.graph, "labels", shape[:-1], DType.int64)
    rows = math.prod(shape[:-1])
    gather = _class_gather(t.graph, logits)
    if gather is not None:           # the loss reads the rank's classes; the gather goes
        t.graph.nodes.remove(gather)
        del t.graph.tensors[logits]
        logits = gather.inputs[0]
    if _narrow(t.dtype(logits)):     # the loss in fp32, as autocast computes it: a scaled gradient seed fits
        logits = t.node("Cast", [logits], to=DType.fp32.onnx)
    scores = t.reshape(logits, (rows, t.shape(logits)[-1]))
    flat = t.reshape(labels, (rows,))
    if gather is not None:
        return _vocab_parallel(t, scores, flat, shape[-1], gather), labels
    loss, _ = t.node("SoftmaxCrossEntropyLoss", [scores, flat], outputs=2, reduction="mean")
    return loss, labels


def _class_gather(graph: Graph, logits: str) -> Node | None:
    """The AllGather that made the logits whole along their class axis (tensor parallelism's column-parallel head,
    compiler.parallel.tensor), when nothing else reads what it gathered."""
    node = graph.producers().get(logits)
    if node is None or node.domain != COMM_DOMAIN or node.op != "AllGather":
        return None
    rank = len(graph.tensor(logits).shape)
    if normalize_axis(node, int(node.attr("axis", 0)), rank) != rank - 1:
        return None
    return None if any(logits in n.inputs for n in graph.nodes) else node


def _vocab_parallel(t: Tape, scores: str, labels: str, classes: int, gather: Node) -> str:
    """Megatron-LM's vocab-parallel cross-entropy (Shoeybi et al. 2019, sec. 3), from this rank's columns of the
    scores [rows, classes / ranks]: the mean over rows of log(sum_c exp(x_c - m)) - (x_label - m), m the row's
    maximum, with three all-reduces over [rows, 1] (the maxima, the sums of exponentials, the label's shifted score,
    which one rank holds and the others give as 0) where the whole loss would gather [rows, classes]. The rank's
    classes are its Shard of 0..classes-1. No gradient passes through the maxima (comm rules: a max all-reduce)."""
    group = {"group": gather.attr("group"), "size": int(gather.attr("size"))}

    def per_row(op: str, x: str) -> str:
        if t.graph.opset >= AXES_INPUT_OPSET[op]:
            return t.node(op, [x, t.ints([1])], keepdims=1)
        return t.node(op, [x], axes=[1], keepdims=1)

    def all_reduce(x: str, **attrs: Any) -> str:
        reduced: str = t.node("AllReduce", [x], domain=COMM_DOMAIN, **group, **attrs)
        return reduced
    top = all_reduce(per_row("ReduceMax", scores), reduction="max")
    shifted = t.node("Sub", [scores, top])
    total = all_reduce(per_row("ReduceSum", t.node("Exp", [shifted])))
    mine = t.node("Shard", [t.ints(np.arange(classes))], domain=COMM_DOMAIN, **group, axis=0)
    hit = t.node("Equal", [t.reshape(labels, (t.shape(labels)[0], 1)), mine])
    label = all_reduce(per_row("ReduceSum", t.node("Where", [hit, shifted, t.const(0, t.dtype(scores), "zero")])))
    return t.node("ReduceMean", [t.node("Sub", [t.node("Log", [total]), label])], keepdims=0)


def _own(t: Tape, output: str) -> tuple[str, None]:
    """The model computes its loss (a SoftmaxCrossEntropyLoss node, say): its first output, a float scalar."""
    if t.graph.tensor(output).elements != 1 or not t.dtype(output).is_float:
        raise ModelError(f"{t.graph.source}: loss 'model' takes the model's first output as its loss, but {output!r} "
                         f"is {t.dtype(output).value} {list(t.shape(output))}, not a float scalar")
    return output, None


def _mse(t: Tape, output: str) -> tuple[str, str]:
    target = _input(t.graph, "target", t.shape(output), t.dtype(output))
    diff = t.node("Sub", [output, target])
    return t.node("ReduceMean", [t.node("Mul", [diff, diff])], keepdims=0), target


def _input(graph: Graph, name: str, shape: tuple[int, ...], dtype: DType) -> str:
    if name in graph.tensors:
        raise ModelError(f"{graph.source}: the model already has a tensor named {name!r}; the loss needs that name "
                         f"for its {name}")
    graph.inputs.append(name)
    graph.tensors[name] = Tensor(name, tuple(shape), dtype)
    return name


def _zeros_like(graph: Graph, p: str, name: str, dtype: DType | None = None, copy: bool = False) -> str:
    """A new weight shaped like p: zeros (optimizer state, accumulators), or p's values (`copy`: a master copy);
    no values when p has none (a shape-only model)."""
    t = graph.tensors[p]
    dtype = dtype or t.dtype
    value = graph.weights.get(p)
    if value is not None:
        value = np.asarray(value).astype(dtype.numpy) if copy else np.zeros(t.shape, dtype.numpy)
    graph.weights[name] = value
    graph.tensors[name] = Tensor(name, t.shape, dtype)
    return name


def _copy(graph: Graph) -> Graph:
    """A graph to add to: new lists and dicts (and nodes), the same arrays."""
    new = copy.copy(graph)
    new.inputs, new.outputs = list(graph.inputs), list(graph.outputs)
    new.nodes = [copy.copy(n) for n in graph.nodes]
    new.tensors, new.weights, new.constants = dict(graph.tensors), dict(graph.weights), dict(graph.constants)
    return new
