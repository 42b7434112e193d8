"""Codegen: the tiled Program, executed numerically tile by tile, equals the untiled reference for every op
kind (ragged edges, strided/padded/grouped convs included); and its rows follow tiles, not MACs."""
import numpy as np
import pytest

import accelsim
from accelsim.arch import load_arch
from accelsim.sim.api import random_inputs
from accelsim.sim.build import mappings_for
from compiler.builder import Builder
from compiler.codegen import generate
from compiler.codegen.execute import einsum_tiled, vector_tiled
from compiler.dtypes import DType
from compiler.ir import Einsum, OpKind
from compiler.mapping import LevelTile, Mapping
from compiler.ops.elementwise import ONE_INPUT_DTYPE
from compiler.compile import Options, compile_graph
from compiler.program import COMPUTE, LOAD, STORE


def check_every_op(ir, code, feeds):
    """Each op, fed the reference values of its inputs, computed tile by tile equals its reference.

    An op whose inputs ONNX types as one dtype (Add, Div, Max...) computes in the dtype the IR gives them, as
    every op's output is held: on an int8 target the MatMul-free LM's `127 / max(absmax, 1e-5)` is an int8
    division (its clamp int8(1e-5) = 0, so 127 // 0), not a float 127.0 over an int8 0 giving inf and then a NaN
    cast to int8. Other ops keep their weights as given: an Einsum's would all be int8 0, leaving nothing to
    compare, and a QuantizeLinear's scale is a float the quantize pass retypes with the data."""
    env = {k: np.asarray(v) for k, v in ir.weights.items()}
    env.update(ir.constants)
    env.update(feeds)
    kinds = set()
    for op, tiles in zip(ir.ops, code.tiles):
        args = [env[o.tensor] for o in op.inputs]
        if op.op in ONE_INPUT_DTYPE:
            args = [np.asarray(a).astype(o.dtype.numpy) for a, o in zip(args, op.inputs)]
        want = np.asarray(op.reference(args)).astype(op.output.dtype.numpy)
        if tiles is not None:
            got = einsum_tiled(op, tiles, args) if isinstance(op, Einsum) else vector_tiled(op, tiles, args)
            got = np.asarray(got).astype(op.output.dtype.numpy)
            if op.output.dtype.is_float:
                np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3, err_msg=op.name)
            else:
                np.testing.assert_array_equal(got, want, err_msg=op.name)
            kinds.add(op.kind)
        env[op.output.tensor] = want
    return kinds


def compiled(graph, arch_name, dtype=None):
    arch = load_arch(arch_name)
    ir = compile_graph(graph, Options(dtype=dtype or arch.native_dtype, arch=arch))   # fused as `run` fuses
    return arch, ir


def feeds_for(graph, seed=0):
    """Random floats; integer inputs (token ids, token types) zero, valid for any embedding table."""
    feeds = random_inputs(graph, seed)
    return {k: v if v.dtype.kind == "f" else np.zeros_like(v) for k, v in feeds.items()}


def hand_mapping(op, levels, unit="mxu"):
    return Mapping(op=op.name, signature="", unit=unit, loops=op.loops, dataflow="ws",
                   levels=(LevelTile("ddr3", op.loops, ()),) + levels)


def test_ragged_gemm_over_three_levels():
    b = Builder("gemm", dtype=DType.int8)
    x = b.input("x", (100, 70))
    y = b.node("Relu", [b.node("MatMul", [x, b.weight("w", (70, 50))])])
    graph = b.build([y])
    arch, ir = compiled(graph, "tpu_v1")
    op = ir.ops[0]
    # 100 = 3 x 32 + 4, 50 = 32 + 18, 70 = 2 x 32 + 6: every dim ragged, k split outside m (partial sums)
    levels = (LevelTile("weight_fifo", (("m", 100), ("n", 32), ("k", 32)), ("n", "k")),
              LevelTile("accumulators", (("m", 32), ("n", 32), ("k", 32)), ("m",)))
    code = generate(ir, arch, mappings_for(ir, arch) | {op.name: hand_mapping(op, levels)})
    assert check_every_op(ir, code, feeds_for(graph)) == {OpKind.einsum, OpKind.map}
    rows = code.program[code.op_rows[0]:code.op_rows[1]]
    computes = rows[rows["kind"] == COMPUTE]
    assert len(computes) == 4 * 2 * 3
    assert computes["useful"].sum() == 100 * 70 * 50
    assert computes["work"].sum() == code.mappings[op.name].padded_work == 128 * 96 * 64
    weight_loads = rows[(rows["kind"] == LOAD) & (rows["operand"] == 1) & (rows["level"] == 0)]
    assert weight_loads["bytes"].sum() == 70 * 50          # each weight leaves DRAM once: reused across m


@pytest.mark.parametrize("stride,pad,groups", [(1, 0, 1), (2, 1, 1), (2, 1, 2), (1, 2, 4)])
def test_conv_tiles_add_up(stride, pad, groups):
    b = Builder("conv", dtype=DType.int8)
    x = b.input("x", (2, 8, 11, 9))
    w = b.weight("w", (12, 8 // groups, 3, 3))
    y = b.node("Conv", [x, w], kernel_shape=[3, 3], strides=[stride, stride], pads=[pad] * 4, group=groups)
    graph = b.build([y])
    arch, ir = compiled(graph, "systolic_8x8")
    code = generate(ir, arch, mappings_for(ir, arch))
    conv = next(op for op in ir.ops if isinstance(op, Einsum))
    # small tiles, every loop split and ragged: halos and padding cross tile edges
    tile = tuple((d, max(1, e // 3 + 1)) for d, e in conv.loops)
    mapping = Mapping(op=conv.name, signature="", unit=code.mappings[conv.name].unit, loops=conv.loops,
                      levels=(LevelTile(arch.memory[0].name, conv.loops, ()),
                              LevelTile(arch.memory[-1].name, tile, tuple(d for d, _ in conv.loops))))
    for mappings in (code.mappings, {**code.mappings, conv.name: mapping}):
        code = generate(ir, arch, mappings)
        check_every_op(ir, code, feeds_for(graph))


MODELS = {
    "resnet18": dict(image=32),
    "alexnet": dict(image=96, width=0.25, fc=64, classes=10),
    "bert_base": dict(layers=1, seq=16, hidden=64, heads=2, mlp=128, vocab=128),
    "llama": dict(layers=1, seq=8, hidden=64, heads=2, mlp=96, vocab=128),
    "matmulfree_lm": dict(layers=1, seq=8, hidden=64, mlp=96, vocab=128),
}


@pytest.mark.parametrize("arch", ["tpu_v1", "h100", "xeon_spr"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_zoo_models_run_tile_by_tile(model, arch):
    graph = accelsim.load_model(model, weights=True, **MODELS[model])
    hw, ir = compiled(graph, arch, DType.fp32 if arch == "xeon_spr" else None)
    code = generate(ir, hw, mappings_for(ir, hw))
    kinds = check_every_op(ir, code, feeds_for(graph))
    assert {OpKind.einsum, OpKind.map} <= kinds


def test_dependencies_point_backwards_and_loads_precede_computes():
    graph = accelsim.load_model("resnet18", image=32)
    arch, ir = compiled(graph, "tpu_v1")
    program = generate(ir, arch, mappings_for(ir, arch)).program
    rows = np.arange(len(program))[:, None]
    deps = program["dep"]
    assert np.all((deps == -1) | ((deps >= 0) & (deps < rows)))
    computes = program["kind"] == COMPUTE
    assert "cycles" not in program.dtype.names and np.all(program["unit"][computes] >= 0)   # counts, not prices
    assert np.all(program["level"][~computes] >= 0) and np.all(program["bytes"][program["kind"] == STORE] > 0)


def test_rows_follow_tiles_not_macs():
    arch = load_arch("systolic_32x32")

    def rows(m, k, n):
        b = Builder("gemm")
        y = b.node("MatMul", [b.input("x", (m, k)), b.weight("w", (k, n))])
        ir = compile_graph(b.build([y]), Options(dtype=arch.native_dtype))
        code = generate(ir, arch, mappings_for(ir, arch))
        return len(code.program), int((code.program["kind"] == COMPUTE).sum())

    small, big = rows(1024, 1024, 1024), rows(1024, 1024, 4096)
    assert small[0] <= 8 * small[1] and big[0] <= 8 * big[1]     # a few transfers per compute
    assert big[1] <= 4 * small[1]                                # 4x the MACs, at most 4x the rows
    assert small[1] < 1024 ** 3 // (32 * 32 * 32)               # far fewer rows than array folds x k-steps


@pytest.mark.parametrize("arch_name, dtype", [("tpu_v1", DType.int8), ("h100", DType.bf16), ("xeon_spr", DType.fp32)])
def test_moves_run_tile_by_tile(arch_name, dtype):
    # Transpose, Concat, Slice, Split, Gather (an embedding) and Expand on ragged shapes: each chunk is
    # gathered from its own source elements, and must equal the reference copy.
    from compiler.builder import Builder

    b = Builder("moves")
    x = b.input("x", (3, 37, 29))
    ids = b.input("ids", (2, 7), DType.int64)
    t = b.node("Transpose", [x], perm=[2, 0, 1])
    c = b.node("Concat", [x, b.node("Relu", [x])], axis=1)
    s = b.node("Slice", [c, b.const([1, 3]), b.const([3, 70]), b.const([0, 1]), b.const([1, 2])])
    halves = b.node("Split", [x, b.const([20, 17])], outputs=2, axis=1)
    g = b.node("Gather", [b.weight("table", (11, 29)), ids], axis=0)
    e = b.node("Expand", [b.node("Relu", [halves[1]]), b.const([2, 3, 17, 29])])
    graph = b.build([t, s, g, e, halves[0]])
    arch = load_arch(arch_name)
    ir = compile_graph(graph, Options(dtype=dtype))
    code = generate(ir, arch, mappings_for(ir, arch))
    feeds = {"x": np.random.default_rng(1).standard_normal((3, 37, 29)).astype(np.float32),
             "ids": np.array([[0, 3, 10, 2, 2, 7, 1], [5, 5, 9, 0, 4, 6, 8]])}
    if not dtype.is_float:
        feeds["x"] = (feeds["x"] * 40).astype(np.int8)
    moves = [op for op, tiles in zip(ir.ops, code.tiles) if op.kind == OpKind.move and tiles is not None]
    assert {op.op for op in moves} >= {"Transpose", "Concat", "Slice", "Split", "Gather", "Expand"}
    assert any(len(tiles.start) > 1 for op, tiles in zip(ir.ops, code.tiles) if op in moves), "chunked"
    assert OpKind.move in check_every_op(ir, code, feeds)
