"""Indexing and data-movement ops: onnx's own conformance cases, their lowering priced on a unit (each family
simulated on a GPU and a TPU preset), data-dependent shapes that evaluate but refuse simulation, and bad input."""
import numpy as np
import pytest

from accelsim.sim.api import run
from compiler.builder import Builder
from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.frontend import from_model
from compiler.ir import OpKind
from compiler.ops.interpret import run_graph
from compiler.ops.lower import lower
from tests.compiler.ops.onnx_node_cases import check_case, node_cases

I64 = DType.int64

# onnx.backend.test.case.node module -> how many of its cases are expected (a case onnx drops shows up here)
MODULES = {"gatherelements": 3, "gathernd": 3, "scatterelements": 7, "scatter": 2, "scatternd": 7, "trilu": 18,
           "cumsum": 9, "argmax": 16, "argmin": 16, "topk": 7, "tile": 2, "onehot": 6, "compress": 5,
           "reversesequence": 3, "spacetodepth": 4, "depthtospace": 2, "eyelike": 3, "size": 2, "rangeop": 4,
           "center_crop_pad": 6, "col2im": 5, "cumprod": 9, "tensorscatter": 3, "maxunpool": 1}
# onnx's reference indexes MaxUnpool's computed size and pads it out to output_shape; onnxruntime (followed here,
# and checked against it in test_ops_indexing_onnx) indexes the output_shape tensor itself, as MaxPool records
DISAGREES_WITH_ONNXRUNTIME = {"test_maxunpool_export_with_output_shape"}
DATA_DEPENDENT = {"nonzero": 1, "unique": 7, "nonmaxsuppression": 10}


def _cases(modules):
    return [(module, name) for module in modules for name in sorted(node_cases(module))
            if not name.endswith("_expanded") and name not in DISAGREES_WITH_ONNXRUNTIME]


@pytest.mark.parametrize("module,name", _cases(MODULES))
def test_onnx_conformance_case_graph_and_ir(module, name):
    check_case(node_cases(module)[name])


@pytest.mark.parametrize("module,name", _cases(DATA_DEPENDENT))
def test_onnx_conformance_case_with_data_dependent_shape_evaluates(module, name):
    case = node_cases(module)[name]
    inputs, expected = case.data_sets[0]
    graph = from_model(case.model, source=name)
    got = run_graph(graph, {i.name: v for i, v in zip(case.model.graph.input, inputs)})
    for info, want in zip(case.model.graph.output, expected):
        np.testing.assert_array_equal(got[info.name], want, err_msg=f"{name} {info.name}")
    with pytest.raises(ModelError, match=r"depends on how many .* known only at run time, so it cannot be "
                                         r"simulated \(accelsim eval runs it\)"):
        lower(graph)


def test_every_module_holds_the_cases_counted():
    found = {m: len(_cases([m])) for m in {**MODULES, **DATA_DEPENDENT}}
    assert found == {**MODULES, **DATA_DEPENDENT}


# -- simulation: one small model per family, every op priced with time on the unit ---------------------------

def _gathers(b):
    x = b.input("x", (64, 96))
    rows = b.const(np.random.default_rng(0).integers(-64, 64, size=(32, 96)))
    tuples = b.const(np.array([[1, 2], [3, -1], [0, 0]], np.int64))
    return [b.node("GatherElements", [x, rows], axis=0), b.node("GatherND", [x, tuples])]


def _scatters(b):
    x = b.input("x", (64, 96))
    where = b.const(np.random.default_rng(1).integers(0, 64, size=(16, 96)))
    updates = b.input("u", (16, 96))
    rows = b.const(np.array([[5], [9]], np.int64))
    cache = b.input("cache", (2, 4, 64, 32))
    return [b.node("ScatterElements", [x, where, updates], reduction="add"),
            b.node("ScatterND", [x, rows, b.input("r", (2, 96))]),
            b.node("TensorScatter", [cache, b.input("step", (2, 4, 1, 32)), b.const(_ints(7, 63))], mode="circular"),
            b.node("MaxUnpool", [b.input("pooled", (1, 2, 3, 3)), b.const(np.arange(18).reshape(1, 2, 3, 3) * 4)],
                   kernel_shape=[2, 2], strides=[2, 2])]


def _running(b):
    x = b.input("x", (64, 96))
    ids = b.input("ids", (64,), I64)
    return [b.node("Trilu", [x, b.const(np.int64(1))], upper=0), b.node("CumSum", [x, b.const(np.int64(-1))]),
            b.node("CumProd", [x, b.const(np.int64(0))], exclusive=1),
            b.node("OneHot", [ids, b.const(np.int64(10)), b.const(np.array([0.0, 1.0], np.float32))])]


def _picks(b):
    x = b.input("x", (64, 96))
    values, indices = b.node("TopK", [x, b.const(np.array([5], np.int64))], outputs=2)
    return [b.node("ArgMax", [x], axis=1), b.node("ArgMin", [x], axis=0, keepdims=0), values, indices]


def _copies(b):
    x = b.input("x", (2, 8, 12, 16))
    y = b.input("y", (300, 300))
    cols = b.input("cols", (1, 4 * 9, 100))
    return [b.node("Tile", [x, b.const(np.array([1, 2, 1, 2], np.int64))]),
            b.node("SpaceToDepth", [x], blocksize=2), b.node("DepthToSpace", [x], blocksize=2, mode="CRD"),
            b.node("ReverseSequence", [x, b.const(np.array([8, 3, 0, 5, 1, 2, 8, 4], np.int64))],
                   batch_axis=1, time_axis=0),
            b.node("Compress", [x, b.const(np.array([1, 0, 1, 1], bool))], axis=-2),
            b.node("CenterCropPad", [x, b.const(np.array([10, 20], np.int64))], axes=[2, 3]),
            b.node("EyeLike", [y], k=1),
            b.node("Col2Im", [cols, b.const(np.array([12, 12], np.int64)), b.const(np.array([3, 3], np.int64))])]


FAMILIES = {"gathers": _gathers, "scatters": _scatters, "running": _running, "picks": _picks, "copies": _copies}


@pytest.mark.parametrize("arch", ["a100", "tpu_v1"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_is_priced_on_a_unit(family, arch):
    b = Builder(family, opset=18)
    graph = b.build(FAMILIES[family](b))
    ops = run(graph, arch=arch).ops
    built = {n.op for n in graph.nodes if n.op not in ("Constant",)}
    assert built <= {o.op for o in ops}, f"not simulated: {built - {o.op for o in ops}}"
    for o in ops:
        assert o.seconds > 0 and o.cycles > 0 and o.unit, (o.name, o.op)
        assert o.bytes > 0, (o.name, o.op)


def test_work_counts_are_honest():
    b = Builder("work", opset=18)
    outs = _picks(b) + _running(b)[1:2] + _scatters(b)[:1]
    ir = {op.name: op for op in lower(b.build(outs)).ops}
    by_op = {}
    for op in ir.values():
        by_op.setdefault(op.op, []).append(op)
    (argmax,) = by_op["ArgMax"]
    assert argmax.kind == OpKind.reduce and argmax.ops == 64 * 96            # one compare per element
    values, indices = sorted(by_op["TopK"], key=lambda op: op.name)
    # per row of 96: 96 compares with the heap root, ceil(log2(6)) = 3 more for each element that enters
    assert values.kind == OpKind.map and values.ops >= 64 * 96 * 4 and values.ops < 64 * 96 * 4 + 64 * 5
    assert indices.kind == OpKind.move and indices.nbytes == 2 * 64 * 5 * 8
    (cumsum,) = by_op["CumSum"]
    assert cumsum.kind == OpKind.map and cumsum.ops == 64 * 96               # one add per element
    (scatter,) = by_op["ScatterElements"]
    assert scatter.kind == OpKind.map and scatter.ops >= 16 * 96             # one add per update at least


@pytest.mark.parametrize("positions", [64, 4096])
def test_a_kv_cache_write_moves_the_update_alone(positions):
    """TensorScatter writes in place (onnxruntime aliases past and present, as serving engines append): the new
    token's rows are read once and written once, 2 x 4 x 1 x 32 fp32 = 1 KiB each way, however long the cache."""
    b = Builder("kv", opset=24)
    step = b.input("step", (2, 4, 1, 32))
    cache = b.node("TensorScatter", [b.input("cache", (2, 4, positions, 32)), step, b.const(_ints(7, 63))])
    graph = b.build([cache])
    (move,) = lower(graph).ops
    update = 2 * 4 * 32 * 4
    assert move.kind == OpKind.move and move.in_place and move.nbytes == 2 * update
    (priced,) = run(graph, arch="a100", dtype="fp32", caches="cold").ops
    assert priced.bytes == 2 * update and priced.bytes_by_level["hbm2"] == 2 * update


@pytest.mark.parametrize("make,pattern", [
    (lambda b, x: b.node("NonZero", [x]), r"depends on how many elements of 'x' are non-zero"),
    (lambda b, x: b.node("Unique", [x]), r"depends on how many distinct values 'x' holds"),
    (lambda b, x: b.node("TopK", [x, b.input("k", (1,), I64)], outputs=2)[0], r"depends on K \(input 'k'\)"),
    (lambda b, x: b.node("Compress", [x, b.input("c", (4,), DType.bool)], axis=0),
     r"depends on how many entries of condition 'c' are true"),
    (lambda b, x: b.node("NonMaxSuppression", [b.input("boxes", (1, 4, 4)), b.input("scores", (1, 2, 4)),
                                               b.const(_ints(2))]), r"depends on how many boxes survive suppression"),
])
def test_data_dependent_shapes_refuse_simulation_by_name(make, pattern):
    b = Builder("dynamic", opset=18)
    graph = b.build([make(b, b.input("x", (4, 6)))])
    with pytest.raises(ModelError, match=r"node '\w+' \(\w+\): its output shape " + pattern
                       + r", known only at run time, so it cannot be simulated"):
        run(graph, arch="a100")


def test_nonzero_of_a_constant_folds_and_needs_no_simulation():
    b = Builder("folded", opset=18)
    mask = b.const(np.array([[1, 0, 2], [0, 0, 3]], np.float32))
    graph = b.build([b.node("NonZero", [mask])])
    assert lower(graph).ops == []
    np.testing.assert_array_equal(run_graph(graph, {})[graph.outputs[0]], [[0, 0, 1], [0, 2, 2]])


# -- bad input: a ModelError naming node, op, value and what is allowed ----------------------------------------

def _ints(*values):
    return np.array(values, np.int64)


@pytest.mark.parametrize("op,extra,attrs,pattern", [
    ("ArgMax", [], {"axis": 3}, r"\(ArgMax\): axis 3 is out of range for rank 3"),
    ("ArgMin", [], {"axis": -4}, r"\(ArgMin\): axis -4 is out of range for rank 3"),
    ("CumSum", [np.int64(5)], {}, r"\(CumSum\): axis 5 is out of range for rank 3"),
    ("GatherElements", [_ints(0, 1)], {}, r"\(GatherElements\): indices .* have shape \[2\]; they need the rank "
                                          r"of data \[2, 3, 4\]"),
    ("GatherElements", [np.zeros((2, 4, 4), np.int64)], {"axis": 2},
     r"\(GatherElements\): indices \[2, 4, 4\] exceed data \[2, 3, 4\] on axis 1"),
    ("GatherElements", [np.full((1, 1, 1), 3, np.int64)], {"axis": 1},
     r"\(GatherElements\): index 3 is out of range for axis 1 of size 3 \(allowed -3 to 2\)"),
    ("GatherND", [_ints(0, 1, 2, 3)], {}, r"\(GatherND\): the last axis of indices \[4\] holds 4 coordinates; "
                                          r"with batch_dims=0 data \[2, 3, 4\] takes 1 to 3"),
    ("GatherND", [np.zeros((3, 1), np.int64)], {"batch_dims": 1},
     r"\(GatherND\): the first 1 \(batch\) dims of data \[2, 3, 4\] and indices \[3, 1\] differ"),
    ("TopK", [_ints(5)], {}, r"\(TopK\): K=5 must be between 0 and the size 4 of axis 2"),
    ("Tile", [_ints(1, 2)], {}, r"\(Tile\): repeats .* must be a 1-D int64 list of 3 counts, got int64 \[2\]"),
    ("Trilu", [np.float32(1)], {}, r"\(Trilu\): k \('\w+'\) must be one int64, got fp32 \[\]"),
    ("OneHot", [np.int64(3), np.array([0.0, 1.0], np.float32)], {"axis": 5},
     r"\(OneHot\): axis 5 is out of range for indices of rank 3 \(allowed -4 to 3\)"),
    ("SpaceToDepth", [], {"blocksize": 2}, r"\(SpaceToDepth\): input .* needs NCHW \(rank 4\)"),
    ("ReverseSequence", [_ints(1, 1, 1)], {"batch_axis": 1, "time_axis": 1},
     r"\(ReverseSequence\): batch_axis=1 and time_axis=1 must be 0 and 1, one each"),
    ("Compress", [np.ones(5, bool)], {"axis": 1}, r"\(Compress\): condition has 5 entries, more than the 3 along "
                                                  r"axis 1"),
    ("CenterCropPad", [_ints(1, 2)], {"axes": [0, -3]}, r"\(CenterCropPad\): axes \[0, -3\] name an axis twice"),
])
def test_bad_arguments_name_the_node_and_what_is_allowed(op, extra, attrs, pattern):
    b = Builder("bad", opset=18)
    x = b.input("x", (2, 3, 4))
    with pytest.raises(ModelError, match=r"node '\w+' " + pattern):
        b.node(op, [x, *(b.const(v) for v in extra)], **attrs)


def test_bad_scatter_arguments():
    b = Builder("bad", opset=18)
    x = b.input("x", (4, 3))
    with pytest.raises(ModelError, match=r"\(ScatterElements\): reduction='sum' is not supported \(allowed: "
                                         r"none, add, mul, max, min\)"):
        b.node("ScatterElements", [x, b.const(_ints(0, 1, 2)[None]), b.input("u", (1, 3))], reduction="sum")
    with pytest.raises(ModelError, match=r"\(ScatterND\): updates 'v' \(fp32 \[2, 2\]\) must be fp32 \[2, 3\]"):
        b.node("ScatterND", [x, b.const(_ints(0, 1)[:, None]), b.input("v", (2, 2))])
    with pytest.raises(ModelError, match=r"\(DepthToSpace\): mode='DRC' is not supported \(allowed: DCR, CRD\)"):
        b.node("DepthToSpace", [b.input("img", (1, 4, 2, 2))], blocksize=2, mode="DRC")
    with pytest.raises(ModelError, match=r"\(Col2Im\): the input holds 7 blocks, but image \[4, 4\] with block "
                                         r"\[2, 2\].* has \[3, 3\] = 9"):
        b.node("Col2Im", [b.input("c", (1, 8, 7)), b.const(_ints(4, 4)), b.const(_ints(2, 2))])


def test_index_out_of_range_at_run_time_is_a_model_error():
    b = Builder("late", opset=18)
    x, i = b.input("x", (3, 4)), b.input("i", (2, 1), I64)
    graph = b.build([b.node("GatherND", [x, i])])
    with pytest.raises(ModelError, match=r"\(GatherND\): index 3 is out of range for axis 0 of size 3"):
        run_graph(graph, {"x": np.zeros((3, 4), np.float32), "i": np.array([[0], [3]])})


def test_shape_inputs_known_only_at_run_time_are_refused_at_import():
    b = Builder("shapes", opset=18)
    x = b.input("x", (2, 3))
    with pytest.raises(ModelError, match=r"\(Tile\): input 1 \(repeats, tensor 'r'\) must be a constant known at "
                                         r"import time"):
        b.node("Tile", [x, b.input("r", (2,), I64)])
    with pytest.raises(ModelError, match=r"\(OneHot\): input 1 \(depth, tensor 'd'\) must be a constant"):
        b.node("OneHot", [b.input("i", (4,), I64), b.input("d", (), I64), b.const(np.array([0.0, 1.0], np.float32))])


def test_range_with_bounds_known_only_at_run_time_says_what_it_needs():
    b = Builder("range", opset=18)
    start, limit = b.input("start", (), I64), b.input("limit", (), I64)
    with pytest.raises(ModelError, match=r"\(Range\): start \('start'\) and limit \('limit'\) must be constants known "
                                         r"at import time: the output's length depends on them"):
        b.node("Range", [start, limit, b.const(np.int64(1))])
