"""A training step runs through the same pipeline as inference and keeps its numbers: lowered to IR it equals the
Graph's reference, executed tile by tile as codegen tiles it (and cut along every axis the chunk rule allows) it
equals it too, and accelsim simulates it, with the backward pass's MACs counted by hand from the shapes.

The models: the MLP of test_train_rules.py, a one-layer GPT-2 (embedding gradient, LayerNorm, attention,
the tied head, cross-entropy over every token) and a one-layer MatMul-free LM (fake-quantised BitLinear, the Scan),
both in fp64 so that a tiling can differ only in summation order.
"""
from collections import Counter

import numpy as np
import pytest

from accelsim.arch import load_arch
from accelsim.sim.build import build, mappings_for, simulate
from compiler import zoo
from compiler.codegen import Tiles, generate
from compiler.codegen.execute import einsum_tiled, vector_tiled
from compiler.dtypes import DType
from compiler.ir import Einsum, OpKind, Move
from compiler.ops.interpret import run_graph, run_ir
from compiler.ops.lower import lower
from compiler.compile import Options, compile_graph
from compiler.targeting import sliced
from compiler.train import Optimizer, training_graph
from tests.compiler.train.train_checks import close
from tests.compiler.train.test_train_rules import mlp
from tests.compiler.train.test_train_transformers import trained

# Within 1e-12 of each output's largest entry: fp64 throughout, 1e-15 seen (the margin is for AdamW, whose first
# step g / (|g| + eps) magnifies a rounding difference in a gradient entry near eps). GPT-2's attention key biases
# are not trained (test_train_transformers.key_biases): their gradient is 0 in exact arithmetic, so it, and AdamW's
# moments of it, are rounding noise that no relative tolerance compares.
RTOL = 1e-12


def step_of(name: str, optimizer: Optimizer):
    """(training step, feeds including the labels)."""
    rng = np.random.default_rng(0)
    if name == "mlp":
        graph, feeds = mlp()
        step = training_graph(graph, optimizer=optimizer)
        return step, {**feeds, step.labels: np.array([0, 2, 1, 2])}
    if name == "matmulfree":      # BitLinear in its training form, the MLGRU's Scan and its reverse Scan
        graph = zoo.build("matmulfree_lm", batch=2, seq=6, layers=1, hidden=16, mlp=32, vocab=40, dtype="fp64",
                          latent=True)
        step = training_graph(graph, optimizer=optimizer)
        return step, {"input_ids": rng.integers(0, 40, (2, 6)), step.labels: rng.integers(0, 40, (2, 6))}
    graph = zoo.build("gpt2", batch=2, seq=8, layers=1, hidden=32, heads=2, mlp=64, vocab=50, max_positions=16,
                      dtype="fp64")
    step = training_graph(graph, optimizer=optimizer, params=trained(graph))
    return step, {"input_ids": rng.integers(0, 50, (2, 8)), step.labels: rng.integers(0, 50, (2, 8))}


CASES = [("mlp", Optimizer("sgd")), ("mlp", Optimizer("adamw")), ("gpt2", Optimizer("sgd")),
         ("gpt2", Optimizer("adamw")), ("matmulfree", Optimizer("adamw"))]
IDS = [f"{name}-{optimizer.name}" for name, optimizer in CASES]


@pytest.mark.parametrize("name, optimizer", CASES, ids=IDS)
def test_lowered_step_equals_the_graph(name, optimizer):
    step, feeds = step_of(name, optimizer)
    want = run_graph(step.graph, feeds)
    got = run_ir(lower(step.graph), feeds, step.graph.tensors)
    assert set(got) == set(want) == set(step.graph.outputs)
    for output in step.graph.outputs:
        close(output, got[output], want[output], RTOL)


@pytest.mark.parametrize("name, optimizer", CASES, ids=IDS)
def test_tiled_step_equals_the_graph(name, optimizer):
    """The whole step, mapped on h100 and run tile by tile, each op reading what the tiles before it computed."""
    step, feeds = step_of(name, optimizer)
    arch = load_arch("h100")
    ir = compile_graph(step.graph, Options(dtype=DType.fp64))
    code = generate(ir, arch, mappings_for(ir, arch))
    env = {k: np.asarray(v) for k, v in ir.weights.items()} | dict(ir.constants) | feeds
    cut = Counter()
    for op, tiles in zip(ir.ops, code.tiles):
        args = [env[o.tensor] for o in op.inputs]
        if tiles is None:          # a view: nothing moves
            result = op.reference(args)
        else:
            result = einsum_tiled(op, tiles, args) if isinstance(op, Einsum) else vector_tiled(op, tiles, args)
            if len(tiles.start) > 1:
                cut[step.phase[op.node], op.kind] += 1
        env[op.output.tensor] = np.asarray(result).astype(op.output.dtype.numpy)
    want = run_graph(step.graph, feeds)
    for output in step.graph.outputs:
        close(output, env[output], want[output], RTOL)
    if name == "gpt2":   # the plan cut backward products and vector ops into several tiles: not a vacuous check
        assert cut["backward", OpKind.einsum] and cut["backward", OpKind.map] and cut["backward", OpKind.reduce]


def chunks(op, axis: int, inputs_cut) -> Tiles:
    """`op`'s output cut along `axis` into uneven chunks: the first row, the rows up to the middle, the rest."""
    shape, extent = op.output.shape, op.output.shape[axis]
    edges = sorted({0, 1, max(1, extent // 2), extent})
    start = np.zeros((len(edges) - 1, len(shape)), np.int64)
    size = np.tile(np.asarray(shape, np.int64), (len(edges) - 1, 1))
    start[:, axis], size[:, axis] = edges[:-1], np.diff(edges)
    return Tiles(op=0, dims=(), rows=np.arange(len(edges) - 1), start=start, extent=size,
                 inputs_sliced=tuple(inputs_cut), axis=axis)


def test_every_training_op_cut_along_every_allowed_axis_equals_its_reference():
    """Whatever chunk plan the mapper picks: every loss, backward and optimizer Map or Reduce of the GPT-2 step, cut
    along each axis compiler.targeting.slicing allows, equals its reference (a chunk that reads only its own rows
    must not need the others', as a mean's denominator does)."""
    step, feeds = step_of("gpt2", Optimizer("adamw"))
    ir = lower(step.graph)
    env = {k: np.asarray(v) for k, v in ir.weights.items()} | dict(ir.constants) | feeds
    checked = set()
    for op in ir.ops:
        args = [env[o.tensor] for o in op.inputs]
        want = np.asarray(op.reference(args)).astype(op.output.dtype.numpy)
        env[op.output.tensor] = want
        if step.phase[op.node] == "forward" or isinstance(op, (Einsum, Move)):
            continue
        for axis, extent in enumerate(op.output.shape):
            inputs_cut = sliced(op, axis)
            if extent < 2 or inputs_cut is None:
                continue
            got = vector_tiled(op, chunks(op, axis, inputs_cut), args)
            close(f"{op.name} cut along axis {axis}", got, want, RTOL)
            checked.add(op.op)
    # the loss's gradient and the optimizer are among them, with the element-wise derivatives and sums
    assert {"CrossEntropyGrad", "AdamW", "ErfGrad", "ReduceSum", "SoftmaxGrad"} <= checked


def test_simulated_step_counts_the_backward_macs_by_hand():
    """The MLP x[4, 8] -> Gemm 16 -> Relu -> Tanh -> Gemm 3 on h100. Forward: 4*8*16 + 4*16*3 = 704 MACs. Backward:
    each weight's gradient (4*8*16 and 4*16*3) and the hidden layer's (4*16*3), but not the input's, which no
    parameter needs: 896 = 2 * 704 - 512. The loss and the optimizer run on the vector unit: no MACs."""
    step, _ = step_of("mlp", Optimizer("adamw"))
    result = simulate(build(step.graph, load_arch("h100")), "tile")
    assert len(result.ops) == len(lower(step.graph).ops)
    macs, seconds = Counter(), Counter()
    for op in result.ops:
        macs[step.phase[op.node]] += op.macs
        seconds[step.phase[op.node]] += op.seconds
    assert dict(macs) == {"forward": 704, "loss": 0, "backward": 896, "optimizer": 0}
    assert all(seconds[phase] > 0 for phase in ("forward", "loss", "backward", "optimizer"))


def test_simulated_llama_step_doubles_the_forward_macs():
    """In a decoder every product's both operands lead to a parameter (the first layer's input is the embedding, a
    gather): the backward pass computes both gradients of each, exactly twice the forward's MACs."""
    graph = zoo.build("llama", batch=2, seq=8, layers=1, hidden=32, heads=2, mlp=64, vocab=50, max_positions=16)
    step = training_graph(graph, optimizer=Optimizer("sgd"))
    result = simulate(build(step.graph, load_arch("h100")), "tile")
    macs = Counter()
    for op in result.ops:
        macs[step.phase[op.node]] += op.macs
    # q, k, v, o: 4 * 16*32*32; gate, up, down: 3 * 16*32*64; QK^T and PV: 2 * 2*2*8*8*16; head: 16*32*50
    forward = 4 * 16 * 32 * 32 + 3 * 16 * 32 * 64 + 2 * 2 * 2 * 8 * 8 * 16 + 16 * 32 * 50
    assert macs["forward"] == forward and macs["backward"] == 2 * forward
