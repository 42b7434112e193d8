"""One training step of a Graph, computed by accelsim's numpy reference and by PyTorch (torch.autograd for the
gradients, torch.optim for the update), compared tensor by tensor."""
from __future__ import annotations

import numpy as np

from compiler.ops.interpret import run_graph
from compiler.train import Optimizer, parameters, training_graph
from tests.compiler.train.torch_graph import run_torch, torch

F = torch.nn.functional
SGD = Optimizer("sgd")     # frozen: one default shared by every call is safe


def torch_optimizer(optimizer: Optimizer, leaves):
    a = optimizer.attrs
    if optimizer.name == "sgd":
        return torch.optim.SGD(leaves, lr=a["lr"], momentum=a["momentum"], weight_decay=a["weight_decay"])
    adamw = torch.optim.AdamW(leaves, lr=a["lr"], betas=(a["beta1"], a["beta2"]), eps=a["eps"],
                              weight_decay=a["weight_decay"])
    for p in leaves:   # a later step from zero moments: only the bias correction changes
        adamw.state[p] = {"step": torch.tensor(float(optimizer.step - 1)), "exp_avg": torch.zeros_like(p),
                          "exp_avg_sq": torch.zeros_like(p)}
    return adamw


def close(name: str, got, want, rtol: float) -> None:
    """Within rtol of the largest magnitude of `want` (a gradient's small entries are sums of cancelling terms)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    scale = max(float(np.abs(want).max(initial=0.0)), 1e-12)
    error = float(np.abs(got - want).max(initial=0.0)) / scale
    assert error <= rtol, f"{name}: off by {error:.2e} of its largest entry (allowed {rtol:.0e})"


def check_step(graph, feeds: dict, labels: np.ndarray, optimizer: Optimizer = SGD, rtol: float = 1e-4,
               loss: str = "cross_entropy", params: list[str] | None = None):
    """Assert accelsim's loss, every gradient and every updated parameter equal PyTorch's; returns the step.
    `params`: the parameters to train (default: all of `parameters(graph)`); torch trains the same candidates, so
    one that reaches torch's loss but gets no gradient from accelsim fails the check."""
    step = training_graph(graph, loss=loss, optimizer=optimizer, params=params)
    step.graph.outputs += list(step.grads.values())
    ours = run_graph(step.graph, {**feeds, step.labels: labels})
    env, leaves = run_torch(graph, feeds, parameters(graph) if params is None else params)
    out = env[graph.outputs[0]]
    if loss == "cross_entropy":
        reference = F.cross_entropy(out.reshape(-1, out.shape[-1]), torch.tensor(labels).long().reshape(-1))
    else:
        reference = F.mse_loss(out, torch.tensor(labels, dtype=out.dtype))
    reference.backward()
    close("loss", ours[step.loss], reference.detach().numpy(), rtol)
    for p in step.params:
        assert leaves[p].grad is not None, f"torch gives {p} no gradient, accelsim does"
        close(f"gradient of {p}", ours[step.grads[p]], leaves[p].grad.numpy(), rtol)
    untouched = [name for name, t in leaves.items() if name not in step.params and t.grad is not None
                 and t.grad.abs().max() > 0]
    assert not untouched, f"torch trains {untouched}, accelsim does not"
    before = {p: leaves[p].detach().clone() for p in step.params}
    torch_optimizer(optimizer, [leaves[p] for p in step.params]).step()
    for p in step.params:
        moved = leaves[p].detach() - before[p]
        close(f"update of {p}", ours[step.updated[p][0]] - before[p].numpy(), moved.numpy(), rtol)
    return step
