"""Shape and data-movement ops against onnxruntime, through the Graph and the IR; folding of shape arithmetic."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler.builder import Builder
from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.ops.interpret import run_graph
from compiler.ir import OpKind
from compiler.ops.lower import folded_nodes, lower
from tests.compiler.onnx_models import model as onnx_model
from tests.compiler.oracle import check_against_ort

F32, I32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(1)
BIG = np.iinfo(np.int64).max


def _check(model, feeds, rtol=0.0, atol=0.0):
    """Graph and IR references equal onnxruntime exactly (no arithmetic here), in the declared dtypes."""
    graph = check_against_ort(model, feeds, rtol=rtol, atol=atol)
    for o in model.graph.output:
        assert graph.tensor(o.name).dtype == DType.from_onnx(o.type.tensor_type.elem_type), o.name
    return graph


def _ints(name, values):
    return helper.make_tensor(name, I64, [len(values)], values)


def _x(shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _one(op, shape, opset, consts=(), outputs=("y",), **attrs):
    """One node reading float32 x and constant inputs (int lists -> int64, a float -> an f32 scalar, None omits)."""
    names = ["x"] + ["" if v is None else f"c{i}" for i, v in enumerate(consts)]
    inits = [helper.make_tensor(f"c{i}", F32, [], [v]) if isinstance(v, float) else _ints(f"c{i}", v)
             for i, v in enumerate(consts) if v is not None]
    node = helper.make_node(op, names, list(outputs), **attrs)
    proto = onnx_model([node], [("x", F32, list(shape))], [(o, F32) for o in outputs], opset, inits)
    return _check(proto, {"x": _x(shape)})


# -- views ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [9, 13, 14, 21])
@pytest.mark.parametrize("spec,expected", [([0, -1], (2, 12)), ([-1, 4], (6, 4)), ([2, 0, 2, 2], (2, 3, 2, 2)),
                                           ([24], (24,))])
def test_reshape_zero_copies_and_minus_one_infers(spec, expected, opset):
    graph = _one("Reshape", (2, 3, 4), opset, [spec])
    assert graph.tensor("y").shape == expected
    (op,) = lower(graph).ops
    assert op.kind == OpKind.move and op.view and op.nbytes == 0 and [o.tensor for o in op.inputs] == ["x"]


def test_reshape_allowzero_keeps_a_literal_zero():
    b = Builder("z", opset=14)
    x = b.input("x", (0, 3))
    y = b.node("Reshape", [x, b.const(np.array([3, 0], dtype=np.int64))], allowzero=1)
    graph = b.build([y])
    assert graph.tensor(y).shape == (3, 0) and run_graph(graph, {x: np.zeros((0, 3), np.float32)})[y].shape == (3, 0)
    with pytest.raises(ModelError, match=r"\(Reshape\): cannot reshape \[0, 3\] \(0 elements\) to \[3, 0\]"):
        b.node("Reshape", [x, b.const(np.array([3, 0], dtype=np.int64))])   # 0 copies the input's 3


@pytest.mark.parametrize("opset,axis", [(9, 0), (9, 2), (11, -1), (13, 3), (21, -3)])
def test_flatten(opset, axis):
    _one("Flatten", (2, 3, 4), opset, axis=axis)


@pytest.mark.parametrize("opset", [9, 11, 13, 17, 21])
def test_squeeze_unsqueeze(opset):
    """axes: an attribute before opset 13 (negative from 11), an input from 13; Squeeze without axes."""
    axes = [0, 2] if opset == 9 else [-1, 1]
    if opset < 13:
        nodes = [helper.make_node("Unsqueeze", ["x"], ["u"], axes=axes),
                 helper.make_node("Squeeze", ["u"], ["y"], axes=axes)]
    else:
        nodes = [helper.make_node("Unsqueeze", ["x", "axes"], ["u"]), helper.make_node("Squeeze", ["u", "axes"], ["y"])]
    nodes.append(helper.make_node("Squeeze", ["u"], ["all"]))
    proto = onnx_model(nodes, [("x", F32, [3, 1, 4])], [("u", F32), ("y", F32), ("all", F32)], opset,
                       [_ints("axes", axes)] if opset >= 13 else [])
    graph = _check(proto, {"x": _x((3, 1, 4))})
    assert graph.tensor("y").shape == (3, 1, 4) and graph.tensor("all").shape == (3, 4)


@pytest.mark.parametrize("opset,mask", [(9, False), (12, True), (13, True), (21, False)])
def test_identity_and_dropout_are_views(opset, mask):
    inputs = ["i", "r"] if opset >= 12 else ["i"]
    attrs = {"ratio": 0.3} if opset < 12 else {}
    nodes = [helper.make_node("Identity", ["x"], ["i"]),
             helper.make_node("Dropout", inputs, ["y", "m"] if mask else ["y"], **attrs)]
    inits = [helper.make_tensor("r", F32, [], [0.25])] if opset >= 12 else []
    outputs = [("y", F32)] + ([("m", BOOL)] if mask else [])
    graph = _check(onnx_model(nodes, [("x", F32, [2, 5])], outputs, opset, inits), {"x": _x((2, 5))})
    ops = lower(graph).ops
    assert all(op.nbytes == 0 for op in ops if op.kind == OpKind.move) and len(ops) == 2 + mask


# -- moves ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [9, 13, 21])
@pytest.mark.parametrize("shape,perm", [((2, 3, 4), None), ((2, 3, 4), [0, 2, 1]), ((2, 3, 4), [2, 0, 1]),
                                        ((1, 3, 4), [1, 0, 2])])   # moving only a size-1 axis is a view
def test_transpose(shape, perm, opset):
    (op,) = lower(_one("Transpose", shape, opset, **({} if perm is None else {"perm": perm}))).ops
    assert op.kind == OpKind.move and op.view == (shape[0] == 1) and op.nbytes == (shape[0] != 1) * 2 * 24 * 4


@pytest.mark.parametrize("opset,axis", [(9, 1), (11, -1), (13, 0), (21, -3)])
def test_concat(opset, axis):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    shapes[1][axis] = 1
    proto = onnx_model([helper.make_node("Concat", ["a", "b", "c"], ["y"], axis=axis)],
                       [(n, F32, s) for n, s in zip("abc", shapes)], [("y", F32)], opset)
    _check(proto, {n: _x(s) for n, s in zip("abc", shapes)})


@pytest.mark.parametrize("opset", [9, 13, 21])
def test_expand_broadcasts_both_ways(opset):
    assert _one("Expand", (3, 1), opset, [[2, 1, 4]]).tensor("y").shape == (2, 3, 4)


# -- Slice, Split, Gather, Pad --------------------------------------------------------------------------

def test_slice_attributes_before_opset_10():
    _one("Slice", (4, 3, 5), 9, starts=[1, -3], ends=[BIG, -1], axes=[0, 2])


SLICES = [  # starts, ends, axes, steps
    ([1], [3], None, None),
    ([-2, 0], [BIG, -1], [0, 2], None),
    ([-1], [-BIG], [2], [-1]),
    ([BIG], [-BIG], [-1], [-2]),
    ([4, 1], [0, 100], [2, -2], [-2, 2]),
    ([10], [20], [0], [1]),        # past the end: empty
    ([0, 3], [-1, 1], [1, 2], [1, -1]),
    ([1], [3], None, [2]),         # steps without axes
]


@pytest.mark.parametrize("opset", [10, 13, 18, 21])
@pytest.mark.parametrize("starts,ends,axes,steps", SLICES)
def test_slice_inputs(starts, ends, axes, steps, opset):
    if opset == 10 and any(a < 0 for a in axes or []):
        pytest.skip("negative axes arrive in opset 11")
    consts = [starts, ends] + ([axes] if axes or steps else []) + ([steps] if steps else [])
    graph = _one("Slice", (4, 3, 5), opset, consts)
    (op,) = lower(graph).ops
    assert [o.tensor for o in op.inputs] == ["x"] and op.nbytes == 2 * graph.tensor("y").nbytes


@pytest.mark.parametrize("opset,split", [(11, [1, 4]), (11, None), (13, [2, 3]), (13, None), (18, None)])
def test_split(opset, split):
    """split: an attribute before 13, an input from 13; none: equal parts (from 18 the last may be smaller)."""
    size = 6 if split is None and opset < 18 else 5
    attrs = {"axis": -1} | ({"split": split} if split and opset < 13 else {}) | \
        ({"num_outputs": 2} if opset >= 18 else {})
    graph = _one("Split", (2, size), opset, [split] if split and opset >= 13 else [], outputs=("a", "b"), **attrs)
    ops = lower(graph).ops
    assert [op.output.tensor for op in ops] == ["a", "b"] and all(op.kind == OpKind.move for op in ops)


@pytest.mark.parametrize("opset", [9, 13, 21])
@pytest.mark.parametrize("axis,indices", [(0, [[0, 2], [-1, 1]]), (-1, [3, -4, 0]), (1, 2), (0, -1)])
def test_gather(axis, indices, opset):
    idx = np.array(indices, dtype=np.int64)
    proto = onnx_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)],
                       [("x", F32, [3, 4]), ("i", I64, list(idx.shape))], [("y", F32)], opset)
    graph = _check(proto, {"x": _x((3, 4)), "i": idx})
    assert graph.tensor("y").shape == np.take(np.zeros((3, 4)), idx, axis=axis).shape


def test_gather_embedding_lookup_reads_only_the_rows():
    proto = onnx_model([helper.make_node("Gather", ["table", "ids"], ["y"])], [("ids", I32, [1, 3])], [("y", F32)],
                       13, [helper.make_tensor("table", F32, [100, 8], RNG.standard_normal(800).tolist())])
    (op,) = lower(_check(proto, {"ids": np.array([[5, 99, 0]], dtype=np.int32)})).ops
    assert op.nbytes == 2 * 3 * 8 * 4   # three rows read and written, not the 100-row table


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("opset", [9, 11, 13, 18, 21])
def test_pad(mode, opset):
    """pads: begins for each axis, then ends (the -1 crops); attributes before 11, inputs from 11, axes from 18."""
    pads = [0, 1, 2, 0, 2, -1]
    if opset < 11:
        graph = _one("Pad", (2, 3, 4), opset, mode=mode, pads=pads, value=1.5)
    elif opset < 18:
        graph = _one("Pad", (2, 3, 4), opset, [pads, 1.5], mode=mode)
    else:
        graph = _one("Pad", (2, 3, 4), opset, [[1, 2, 2, -1], 1.5, [-2, -1]], mode=mode)
    assert graph.tensor("y").shape == (2, 6, 5)


def test_pad_wrap_and_omitted_value():
    _one("Pad", (3, 4), 19, [[1, 2, 2, 3]], mode="wrap")
    _one("Pad", (3, 4), 18, [[1, 2, 2, 3], None, [0, 1]])


# -- constants and folded shape arithmetic --------------------------------------------------------------

def test_pytorch_style_shape_chain_folds_to_one_view():
    """x.view(x.size(0), -1) as torch.onnx exports it: Shape -> Gather -> Unsqueeze -> Concat -> Reshape."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("z", I64, [], [0])),
             helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
             helper.make_node("Unsqueeze", ["batch", "axes0"], ["batch1"]),
             helper.make_node("Constant", [], ["minus1"], value_ints=[-1]),
             helper.make_node("Concat", ["batch1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"]), helper.make_node("Relu", ["y"], ["out"])]
    proto = onnx_model(nodes, [("x", F32, [2, 3, 4])], [("out", F32)], 13, [_ints("axes0", [0])])
    proto.graph.output[0].CopyFrom(helper.make_tensor_value_info("out", F32, [2, 12]))  # onnx cannot infer it
    graph = _check(proto, {"x": _x((2, 3, 4))})
    folded = folded_nodes(graph)
    assert len(folded) == 6 and graph.value("target").tolist() == [2, -1]
    ir = lower(graph)
    assert {op.node for op in ir.ops}.isdisjoint(folded)
    assert [(op.op, op.kind) for op in ir.ops] == [("Reshape", OpKind.move), ("Relu", OpKind.map)]


@pytest.mark.parametrize("opset,start,end", [(15, 1, None), (15, -2, -1), (19, 0, 100), (21, -100, 2)])
def test_shape_start_end(opset, start, end):
    attrs = {"start": start} | ({} if end is None else {"end": end})
    proto = onnx_model([helper.make_node("Shape", ["x"], ["s"], **attrs), helper.make_node("Size", ["x"], ["n"])],
                       [("x", F32, [2, 3, 4])], [("s", I64), ("n", I64)], opset)
    graph = _check(proto, {"x": _x((2, 3, 4))})
    assert lower(graph).ops == [] and set(folded_nodes(graph)) == {n.name for n in graph.nodes}


@pytest.mark.parametrize("opset", [9, 13, 21])
def test_constants_and_constant_of_shape(opset):
    nodes = [helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", F32, [2, 2], [1, 2, 3, 4])),
             helper.make_node("ConstantOfShape", ["shape"], ["fill"], value=helper.make_tensor("f", I32, [1], [7])),
             helper.make_node("ConstantOfShape", ["shape"], ["zeros"]),
             helper.make_node("Constant", [], ["cf"], **({"value_float": 2.5} if opset >= 11 else   # from 11
                                                         {"value": helper.make_tensor("w", F32, [], [2.5])})),
             helper.make_node("Add", ["x", "c"], ["y"]), helper.make_node("Mul", ["y", "cf"], ["y2"])]
    outputs = [("y", F32), ("fill", I32), ("zeros", F32), ("y2", F32)]
    proto = onnx_model(nodes, [("x", F32, [2, 2])], outputs, opset, [_ints("shape", [2, 3])])
    graph = _check(proto, {"x": _x((2, 2))})
    assert {op.op for op in lower(graph).ops} <= {"Add", "Mul"}


def test_large_fills_lower_to_input_less_maps_and_large_constants_fold():
    big = helper.make_tensor("v", F32, [300, 300], RNG.standard_normal(90000).tolist())
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["fill"], value=helper.make_tensor("f", F32, [1], [2.0])),
             helper.make_node("Constant", [], ["c"], value=big), helper.make_node("Add", ["fill", "c"], ["s"]),
             helper.make_node("Add", ["s", "x"], ["y"])]
    proto = onnx_model(nodes, [("x", F32, [300, 300])], [("y", F32)], 13, [_ints("shape", [300, 300])])
    graph = _check(proto, {"x": _x((300, 300))})
    fill, add, _ = lower(graph).ops
    assert fill.kind == OpKind.map and fill.inputs == () and fill.ops == 0 and fill.nbytes == 90000 * 4
    assert "c" in graph.constants and add.inputs[1].tensor == "c"


@pytest.mark.parametrize("start,limit,delta,elem", [(0, 10, 3, I64), (10, 0, -3, I32), (0.5, 2.0, 0.25, F32)])
def test_range(start, limit, delta, elem):
    inits = [helper.make_tensor(n, elem, [], [v]) for n, v in zip(("s", "l", "d"), (start, limit, delta))]
    graph = _check(onnx_model([helper.make_node("Range", ["s", "l", "d"], ["y"])], [], [("y", elem)], 13, inits), {})
    assert lower(graph).ops == []


# -- errors name the node and the op --------------------------------------------------------------------

def _builder():
    b = Builder("bad", opset=13)
    return b, b.input("x", (2, 3, 4))


@pytest.mark.parametrize("op,inputs,attrs,pattern", [
    ("Reshape", [[5, -1]], {}, r"node 'reshape' \(Reshape\): cannot reshape \[2, 3, 4\] \(24 elements\) to \[5, -1\]"),
    ("Reshape", [[4, 4]], {}, r"\(Reshape\): cannot reshape \[2, 3, 4\] \(24 elements\) to \[4, 4\] \(16 elements\)"),
    ("Reshape", [[-1, -1]], {}, r"\(Reshape\): shape \[-1, -1\] may hold at most one -1"),
    ("Reshape", [[0, 0, 0, 0]], {}, r"\(Reshape\): .*the 0 at position 3 copies input dimension 3"),
    ("Transpose", [], {"perm": [0, 0, 1]}, r"\(Transpose\): perm \[0, 0, 1\] is not a permutation"),
    ("Squeeze", [[1]], {}, r"\(Squeeze\): cannot squeeze axis 1: it has size 3"),
    ("Unsqueeze", [[0, 0]], {}, r"\(Unsqueeze\): axes \[0, 0\] name the same output axis twice"),
    ("Concat", [], {"axis": 3}, r"\(Concat\): axis 3 is out of range for rank 3"),
    ("Gather", [[0, 5]], {"axis": 2}, r"\(Gather\): index 5 is out of range for axis 2 of size 4"),
    ("Flatten", [], {"axis": 4}, r"\(Flatten\): axis 4 is out of range for rank 3"),
    ("Split", [[1, 1]], {"axis": 1}, r"\(Split\): split \[1, 1\] must give 1 sizes"),
    ("Expand", [[5, 1, 1]], {}, r"\(Expand\): input shapes \[2, 3, 4\] and \[5, 1, 1\] do not broadcast"),
    ("Slice", [[0], [1], [0], [0]], {}, r"\(Slice\): step 0 on axis 0 is not allowed"),
])
def test_bad_shape_arguments(op, inputs, attrs, pattern):
    b, x = _builder()
    consts = [b.const(np.array(v, dtype=np.int64)) for v in inputs]
    with pytest.raises(ModelError, match=pattern):
        b.node(op, [x, *consts], **attrs)


def test_training_dropout_and_runtime_shapes_are_refused():
    b, x = _builder()
    with pytest.raises(ModelError, match=r"\(Dropout\): training_mode=true is not supported"):
        b.node("Dropout", [x, b.const(np.float32(0.5)), b.const(np.bool_(True))])
    with pytest.raises(ModelError, match=r"\(Reshape\): input 1 \(the target shape, tensor 's'\) must be a const"):
        b.node("Reshape", [x, b.input("s", (2,), DType.int64)])
