"""The chunk plans of Map, Reduce and Move (compiler/map/vector.py): which axis is cut, into how many chunks, which
operands each chunk slices, the Mapping they make, and the refusal when not even a chunk fits."""
from dataclasses import replace

import numpy as np
import pytest

from accelsim.arch import load_arch
from compiler.dtypes import DType
from compiler.ir import Map, Move, Operand, Reduce, Role
from compiler.map import MappingError
from compiler.map.vector import MIN_CHUNKS, chunk_plan, plan


def tensor(name, shape, role=Role.input):
    return Operand(name, shape, DType.fp32, role)


def add(*shapes, out=None, op="Add"):
    out = out or shapes[0]
    return Map(name="m", node="m", op=op, inputs=tuple(tensor(f"x{i}", s) for i, s in enumerate(shapes)),
               output=tensor("y", out, Role.output), fn=np.add, ops_per_element=1)


def test_the_longest_axis_every_operand_can_follow_is_cut():
    axis, chunk, cut = chunk_plan(add((8, 512), (8, 512)), capacity=1 << 30)
    assert (axis, chunk, cut) == (1, 512 // MIN_CHUNKS, [True, True])


def test_an_operand_that_indexes_an_axis_by_its_length_keeps_that_axis_whole():
    # a bias of 4096 lines up with the last axis: the rows are cut, the bias is read whole by every chunk
    axis, chunk, cut = chunk_plan(add((64, 4096), (4096,)), capacity=1 << 30)
    assert (axis, chunk, cut) == (0, 64 // MIN_CHUNKS, [True, False])


def test_a_broadcast_operand_is_not_sliced():
    axis, _, cut = chunk_plan(add((16, 256), (1, 256)), capacity=1 << 30)
    assert axis == 1 and cut == [True, True]
    axis, _, cut = chunk_plan(add((256, 16), (1, 16)), capacity=1 << 30)
    assert axis == 0 and cut == [True, False]


def test_unit_axes_are_never_cut():
    assert chunk_plan(add((1, 1, 300)), capacity=1 << 30)[0] == 2


def test_more_chunks_when_the_op_outgrows_the_level():
    op = add((4, 4000), (4, 4000))                 # 3 x 64,000 bytes
    axis, chunk, _ = chunk_plan(op, capacity=op.nbytes // 10)
    assert axis == 1 and chunk == -(-4000 // 20)   # twice the bytes over the capacity: 20 chunks
    assert chunk_plan(op, capacity=op.nbytes * 100)[1] == 4000 // MIN_CHUNKS


def test_a_reduction_is_never_cut_along_a_reduced_axis():
    op = Reduce(name="r", node="r", op="ReduceSum", inputs=(tensor("x", (32, 1024)),),
                output=tensor("y", (32, 1), Role.output), axes=(1,), fn=lambda x: x.sum(1, keepdims=True))
    axis, chunk, cut = chunk_plan(op, capacity=1 << 30)
    assert (axis, chunk, cut) == (0, 32 // MIN_CHUNKS, [True])


def test_a_recurrence_runs_as_one_chunk():
    assert chunk_plan(add((8, 64), op="Scan"), capacity=1 << 30) == (0, 8, None)


def test_the_plan_holds_one_chunk_in_the_inner_level():
    arch = load_arch("h100")
    op = add((64, 4096), (4096,))
    mapping = plan(op, arch)
    vector = next(u for u in arch.compute if u.role.value == "vector")
    assert mapping.unit == vector.name and mapping.loops == (("a0", 64), ("a1", 4096))
    outer, inner = mapping.levels
    assert outer.level == arch.memory[0].name and dict(outer.tile) == {"a0": 64, "a1": 4096} and outer.order == ()
    assert inner.level != outer.level and inner.order == ("a0",)
    assert dict(inner.tile)["a1"] == 4096 and dict(inner.tile)["a0"] < 64


def test_an_uncut_plan_names_no_axis_and_a_view_moves_nothing():
    arch = load_arch("h100")
    assert plan(add((8, 64), op="Scan"), arch).levels[-1].order == ()
    view = Move(name="v", node="v", op="Reshape", inputs=(tensor("x", (8, 64)),),
                output=tensor("y", (512,), Role.output),
                fn=lambda x: x.reshape(-1), view=True)
    mapping = plan(view, arch)
    assert mapping.levels == () and mapping.loops == (("e", 512),) and "view" in mapping.notes[0]


def test_nothing_fits_names_the_operand_and_the_level():
    arch = load_arch("systolic_8x8")
    op = add((64, 64), (64, 64))
    tiny = replace(arch, memory=tuple(replace(lv, capacity_bytes=2) if i > 0 else lv
                                      for i, lv in enumerate(arch.memory)))
    with pytest.raises(MappingError) as error:
        plan(op, tiny)
    # one element of each input, double-buffered: 2 x (4 + 4) bytes against 2
    assert "op 'm'" in str(error.value) and "'x0' needs 16 bytes of input_sram" in str(error.value)
    assert "which has 2 bytes" in str(error.value)
