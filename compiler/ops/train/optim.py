"""Optimizer updates, as PyTorch's torch.optim computes them: every state tensor is read and written, none free.

SGD(x, g[, v]) -> x'[, v']: g' = g + weight_decay * x; with momentum, v' = momentum * v + g' (no dampening) and the
step uses v' (or g' + momentum * v' with nesterov); x' = x - lr * step.
AdamW(x, g, m, v) -> x', m', v' at step t >= 1: x is first decayed by (1 - lr * weight_decay) (decoupled decay);
m' = b1 m + (1 - b1) g, v' = b2 v + (1 - b2) g^2; x' = x - lr * (m' / (1 - b1^t)) / (sqrt(v' / (1 - b2^t)) + eps).
Invariant: state enters zero before step 1 (PyTorch's first momentum step, v' = g', is the same number).
Lowered to one Map per written tensor (PyTorch's unfused per-tensor kernels, each reading what it needs).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map, Operand, Role
from compiler.ops.base import TRAINING_DOMAIN, OpDef, fail, given, operand, out, output_operand, register
from compiler.ops.train import work

Step = Callable[..., np.ndarray]


def _sgd(node: Node) -> tuple[Step, Step]:
    lr, momentum = float(node.attr("lr", 0.01)), float(node.attr("momentum", 0.0))
    decay, nesterov = float(node.attr("weight_decay", 0.0)), bool(node.attr("nesterov", 0))

    def velocity(x: np.ndarray, g: np.ndarray, v: np.ndarray) -> np.ndarray:
        x, g, v = work(x, g, v)
        result: np.ndarray = momentum * v + g + decay * x
        return result

    def update(x: np.ndarray, g: np.ndarray, v: np.ndarray | None = None) -> np.ndarray:
        x, g = work(x, g)
        step = g + decay * x
        if v is not None:
            step = step + momentum * np.asarray(v) if nesterov else np.asarray(v)
        return x - lr * step
    return velocity, update


def _adamw(node: Node) -> tuple[Step, Step, Step]:
    lr, eps, decay = float(node.attr("lr", 1e-3)), float(node.attr("eps", 1e-8)), float(node.attr("weight_decay", 0.01))
    b1, b2, t = float(node.attr("beta1", 0.9)), float(node.attr("beta2", 0.999)), int(node.attr("step", 1))

    def first(g: np.ndarray, m: np.ndarray) -> np.ndarray:
        g, m = work(g, m)
        return b1 * m + (1 - b1) * g

    def second(g: np.ndarray, v: np.ndarray) -> np.ndarray:
        g, v = work(g, v)
        result: np.ndarray = b2 * v + (1 - b2) * g * g
        return result

    def update(x: np.ndarray, m: np.ndarray, v: np.ndarray) -> np.ndarray:
        x, m, v = work(x, m, v)
        return x * (1 - lr * decay) - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return first, second, update


class _Optimizer(OpDef):
    foldable = False
    inputs: tuple[str, ...] = ()

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        names = self._inputs(node)
        if len(ins) != len(names) or any(t is None for t in ins):
            raise fail(node, f"expects inputs ({', '.join(names)}), got {len(ins)}")
        tensors = given(node, ins, len(names))
        x = tensors[0]
        for name, t in zip(names[1:], tensors[1:]):
            if t.shape != x.shape or not t.dtype.is_float:
                raise fail(node, f"{name} {t.name!r} is {t.dtype.value} {list(t.shape)}; it must be a float tensor "
                                 f"of the parameter's shape {list(x.shape)}")
        if node.attr("step", 1) < 1:
            raise fail(node, f"step {node.attr('step')} must be 1 or more")
        return [out(node, x.shape, t.dtype, i) for i, t in enumerate(self._written(tensors))]

    def _inputs(self, node: Node) -> tuple[str, ...]:
        return self.inputs

    def _written(self, ins: list[Tensor]) -> list[Tensor]:
        return ins[:1]


@register("SGD", domain=TRAINING_DOMAIN)
class SGD(_Optimizer):
    def _inputs(self, node: Node) -> tuple[str, ...]:
        return ("x", "g", "v") if float(node.attr("momentum", 0.0)) else ("x", "g")

    def _written(self, ins: list[Tensor]) -> list[Tensor]:
        return [ins[0], ins[2]] if len(ins) > 2 else [ins[0]]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        velocity, update = _sgd(node)
        x, g, *state = given(node, args, len(args))
        if not state:
            return [update(x, g).astype(x.dtype)]
        v = velocity(x, g, state[0])
        return [update(x, g, v).astype(x.dtype), v.astype(state[0].dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        velocity, update = _sgd(node)
        x, g = operand(graph, node.inputs[0]), operand(graph, node.inputs[1])
        if len(node.inputs) < 3:   # x - lr * (g + wd x): a multiply-add, a multiply-subtract
            return [_map(node, 0, (x, g), output_operand(node, graph), update, 2)]
        v = output_operand(node, graph, 1)
        return [_map(node, 1, (x, g, operand(graph, node.inputs[2])), v, velocity, 3),
                _map(node, 0, (x, g, _read(v)), output_operand(node, graph), update, 3)]


@register("AdamW", domain=TRAINING_DOMAIN)
class AdamW(_Optimizer):
    inputs = ("x", "g", "m", "v")

    def _written(self, ins: list[Tensor]) -> list[Tensor]:
        return [ins[0], ins[2], ins[3]]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        first, second, update = _adamw(node)
        x, g, m, v = given(node, args, 4)
        m2, v2 = first(g, m), second(g, v)
        return [update(x, m2, v2).astype(x.dtype), m2.astype(m.dtype), v2.astype(v.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        first, second, update = _adamw(node)
        x, g, m, v = (operand(graph, name) for name in node.inputs)
        m2, v2 = output_operand(node, graph, 1), output_operand(node, graph, 2)
        # per element: 3 for each moment; the step: two bias corrections, sqrt, add, divide, decay, subtract = 8
        return [_map(node, 1, (g, m), m2, first, 3), _map(node, 2, (g, v), v2, second, 4),
                _map(node, 0, (x, _read(m2), _read(v2)), output_operand(node, graph), update, 8)]


def _read(o: Operand) -> Operand:
    return Operand(o.tensor, o.shape, o.dtype, Role.input)


def _map(node: Node, index: int, inputs: tuple[Operand, ...], output: Operand, fn: Step, cost: int) -> Map:
    return Map(name=f"{node.name}:{index}", node=node.name, op=node.op, inputs=tuple(inputs), output=output,
               fn=lambda *a: np.asarray(fn(*a)).astype(output.dtype.numpy), ops_per_element=cost)
