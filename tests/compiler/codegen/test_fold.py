"""Folding a long loop of identical tiles: the rows a folded Program keeps are the whole Program's rows for those
iterations; a Program past the row bound is refused before its rows are built."""
from dataclasses import replace

import numpy as np
import pytest

from accelsim.arch import load_arch
from compiler.builder import Builder
from compiler.codegen import Fold, folds_for, generate
from compiler.codegen.fold import foldable, plain_dims
from compiler.codegen.nest import loop_nest
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.ir import Einsum
from compiler.mapping import LevelTile, Mapping
from compiler.compile import Options, compile_graph
from compiler.program import COMPUTE, STORE

FIELDS = ("kind", "level", "operand", "bytes", "m", "n", "k", "work", "useful")


def gemm_on_tpu_v1():
    b = Builder("gemm", dtype=DType.int8)
    y = b.node("MatMul", [b.input("x", (100, 70)), b.weight("w", (70, 50))])
    arch = load_arch("tpu_v1")
    ir = compile_graph(b.build([y]), Options(dtype=DType.int8, arch=arch))
    return arch, ir, ir.ops[0]


def mapping_with_outer(op, dim: str, tile: int) -> Mapping:
    """`dim` cut into tiles of `tile` in the weight FIFO, outermost; the accumulators take 32 x 32 x 32 steps."""
    outer = tuple((d, tile if d == dim else e) for d, e in op.loops)
    inner = tuple((d, min(32, e)) for d, e in outer)
    return Mapping(op=op.name, signature="", unit="mxu", loops=op.loops, dataflow="ws",
                   levels=(LevelTile("ddr3", op.loops, ()), LevelTile("weight_fifo", outer, (dim,)),
                           LevelTile("accumulators", inner, ("m", "n", "k"))))


def mapping_with_inner(op, dim: str, tile: int) -> Mapping:
    """n cut in two tiles of 25 in the weight FIFO, outermost; inside, `dim` cut into tiles of `tile` in the
    accumulators, then k (when it is not `dim`) in tiles of 32."""
    outer = tuple((d, 25 if d == "n" else e) for d, e in op.loops)
    inner = tuple((d, tile if d == dim else min(32, e)) for d, e in outer)
    order = (dim,) + tuple(d for d in ("m", "n", "k") if d != dim)
    return Mapping(op=op.name, signature="", unit="mxu", loops=op.loops, dataflow="ws",
                   levels=(LevelTile("ddr3", op.loops, ()), LevelTile("weight_fifo", outer, ("n",)),
                           LevelTile("accumulators", inner, order)))


def iterations(program: np.ndarray, per: int) -> list[list[tuple]]:
    """The rows of each iteration of the outermost loop (`per` computes each), as sorted tuples: an iteration's
    rows run from its first load to the stores after its last compute."""
    computes = np.flatnonzero(program["kind"] == COMPUTE)
    out, start = [], 0
    for last in computes[per - 1::per]:
        end = last + 1
        while end < len(program) and program["kind"][end] == STORE:
            end += 1
        out.append(sorted(tuple(int(r[f]) for f in FIELDS) for r in program[start:end]))
        start = end
    return out


@pytest.mark.parametrize("dim, tile", [("m", 3), ("k", 2)])
def test_folded_rows_are_the_whole_programs_rows_of_the_kept_iterations(dim, tile):
    arch, ir, op = gemm_on_tpu_v1()
    mapping = mapping_with_outer(op, dim, tile)
    extent = dict(op.loops)[dim]
    trips = -(-extent // tile)                 # m: 34 tiles of 3, the last of 1; k: 35 of 2 (partial sums)
    whole = generate(ir, arch, {op.name: mapping}).program
    fold = Fold(0, trips, 3)
    code = generate(ir, arch, {op.name: mapping}, {op.name: (fold,)})
    per = int((whole["kind"] == COMPUTE).sum()) // trips
    kept = iterations(code.program, per)
    every = iterations(whole, per)
    assert len(every) == trips and len(kept) == 4
    # iterations 0, 1, 2 and the last (ragged for m; the one storing final sums for k)
    assert kept == [every[0], every[1], every[2], every[trips - 1]]
    assert code.folds == {op.name: (fold,)}


@pytest.mark.parametrize("dim, tile", [("m", 3), ("k", 2)])
def test_an_inner_loop_keeps_the_same_iterations_inside_every_outer_one(dim, tile):
    arch, ir, op = gemm_on_tpu_v1()
    mapping = mapping_with_inner(op, dim, tile)
    trips = -(-dict(op.loops)[dim] // tile)
    assert loop_nest(mapping)[:2] == [("n", 2, 1), (dim, trips, 2)]
    whole = generate(ir, arch, {op.name: mapping}).program
    code = generate(ir, arch, {op.name: mapping}, {op.name: (Fold(1, trips, 3),)})
    per = int((whole["kind"] == COMPUTE).sum()) // (2 * trips)
    kept, every = iterations(code.program, per), iterations(whole, per)
    assert len(every) == 2 * trips and len(kept) == 8
    # in each of the two n tiles: the inner loop's iterations 0, 1, 2 and its last
    assert kept == [every[o * trips + i] for o in (0, 1) for i in (0, 1, 2, trips - 1)]


def two_long_loops(op) -> Mapping:
    """m in 34 tiles of 3 in the weight FIFO; inside, k in 35 tiles of 2 in the accumulators."""
    mapping = mapping_with_outer(op, "m", 3)
    inner = tuple((d, {"m": 3, "k": 2}.get(d, e)) for d, e in op.loops)
    return replace(mapping, levels=mapping.levels[:2] + (replace(mapping.levels[2], tile=inner),))


def m_in_m(op, outer: int) -> Mapping:
    """m cut into tiles of `outer` in the weight FIFO, each cut into tiles of 1 in the accumulators."""
    mapping = mapping_with_outer(op, "m", outer)
    inner = tuple((d, 1 if d == "m" else e) for d, e in mapping.levels[2].tile)
    return replace(mapping, levels=mapping.levels[:2] + (replace(mapping.levels[2], tile=inner),))


def test_an_inner_loop_over_a_dim_cut_outside_it_keeps_the_same_iterations_in_every_outer_tile():
    arch, ir, op = gemm_on_tpu_v1()
    mapping = m_in_m(op, 25)
    whole = generate(ir, arch, {op.name: mapping}).program
    code = generate(ir, arch, {op.name: mapping}, {op.name: (Fold(1, 25, 3),)})
    per = int((whole["kind"] == COMPUTE).sum()) // 100
    kept, every = iterations(code.program, per), iterations(whole, per)
    assert len(every) == 100 and len(kept) == 16
    assert kept == [every[o * 25 + i] for o in range(4) for i in (0, 1, 2, 24)]


def test_two_folded_loops_keep_the_whole_programs_rows_where_both_are_kept():
    arch, ir, op = gemm_on_tpu_v1()
    mapping = two_long_loops(op)
    assert loop_nest(mapping) == [("m", 34, 1), ("k", 35, 2)]
    whole = generate(ir, arch, {op.name: mapping}).program
    code = generate(ir, arch, {op.name: mapping}, {op.name: (Fold(1, 35, 3), Fold(0, 34, 3))})
    kept, every = iterations(code.program, 1), iterations(whole, 1)
    assert len(every) == 34 * 35 and len(kept) == 16
    assert kept == [every[o * 35 + i] for o in (0, 1, 2, 33) for i in (0, 1, 2, 34)]


def test_the_loops_that_fold_are_the_longest_that_may(monkeypatch):
    monkeypatch.setattr("compiler.codegen.fold.FOLD_STEPS", 0)
    arch, ir, op = gemm_on_tpu_v1()
    assert folds_for(op, mapping_with_outer(op, "m", 3)) == (Fold(0, 34, 4),)
    assert folds_for(op, mapping_with_outer(op, "m", 10)) == ()           # 10 trips: too few to save work
    # a weight gradient's reduction over the batch runs inside its output tiles: the inner loop folds
    assert folds_for(op, mapping_with_inner(op, "m", 3)) == (Fold(1, 34, 4),)
    # the longer first; the second only while the steps kept are still many (34 x 7 left after folding k)
    monkeypatch.setattr("compiler.codegen.fold.FOLD_STEPS", 34 * 7)
    assert folds_for(op, two_long_loops(op)) == (Fold(1, 35, 4), Fold(0, 34, 4))
    monkeypatch.setattr("compiler.codegen.fold.FOLD_STEPS", 34 * 7 + 1)
    assert folds_for(op, two_long_loops(op)) == (Fold(1, 35, 4),)
    # m in tiles of 25, each in 25 tiles of 1: the inner loop folds, the tiles it cuts being alike; in tiles of 30 (the
    # last of 10) it does not: in the ragged one its iterations past the edge would be empty, unlike the kept ones
    assert [(d, t) for d, t, _ in loop_nest(m_in_m(op, 25))][:2] == [("m", 4), ("m", 25)]
    assert foldable(op, m_in_m(op, 25)) == [1]
    assert [(d, t) for d, t, _ in loop_nest(m_in_m(op, 30))][:2] == [("m", 4), ("m", 30)]
    assert foldable(op, m_in_m(op, 30)) == []
    b = Builder("conv", dtype=DType.int8)
    y = b.node("Conv", [b.input("x", (64, 8, 11, 9)), b.weight("w", (12, 8, 3, 3))], kernel_shape=[3, 3])
    conv = next(o for o in compile_graph(b.build([y]), Options(dtype=DType.int8, arch=arch)).ops
                if isinstance(o, Einsum))
    # the batch is read as x[n, ...]; an output row reads the window x[.., p + r, ..]
    window = {d for axes in conv.in_axes for axis in axes if len(axis.terms) > 1 for d, _ in axis.terms}
    assert window and not window & plain_dims(conv)
    batch = next(d for d, e in conv.loops if e == 64)
    assert batch in plain_dims(conv)


def test_a_program_past_the_row_bound_is_refused_before_its_rows_are_allocated(monkeypatch):
    arch, ir, op = gemm_on_tpu_v1()
    mapping = mapping_with_outer(op, "m", 3)
    rows = len(generate(ir, arch, {op.name: mapping}).program)
    monkeypatch.setattr("compiler.codegen.assemble.MAX_ROWS", rows - 1)

    def no_rows(n):
        raise AssertionError(f"{n} rows allocated")

    monkeypatch.setattr("compiler.codegen.assemble.empty", no_rows)
    with pytest.raises(UserError, match=rf"op '{op.name}': its Program would hold {rows:,} rows"):
        generate(ir, arch, {op.name: mapping})
