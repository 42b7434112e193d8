"""Folding a long loop of identical tiles: the rows a folded Program keeps are the whole Program's rows for those
iterations; a Program past the row bound is refused before its rows are built."""
import numpy as np
import pytest

from accelsim.arch import load_arch
from compiler.builder import Builder
from compiler.codegen import Fold, fold_for, generate
from compiler.codegen.fold import plain_dims
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.ir import Einsum
from compiler.mapping import LevelTile, Mapping
from compiler.pipeline import Options, compile_graph
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
    code = generate(ir, arch, {op.name: mapping}, {op.name: fold})
    per = int((whole["kind"] == COMPUTE).sum()) // trips
    kept = iterations(code.program, per)
    every = iterations(whole, per)
    assert len(every) == trips and len(kept) == 4
    # iterations 0, 1, 2 and the last (ragged for m; the one storing final sums for k)
    assert kept == [every[0], every[1], every[2], every[trips - 1]]
    assert code.folds == {op.name: fold}


def test_only_the_outermost_loop_folds_and_only_over_a_plain_dim(monkeypatch):
    monkeypatch.setattr("compiler.codegen.fold.FOLD_STEPS", 0)
    arch, ir, op = gemm_on_tpu_v1()
    assert fold_for(op, mapping_with_outer(op, "m", 3)) == Fold(0, 34, 4)
    assert fold_for(op, mapping_with_outer(op, "m", 10)) is None          # 10 trips: too few to save work
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
