"""The convolution family's gradients: a training step against PyTorch (loss, every gradient, every update; fp64 to
1e-9), its lowered IR against the graph's reference, the MACs the backward Einsums claim, and chunked execution."""
import itertools
import math

import numpy as np
import pytest

from compiler import zoo
from compiler.builder import Builder
from compiler.codegen import Tiles
from compiler.codegen.execute import einsum_tiled
from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.ir import Einsum, OpKind
from compiler.ops.interpret import run_graph, run_ir
from compiler.ops.lower import lower
from compiler.train import Optimizer, training_graph
from tests.compiler.train.train_checks import check_step, close

RNG = np.random.default_rng(0)
LABELS = np.array([0, 2])


def net(x_shape, layer, weight_shape=None, bias=True, opset=17, ones=False, x=None, **attrs):
    """x * a -> layer (a Conv with its weight, or a pool / LRN) -> Flatten -> Gemm with bias: `a`'s gradient is x
    times the layer's input gradient, so torch checks dx as well."""
    b = Builder(layer.lower(), dtype=DType.fp64, opset=opset)
    h = b.node("Mul", [b.input("x", x_shape), b.weight("a", x_shape, init="ones" if ones else "normal")])
    if layer == "Conv":
        inputs = [h, b.weight("w", weight_shape)] + ([b.weight("bias", weight_shape[:1])] if bias else [])
        h = b.node("Relu", [b.node("Conv", inputs, **attrs)])
    else:
        h = b.node(layer, [h], **attrs)
    h = b.node("Flatten", [h], axis=1)
    y = b.node("Gemm", [h, b.weight("fc", (b.shape(h)[1], 3)), b.weight("fc_bias", (3,))])
    return b.build([y]), {"x": RNG.standard_normal(x_shape) if x is None else x}


def ir_matches_graph(step, feeds):
    """The lowered IR of the whole step computes every output the graph's reference does."""
    feeds = {**feeds, step.labels: LABELS}
    want, got = run_graph(step.graph, feeds), run_ir(lower(step.graph), feeds)
    for name in step.graph.outputs:
        close(name, got[name], want[name], 1e-12)


def forward_macs(graph, conv: str) -> int:
    """N*K*P*Q * (C/G)*R*S, from the tensors' shapes alone."""
    node = next(n for n in graph.nodes if n.name == conv)
    return graph.tensors[node.outputs[0]].elements * math.prod(graph.tensors[node.inputs[1]].shape[1:])


def backward_macs(step, op_type: str) -> dict[str, int]:
    """Forward Conv name -> MACs of the IR Einsums its `op_type` gradient node lowers to."""
    owner = {n.name: n.name.split("/grad/")[0] for n in step.graph.nodes if n.op == op_type}
    total: dict[str, int] = {}
    for op in lower(step.graph).ops:
        if isinstance(op, Einsum) and op.node in owner:
            total[owner[op.node]] = total.get(owner[op.node], 0) + op.macs
    return total


def data_macs_by_count(graph, conv: str) -> int:
    """dx's MACs counted pair by pair: per axis, the (row h, tap r) pairs with (h + pad - dilation*r) divisible by
    the stride (the taps that reach h), times N*K*C/G."""
    node = next(n for n in graph.nodes if n.name == conv)
    x, w = graph.tensors[node.inputs[0]].shape, graph.tensors[node.inputs[1]].shape
    rank = len(x) - 2
    pads = node.attr("pads", [0] * 2 * rank)
    pairs = 1
    for i in range(rank):
        s, d = node.attr("strides", [1] * rank)[i], node.attr("dilations", [1] * rank)[i]
        pairs *= sum((h + pads[i] - d * r) % s == 0 for h in range(x[2 + i]) for r in range(w[2 + i]))
    return x[0] * w[0] * w[1] * pairs


CONVS = {   # x shape, weight shape, bias, Conv attributes
    "2d_groups2_stride2_asymmetric_pads": ((2, 4, 9, 8), (6, 2, 3, 3), True, dict(strides=[2, 2], pads=[1, 0, 2, 1],
                                                                                     group=2)),
    "2d_stride4_kernel11_alexnet_conv1": ((2, 3, 19, 19), (4, 3, 11, 11), True, dict(strides=[4, 4], pads=[2] * 4)),
    "2d_stride4_groups2_no_pad": ((2, 4, 13, 11), (4, 2, 5, 3), False, dict(strides=[4, 4], group=2)),
    "2d_dilation2_same": ((2, 3, 7, 6), (4, 3, 3, 3), False, dict(dilations=[2, 2], pads=[2] * 4)),
    "2d_stride2_dilation2_groups2": ((2, 4, 11, 10), (4, 2, 3, 3), False, dict(strides=[2, 2], dilations=[2, 2],
                                                                              pads=[1, 2, 2, 1], group=2)),
    "2d_strides_2_1_trailing_rows_unread": ((2, 3, 6, 5), (4, 3, 3, 2), True, dict(strides=[2, 1])),
    "2d_1x1_stride2": ((2, 3, 6, 6), (4, 3, 1, 1), True, dict(strides=[2, 2])),
    "1d_stride2_dilation2": ((2, 3, 13), (4, 3, 3), False, dict(strides=[2], dilations=[2], pads=[1, 2])),
    "1d_stride1_bias": ((2, 3, 10), (4, 3, 5), True, dict(pads=[2, 2])),
}


@pytest.mark.parametrize("case", CONVS)
def test_conv_step_matches_torch_and_lowers_to_its_macs(case):
    x_shape, w_shape, bias, attrs = CONVS[case]
    graph, feeds = net(x_shape, "Conv", w_shape, bias, **attrs)
    step = check_step(graph, feeds, LABELS, Optimizer("sgd"), rtol=1e-9)
    assert set(step.params) == {"a", "w", "fc", "fc_bias"} | ({"bias"} if bias else set())
    ir_matches_graph(step, feeds)
    assert backward_macs(step, "ConvGradFilter") == {"conv": forward_macs(graph, "conv")}
    assert backward_macs(step, "ConvGradData") == {"conv": data_macs_by_count(graph, "conv")}


SIZE_KEEPING = {   # H = stride * P on every axis: dx costs exactly the forward's MACs
    "3x3_stride2_pad1_groups2": ((2, 4, 8, 8), (6, 2, 3, 3), dict(strides=[2, 2], pads=[1] * 4, group=2)),
    "1x1_stride2": ((2, 4, 8, 6), (6, 4, 1, 1), dict(strides=[2, 2])),
    "8x8_stride4_pad2": ((1, 3, 16, 16), (4, 3, 8, 8), dict(strides=[4, 4], pads=[2] * 4)),
    "3x3_stride2_dilation3_pads_2_3": ((1, 3, 10, 10), (4, 3, 3, 3), dict(strides=[2, 2], dilations=[3, 3],
                                                                         pads=[2, 2, 3, 3])),
    "5x5_stride1_same_alexnet_conv2": ((2, 4, 7, 7), (8, 2, 5, 5), dict(pads=[2] * 4, group=2)),
}


@pytest.mark.parametrize("case", SIZE_KEEPING)
def test_strided_data_gradient_costs_the_forward_macs(case):
    x_shape, w_shape, attrs = SIZE_KEEPING[case]
    graph, _ = net(x_shape, "Conv", w_shape, **attrs)
    step = training_graph(graph)
    macs = forward_macs(graph, "conv")
    assert backward_macs(step, "ConvGradData") == {"conv": macs} == {"conv": data_macs_by_count(graph, "conv")}
    assert backward_macs(step, "ConvGradFilter") == {"conv": macs}


POOLS = {   # layer, attributes, x shape
    "maxpool_3x3_stride2_alexnet": ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2]), (2, 4, 9, 9)),
    "maxpool_pads_ceil_mode": ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4, ceil_mode=1),
                               (2, 4, 8, 8)),
    "maxpool_asymmetric_pads_dilation2": ("MaxPool", dict(kernel_shape=[2, 2], strides=[1, 2], pads=[0, 1, 1, 0],
                                                          dilations=[2, 2]), (2, 3, 7, 8)),
    "maxpool_1d": ("MaxPool", dict(kernel_shape=[3], strides=[2], pads=[1, 1]), (2, 3, 10)),
    "averagepool_pads_not_counted": ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4),
                                     (2, 4, 9, 8)),
    "averagepool_pads_counted": ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4,
                                                     count_include_pad=1), (2, 4, 9, 8)),
    "averagepool_1d": ("AveragePool", dict(kernel_shape=[4], strides=[3]), (2, 3, 11)),
    "globalaveragepool": ("GlobalAveragePool", {}, (2, 4, 5, 6)),
    "globalmaxpool": ("GlobalMaxPool", {}, (2, 4, 5, 6)),
    "lrn_alexnet": ("LRN", dict(size=5, alpha=5e-4, beta=0.75, bias=2.0), (2, 7, 4, 3)),
    "lrn_strong": ("LRN", dict(size=3, alpha=0.5, beta=1.5, bias=1.0), (2, 4, 3, 3)),
}


@pytest.mark.parametrize("case", POOLS)
def test_pool_and_lrn_steps_match_torch(case):
    layer, attrs, x_shape = POOLS[case]
    graph, feeds = net(x_shape, layer, **attrs)
    step = check_step(graph, feeds, LABELS, Optimizer("sgd"), rtol=1e-9)
    ir_matches_graph(step, feeds)


@pytest.mark.parametrize("layer, attrs", [("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)),
                                          ("GlobalMaxPool", {})], ids=["maxpool", "globalmaxpool"])
def test_max_pool_ties_go_to_the_first_maximum_as_in_torch(layer, attrs):
    # x in {1, 2, 3} (never 0, so a on the wrong tied position would get a different gradient x * dx)
    x = RNG.integers(1, 4, size=(2, 3, 9, 9)).astype(np.float64)
    graph, feeds = net(x.shape, layer, ones=True, x=x, **attrs)
    check_step(graph, feeds, LABELS, Optimizer("sgd"), rtol=1e-9)


def test_opset12_conv_bias_gradient_reads_axes_from_an_attribute():
    # before opset 13 ReduceSum takes its axes as an attribute: the conv bias's and Gemm bias's (Tape.sum_to) sums
    graph, feeds = net((2, 3, 6, 6), "Conv", (4, 3, 3, 3), opset=12, strides=[2, 2], pads=[1] * 4)
    step = check_step(graph, feeds, LABELS, Optimizer("sgd"), rtol=1e-9)
    sums = [n for n in step.graph.nodes if n.op == "ReduceSum"]
    assert len(sums) == 2 and all(len(n.inputs) == 1 and n.attrs["axes"] for n in sums)


def test_a_data_gradient_every_tap_of_which_reads_padding_is_refused():
    graph, _ = net((1, 1, 1), "Conv", (1, 1, 1), strides=[2], pads=[1, 1])
    with pytest.raises(ModelError, match="only padding"):
        lower(training_graph(graph).graph)


def test_conv_einsum_reads_zeros_past_the_input_end():
    # A 2x2 stride-2 window over end padding indexes x as 2p + r, a mixed-radix axis running past x's end; dx's
    # phases read dy past its end the same way (the 2d_strides_2_1 case above).
    b = Builder("conv", dtype=DType.fp64)
    y = b.node("Conv", [b.input("x", (1, 2, 5, 5)), b.weight("w", (3, 2, 2, 2))], strides=[2, 2], pads=[0, 0, 1, 1])
    graph = b.build([y])
    feeds = {"x": RNG.standard_normal((1, 2, 5, 5))}
    close("y", run_ir(lower(graph), feeds)[y], run_graph(graph, feeds)[y], 1e-12)


ALEXNET = dict(batch=2, image=63, width=1 / 16, fc=32, classes=10)   # conv maps 15, 7, 3, 3, 3; pool5 1x1


@pytest.fixture(scope="module")
def alexnet():
    graph = zoo.build("alexnet", dtype="fp64", **ALEXNET)
    feeds = {"image": RNG.standard_normal((2, 3, 63, 63))}
    return graph, feeds, check_step(graph, feeds, np.array([1, 7]), Optimizer("sgd"), rtol=1e-9)


def test_alexnet_step_matches_torch(alexnet):
    graph, _, step = alexnet
    assert len(step.params) == 16        # 8 layers' weights and biases
    assert not any(n.op == "ConvGradData" and n.name.startswith("conv1/") for n in step.graph.nodes), \
        "the image needs no gradient"


def test_alexnet_step_lowers_to_ir_that_computes_the_same(alexnet):
    _, feeds, step = alexnet
    feeds = {**feeds, step.labels: np.array([1, 7])}
    want, got = run_graph(step.graph, feeds), run_ir(lower(step.graph), feeds)
    for name in step.graph.outputs:
        close(name, got[name], want[name], 1e-12)


def test_alexnet_backward_einsums_cost_the_forward_macs(alexnet):
    graph, _, step = alexnet
    convs = [f"conv{i}" for i in range(1, 6)]
    assert backward_macs(step, "ConvGradFilter") == {c: forward_macs(graph, c) for c in convs}
    assert backward_macs(step, "ConvGradData") == {c: forward_macs(graph, c) for c in convs[1:]}


def _tiles(op: Einsum, chunk: int = 2) -> Tiles:
    """Every loop cut into `chunk`-long pieces: the tiles a small mapping would give."""
    starts = np.array(list(itertools.product(*(range(0, e, chunk) for _, e in op.loops))), np.int64)
    extents = np.minimum(chunk, np.array([e for _, e in op.loops]) - starts)
    return Tiles(op=0, dims=tuple(d for d, _ in op.loops), rows=np.arange(len(starts)), start=starts, extent=extents)


def _chunks(op, axis: int, cut) -> Tiles:
    """The output cut along `axis` into uneven chunks: a single row, then two halves of the rest."""
    shape = np.asarray(op.output.shape, np.int64)
    edges = sorted({0, 1, max(1, int(shape[axis]) // 2), int(shape[axis])})
    start, extent = np.zeros((len(edges) - 1, len(shape)), np.int64), np.tile(shape, (len(edges) - 1, 1))
    start[:, axis], extent[:, axis] = edges[:-1], np.diff(edges)
    return Tiles(op=0, dims=(), rows=np.arange(len(edges) - 1), start=start, extent=extent, inputs_sliced=tuple(cut),
                 axis=axis)


GRADIENT_OPS = {"ConvGradData", "ConvGradFilter", "LRNGrad", "MaxPoolGrad", "AveragePoolGrad"}


def test_training_step_runs_tile_by_tile_and_chunk_by_chunk():
    """Mapped for a GPU, every op of the step computed tile by tile (chunk by chunk for the vector ops) equals its
    reference; and whatever plan a mapper picks: every backward Einsum cut into 2-long pieces along every loop, every
    other backward op cut along every axis compiler.targeting.slicing allows."""
    from accelsim.arch import load_arch
    from accelsim.sim.build import mappings_for
    from compiler.codegen import generate
    from compiler.codegen.execute import vector_tiled
    from compiler.compile import Options, compile_graph
    from compiler.targeting import sliced
    from tests.compiler.codegen.test_codegen import check_every_op

    b = Builder("chunks", dtype=DType.fp64)
    h = b.node("Mul", [b.input("x", (2, 4, 9, 8)), b.weight("a", (2, 4, 9, 8))])
    h = b.node("Conv", [h, b.weight("w", (6, 2, 3, 3)), b.weight("bias", (6,))], strides=[2, 2], pads=[1, 0, 2, 1],
               group=2)
    h = b.node("LRN", [b.node("Relu", [h])], size=3, alpha=0.1, bias=2.0)
    h = b.node("MaxPool", [h], kernel_shape=[3, 3], strides=[1, 1], pads=[1] * 4)
    h = b.node("AveragePool", [b.node("Conv", [h, b.weight("w2", (4, 6, 1, 1))], strides=[2, 2])],
               kernel_shape=[2, 2], strides=[1, 1])
    h = b.node("Flatten", [h], axis=1)
    step = training_graph(b.build([b.node("Gemm", [h, b.weight("fc", (b.shape(h)[1], 3))])]))
    arch = load_arch("h100")
    ir = compile_graph(step.graph, Options(dtype=DType.fp64))
    code = generate(ir, arch, mappings_for(ir, arch))
    feeds = {"x": RNG.standard_normal((2, 4, 9, 8)), step.labels: LABELS}
    assert {OpKind.einsum, OpKind.reduce, OpKind.move} <= check_every_op(ir, code, feeds)
    backward = [(op, tiles) for op, tiles in zip(ir.ops, code.tiles) if op.op in GRADIENT_OPS]
    assert {op.op for op, _ in backward} == GRADIENT_OPS
    assert all(len(tiles.start) > 1 for op, tiles in backward if tiles is not None and op.kind != OpKind.einsum)
    env = {**ir.weights, **ir.constants, **feeds}
    allowed = {}
    for op in ir.ops:
        args = [env[o.tensor] for o in op.inputs]
        want = env[op.output.tensor] = np.asarray(op.reference(args)).astype(op.output.dtype.numpy)
        if op.op not in GRADIENT_OPS or getattr(op, "view", False):
            continue
        if isinstance(op, Einsum):
            close(op.name, einsum_tiled(op, _tiles(op), args), want, 1e-12)
            continue
        allowed[op.name] = [axis for axis in range(len(op.output.shape)) if sliced(op, axis) is not None]
        for axis in allowed[op.name]:
            cut = sliced(op, axis)
            close(f"{op.name} cut along axis {axis}", vector_tiled(op, _chunks(op, axis, cut), args), want, 1e-12)
    # a window's axes are never cut (the spatial ones of a pool's gradient, LRN's channels); a Move's may all be
    assert allowed == {"averagepool/grad/AveragePoolGrad": [0, 1], "maxpool/grad/MaxPoolGrad": [0, 1],
                       "lrn/grad/LRNGrad": [0, 2, 3], "conv_1/grad/ConvGradData:interleave": [0, 1],
                       "conv/grad/ConvGradData:flip": [0, 1, 2, 3], "conv/grad/ConvGradData:interleave": [0, 1, 2, 3]}
