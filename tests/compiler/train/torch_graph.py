"""A Graph's forward pass written in PyTorch, op by op, so that torch.autograd and torch.optim give the gradients and
updates accelsim's training graph must match. Only forward semantics are written here; every derivative is torch's.

Conventions shared with accelsim's rules (the points where a derivative is a choice, not a fact): Round, and a Clip of
a Round, pass their gradient straight through and a quantiser's own scale is held constant (BitNet's estimator, which
test_train_ternary.py checks against the reference code's form); MatMulInteger multiplies its integer operands as
floats; BatchNormalization in a training step normalises with the batch's statistics.
"""
from __future__ import annotations

import numpy as np
import pytest

from compiler.train.autodiff import quantiser_scales

torch = pytest.importorskip("torch")
F = torch.nn.functional


class _RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, dy):
        return dy


def _attr_axes(node, args, index=1):
    if len(args) > index and args[index] is not None:
        return [int(a) for a in np.asarray(args[index].detach().cpu()).reshape(-1)]
    return node.attrs.get("axes")


def _pool_pads(node, rank):
    pads = node.attr("pads", [0] * (2 * rank))
    return pads[:rank], pads[rank:]


def _conv(node, x, w, b=None):
    rank = x.dim() - 2
    begin, end = _pool_pads(node, rank)
    if begin != end:
        x = F.pad(x, [p for pair in zip(reversed(begin), reversed(end)) for p in pair])
        begin = [0] * rank
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[rank]
    return fn(x, w, b, stride=node.attr("strides", [1] * rank), padding=begin,
              dilation=node.attr("dilations", [1] * rank), groups=node.attr("group", 1))


def _max_pool(node, x):
    rank = x.dim() - 2
    begin, end = _pool_pads(node, rank)
    kernel = node.attr("kernel_shape")
    if begin != end:
        x = F.pad(x, [p for pair in zip(reversed(begin), reversed(end)) for p in pair], value=float("-inf"))
        begin = [0] * rank
    fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[rank]
    return fn(x, kernel, stride=node.attr("strides", [1] * rank), padding=begin,
              dilation=node.attr("dilations", [1] * rank), ceil_mode=bool(node.attr("ceil_mode", 0)))


def _avg_pool(node, x):
    rank = x.dim() - 2
    begin, end = _pool_pads(node, rank)
    fn = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[rank]
    return fn(x, node.attr("kernel_shape"), stride=node.attr("strides", [1] * rank), padding=begin,
              ceil_mode=bool(node.attr("ceil_mode", 0)), count_include_pad=bool(node.attr("count_include_pad", 0)))


def _layer_norm(node, x, scale, bias=None):
    axis = node.attr("axis", -1) % x.dim()
    shape, eps = x.shape[axis:], node.attr("epsilon", 1e-5)
    if scale.shape == shape and (bias is None or bias.shape == shape):
        return F.layer_norm(x, shape, scale, bias, eps=eps)
    y = F.layer_norm(x, shape, eps=eps) * scale    # ONNX broadcasts Scale and B to the normalised shape
    return y if bias is None else y + bias


def _batch_norm(node, x, scale, bias, mean, var):
    y = F.batch_norm(x, None, None, scale, bias, training=True, eps=node.attr("epsilon", 1e-5))
    if not node.attr("training_mode", 0):
        return y
    # ONNX's training outputs: running statistics from the population variance (PyTorch's own buffers, from the
    # unbiased one, are what compiler/train/modes.py's correction is checked against)
    dims, m = [0, *range(2, x.dim())], node.attr("momentum", 0.9)
    with torch.no_grad():
        return y, mean * m + x.mean(dims) * (1 - m), var * m + x.var(dims, unbiased=False) * (1 - m)


def _lrn(node, x):
    return F.local_response_norm(x, node.attr("size"), alpha=node.attr("alpha", 1e-4), beta=node.attr("beta", 0.75),
                                 k=node.attr("bias", 1.0))


def _slice(node, graph, x):
    from compiler.ops.slice import slice_bounds, slices
    starts, ends, axes, steps = slice_bounds(node, lambda i: graph.value(node.inputs[i])
                                        if len(node.inputs) > i and node.inputs[i] else None)
    where = slices(node, tuple(x.shape), starts, ends, axes, steps)
    if any(s.step is not None and s.step < 0 for s in where):
        raise NotImplementedError("negative slice steps")
    return x[where]


def _gemm(node, a, b, c=None):
    a = a.T if node.attr("transA", 0) else a
    b = b.T if node.attr("transB", 0) else b
    y = node.attr("alpha", 1.0) * (a @ b)
    return y if c is None else y + node.attr("beta", 1.0) * c


def _cross_entropy(node, scores, labels, weights=None):
    kwargs = {"reduction": node.attr("reduction", "mean")}
    if node.attr("ignore_index") is not None:
        kwargs["ignore_index"] = node.attr("ignore_index")
    log_prob = F.log_softmax(scores, dim=1)
    return F.nll_loss(log_prob, labels.long(), weight=weights, **kwargs), log_prob


OPS = {
    "Add": lambda n, g, a, b: a + b, "Sub": lambda n, g, a, b: a - b, "Mul": lambda n, g, a, b: a * b,
    "Div": lambda n, g, a, b: a / b, "Neg": lambda n, g, x: -x, "Pow": lambda n, g, a, b: a ** b,
    "Sqrt": lambda n, g, x: torch.sqrt(x), "Abs": lambda n, g, x: torch.abs(x), "Relu": lambda n, g, x: F.relu(x),
    "Sigmoid": lambda n, g, x: torch.sigmoid(x), "Tanh": lambda n, g, x: torch.tanh(x),
    "Erf": lambda n, g, x: torch.erf(x), "Gelu": lambda n, g, x: F.gelu(x),
    "Max": lambda n, g, a, b: torch.maximum(a, b), "Min": lambda n, g, a, b: torch.minimum(a, b),
    "Sum": lambda n, g, *xs: sum(xs[1:], xs[0]),
    "Clip": lambda n, g, x, lo=None, hi=None: torch.clamp(x, lo, hi),
    "Round": lambda n, g, x: _RoundSTE.apply(x),
    "Cast": lambda n, g, x: x if x.is_floating_point() else x.double(),
    "Identity": lambda n, g, x: x, "Dropout": lambda n, g, x, *rest: x,
    "Reshape": lambda n, g, x, shape: x.reshape(tuple(g.tensors[n.outputs[0]].shape)),
    "Flatten": lambda n, g, x: x.reshape(tuple(g.tensors[n.outputs[0]].shape)),
    "Squeeze": lambda n, g, x, *a: x.reshape(tuple(g.tensors[n.outputs[0]].shape)),
    "Unsqueeze": lambda n, g, x, *a: x.reshape(tuple(g.tensors[n.outputs[0]].shape)),
    "Transpose": lambda n, g, x: x.permute(*n.attr("perm", list(range(x.dim()))[::-1])),
    "Expand": lambda n, g, x, shape: x.expand(*g.tensors[n.outputs[0]].shape),
    "Concat": lambda n, g, *xs: torch.cat(xs, dim=n.attr("axis")),
    "Slice": lambda n, g, x, *rest: _slice(n, g, x),
    "Gather": lambda n, g, x, i: torch.index_select(x, n.attr("axis", 0) % x.dim(), i.long().reshape(-1)).reshape(
        tuple(g.tensors[n.outputs[0]].shape)),
    "MatMul": lambda n, g, a, b: a @ b, "MatMulInteger": lambda n, g, a, b, *zp: a.double() @ b.double(),
    "Gemm": lambda n, g, *a: _gemm(n, *a),
    "Einsum": lambda n, g, *xs: torch.einsum(n.attr("equation"), *xs),
    "Softmax": lambda n, g, x: torch.softmax(x, dim=n.attr("axis", -1)),
    "LogSoftmax": lambda n, g, x: torch.log_softmax(x, dim=n.attr("axis", -1)),
    "ReduceMean": lambda n, g, x, *a: _reduce(torch.mean, n, x, a),
    "ReduceSum": lambda n, g, x, *a: _reduce(torch.sum, n, x, a),
    "ReduceMax": lambda n, g, x, *a: _reduce(torch.amax, n, x, a),
    "LayerNormalization": lambda n, g, *a: _layer_norm(n, *a),
    "BatchNormalization": lambda n, g, *a: _batch_norm(n, *a),
    "Conv": lambda n, g, *a: _conv(n, *a), "MaxPool": lambda n, g, x: _max_pool(n, x),
    "AveragePool": lambda n, g, x: _avg_pool(n, x),
    "GlobalAveragePool": lambda n, g, x: x.mean(dim=tuple(range(2, x.dim())), keepdim=True),
    "GlobalMaxPool": lambda n, g, x: {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d,
                                      3: F.adaptive_max_pool3d}[x.dim() - 2](x, 1),
    "LRN": lambda n, g, x: _lrn(n, x),
    "SoftmaxCrossEntropyLoss": lambda n, g, *a: _cross_entropy(n, *a),
}


def _reduce(fn, node, x, args):
    axes = _attr_axes(node, [x, *args])
    keep = bool(node.attr("keepdims", 1))
    if not axes:
        axes = list(range(x.dim()))
    return fn(x, dim=tuple(axes), keepdim=keep)


def run_torch(graph, feeds: dict, params: list[str], dtype=None):
    """Run the graph's forward pass in torch (float64 unless `dtype`); returns (env of tensors by name, params as
    leaf tensors requiring grad). Integer inputs stay integers."""
    dtype = dtype or torch.float64
    env = _tensors({**graph.weights, **graph.constants, **feeds}, dtype)
    leaves = {name: env[name].requires_grad_(True) for name in params if name in env}
    return _run_nodes(graph, env), leaves


def _tensors(values: dict, dtype) -> dict:
    """numpy arrays as torch tensors: floats in `dtype`, integers as they are; missing values skipped."""
    env = {}
    for name, value in values.items():
        if value is not None:
            array = np.asarray(value)
            env[name] = torch.tensor(array, dtype=dtype) if array.dtype.kind == "f" else torch.tensor(array)
    return env


def _run_nodes(graph, env: dict) -> dict:
    scales = quantiser_scales(graph)
    rounded = {o for n in graph.nodes if n.op == "Round" for o in n.outputs}
    for node in graph.nodes:
        args = [env[name] if name else None for name in node.inputs]
        # a node folded at build time is skipped, unless it reads a parameter (ViT's class token, Expand-ed: a
        # small weight folds, but its gradient still flows through the node)
        folded = node.outputs and all(not o or o in graph.constants for o in node.outputs)
        if folded and not any(a is not None and a.requires_grad for a in args):
            continue
        if node.op == "Scan":
            result = _scan(node, env, *args)
        elif node.op == "Clip" and node.inputs[0] in rounded:
            result = args[0] + (torch.clamp(*args) - args[0]).detach()
        else:
            result = OPS[node.op](node, graph, *args)
        results = result if isinstance(result, tuple) else (result,)
        for name, value in zip(node.outputs, results):
            if name:
                env[name] = value.detach() if name in scales else value
    return env


def _scan(node, outer: dict, *args):
    """ONNX Scan, step by step: the body's ops in torch on its own constants and the outer tensors it reads by name."""
    body, plan = node.resolved["body"], node.resolved["plan"]
    states, scans = list(args[:plan.states]), args[plan.states:]
    dtype = next((a.dtype for a in args if a.is_floating_point()), torch.float64)
    own = _tensors({**body.weights, **body.constants}, dtype) | {k: v for k, v in outer.items() if k in body.weights}
    collected = [[] for _ in body.outputs[plan.states:]]
    for t in range(plan.steps):
        env = {**own, **dict(zip(body.inputs, states))}
        for name, x, axis, reverse in zip(body.inputs[plan.states:], scans, plan.in_axes, plan.in_reverse):
            env[name] = x.select(axis, plan.steps - 1 - t if reverse else t)
        env = _run_nodes(body, env)
        states = [env[name] for name in body.outputs[:plan.states]]
        for values, name in zip(collected, body.outputs[plan.states:]):
            values.append(env[name])
    stacked = [torch.stack(v[::-1] if r else v, dim=a) for v, a, r in zip(collected, plan.out_axes, plan.out_reverse)]
    return tuple(states + stacked)
