"""Long loops of identical tiles simulated from a few of their iterations: every figure of the op as the whole Program
gives it, and the rows simulated do not grow with the batch, wherever the batch's loop runs in the nest."""
from dataclasses import replace

import pytest

import accelsim.sim.tile as tile
from accelsim.sim.build import build
from accelsim.sim.fold import extrapolated, simulate_folded
from accelsim.sim.model import load_arch, load_model
from accelsim.sim.train import compute_dtype
from compiler.builder import Builder
from compiler.codegen import Fold, folds_for
from compiler.codegen.nest import loop_nest
from compiler.train import Optimizer, training_graph


@pytest.fixture
def fold_everything(monkeypatch):
    """Fold ops of any size, so that small ones (cheap to simulate whole) are folded too."""
    monkeypatch.setattr("compiler.codegen.fold.FOLD_STEPS", 0)


def training_step(arch: str):
    """GPT-2's training step (one layer, batch 4, 128 tokens) built for `arch`: its forward and backward GEMMs."""
    hw = load_arch(arch)
    dtype = compute_dtype(hw, None)
    graph = load_model("gpt2", batch=4, seq=128, layers=1, dtype=dtype.value)
    step = training_graph(graph, loss="cross_entropy", optimizer=Optimizer("sgd", {}))
    return build(step.graph, hw, batch=4, dtype=dtype, fuse="chains")


@pytest.mark.parametrize("arch, trains", [("gtx580", True), ("xeon_spr", True), ("npu4", False), ("tpu_v4", False),
                                          ("systolic_32x32", False)])
def test_a_folded_op_has_every_figure_of_the_whole_op(arch, trains, fold_everything):
    compiled = training_step(arch) if trains else build("gpt2", arch, batch=32, seq=128, layers=1)
    seen = set()
    for op in compiled.ir.ops:
        mapping = compiled.mappings.get(op.name)
        if mapping is None or not folds_for(op, mapping) or tile.op_key(op, mapping) in seen:
            continue
        seen.add(tile.op_key(op, mapping))
        alone = replace(compiled.ir, ops=[op])
        whole, _ = tile.run_tiles(alone, compiled.arch, compiled.mappings, compiled.pricing)
        result = simulate_folded(alone, compiled.arch, compiled.mappings, compiled.pricing, tile.run_tiles,
                                 tile.bound_of)
        assert result is not None, op.name
        assert result[0].to_dict() == whole[0].to_dict(), op.name
    assert seen


@pytest.fixture
def simulated(monkeypatch):
    """The rows and folds of every Program accelsim.sim.tile simulates."""
    seen = []
    simulate = tile.run_tiles

    def recording(ir, arch, mappings, pricing, folds=None):
        out = simulate(ir, arch, mappings, pricing, folds)
        seen.append((len(out[1].code.program), tuple(len(f) for f in (folds or {}).values())))
        return out

    monkeypatch.setattr(tile, "run_tiles", recording)
    return seen


def one_einsum(graph, arch: str):
    compiled = build(graph, arch)
    (einsum,) = [op for op in compiled.ir.ops if op.kind.value == "einsum"]
    return compiled, einsum


def whole_and_folded(compiled, op):
    alone = replace(compiled.ir, ops=[op])
    whole, _ = tile.run_tiles(alone, compiled.arch, compiled.mappings, compiled.pricing)
    folded = tile.simulate_ops(alone, compiled.arch, compiled.mappings, compiled.pricing)
    return whole[0].to_dict(), folded[0].to_dict()


def weight_gradient(tokens: int):
    """dW = x^T dy over `tokens` rows (a batch of sequences): the reduction over the batch."""
    b = Builder("wgrad")
    y = b.node("Gemm", [b.input("x", (tokens, 768)), b.input("dy", (tokens, 4096))], transA=1)
    return b.build([y])


def test_a_reduction_over_the_batch_inside_the_output_tiles_folds(fold_everything, simulated):
    rows = {}
    for tokens in (8192, 65536):
        compiled, op = one_einsum(weight_gradient(tokens), "gtx580")
        nest = loop_nest(compiled.mappings[op.name])
        # each output tile sums over every token: the tokens' loop is the innermost, and folds there
        assert nest[-1][:2] == ("k", tokens // 32) and [d for d, _, _ in nest[:-1]] == ["m", "n"]
        assert folds_for(op, compiled.mappings[op.name])[0].loop == len(nest) - 1
        simulated.clear()
        whole, folded = whole_and_folded(compiled, op)
        assert folded == whole
        rows[tokens] = sum(n for n, _ in simulated[1:])          # after the whole Program, the folded ones
        assert rows[tokens] < simulated[0][0] / 4
    assert rows[65536] == rows[8192]


def test_two_long_loops_fold_together(fold_everything, simulated):
    b = Builder("gemm")
    y = b.node("MatMul", [b.input("x", (8192, 256)), b.weight("w", (256, 16384))])
    compiled, op = one_einsum(b.build([y]), "gtx580")
    assert [(d, t) for d, t, _ in loop_nest(compiled.mappings[op.name])] == [("m", 32), ("n", 32), ("k", 8)]
    whole, folded = whole_and_folded(compiled, op)
    assert folded == whole
    # after the whole Program (32 x 32 x 8 steps), only Programs keeping a few iterations of both loops
    assert simulated[0][1] == () and {folds for _, folds in simulated[1:]} == {(2,)}
    assert max(n for n, _ in simulated[1:]) < simulated[0][0] / 10


def batched_gemm(batch: int):
    b = Builder("bgemm")
    y = b.node("MatMul", [b.input("x", (batch, 256, 256)), b.weight("w", (256, 256))])
    return b.build([y])


def test_a_larger_batch_simulates_no_more_rows(monkeypatch, fold_everything):
    rows = []
    generate = tile.generate

    def counting(*args, **kwargs):
        code = generate(*args, **kwargs)
        rows.append(len(code.program))
        return code

    monkeypatch.setattr(tile, "generate", counting)
    simulated = {}
    for batch in (48, 480):
        rows.clear()
        compiled = build(batched_gemm(batch), "gtx580")
        (einsum,) = [op for op in compiled.ir.ops if op.kind.value == "einsum"]
        assert loop_nest(compiled.mappings[einsum.name])[0][0] == "b0"     # the batch is the outer loop
        result = tile.simulate_ops(compiled.ir, compiled.arch, compiled.mappings, compiled.pricing)
        simulated[batch] = sum(rows)
        if batch == 480:
            whole, _ = tile.run_tiles(compiled.ir, compiled.arch, compiled.mappings, compiled.pricing)
            assert [r.to_dict() for r in result] == [r.to_dict() for r in whole]
    assert simulated[480] == simulated[48] > 0


def synthetic_counts(per_inner):
    """The counts of an op of two loops, a (40 trips) around b (30): 7 cycles to start, 5 per iteration of a and
    per_inner(b) for b iterations of b inside it, half of it computing; 64 bytes per tile."""
    def counts(kept: tuple) -> dict:
        heads = {fold.loop: fold.head + 1 for fold in kept}
        a, b = heads.get(0, 40), heads.get(1, 30)
        cycles, compute = 7 + a * (5 + per_inner(b)), a * per_inner(b) // 2
        level = {"dram": 64 * a * b}
        return {"cycles": cycles, "compute_cycles": compute, "stall_cycles": cycles - compute, "work": a * b,
                "tiles": a * b, "stall_cycles_by_level": {"dram": cycles - compute}, "bytes_read_by_level": level,
                "bytes_written_by_level": {}, "bytes_by_level": level, "level_cycles": {"dram": cycles},
                "useful": a * b, "result": None}
    return counts


def test_two_folds_extrapolate_each_along_the_other():
    folds = (Fold(0, 40, 4), Fold(1, 30, 4))
    periodic = synthetic_counts(lambda b: 6 * b)
    whole = extrapolated(folds, (), periodic)
    assert whole == periodic(()) and whole["cycles"] == 7 + 40 * (5 + 6 * 30)
    # an inner loop whose iterations cost more and more never settles: the pair is given up
    assert extrapolated(folds, (), synthetic_counts(lambda b: b * b)) is None
    # folded alone, the outer loop still settles: it is what simulate_folded falls back to
    growing = synthetic_counts(lambda b: b * b)
    assert extrapolated(folds[:1], (), growing) == growing(())
