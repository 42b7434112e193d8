"""`evaluate_step`: one training step of a model in the numpy reference (`accelsim eval MODEL --train`): the loss,
every parameter's gradient, its updated value and the optimizer's new state.

Invariant: the step is compiler.train's training graph run as built, nothing recomputed beside it; labels given are
checked (kind of number, shape, class range) before it runs, never cast.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from accelsim.sim.api import eval_inputs
from accelsim.sim.inputs import eval_budget
from accelsim.sim.train import training_form
from compiler.errors import UserError
from compiler.graph import Graph, Tensor
from compiler.ops.interpret import run_graph
from compiler.train import LOSSES, Optimizer, training_graph
from compiler.train.step import FP16_LOSS_SCALE

LABELS = "labels"      # the key of the labels (cross_entropy's classes, mse's targets) among the given inputs


@dataclass(frozen=True)
class StepValues:
    """What one training step computes, every array as the reference interpreter gave it."""

    loss_kind: str                       # cross_entropy, mse or model
    optimizer: Optimizer
    loss: np.ndarray                     # the scalar loss
    params: dict[str, np.ndarray]        # parameter -> its value before the step (model order)
    gradients: dict[str, np.ndarray]     # parameter -> d loss / d parameter
    updated: dict[str, np.ndarray]       # parameter -> its value after the step
    state: dict[str, np.ndarray]         # optimizer state tensor (sgd.v/<param>, adamw.m/<param>, ...) -> new value
    running: dict[str, np.ndarray]       # BatchNorm running statistic -> after the step
    feeds: dict[str, np.ndarray]         # the inputs the step ran on: the model's, `labels` (mse: `target`)

    def arrays(self) -> dict[str, np.ndarray]:
        """For an .npz: `loss`, `gradient/<param>`, `updated/<param>`, `state/<state tensor>`, `running/<statistic>`."""
        return {"loss": self.loss, **{f"gradient/{p}": g for p, g in self.gradients.items()},
                **{f"updated/{p}": u for p, u in self.updated.items()},
                **{f"state/{s}": v for s, v in self.state.items()},
                **{f"running/{r}": v for r, v in self.running.items()}}

    def table(self, limit: int | None = 20) -> str:
        """The loss, then per parameter (model order, the first `limit`) its shape, the L2 norm of its gradient and
        of its change in the step (new - old), then the norms over all parameters."""
        settings = ", ".join(f"{k} {v:g}" for k, v in self.optimizer.attrs.items())
        lines = [f"loss {float(self.loss):.6g} ({self.loss_kind}; {self.optimizer.name}: {settings})"]
        norms = {p: (_norm(self.gradients[p]), _norm(np.asarray(self.updated[p], np.float64)
                                                      - np.asarray(self.params[p], np.float64)))
                 for p in self.params}
        shown = list(norms)[:limit] if limit else list(norms)
        shapes = {p: str(list(self.params[p].shape)) for p in shown}
        width = max([len("parameter")] + [len(p) for p in shown])
        shape_width = max([len("shape")] + [len(s) for s in shapes.values()])
        lines.append(f"{'parameter':<{width}}  {'shape':<{shape_width}}  {'gradient L2':>12}  {'update L2':>12}")
        lines += [f"{p:<{width}}  {shapes[p]:<{shape_width}}  {norms[p][0]:>12.4g}  {norms[p][1]:>12.4g}"
                  for p in shown]
        if len(shown) < len(norms):
            lines.append(f"... {len(norms) - len(shown)} more parameters (--limit 0 for all)")
        values = sum(v.size for v in self.params.values())
        gradient, update = (float(np.sqrt(sum(n[i] ** 2 for n in norms.values()))) for i in (0, 1))
        lines.append(f"{len(norms)} parameters, {values:,} values: gradient L2 {gradient:.4g}, update L2 {update:.4g}")
        overflowed = [p for p, (g, _) in norms.items() if not np.isfinite(g)]
        if overflowed:
            why = (f"; fp16 parameters train with the loss scaled by {FP16_LOSS_SCALE:,.0f} and this step overflowed "
                   f"(PyTorch's GradScaler would skip it and halve the scale)"
                   if any(v.dtype == np.float16 for v in self.params.values()) else "")
            lines.append(f"note: the gradients of {len(overflowed)} parameters are not finite ({overflowed[0]}, ...)"
                         f"{why}")
        return "\n".join(lines) + "\n"


def evaluate_step(model: str | os.PathLike | Graph, inputs: dict[str, np.ndarray] | None = None, seed: int = 0,
                  batch: int | None = None, optimizer: str = "sgd", settings: dict | None = None,
                  loss: str = "cross_entropy", **model_options) -> StepValues:
    """One training step of `model` in the numpy reference, from its weights and optimizer state at zero (a first
    step). `inputs` holds the model's inputs and, under `labels`, the loss's labels: class indices of the first
    output's shape without its last axis (cross_entropy), or targets of its shape (mse). Without model inputs they
    are random as `evaluate`'s, and without labels those are random too (classes in range, standard-normal targets),
    both seeded. Zoo models with ternary layers train in their training form (accelsim.sim.train.training_form).
    `optimizer` is sgd or adamw, `settings` its hyper-parameters (PyTorch's names and defaults:
    compiler.train.step.DEFAULTS)."""
    if loss not in LOSSES:
        raise UserError(f"unknown loss {loss!r}; allowed: {', '.join(LOSSES)}")
    update = Optimizer(optimizer, dict(settings or {}))
    given = dict(inputs or {})
    labels = given.pop(LABELS, None) if loss != "model" else None
    budget = eval_budget()
    graph, feeds = eval_inputs(model, given or None, seed, batch, budget, **training_form(model, model_options))
    step = training_graph(graph, loss=loss, optimizer=update)
    if step.labels is not None:
        output, want = graph.tensor(graph.outputs[0]), step.graph.tensor(step.labels)
        feeds[step.labels] = _random_labels(output, want, loss, seed) if labels is None else \
            _checked(np.asarray(labels), output, want, loss)
    step.graph.outputs = step.graph.outputs + [step.grads[p] for p in step.params]
    with np.errstate(over="ignore", invalid="ignore"):     # an overflow shows as inf or nan, noted by the table
        out = run_graph(step.graph, feeds, budget)
    states = {s: new for p in step.params for s, new in zip(step.state[p], step.updated[p][1:])}
    return StepValues(loss_kind=loss, optimizer=update, loss=out[step.loss],
                      params={p: np.asarray(graph.weights[p]) for p in step.params},
                      gradients={p: out[step.grads[p]] for p in step.params},
                      updated={p: out[step.updated[p][0]] for p in step.params},
                      state={s: out[new] for s, new in states.items()},
                      running={r: out[new] for r, new in step.running.items()}, feeds=feeds)


def _checked(labels: np.ndarray, output: Tensor, want: Tensor, loss: str) -> np.ndarray:
    """The labels as given, if they are what the loss on `output` reads: integer classes in range, or float targets."""
    if loss == "cross_entropy":
        classes = output.shape[-1]
        need = f"integer class indices in [0, {classes}) of shape {list(want.shape)}"
        if labels.dtype.kind not in "iu" or labels.shape != want.shape:
            raise UserError(f"labels are {labels.dtype} {list(labels.shape)}; the cross_entropy loss on "
                            f"{output.name!r} {list(output.shape)} needs {need}")
        if labels.size and (labels.min() < 0 or labels.max() >= classes):
            bad = labels.min() if labels.min() < 0 else labels.max()
            raise UserError(f"labels hold class {bad}; the cross_entropy loss on {output.name!r} needs {need}")
        return labels
    if labels.dtype.kind != "f" or labels.shape != want.shape:
        raise UserError(f"labels are {labels.dtype} {list(labels.shape)}; the mse loss on {output.name!r} needs float "
                        f"targets of its shape {list(want.shape)}")
    return labels


def _random_labels(output: Tensor, want: Tensor, loss: str, seed: int) -> np.ndarray:
    """Classes in range of `output`'s last axis, or standard-normal targets; seeded, on a stream of their own (the
    inputs draw from default_rng(seed))."""
    rng = np.random.default_rng([seed, 1])
    if loss == "cross_entropy":
        return rng.integers(0, output.shape[-1], size=want.shape).astype(want.dtype.numpy)
    return rng.standard_normal(want.shape).astype(want.dtype.numpy)


def _norm(values: np.ndarray) -> float:
    return float(np.sqrt(np.sum(np.square(values, dtype=np.float64))))

