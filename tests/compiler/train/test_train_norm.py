"""Normalisation layers in a training step, against PyTorch: BatchNormalization in training mode (its gradient and its
running statistics, which must equal torch.nn.BatchNorm's buffers) and LayerNormalization over one or more axes, with
and without B; and their gradient ops chunked as the vector unit runs them."""
import numpy as np
import pytest

from compiler import zoo
from compiler.builder import Builder
from compiler.codegen import Tiles
from compiler.codegen.execute import vector_tiled
from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.ir import Move, Reduce
from compiler.ops.interpret import run_graph
from compiler.ops.lower import lower
from compiler.targeting import sliced
from compiler.train import Optimizer, training_graph
from compiler.train.autodiff import differentiate
from compiler.train.modes import training_forward
from tests.compiler.train.train_checks import check_step, close
from tests.compiler.train.torch_graph import torch


def labels(shape, classes: int = 5) -> np.ndarray:
    return np.random.default_rng(2).integers(0, classes, shape)


NORM_OPS = {"BatchNormalization", "LayerNormalization", "NormStats", "BatchNormGrad", "LayerNormGrad"}


def bn_model(shape=(4, 3, 2, 2), opset=17):
    """x [N, 6] -> Gemm -> Reshape to `shape` -> BatchNormalization -> Relu -> Reshape [N, C*H*W] -> Gemm -> 5 scores
    (the Conv in front of a BatchNormalization is another test's: a Gemm fills the channels here)."""
    b = Builder("bn", dtype=DType.fp64, opset=opset)
    features = int(np.prod(shape[1:]))
    x = b.input("x", (shape[0], 6))
    h = b.node("Reshape", [b.node("Gemm", [x, b.weight("w1", (6, features))]), b.const(np.array(shape, np.int64))])
    c = shape[1]
    params = [b.weight("bn.weight", (c,), init="uniform"), b.weight("bn.bias", (c,)),
              b.weight("bn.running_mean", (c,)), b.weight("bn.running_var", (c,), init="uniform")]
    h = b.node("Relu", [b.node("BatchNormalization", [h] + params, name="bn", epsilon=1e-3)])
    h = b.node("Reshape", [h, b.const(np.array([shape[0], features], np.int64))])
    feeds = {"x": np.random.default_rng(1).standard_normal((shape[0], 6))}
    return b.build([b.node("Gemm", [h, b.weight("w2", (features, 5))])]), feeds


@pytest.mark.parametrize("shape", [(4, 3, 2, 2), (6, 4)], ids=["NCHW", "NC"])
@pytest.mark.parametrize("optimizer", [Optimizer("sgd"), Optimizer("adamw")], ids=str)
def test_batchnorm_step_matches_torch(shape, optimizer):
    graph, feeds = bn_model(shape)
    running = training_forward(graph)
    assert running == {"bn.running_mean": "bn/running_mean", "bn.running_var": "bn/running_var"}
    step = check_step(graph, feeds, labels(shape[0]), optimizer, rtol=1e-9)
    assert {"bn.weight", "bn.bias"} <= set(step.params)
    assert not {"bn.running_mean", "bn.running_var"} & set(step.params)


@pytest.mark.parametrize("shape, module, momentum", [((4, 3, 2, 2), "BatchNorm2d", 0.9), ((6, 4), "BatchNorm1d", 0.7)])
def test_running_statistics_equal_torch_buffers(shape, module, momentum):
    """ONNX's momentum m is PyTorch's 1 - m; PyTorch's running_var takes the unbiased batch variance."""
    b = Builder("bn", dtype=DType.fp64)
    x = b.input("x", shape)
    c = shape[1]
    params = [b.weight("bn.weight", (c,), init="uniform"), b.weight("bn.bias", (c,)),
              b.weight("bn.running_mean", (c,)), b.weight("bn.running_var", (c,), init="uniform")]
    y = b.node("BatchNormalization", [x] + params, name="bn", epsilon=1e-3, momentum=momentum)
    graph = b.build([b.node("Gemm", [b.node("Flatten", [y]), b.weight("w", (int(np.prod(shape[1:])), 3))])])
    initial = {name: graph.weights[name].copy() for name in params[2:]}
    running = training_forward(graph)
    step = training_graph(graph, optimizer=Optimizer("sgd"))
    step.graph.outputs += list(running.values()) + ["bn/running_var_population"]
    feeds = {"x": np.random.default_rng(1).standard_normal(shape) * 2 + 1}
    ours = run_graph(step.graph, {**feeds, step.labels: labels(shape[0], classes=3)})

    bn = getattr(torch.nn, module)(c, eps=1e-3, momentum=1 - momentum).double().train()
    with torch.no_grad():
        bn.running_mean.copy_(torch.tensor(initial["bn.running_mean"]))
        bn.running_var.copy_(torch.tensor(initial["bn.running_var"]))
        bn(torch.tensor(feeds["x"]))
    close("running_mean", ours[running["bn.running_mean"]], bn.running_mean.numpy(), 1e-12)
    close("running_var", ours[running["bn.running_var"]], bn.running_var.numpy(), 1e-12)
    # the ONNX running variance (population) differs: the correction is what makes the two agree
    assert not np.allclose(ours["bn/running_var_population"], bn.running_var.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name, norms, image", [("resnet18", 20, 32), ("resnet50", 53, 64)])
def test_resnet_step_matches_torch(name, norms, image):
    """The zoo's ResNets at a tiny size: BatchNormalizations in training mode, convs (ResNet-50's bottleneck 1x1s
    and strided 3x3s, its projection shortcuts), pools, residual adds. ResNet-50 at 64 pixels: at 32 its last
    stage is 1x1, so its BatchNorms see two values per channel, and 1 / std magnifies rounding to 4e-9."""
    graph = zoo.build(name, batch=2, image=image, width=0.25, classes=10, dtype=DType.fp64)
    assert len(training_forward(graph)) == 2 * norms
    pixels = np.random.default_rng(1).standard_normal((2, 3, image, image))
    step = check_step(graph, {"image": pixels}, labels(2, classes=10), Optimizer("sgd"), rtol=1e-9)
    affine = {name for n in graph.nodes if n.op == "BatchNormalization" for name in n.inputs[1:3]}
    assert len(affine) == 2 * norms and affine <= set(step.params)


def test_training_forward_switches_once_and_refuses_what_torch_cannot_train():
    graph, _ = bn_model()
    training_forward(graph)
    count = len(graph.nodes)
    assert training_forward(graph) == {} and len(graph.nodes) == count
    (bn,) = [n for n in graph.nodes if n.op == "BatchNormalization"]
    assert bn.attrs["training_mode"] == 1 and bn.outputs[1:] == ("bn/running_mean", "bn/running_var_population")
    with pytest.raises(ModelError, match="'bn' .*needs its training mode, which ONNX has from opset 14; the model "
                                         "is opset 13"):
        training_forward(bn_model(opset=13)[0])
    with pytest.raises(ModelError, match=r"'bn' .*\[1, 3\] gives one value per channel"):
        training_forward(bn_model((1, 3))[0])


def test_inference_batchnorm_has_no_gradient_rule():
    b = Builder("bn", dtype=DType.fp64)
    params = [b.weight(name, (3,), init="uniform") for name in ("scale", "bias", "mean", "var")]
    y = b.node("BatchNormalization", [b.input("x", (4, 3))] + params, name="bn")
    graph = b.build([b.node("ReduceSum", [y], keepdims=0)])
    with pytest.raises(ModelError, match=r"'bn' .*inference form .*training_forward first"):
        differentiate(graph, graph.outputs[0], ["scale"])


def ln_model(axis: int, bias: bool, dtype=DType.fp64, scale_shape=None, saved: bool = False):
    """x [2, 3, 8] -> MatMul -> LayerNormalization(axis) -> MatMul -> scores [2, 3, 5] (cross-entropy per token)."""
    b = Builder("ln", dtype=dtype)
    x = b.input("x", (2, 3, 8))
    h = b.node("MatMul", [x, b.weight("w1", (8, 8))])
    normalized = (2, 3, 8)[axis:]
    inputs = [h, b.weight("ln.weight", scale_shape or normalized, init="uniform")]
    inputs += [b.weight("ln.bias", scale_shape or normalized)] if bias else []
    h = b.node("LayerNormalization", inputs, outputs=3 if saved else 1, name="ln", axis=axis, epsilon=1e-4)
    h = h[0] if saved else h
    feeds = {"x": (np.random.default_rng(1).standard_normal((2, 3, 8)) * 2 + 1).astype(dtype.numpy)}
    return b.build([b.node("MatMul", [h, b.weight("w2", (8, 5))])]), feeds


@pytest.mark.parametrize("axis, bias, scale_shape", [(-1, True, None), (-1, False, None), (-2, True, None),
                                                     (-2, False, None), (1, True, (8,)), (0, True, None)],
                         ids=["last", "last-nobias", "last2", "last2-nobias", "last2-broadcast", "all"])
def test_layernorm_step_matches_torch(axis, bias, scale_shape):
    graph, feeds = ln_model(axis, bias, scale_shape=scale_shape)
    step = check_step(graph, feeds, labels((2, 3)), Optimizer("adamw"), rtol=1e-9)
    assert {"ln.weight"} | ({"ln.bias"} if bias else set()) <= set(step.params)
    # fp64: the forward's Mean and InvStdDev would be fp32 (stash_type 1); the statistics are recomputed in fp64
    assert any(n.op == "NormStats" for n in step.graph.nodes)


def test_layernorm_gradient_reads_the_saved_statistics():
    """In fp32 the forward's own Mean and InvStdDev outputs are the statistics: nothing computes them again."""
    graph, feeds = ln_model(-1, True, dtype=DType.fp32, saved=True)
    # fp32 against torch in fp64: an update x' - x is lr * g ~ 1e-3 of x, so x's rounding (6e-8) is ~1e-4 of it
    step = check_step(graph, feeds, labels((2, 3)), rtol=1e-4)
    (grad,) = [n for n in step.graph.nodes if n.op == "LayerNormGrad"]
    assert grad.inputs[3:] == ("ln:1", "ln:2")
    assert not any(n.op == "NormStats" for n in step.graph.nodes)


def chunk_axes(op) -> list[int]:
    """The output axes (of extent > 1) a chunk may cut (compiler.targeting.slicing)."""
    return [a for a, extent in enumerate(op.output.shape) if extent > 1 and sliced(op, a) is not None]


def in_chunks_of_one(op, axis: int, args) -> np.ndarray:
    extent, rank = op.output.shape[axis], len(op.output.shape)
    start = np.zeros((extent, rank), np.int64)
    start[:, axis] = np.arange(extent)
    size = np.tile(np.array(op.output.shape, np.int64), (extent, 1))
    size[:, axis] = 1
    tiles = Tiles(op=0, dims=tuple(f"a{i}" for i in range(rank)), rows=np.arange(extent), start=start, extent=size,
                  inputs_sliced=tuple(sliced(op, axis)), axis=axis)
    return vector_tiled(op, tiles, args)


@pytest.mark.parametrize("model", ["bn", "ln-last", "ln-last2", "ln-all"])
def test_norm_ops_computed_in_chunks_equal_their_reference(model):
    """Each op of a normalisation or its gradient, cut into chunks of one along every axis the chunk rule allows,
    gives its unchunked numbers; and each has such an axis (a chunk plan need not hold it whole), but one that
    reduces every axis (a LayerNormalization with axis 0: its one row is the whole tensor)."""
    graph, feeds = bn_model() if model == "bn" else ln_model({"ln-last": -1, "ln-last2": -2, "ln-all": 0}[model], True)
    if model == "bn":
        training_forward(graph)
    step = training_graph(graph, optimizer=Optimizer("sgd"))
    env = {**step.graph.weights, **step.graph.constants, **feeds,
           step.labels: labels(step.graph.tensors[step.labels].shape)}
    checked = set()
    for op in lower(step.graph).ops:
        args = [np.asarray(env[o.tensor]) for o in op.inputs]
        whole = np.asarray(op.reference(args)).astype(op.output.dtype.numpy)
        env[op.output.tensor] = whole
        if op.op not in NORM_OPS or isinstance(op, Move):
            continue
        axes = chunk_axes(op)
        everything = isinstance(op, Reduce) and len(op.axes) == len(op.inputs[0].shape)
        assert axes or everything, f"{op.name} cannot be cut"
        for axis in axes:
            np.testing.assert_allclose(in_chunks_of_one(op, axis, args), whole, rtol=1e-12, atol=1e-12,
                                       err_msg=f"{op.name} cut along axis {axis}")
        checked.add(op.op)
    assert checked == ({"BatchNormalization", "NormStats", "BatchNormGrad"} if model == "bn"
                       else {"LayerNormalization", "NormStats", "LayerNormGrad"})
    # and the IR computes what the graph's reference does, every output of these nodes (running statistics too)
    step.graph.outputs = [o for n in step.graph.nodes if n.op in NORM_OPS for o in n.outputs if o]
    for name, want in run_graph(step.graph, {k: env[k] for k in step.graph.inputs}).items():
        np.testing.assert_allclose(env[name], want, rtol=1e-12, atol=1e-12, err_msg=name)
