"""Training: a model plus a loss becomes one training-step Graph (forward, loss, backward, optimizer update) that the
same lowering, mapper and engine run as inference. `autodiff` walks the graph backwards, `rules/` holds one module of
gradient rules per family of ops, `step` adds the loss and the optimizer."""
from compiler.train.step import LOSSES, Optimizer, TrainingStep, parameters, training_graph

__all__ = ["LOSSES", "Optimizer", "TrainingStep", "parameters", "training_graph"]
