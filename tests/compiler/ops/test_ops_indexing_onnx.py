"""Indexing and data-movement ops against onnxruntime, through the Graph and the IR: gathers and scatters, Trilu,
CumSum/CumProd, ArgMax/ArgMin, TopK, Tile, OneHot, Compress, NonZero, Unique, ReverseSequence, SpaceToDepth and
DepthToSpace, EyeLike, CenterCropPad, Col2Im (several attribute combinations, negative axes and indices)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend import from_model
from compiler.ops.interpret import run_graph
from tests.compiler.onnx_models import model as onnx_model
from tests.compiler.oracle import check_against_ort, ort_run

F32, I32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(7)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _node_model(op, inputs, outputs, opset, consts=(), order=None, **attrs):
    """One node; inputs: [(name, elem, shape)] fed at run time; consts: [(name, array)] become initializers;
    the node reads inputs then consts, or the names in `order`."""
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in consts]
    names = order or [n for n, _, _ in inputs] + [n for n, _ in consts]
    node = helper.make_node(op, names, [n for n, _ in outputs], **attrs)
    return onnx_model([node], inputs, outputs, opset, inits)


# -- gathers and scatters -------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis,indices", [(0, [[1, -1], [0, 2]]), (1, [[2, 0], [-3, 1]]), (-1, [[0], [2]])])
def test_gather_elements(axis, indices):
    proto = _node_model("GatherElements", [("x", F32, [3, 3])], [("y", F32)], 13,
                        [("i", np.array(indices, np.int64))], axis=axis)
    check_against_ort(proto, {"x": _x(3, 3)}, rtol=0, atol=0)


def test_gather_elements_runtime_int32_indices():
    i = RNG.integers(-4, 4, size=(2, 5, 3)).astype(np.int32)
    proto = _node_model("GatherElements", [("x", F32, [2, 4, 3]), ("i", I32, [2, 5, 3])], [("y", F32)], 13, axis=1)
    check_against_ort(proto, {"x": _x(2, 4, 3), "i": i}, rtol=0, atol=0)


@pytest.mark.parametrize("batch,indices", [(0, [[0, 1], [-1, 0]]), (0, [[1], [0]]), (1, [[1], [0]]),
                                           (0, [[[0, 1, 1]], [[1, 0, 0]]])])
def test_gather_nd(batch, indices):
    proto = _node_model("GatherND", [("x", F32, [2, 2, 3])], [("y", F32)], 13,
                        [("i", np.array(indices, np.int64))], batch_dims=batch)
    check_against_ort(proto, {"x": _x(2, 2, 3)}, rtol=0, atol=0)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, -1])
def test_scatter_elements(reduction, axis):
    indices = np.array([[1, 0, 2], [0, 2, 1]], np.int64) if reduction == "none" else \
        np.array([[1, 1, 2], [0, -3, 1]], np.int64)       # repeats combine under a reduction
    proto = _node_model("ScatterElements", [("x", F32, [3, 3]), ("u", F32, [2, 3])], [("y", F32)], 18,
                        [("i", indices)], ["x", "i", "u"], axis=axis, reduction=reduction)
    check_against_ort(proto, {"x": _x(3, 3), "u": _x(2, 3)})


def test_scatter_opset_9_name():
    proto = _node_model("Scatter", [("x", F32, [2, 4]), ("u", F32, [2, 2])], [("y", F32)], 9,
                        [("i", np.array([[3, 0], [-1, 1]], np.int64))], ["x", "i", "u"], axis=1)
    check_against_ort(proto, {"x": _x(2, 4), "u": _x(2, 2)}, rtol=0, atol=0)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("indices,updates", [([[0], [2]], (2, 3, 2)), ([[1, 0], [-1, 1]], (2, 2)),
                                             ([[0, 1, 1]], (1,))])
def test_scatter_nd(reduction, indices, updates):
    proto = _node_model("ScatterND", [("x", F32, [3, 3, 2]), ("u", F32, list(updates))], [("y", F32)], 18,
                        [("i", np.array(indices, np.int64))], ["x", "i", "u"], reduction=reduction)
    check_against_ort(proto, {"x": _x(3, 3, 2), "u": _x(*updates)})


# -- masks, running sums, picks --------------------------------------------------------------------------------

@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 2, -1, -5])
def test_trilu(upper, k):
    consts = [] if k is None else [("k", np.array(k, np.int64))]
    proto = _node_model("Trilu", [("x", F32, [2, 3, 4])], [("y", F32)], 14, consts, upper=upper)
    check_against_ort(proto, {"x": _x(2, 3, 4)}, rtol=0, atol=0)


@pytest.mark.parametrize("op,opset", [("CumSum", 14), ("CumProd", 26)])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum_and_cumprod(op, opset, axis, exclusive, reverse):
    proto = _node_model(op, [("x", F32, [3, 4])], [("y", F32)], opset, [("a", np.array(axis, np.int32))],
                        exclusive=exclusive, reverse=reverse)
    check_against_ort(proto, {"x": _x(3, 4)})


def test_cumsum_int64_with_runtime_axis_equals_onnxruntime():
    x = RNG.integers(-50, 50, size=(3, 5)).astype(np.int64)
    proto = _node_model("CumSum", [("x", I64, [3, 5]), ("a", I64, [])], [("y", I64)], 14, reverse=1)
    check_against_ort(proto, {"x": x, "a": np.array(-1, np.int64)})


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis,keepdims", [(0, 1), (1, 0), (-1, 1), (-2, 0)])
@pytest.mark.parametrize("last", [0, 1])
def test_argmax_argmin_with_ties(op, axis, keepdims, last):
    x = RNG.integers(0, 3, size=(3, 4, 5)).astype(np.float32)   # many ties: first or last among equals
    proto = _node_model(op, [("x", F32, [3, 4, 5])], [("y", I64)], 13, axis=axis, keepdims=keepdims,
                        select_last_index=last)
    check_against_ort(proto, {"x": x})


@pytest.mark.parametrize("axis,k,largest", [(-1, 3, 1), (0, 2, 0), (1, 4, 1), (1, 1, 0), (-1, 0, 1)])
def test_topk_ties_keep_the_lower_index(axis, k, largest):
    x = RNG.integers(0, 4, size=(3, 4, 6)).astype(np.float32)
    proto = _node_model("TopK", [("x", F32, [3, 4, 6])], [("v", F32), ("i", I64)], 11,
                        [("k", np.array([k], np.int64))], axis=axis, largest=largest)
    check_against_ort(proto, {"x": x})


def test_topk_opset_1_attribute_and_int_data():
    x = RNG.integers(-9, 9, size=(2, 7)).astype(np.int32)
    proto = _node_model("TopK", [("x", I32, [2, 7])], [("v", I32), ("i", I64)], 13, [("k", np.array([3]))])
    check_against_ort(proto, {"x": x})
    legacy = _node_model("TopK", [("x", F32, [2, 7])], [("v", F32), ("i", I64)], 9, k=2)
    check_against_ort(legacy, {"x": _x(2, 7)})


def test_topk_with_k_known_at_run_time_evaluates():
    proto = _node_model("TopK", [("x", F32, [2, 6]), ("k", I64, [1])], [("v", F32), ("i", I64)], 11)
    feeds = {"x": _x(2, 6), "k": np.array([4], np.int64)}
    got, want = run_graph(from_model(proto), feeds), ort_run(proto, feeds)
    np.testing.assert_array_equal(got["v"], want["v"])
    np.testing.assert_array_equal(got["i"], want["i"])


# -- copies ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("repeats", [[1, 1], [2, 3], [0, 2], [3, 1]])
def test_tile(repeats):
    proto = _node_model("Tile", [("x", F32, [2, 3])], [("y", F32)], 13, [("r", np.array(repeats, np.int64))])
    check_against_ort(proto, {"x": _x(2, 3)}, rtol=0, atol=0)


@pytest.mark.parametrize("axis", [-1, 0, 1, -3])
@pytest.mark.parametrize("elem", [I64, F32])
def test_one_hot_with_negative_and_out_of_range_indices(axis, elem):
    indices = np.array([[0, -1, 3], [7, 2, -5]])        # 7 and -5 are out of range: a row of `off`
    proto = _node_model("OneHot", [("i", elem, [2, 3])], [("y", F32)], 11,
                        [("d", np.array(5, np.float32 if elem == F32 else np.int64)),
                         ("v", np.array([-2.0, 3.5], np.float32))], axis=axis)
    check_against_ort(proto, {"i": indices.astype(np.float32 if elem == F32 else np.int64)}, rtol=0, atol=0)


@pytest.mark.parametrize("axis,condition", [(None, [1, 0, 1, 1, 0]), (0, [0, 1]), (1, [1, 0, 1]), (-1, [0, 1])])
def test_compress_with_constant_condition(axis, condition):
    attrs = {} if axis is None else {"axis": axis}
    proto = _node_model("Compress", [("x", F32, [2, 3])], [("y", F32)], 11,
                        [("c", np.array(condition, bool))], **attrs)
    check_against_ort(proto, {"x": _x(2, 3)}, rtol=0, atol=0)


def _eval_matches_ort(proto, feeds):
    """Data-dependent shapes: the Graph reference (evaluation) equals onnxruntime; no IR exists to compare."""
    graph = from_model(proto)
    got, want = run_graph(graph, feeds), ort_run(proto, feeds)
    for name, value in want.items():
        assert got[name].shape == value.shape and got[name].dtype == value.dtype, name
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    return graph


def test_compress_and_nonzero_with_run_time_values():
    feeds = {"x": _x(3, 4), "c": np.array([True, False, True])}
    _eval_matches_ort(_node_model("Compress", [("x", F32, [3, 4]), ("c", BOOL, [3])], [("y", F32)], 11, axis=0),
                      feeds)
    x = (RNG.integers(0, 3, size=(2, 3, 4)) * 1.5).astype(np.float32)
    _eval_matches_ort(_node_model("NonZero", [("x", F32, [2, 3, 4])], [("y", I64)], 13), {"x": x})


@pytest.mark.parametrize("attrs", [{}, {"sorted": 0}, {"axis": 0}, {"axis": -1, "sorted": 0}, {"axis": 1}])
def test_unique(attrs):
    x = RNG.integers(0, 3, size=(4, 3)).astype(np.float32)
    x[2] = x[0]
    outs = [("y", F32), ("first", I64), ("inverse", I64), ("counts", I64)]
    _eval_matches_ort(_node_model("Unique", [("x", F32, [4, 3])], outs, 11, **attrs), {"x": x})


@pytest.mark.parametrize("batch_axis,time_axis", [(1, 0), (0, 1)])
def test_reverse_sequence(batch_axis, time_axis):
    shape = [4, 3, 2] if time_axis == 0 else [3, 4, 2]
    proto = _node_model("ReverseSequence", [("x", F32, shape)], [("y", F32)], 10,
                        [("lens", np.array([4, 0, 2], np.int64))], batch_axis=batch_axis, time_axis=time_axis)
    check_against_ort(proto, {"x": _x(*shape)}, rtol=0, atol=0)


@pytest.mark.parametrize("op,mode,shape", [("SpaceToDepth", None, [2, 3, 4, 6]), ("DepthToSpace", "DCR", [2, 8, 2, 3]),
                                           ("DepthToSpace", "CRD", [1, 12, 3, 2])])
def test_space_to_depth_and_back(op, mode, shape):
    attrs = {"blocksize": 2} if mode is None else {"blocksize": 2, "mode": mode}
    proto = _node_model(op, [("x", F32, shape)], [("y", F32)], 13, **attrs)
    check_against_ort(proto, {"x": _x(*shape)}, rtol=0, atol=0)


@pytest.mark.parametrize("k,dtype", [(0, None), (1, TensorProto.INT32), (-2, TensorProto.DOUBLE), (7, None)])
def test_eye_like(k, dtype):
    attrs = {"k": k} if dtype is None else {"k": k, "dtype": dtype}
    out = dtype or F32
    proto = _node_model("EyeLike", [("x", F32, [3, 5])], [("y", out)], 9, **attrs)
    check_against_ort(proto, {"x": _x(3, 5)}, rtol=0, atol=0)


@pytest.mark.parametrize("axes,shape", [(None, [3, 7, 3]), ([0, -2], [2, 7]), ([1], [6]), ([-1, 0], [2, 5])])
def test_center_crop_pad(axes, shape):
    attrs = {} if axes is None else {"axes": axes}
    proto = _node_model("CenterCropPad", [("x", F32, [5, 4, 3])], [("y", F32)], 18,
                        [("s", np.array(shape, np.int64))], **attrs)
    check_against_ort(proto, {"x": _x(5, 4, 3)}, rtol=0, atol=0)


@pytest.mark.parametrize("attrs", [{}, {"strides": [2, 1]}, {"pads": [1, 0, 1, 0]}, {"dilations": [1, 2]}])
def test_col2im_sums_overlapping_blocks(attrs):
    image, block = [5, 6], [2, 3]
    strides, pads, dilations = attrs.get("strides", [1, 1]), attrs.get("pads", [0] * 4), attrs.get("dilations", [1, 1])
    counts = [(image[i] + pads[i] + pads[i + 2] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1
              for i in range(2)]
    shape = [2, 3 * 6, counts[0] * counts[1]]
    proto = _node_model("Col2Im", [("x", F32, shape)], [("y", F32)], 18,
                        [("img", np.array(image, np.int64)), ("blk", np.array(block, np.int64))], **attrs)
    check_against_ort(proto, {"x": _x(*shape)})


@pytest.mark.parametrize("mode,starts", [("linear", [3, 0]), ("circular", [4, 1]), ("linear", None)])
@pytest.mark.parametrize("axis", [-2, 2])
def test_tensor_scatter_writes_a_kv_cache(mode, starts, axis):
    inputs = [("cache", F32, [2, 3, 5, 4]), ("update", F32, [2, 3, 2, 4])]
    consts = [] if starts is None else [("w", np.array(starts, np.int64))]
    proto = _node_model("TensorScatter", inputs, [("y", F32)], 24, consts, mode=mode, axis=axis)
    check_against_ort(proto, {"cache": _x(2, 3, 5, 4), "update": _x(2, 3, 2, 4)}, rtol=0, atol=0)


def _pool_indices(shape, kernel):
    """Flat indices a MaxPool (kernel = stride) could record: one position inside each window."""
    n, c, h, w = shape
    ph, pw = h // kernel, w // kernel
    dh, dw = RNG.integers(0, kernel, (n, c, ph, pw)), RNG.integers(0, kernel, (n, c, ph, pw))
    b, ch, p, q = np.indices((n, c, ph, pw))
    return ((b * c + ch) * h + kernel * p + dh) * w + kernel * q + dw


@pytest.mark.parametrize("output_shape", [None, [1, 2, 7, 7]])
def test_max_unpool_puts_values_back_where_max_pool_found_them(output_shape):
    full = output_shape or [1, 2, 6, 6]
    consts = [] if output_shape is None else [("s", np.array(output_shape, np.int64))]
    graph_inputs = [("p", F32, [1, 2, 3, 3]), ("i", I64, [1, 2, 3, 3])]
    node = helper.make_node("MaxUnpool", ["p", "i"] + (["s"] if consts else []), ["y"], kernel_shape=[2, 2],
                            strides=[2, 2])
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info(n, t, s) for n, t, s in graph_inputs],
                              [helper.make_tensor_value_info("y", F32, full)],
                              initializer=[numpy_helper.from_array(v, n) for n, v in consts])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    proto.ir_version = 8
    check_against_ort(proto, {"p": _x(1, 2, 3, 3), "i": _pool_indices((1, 2, 6, 6), 2)}, rtol=0, atol=0)


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("limit,iou,floor", [(3, 0.5, None), (10, 0.3, 0.2), (2, 0.0, None), (5, 0.7, 0.9)])
def test_non_max_suppression(center, limit, iou, floor):
    boxes = RNG.uniform(0, 1, (2, 12, 4)).astype(np.float32)
    boxes[0, 5] = boxes[0, 4]                            # a duplicate box, and equal scores below
    scores = RNG.integers(0, 5, (2, 3, 12)).astype(np.float32) / 4
    consts = [("limit", np.array([limit], np.int64)), ("iou", np.array([iou], np.float32))]
    consts += [] if floor is None else [("floor", np.array([floor], np.float32))]
    proto = _node_model("NonMaxSuppression", [("boxes", F32, [2, 12, 4]), ("scores", F32, [2, 3, 12])],
                        [("y", I64)], 11, consts, center_point_box=center)
    _eval_matches_ort(proto, {"boxes": boxes, "scores": scores})


def test_boolean_mask_selection_through_nonzero_evaluates_downstream():
    """x[x > 0] as exporters write it: NonZero -> Transpose -> GatherND; the ops after NonZero see its stand-in
    shape at import and the true one at run time."""
    nodes = [helper.make_node("Greater", ["x", "zero"], ["mask"]), helper.make_node("NonZero", ["mask"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["where"], perm=[1, 0]),
             helper.make_node("GatherND", ["x", "where"], ["y"])]
    proto = onnx_model(nodes, [("x", F32, [4, 6])], [("y", F32)], 13,
                       [numpy_helper.from_array(np.float32(0), "zero")])
    _eval_matches_ort(proto, {"x": _x(4, 6)})


@pytest.mark.parametrize("elem,dtype", [(I64, np.int64), (I32, np.int32)])
def test_integer_data_moves_exactly(elem, dtype):
    x = RNG.integers(0, 100, size=(3, 4)).astype(dtype)
    u = RNG.integers(0, 100, size=(2, 4)).astype(dtype)
    i = np.array([[2], [0]], np.int64)
    nodes = [helper.make_node("ScatterND", ["x", "i", "u"], ["s"]),
             helper.make_node("GatherElements", ["s", "g"], ["y"], axis=1),
             helper.make_node("Tile", ["y", "r"], ["t"]), helper.make_node("Trilu", ["t"], ["z"], upper=0)]
    inits = [numpy_helper.from_array(i, "i"), numpy_helper.from_array(np.array([[3, 0], [1, 1], [0, 2]]), "g"),
             numpy_helper.from_array(np.array([2, 3], np.int64), "r")]
    proto = onnx_model(nodes, [("x", elem, [3, 4]), ("u", elem, [2, 4])], [("z", elem)], 16, inits)
    check_against_ort(proto, {"x": x, "u": u})
